/* Unit tests for the shared geometry of core/: sliding windows and the auto_pad
 * pass (window_geom.h, passes.h), Slice's clamp (slice_geom.h) and Einsum's plan
 * (einsum_geom.h). Every expected value is worked out by hand from the ONNX
 * specification's formulas (and numpy's einsum definition), not from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "einsum_geom.h"
#include "ir.h"
#include "pad_geom.h"
#include "passes.h"
#include "slice_geom.h"
#include "window_geom.h"

/* A node of op with attributes: auto_pad, strides (ns values of s[]). */
typedef struct {
  mg_node n;
  mg_attr a[4];
  int64_t st[MG_WIN_ND];
} win_node;

static void make_node(win_node *w, mg_op op, const char *auto_pad, int nd, const int64_t *strides) {
  memset(w, 0, sizeof *w);
  w->n.op = op;
  w->n.attr = w->a;
  w->a[w->n.n_attr++] = (mg_attr){.name = "auto_pad", .kind = MG_ATTR_STRING, .s = auto_pad};
  if (strides) {
    memcpy(w->st, strides, sizeof(int64_t) * (size_t)nd);
    w->a[w->n.n_attr++] = (mg_attr){.name = "strides", .kind = MG_ATTR_INTS, .n = (size_t)nd, .ints = w->st};
  }
}

static const mg_win_limits lim = {(int64_t)1 << 20, (int64_t)1 << 20};

/* SAME_*: out = ceil(in / s), total = max(0, (out - 1) * s + k - in), split
 * floor(total / 2) at the begin (UPPER) or the end (LOWER). */
static void test_window_same(void **state) {
  (void)state;
  win_node w;
  mg_window g;
  int64_t in = 5, k = 2;
  make_node(&w, MG_OP_Conv, "SAME_UPPER", 1, NULL);
  assert_int_equal(mg_window_init(&w.n, 1, &in, &k, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 5); /* total = 4 * 1 + 2 - 5 = 1 */
  assert_int_equal(g.pb[0], 0);
  assert_int_equal(g.pe[0], 1);
  make_node(&w, MG_OP_Conv, "SAME_LOWER", 1, NULL);
  assert_int_equal(mg_window_init(&w.n, 1, &in, &k, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.pb[0], 1);
  assert_int_equal(g.pe[0], 0);
  int64_t in7 = 7, k3 = 3, s2 = 2;
  make_node(&w, MG_OP_Conv, "SAME_UPPER", 1, &s2);
  assert_int_equal(mg_window_init(&w.n, 1, &in7, &k3, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 4); /* ceil(7 / 2); total = 3 * 2 + 3 - 7 = 2 */
  assert_int_equal(g.pb[0], 1);
  assert_int_equal(g.pe[0], 1);
  /* in 6, k 1, s 2: out 3, total = 2 * 2 + 1 - 6 < 0, so no padding */
  int64_t in6 = 6, k1 = 1;
  assert_int_equal(mg_window_init(&w.n, 1, &in6, &k1, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 3);
  assert_int_equal(g.pb[0] + g.pe[0], 0);
  /* an unknown input size: unknown output and pads */
  int64_t unk = -1;
  assert_int_equal(mg_window_init(&w.n, 1, &unk, &k3, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], -1);
}

/* VALID and NOTSET: out = floor((in + pads - k) / s) + 1; ceil_mode rounds up
 * unless that window would start past the input and its begin pad. */
static void test_window_valid_notset(void **state) {
  (void)state;
  win_node w;
  mg_window g;
  int64_t in = 7, k = 3, s = 2;
  make_node(&w, MG_OP_MaxPool, "VALID", 1, &s);
  assert_int_equal(mg_window_init(&w.n, 1, &in, &k, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 3); /* (7 - 3) / 2 + 1 */
  int64_t in8 = 8;
  make_node(&w, MG_OP_MaxPool, "NOTSET", 1, &s);
  assert_int_equal(mg_window_init(&w.n, 1, &in8, &k, 0, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 3); /* floor(5 / 2) + 1 */
  assert_int_equal(mg_window_init(&w.n, 1, &in8, &k, 1, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 4); /* ceil(5 / 2) + 1; the last window starts at 6 < 8 */
  int64_t k5 = 9;
  assert_int_equal(mg_window_init(&w.n, 1, &in8, &k5, 0, &lim, &g), MG_WIN_EMPTY);
  make_node(&w, MG_OP_MaxPool, "SAME_MIDDLE", 1, NULL);
  assert_int_equal(mg_window_init(&w.n, 1, &in8, &k, 0, &lim, &g), MG_WIN_AUTO_PAD);
  int64_t big = ((int64_t)1 << 20) + 1;
  make_node(&w, MG_OP_MaxPool, "NOTSET", 1, NULL);
  assert_int_equal(mg_window_init(&w.n, 1, &in8, &big, 0, &lim, &g), MG_WIN_TOO_LARGE);
}

/* ConvTranspose: full = s * (in - 1) + output_padding + (k - 1) * d + 1; SAME_*
 * asks for in * s, total = full - in * s, SAME_UPPER puts floor(total / 2) at the
 * begin, everything else the rest there. */
static void test_window_transpose(void **state) {
  (void)state;
  win_node w;
  mg_window g;
  int64_t in = 3, k = 3, s = 2;
  make_node(&w, MG_OP_ConvTranspose, "SAME_UPPER", 1, &s);
  assert_int_equal(mg_window_transpose(&w.n, 1, &in, &k, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 6); /* full = 2 * 2 + 2 + 1 = 7, total 1 */
  assert_int_equal(g.pb[0], 0);
  assert_int_equal(g.pe[0], 1);
  make_node(&w, MG_OP_ConvTranspose, "SAME_LOWER", 1, &s);
  assert_int_equal(mg_window_transpose(&w.n, 1, &in, &k, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.pb[0], 1);
  assert_int_equal(g.pe[0], 0);
  make_node(&w, MG_OP_ConvTranspose, "NOTSET", 1, &s);
  assert_int_equal(mg_window_transpose(&w.n, 1, &in, &k, &lim, &g), MG_WIN_OK);
  assert_int_equal(g.out[0], 7);
}

/* A graph of one `op` node over x [1, 1, dims...] (and a weight [1, 1, k...]
 * for Conv) with auto_pad and kernel_shape k; returns the node. */
static mg_node *pad_graph(mg_model *m, mg_op op, const char *auto_pad, int nd, const int64_t *dims,
                          const int64_t *k, int64_t stride) {
  mg_graph *g = m->graph = mg_graph_new(m, NULL);
  mg_node *n = mg_node_new(g, op, "n", op == MG_OP_Conv ? 2 : 1, 1);
  n->in[0] = mg_value_new(g, "x", NULL);
  n->in[0]->shape.rank = nd + 2;
  n->in[0]->shape.d[0] = n->in[0]->shape.d[1] = (mg_dim){1, NULL};
  for (int i = 0; i < nd; i++) n->in[0]->shape.d[2 + i] = (mg_dim){dims[i], dims[i] < 0 ? "h" : NULL};
  if (op == MG_OP_Conv) {
    n->in[1] = mg_value_new(g, "w", NULL);
    n->in[1]->shape.rank = nd + 2;
    n->in[1]->shape.d[0] = n->in[1]->shape.d[1] = (mg_dim){1, NULL};
    for (int i = 0; i < nd; i++) n->in[1]->shape.d[2 + i] = (mg_dim){k[i], NULL};
  }
  n->out[0] = mg_value_new(g, "y", NULL);
  int64_t *kv = mg_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)nd);
  int64_t *sv = mg_arena_alloc(&m->arena, sizeof(int64_t) * (size_t)nd);
  for (int i = 0; i < nd; i++) kv[i] = k[i], sv[i] = stride;
  n->attr = mg_arena_alloc(&m->arena, sizeof(mg_attr) * 3);
  n->attr[n->n_attr++] = (mg_attr){.name = "auto_pad", .kind = MG_ATTR_STRING, .s = auto_pad};
  if (op != MG_OP_Conv) n->attr[n->n_attr++] = (mg_attr){.name = "kernel_shape", .kind = MG_ATTR_INTS, .n = (size_t)nd, .ints = kv};
  n->attr[n->n_attr++] = (mg_attr){.name = "strides", .kind = MG_ATTR_INTS, .n = (size_t)nd, .ints = sv};
  assert_int_equal(mg_graph_push_node(g, n), 0);
  return n;
}

/* The pass writes the pads SAME_* stands for and sets NOTSET; symbolic spatial
 * dims keep auto_pad. */
static void test_auto_pad_pass(void **state) {
  (void)state;
  mg_model *m = mg_model_new();
  const int64_t d2[] = {7, 5}, k2[] = {3, 2};
  mg_node *n = pad_graph(m, MG_OP_Conv, "SAME_UPPER", 2, d2, k2, 1);
  assert_int_equal(pass_resolve_auto_pad(m), 1);
  assert_string_equal(mg_attr_str(n, "auto_pad", ""), "NOTSET");
  const int64_t *p;
  assert_int_equal(mg_attr_ints(n, "pads", &p), 4);
  /* axis 0: in 7, k 3, s 1: total 2 -> (1, 1); axis 1: in 5, k 2: total 1 -> (0, 1) */
  assert_int_equal(p[0], 1);
  assert_int_equal(p[1], 0);
  assert_int_equal(p[2], 1);
  assert_int_equal(p[3], 1);
  mg_model_free(m);

  m = mg_model_new();
  const int64_t d1[] = {7}, k1[] = {3};
  n = pad_graph(m, MG_OP_MaxPool, "SAME_LOWER", 1, d1, k1, 2);
  assert_int_equal(pass_resolve_auto_pad(m), 1);
  assert_int_equal(mg_attr_ints(n, "pads", &p), 2);
  assert_int_equal(p[0], 1); /* out 4, total 2 */
  assert_int_equal(p[1], 1);
  mg_model_free(m);

  m = mg_model_new();
  const int64_t d8[] = {8};
  n = pad_graph(m, MG_OP_AveragePool, "SAME_LOWER", 1, d8, k1, 2);
  assert_int_equal(pass_resolve_auto_pad(m), 1);
  assert_int_equal(mg_attr_ints(n, "pads", &p), 2);
  assert_int_equal(p[0], 1); /* out 4, total = 3 * 2 + 3 - 8 = 1, at the begin */
  assert_int_equal(p[1], 0);
  mg_model_free(m);

  m = mg_model_new();
  const int64_t sym[] = {-1};
  n = pad_graph(m, MG_OP_Conv, "SAME_UPPER", 1, sym, k1, 1);
  assert_int_equal(pass_resolve_auto_pad(m), 0);
  assert_string_equal(mg_attr_str(n, "auto_pad", ""), "SAME_UPPER");
  mg_model_free(m);
}

/* Slice: negative indices count from the end; forward, start and end clamp to
 * [0, dim]; backward, start to [0, dim - 1] and end to [-1, dim - 1]. */
static void test_slice_axis(void **state) {
  (void)state;
  int64_t f, c;
  assert_int_equal(mg_slice_axis(10, 2, 7, 1, &f, &c), 0);
  assert_true(f == 2 && c == 5);
  assert_int_equal(mg_slice_axis(10, -3, 100, 1, &f, &c), 0); /* 7..9 */
  assert_true(f == 7 && c == 3);
  assert_int_equal(mg_slice_axis(10, -100, 4, 3, &f, &c), 0); /* 0, 3 */
  assert_true(f == 0 && c == 2);
  assert_int_equal(mg_slice_axis(10, 8, 2, 1, &f, &c), 0); /* nothing */
  assert_int_equal(c, 0);
  assert_int_equal(mg_slice_axis(10, 100, -100, -1, &f, &c), 0); /* 9 down to 0 */
  assert_true(f == 9 && c == 10);
  assert_int_equal(mg_slice_axis(10, -1, 0, -3, &f, &c), 0); /* 9, 6, 3 */
  assert_true(f == 9 && c == 3);
  assert_int_equal(mg_slice_axis(5, -10, -10, -1, &f, &c), 0); /* start 0, end -1: x[0] */
  assert_true(f == 0 && c == 1);
  assert_int_equal(mg_slice_axis(10, 5, 0, INT64_MIN, &f, &c), 0); /* one element */
  assert_true(f == 5 && c == 1);
  assert_int_equal(mg_slice_axis(10, 0, INT64_MAX, INT64_MAX, &f, &c), 0);
  assert_true(f == 0 && c == 1);
  assert_int_equal(mg_slice_axis(10, 0, 5, 0, &f, &c), -1);
}

/* Pad over [a b c] (len 3) with 2 before: reflect reads c b | a b c | b a,
 * edge a a | a b c | c c, wrap b c | a b c | a b; constant: -1 in the padding. */
static void test_pad_source(void **state) {
  (void)state;
  const int64_t reflect[] = {2, 1, 0, 1, 2, 1, 0}, edge[] = {0, 0, 0, 1, 2, 2, 2}, wrap[] = {1, 2, 0, 1, 2, 0, 1};
  for (int64_t o = 0; o < 7; o++) {
    assert_int_equal(mg_pad_source(MG_PADM_REFLECT, o, 2, 3), reflect[o]);
    assert_int_equal(mg_pad_source(MG_PADM_EDGE, o, 2, 3), edge[o]);
    assert_int_equal(mg_pad_source(MG_PADM_WRAP, o, 2, 3), wrap[o]);
    assert_int_equal(mg_pad_source(MG_PADM_CONSTANT, o, 2, 3), o >= 2 && o < 5 ? o - 2 : -1);
  }
  assert_int_equal(mg_pad_source(MG_PADM_REFLECT, 0, 1, 1), 0); /* a one-element axis */
  int64_t st, len;
  mg_pad_crop(5, -1, -2, &st, &len); /* crop one at the begin, two at the end */
  assert_true(st == 1 && len == 2);
  assert_int_equal(mg_pad_mode("wrap"), MG_PADM_WRAP);
  assert_int_equal(mg_pad_mode("mirror"), -1);
}

/* Einsum plans, with label numbers A-Z 0..25, a-z 26..51, ellipsis 52 + j. */
enum { I = 26 + 'i' - 'a', J = 26 + 'j' - 'a', K = 26 + 'k' - 'a', B = 26 + 'b' - 'a' };

static void test_einsum_matmul(void **state) {
  (void)state;
  mg_einsum_geom p;
  mg_ein_error e;
  const int r[] = {2, 2};
  const int64_t a[] = {2, 3}, b[] = {3, 4};
  const int64_t *d[] = {a, b};
  /* ij,jk->ik: loops i, k (output), then j summed; A strides (3, 1), B (4, 1) */
  assert_int_equal(mg_einsum_plan("ij,jk->ik", 2, r, d, &p, &e), MG_EIN_OK);
  assert_int_equal(p.no, 2);
  assert_int_equal(p.na, 3);
  assert_true(p.loop[0] == I && p.loop[1] == K && p.loop[2] == J);
  assert_true(p.size[0] == 2 && p.size[1] == 4 && p.size[2] == 3);
  assert_true(p.stride[0][0] == 3 && p.stride[0][1] == 0 && p.stride[0][2] == 1);
  assert_true(p.stride[1][0] == 0 && p.stride[1][1] == 1 && p.stride[1][2] == 4);
  assert_true(p.out_dims[0] == 2 && p.out_dims[1] == 4);
  /* implicit output: labels used once, alphabetically: i, k */
  mg_einsum_geom q;
  assert_int_equal(mg_einsum_plan("ij,jk", 2, r, d, &q, &e), MG_EIN_OK);
  assert_int_equal(q.no, 2);
  assert_true(q.olab[0] == I && q.olab[1] == K);
  /* bij,bjk->bik */
  const int r3[] = {3, 3};
  const int64_t a3[] = {5, 2, 3}, b3[] = {5, 3, 4};
  const int64_t *d3[] = {a3, b3};
  assert_int_equal(mg_einsum_plan("bij,bjk->bik", 2, r3, d3, &p, &e), MG_EIN_OK);
  assert_true(p.no == 3 && p.na == 4);
  assert_true(p.loop[0] == B && p.loop[1] == I && p.loop[2] == K && p.loop[3] == J);
  assert_true(p.out_dims[0] == 5 && p.out_dims[1] == 2 && p.out_dims[2] == 4);
  assert_true(p.stride[0][0] == 6 && p.stride[0][1] == 3 && p.stride[0][2] == 0 && p.stride[0][3] == 1);
  assert_true(p.stride[1][0] == 12 && p.stride[1][1] == 0 && p.stride[1][2] == 1 && p.stride[1][3] == 4);
  /* mismatched sizes of j */
  const int64_t bad[] = {4, 4};
  const int64_t *db[] = {a, bad};
  assert_int_equal(mg_einsum_plan("ij,jk->ik", 2, r, db, &p, &e), MG_EIN_LABEL_SIZES);
  assert_int_equal(e.label, J);
}

static void test_einsum_ellipsis_diagonal(void **state) {
  (void)state;
  mg_einsum_geom p;
  mg_ein_error e;
  /* ...ij,...jk->...ik with batch dims [2, 1] and [3]: broadcast to [2, 3] */
  const int r[] = {4, 3};
  const int64_t a[] = {2, 1, 4, 5}, b[] = {3, 5, 6};
  const int64_t *d[] = {a, b};
  assert_int_equal(mg_einsum_plan("...ij,...jk->...ik", 2, r, d, &p, &e), MG_EIN_OK);
  assert_int_equal(p.ell, 2);
  assert_int_equal(p.no, 4);
  assert_true(p.out_dims[0] == 2 && p.out_dims[1] == 3 && p.out_dims[2] == 4 && p.out_dims[3] == 6);
  /* a's ellipsis dim of size 1 broadcasts: stride 0; b has no first batch dim */
  assert_int_equal(p.stride[0][0], 20);
  assert_int_equal(p.stride[0][1], 0);
  assert_int_equal(p.stride[1][0], 0);
  assert_int_equal(p.stride[1][1], 30);
  /* ii->i: one loop of size 3 whose stride walks the diagonal (3 + 1) */
  const int r1[] = {2};
  const int64_t sq[] = {3, 3};
  const int64_t *d1[] = {sq};
  assert_int_equal(mg_einsum_plan("ii->i", 1, r1, d1, &p, &e), MG_EIN_OK);
  assert_true(p.no == 1 && p.na == 1 && p.size[0] == 3 && p.stride[0][0] == 4);
  /* ii (implicit): i is used twice, so the output is a scalar: the trace */
  assert_int_equal(mg_einsum_plan("ii", 1, r1, d1, &p, &e), MG_EIN_OK);
  assert_true(p.no == 0 && p.na == 1 && p.stride[0][0] == 4);
  assert_int_equal(mg_einsum_plan("ij->k", 1, r1, d1, &p, &e), MG_EIN_OUTPUT_UNKNOWN);
  assert_int_equal(mg_einsum_plan("ijk->i", 1, r1, d1, &p, &e), MG_EIN_TERM_RANK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window_same),     cmocka_unit_test(test_window_valid_notset),
      cmocka_unit_test(test_window_transpose), cmocka_unit_test(test_auto_pad_pass),
      cmocka_unit_test(test_slice_axis),      cmocka_unit_test(test_pad_source),      cmocka_unit_test(test_einsum_matmul),
      cmocka_unit_test(test_einsum_ellipsis_diagonal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
