/* Control flow, sequences and optionals: If, Loop, Scan (opset-9 form),
 * SequenceConstruct/Empty/At/Insert/Erase/Length, SplitToSequence,
 * ConcatFromSequence, SequenceMap, Optional, OptionalGetElement and
 * OptionalHasElement.
 *
 * Ownership: in[i] belongs to the caller's frame, so kernels copy from it and
 * never steal. Values a body returns (interp_run_body) are fresh and ours, so they
 * are moved into out[] or into the loop state rather than copied. */
#include "interp_internal.h"
#include <string.h>

/* Deep-copies any run-time value (tensor, sequence or empty optional) into the
 * zeroed dst. On failure dst is left empty. */
static int rv_copy(interp_ctx *c, const mg_node *n, mg_rvalue *dst, const mg_rvalue *src) {
  memset(dst, 0, sizeof *dst);
  dst->kind = src->kind;
  if (src->kind == MG_RV_TENSOR) return it_copy(c, n, &dst->t, &src->t);
  if (src->kind != MG_RV_SEQUENCE) return 0;
  dst->items = mg_calloc((size_t)src->n_items + 1, sizeof(mg_array));
  if (!dst->items) return it_fail(c, n, "out of memory");
  for (int i = 0; i < src->n_items; i++) {
    if (it_copy(c, n, &dst->items[i], &src->items[i])) {
      mg_rvalue_free(dst);
      return -1;
    }
    dst->n_items++;
  }
  return 0;
}

/* Moves src into the zeroed dst and leaves src empty. */
static void rv_move(mg_rvalue *dst, mg_rvalue *src) {
  *dst = *src;
  memset(src, 0, sizeof *src);
}

/* Frees count body results and the block holding them. */
static void results_free(mg_rvalue *r, int count) {
  if (!r) return;
  for (int i = 0; i < count; i++) mg_rvalue_free(&r[i]);
  mg_free(r);
}

/* The graph attribute `name` of n, or NULL after a diagnostic. */
static mg_graph *body_of(interp_ctx *c, const mg_node *n, const char *name) {
  const mg_attr *a = mg_node_attr(n, name);
  if (!a || a->kind != MG_ATTR_GRAPH || !a->g) {
    it_fail(c, n, "missing graph attribute '%s'", name);
    return NULL;
  }
  return a->g;
}

/* Makes out[i] an empty sequence with room for cap items. */
static int seq_out(interp_ctx *c, const mg_node *n, mg_rvalue **out, int i, int64_t cap) {
  if (i >= n->n_out || !out[i]) return 0;
  out[i]->kind = MG_RV_SEQUENCE;
  out[i]->n_items = 0;
  out[i]->items = mg_calloc((size_t)cap + 1, sizeof(mg_array));
  return out[i]->items ? 0 : it_fail(c, n, "out of memory");
}

/* Input i as a sequence, or NULL after a diagnostic. */
static const mg_rvalue *seq_in(interp_ctx *c, const mg_node *n, mg_rvalue **in, int i) {
  if (i >= n->n_in || !in[i] || in[i]->kind != MG_RV_SEQUENCE) {
    it_fail(c, n, "input %d is not a sequence", i);
    return NULL;
  }
  return in[i];
}

/* Normalises a possibly negative axis into [0, rank); -1 when out of range. */
static int norm_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? (int)axis : -1;
}

/* Products of dims before and after `axis`. */
static void outer_inner(const mg_array *t, int axis, int64_t *outer, int64_t *inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < t->rank; d++) {
    if (d < axis) *outer *= t->dims[d];
    else if (d > axis) *inner *= t->dims[d];
  }
}

/* Copies the slab [start, start+len) along `axis` of src into dst, which is
 * already allocated with src's dims except len along axis (or with that axis
 * removed: the element order is the same). */
static void take_slab(const mg_array *src, int axis, int64_t start, int64_t len, mg_array *dst) {
  int64_t outer, inner;
  outer_inner(src, axis, &outer, &inner);
  size_t es = mg_dtype_size(src->dtype), row = (size_t)(len * inner) * es;
  int64_t D = src->dims[axis];
  for (int64_t o = 0; o < outer; o++)
    if (row)
      memcpy((unsigned char *)dst->data + (size_t)o * row,
             (const unsigned char *)src->data + (size_t)((o * D + start) * inner) * es, row);
}

/* Writes item (dst's dims with `axis` removed, or of size len there) at
 * [pos, pos+len) along `axis` of dst. */
static void put_slab(mg_array *dst, int axis, int64_t pos, int64_t len, const mg_array *item) {
  int64_t outer, inner;
  outer_inner(dst, axis, &outer, &inner);
  size_t es = mg_dtype_size(dst->dtype), row = (size_t)(len * inner) * es;
  int64_t D = dst->dims[axis];
  for (int64_t o = 0; o < outer; o++)
    if (row)
      memcpy((unsigned char *)dst->data + (size_t)((o * D + pos) * inner) * es,
             (const unsigned char *)item->data + (size_t)o * row, row);
}

/* Stacks count same-shaped items along a new axis `axis` into dst; item k goes to
 * position k, or count-1-k when reverse. With no items, dst gets the shape that
 * inference gave value v (unknown dims as 0), so an empty loop still yields a
 * tensor of the right rank and dtype. */
static int stack_items(interp_ctx *c, const mg_node *n, mg_array *items, int64_t count, int axis,
                       int reverse, const mg_value *v, mg_array *dst) {
  if (count == 0) {
    int64_t dims[MG_ARRAY_MAX_RANK] = {0};
    int rank = v && v->shape.rank > 0 && v->shape.rank <= MG_ARRAY_MAX_RANK ? v->shape.rank : 1;
    for (int d = 0; d < rank && v && v->shape.rank > 0; d++) dims[d] = v->shape.d[d].v > 0 ? v->shape.d[d].v : 0;
    dims[axis < rank ? axis : 0] = 0;
    return it_alloc(c, n, dst, v && v->dtype ? v->dtype : MG_F32, rank, dims);
  }
  const mg_array *first = &items[0];
  if (axis < 0 || axis > first->rank || first->rank + 1 > MG_ARRAY_MAX_RANK)
    return it_fail(c, n, "stacking axis %d out of range for rank %d", axis, first->rank);
  for (int64_t k = 1; k < count; k++) {
    int same = items[k].dtype == first->dtype && items[k].rank == first->rank;
    for (int d = 0; same && d < first->rank; d++) same = items[k].dims[d] == first->dims[d];
    if (!same) return it_fail(c, n, "scan output %lld differs in shape or dtype from the first", (long long)k);
  }
  int64_t dims[MG_ARRAY_MAX_RANK];
  for (int d = 0, s = 0; d <= first->rank; d++) dims[d] = d == axis ? count : first->dims[s++];
  if (it_alloc(c, n, dst, first->dtype, first->rank + 1, dims)) return -1;
  for (int64_t k = 0; k < count; k++) put_slab(dst, axis, reverse ? count - 1 - k : k, 1, &items[k]);
  return 0;
}

/* If: runs the branch the scalar cond selects and moves its outputs to out. */
static int op_if(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out, interp_frame *frame) {
  const mg_array *cond = it_in(in, n, 0);
  if (!cond || it_numel(cond) < 1) return it_fail(c, n, "cond must be a one-element tensor");
  mg_graph *g = body_of(c, n, it_get_i64(cond, 0) ? "then_branch" : "else_branch");
  if (!g) return -1;
  if (g->n_outputs < n->n_out)
    return it_fail(c, n, "the branch has %d outputs; If has %d", g->n_outputs, n->n_out);
  mg_rvalue *res = mg_calloc((size_t)g->n_outputs + 1, sizeof *res);
  if (!res) return it_fail(c, n, "out of memory");
  if (interp_run_body(c, frame, n, g, NULL, 0, res)) {
    mg_free(res);
    return -1;
  }
  for (int i = 0; i < n->n_out; i++)
    if (out[i]) rv_move(out[i], &res[i]);
  results_free(res, g->n_outputs);
  return 0;
}

/* Per scan output: the items collected so far, one per iteration. */
typedef struct {
  mg_array *items;
  int64_t count, cap;
} collect;

/* Appends body result v (moved, must be a tensor) to col. */
static int collect_push(interp_ctx *c, const mg_node *n, collect *col, mg_rvalue *v) {
  if (v->kind != MG_RV_TENSOR) return it_fail(c, n, "a scan output of the body is not a tensor");
  if (col->count == col->cap) {
    int64_t cap = col->cap ? 2 * col->cap : 8;
    mg_array *p = mg_realloc(col->items, sizeof(mg_array) * (size_t)cap);
    if (!p) return it_fail(c, n, "out of memory");
    col->items = p, col->cap = cap;
  }
  col->items[col->count++] = v->t;
  memset(v, 0, sizeof *v);
  return 0;
}

/* Frees k collections and the block holding them. */
static void collects_free(collect *cols, int k) {
  if (!cols) return;
  for (int i = 0; i < k; i++) {
    for (int64_t j = 0; j < cols[i].count; j++) mg_array_free(&cols[i].items[j]);
    mg_free(cols[i].items);
  }
  mg_free(cols);
}

/* Makes v a fresh scalar tensor of dtype dt holding x. */
static int scalar_rv(interp_ctx *c, const mg_node *n, mg_rvalue *v, mg_dtype dt, int64_t x) {
  memset(v, 0, sizeof *v);
  v->kind = MG_RV_TENSOR;
  if (it_alloc(c, n, &v->t, dt, 0, NULL)) return -1;
  it_set_i64(&v->t, 0, x);
  return 0;
}

/* Loop: body inputs (iteration_num, cond, carried...), body outputs (cond,
 * carried..., scan outputs...). Runs while i < M (when given) and cond (when the
 * cond input is given; the spec's for-loop form ignores the body's cond). Scan
 * outputs are stacked along a new axis 0. */
static int op_loop(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out, interp_frame *frame) {
  mg_graph *g = body_of(c, n, "body");
  if (!g) return -1;
  int N = n->n_in - 2, K = n->n_out - N;
  if (N < 0 || K < 0 || g->n_inputs != 2 + N || g->n_outputs != 1 + N + K)
    return it_fail(c, n, "body signature (%d inputs, %d outputs) does not match the node", g->n_inputs,
                   g->n_outputs);
  const mg_array *M = it_in(in, n, 0), *C = it_in(in, n, 1);
  if ((n->in[0] && (!M || it_numel(M) != 1)) || (n->in[1] && (!C || it_numel(C) != 1)))
    return it_fail(c, n, "M and cond must be one-element tensors");
  if (!M && !C) return it_fail(c, n, "a Loop with neither trip count nor condition never ends");
  int64_t max_trip = M ? it_get_i64(M, 0) : INT64_MAX;
  int cond = C ? it_get_i64(C, 0) != 0 : 1;
  mg_rvalue *state = mg_calloc((size_t)N + 1, sizeof *state);
  mg_rvalue **bin = mg_calloc((size_t)N + 3, sizeof *bin);
  collect *cols = mg_calloc((size_t)K + 1, sizeof *cols);
  mg_rvalue iv = {0}, cv = {0};
  int rc = 0;
  if (!state || !bin || !cols) {
    rc = it_fail(c, n, "out of memory");
    goto done;
  }
  for (int i = 0; i < N && !rc; i++) {
    if (in[2 + i]) rc = rv_copy(c, n, &state[i], in[2 + i]);
    else state[i].kind = MG_RV_NONE;
  }
  bin[0] = &iv, bin[1] = &cv;
  for (int i = 0; i < N; i++) bin[2 + i] = &state[i];
  for (int64_t it = 0; !rc && it < max_trip && cond; it++) {
    mg_rvalue_free(&iv), mg_rvalue_free(&cv);
    if (scalar_rv(c, n, &iv, MG_I64, it) || scalar_rv(c, n, &cv, MG_BOOL, cond)) {
      rc = -1;
      break;
    }
    mg_rvalue *res = mg_calloc((size_t)g->n_outputs + 1, sizeof *res);
    if (!res) {
      rc = it_fail(c, n, "out of memory");
      break;
    }
    if (interp_run_body(c, frame, n, g, bin, 2 + N, res)) {
      mg_free(res);
      rc = -1;
      break;
    }
    if (C) {
      if (res[0].kind != MG_RV_TENSOR || it_numel(&res[0].t) < 1)
        rc = it_fail(c, n, "the body's cond output is not a one-element tensor");
      else cond = it_get_i64(&res[0].t, 0) != 0;
    }
    for (int i = 0; i < N && !rc; i++) {
      mg_rvalue_free(&state[i]);
      rv_move(&state[i], &res[1 + i]);
    }
    for (int k = 0; k < K && !rc; k++) rc = collect_push(c, n, &cols[k], &res[1 + N + k]);
    results_free(res, g->n_outputs);
  }
  for (int i = 0; i < N && !rc; i++)
    if (out[i]) rv_move(out[i], &state[i]);
  for (int k = 0; k < K && !rc; k++) {
    if (!out[N + k]) continue;
    out[N + k]->kind = MG_RV_TENSOR;
    rc = stack_items(c, n, cols[k].items, cols[k].count, 0, 0, n->out[N + k], &out[N + k]->t);
  }
done:
  mg_rvalue_free(&iv), mg_rvalue_free(&cv);
  results_free(state, state ? N : 0);
  mg_free(bin);
  collects_free(cols, cols ? K : 0);
  return rc;
}

/* Reads an optional ints attribute of `count` entries (default 0 each). */
static int ints_attr(interp_ctx *c, const mg_node *n, const char *name, int count, int64_t *v) {
  const int64_t *a;
  size_t k = mg_attr_ints(n, name, &a);
  for (int i = 0; i < count; i++) v[i] = 0;
  if (!k) return 0;
  if ((int)k != count) return it_fail(c, n, "%s has %zu entries; expected %d", name, k, count);
  for (int i = 0; i < count; i++) v[i] = a[i];
  return 0;
}

/* Scan (opset 9+): the first n_in - num_scan_inputs inputs are state, the rest
 * are sliced along their scan axes (in reverse when the direction is 1). Body
 * outputs are (state..., scan output slices...); those are stacked along each
 * scan output axis, reversed when that direction is 1. */
static int op_scan(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out, interp_frame *frame) {
  mg_graph *g = body_of(c, n, "body");
  if (!g) return -1;
  int Ms = (int)mg_attr_int(n, "num_scan_inputs", 0);
  int N = n->n_in - Ms, K = n->n_out - N;
  if (Ms < 1 || N < 0 || K < 0 || g->n_inputs != N + Ms || g->n_outputs != N + K)
    return it_fail(c, n, "body signature (%d inputs, %d outputs) does not match the node", g->n_inputs,
                   g->n_outputs);
  int64_t *iax = mg_calloc((size_t)Ms + 1, sizeof(int64_t)), *idir = mg_calloc((size_t)Ms + 1, sizeof(int64_t));
  int64_t *oax = mg_calloc((size_t)K + 1, sizeof(int64_t)), *odir = mg_calloc((size_t)K + 1, sizeof(int64_t));
  mg_rvalue *state = mg_calloc((size_t)N + 1, sizeof *state);
  mg_rvalue *slices = mg_calloc((size_t)Ms + 1, sizeof *slices);
  mg_rvalue **bin = mg_calloc((size_t)(N + Ms) + 1, sizeof *bin);
  collect *cols = mg_calloc((size_t)K + 1, sizeof *cols);
  int rc = 0;
  int64_t T = -1;
  if (!iax || !idir || !oax || !odir || !state || !slices || !bin || !cols) {
    rc = it_fail(c, n, "out of memory");
    goto done;
  }
  if (ints_attr(c, n, "scan_input_axes", Ms, iax) || ints_attr(c, n, "scan_input_directions", Ms, idir) ||
      ints_attr(c, n, "scan_output_axes", K, oax) || ints_attr(c, n, "scan_output_directions", K, odir)) {
    rc = -1;
    goto done;
  }
  for (int j = 0; j < Ms && !rc; j++) {
    const mg_array *x = it_in(in, n, N + j);
    if (!x) {
      rc = it_fail(c, n, "scan input %d is not a tensor", j);
      break;
    }
    int a = norm_axis(iax[j], x->rank);
    if (a < 0) {
      rc = it_fail(c, n, "scan_input_axes[%d] = %lld out of range", j, (long long)iax[j]);
      break;
    }
    iax[j] = a;
    if (T >= 0 && x->dims[a] != T) rc = it_fail(c, n, "scan inputs disagree on the sequence length");
    T = x->dims[a];
    int64_t dims[MG_ARRAY_MAX_RANK];
    for (int d = 0, s = 0; d < x->rank; d++)
      if (d != a) dims[s++] = x->dims[d];
    slices[j].kind = MG_RV_TENSOR;
    if (!rc && it_alloc(c, n, &slices[j].t, x->dtype, x->rank - 1, dims)) rc = -1;
  }
  for (int i = 0; i < N && !rc; i++) {
    if (in[i]) rc = rv_copy(c, n, &state[i], in[i]);
    else state[i].kind = MG_RV_NONE;
  }
  for (int i = 0; i < N; i++) bin[i] = &state[i];
  for (int j = 0; j < Ms; j++) bin[N + j] = &slices[j];
  for (int64_t t = 0; !rc && t < T; t++) {
    for (int j = 0; j < Ms; j++)
      take_slab(it_in(in, n, N + j), (int)iax[j], idir[j] ? T - 1 - t : t, 1, &slices[j].t);
    mg_rvalue *res = mg_calloc((size_t)g->n_outputs + 1, sizeof *res);
    if (!res) {
      rc = it_fail(c, n, "out of memory");
      break;
    }
    if (interp_run_body(c, frame, n, g, bin, N + Ms, res)) {
      mg_free(res);
      rc = -1;
      break;
    }
    for (int i = 0; i < N; i++) {
      mg_rvalue_free(&state[i]);
      rv_move(&state[i], &res[i]);
    }
    for (int k = 0; k < K && !rc; k++) rc = collect_push(c, n, &cols[k], &res[N + k]);
    results_free(res, g->n_outputs);
  }
  for (int i = 0; i < N && !rc; i++)
    if (out[i]) rv_move(out[i], &state[i]);
  for (int k = 0; k < K && !rc; k++) {
    if (!out[N + k]) continue;
    int r = cols[k].count ? cols[k].items[0].rank + 1 : 1;
    int a = norm_axis(oax[k], r);
    if (a < 0) {
      rc = it_fail(c, n, "scan_output_axes[%d] = %lld out of range", k, (long long)oax[k]);
      break;
    }
    out[N + k]->kind = MG_RV_TENSOR;
    rc = stack_items(c, n, cols[k].items, cols[k].count, a, odir[k] != 0, n->out[N + k], &out[N + k]->t);
  }
done:
  mg_free(iax), mg_free(idir), mg_free(oax), mg_free(odir);
  results_free(state, state ? N : 0);
  results_free(slices, slices ? Ms : 0);
  mg_free(bin);
  collects_free(cols, cols ? K : 0);
  return rc;
}

/* Reads a scalar (or one-element) position input and normalises it against
 * len: valid positions are [-len, len + extra). Returns -1 after a diagnostic. */
static int64_t position(interp_ctx *c, const mg_node *n, const mg_array *p, int64_t dflt, int64_t len, int extra) {
  int64_t v = dflt;
  if (p) {
    if (it_numel(p) != 1) return it_fail(c, n, "position must be a scalar");
    v = it_get_i64(p, 0);
  }
  if (v < -len || v >= len + extra) {
    it_fail(c, n, "position %lld out of range for a sequence of %lld", (long long)v, (long long)len);
    return -1;
  }
  return v < 0 ? v + len : v;
}

/* SequenceConstruct, SequenceEmpty, SequenceAt, SequenceInsert, SequenceErase,
 * SequenceLength: copies of the input items, rearranged. */
static int op_sequence(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  switch (n->op) {
  case MG_OP_SequenceConstruct: {
    if (seq_out(c, n, out, 0, n->n_in)) return -1;
    for (int i = 0; i < n->n_in; i++) {
      const mg_array *x = it_in(in, n, i);
      if (!x) return it_fail(c, n, "input %d is not a tensor", i);
      if (x->dtype != it_in(in, n, 0)->dtype) return it_fail(c, n, "inputs differ in dtype");
      if (it_copy(c, n, &out[0]->items[i], x)) return -1;
      out[0]->n_items++;
    }
    return 0;
  }
  case MG_OP_SequenceEmpty:
    return seq_out(c, n, out, 0, 0);
  case MG_OP_SequenceLength: {
    const mg_rvalue *s = seq_in(c, n, in, 0);
    if (!s) return -1;
    mg_array *y = it_out(c, n, out, 0, MG_I64, 0, NULL);
    if (!y) return -1;
    it_set_i64(y, 0, s->n_items);
    return 0;
  }
  case MG_OP_SequenceAt: {
    const mg_rvalue *s = seq_in(c, n, in, 0);
    if (!s) return -1;
    int64_t p = position(c, n, it_in(in, n, 1), 0, s->n_items, 0);
    if (p < 0) return -1;
    out[0]->kind = MG_RV_TENSOR;
    return it_copy(c, n, &out[0]->t, &s->items[p]);
  }
  case MG_OP_SequenceInsert: {
    const mg_rvalue *s = seq_in(c, n, in, 0);
    const mg_array *x = it_in(in, n, 1);
    if (!s) return -1;
    if (!x) return it_fail(c, n, "the inserted value is not a tensor");
    if (s->n_items && s->items[0].dtype != x->dtype)
      return it_fail(c, n, "inserting %s into a sequence of %s", mg_dtype_name(x->dtype),
                     mg_dtype_name(s->items[0].dtype));
    int64_t p = position(c, n, it_in(in, n, 2), s->n_items, s->n_items, 1);
    if (p < 0 || seq_out(c, n, out, 0, s->n_items + 1)) return -1;
    for (int64_t i = 0; i <= s->n_items; i++) {
      const mg_array *src = i == p ? x : &s->items[i < p ? i : i - 1];
      if (it_copy(c, n, &out[0]->items[i], src)) return -1;
      out[0]->n_items++;
    }
    return 0;
  }
  case MG_OP_SequenceErase: {
    const mg_rvalue *s = seq_in(c, n, in, 0);
    if (!s) return -1;
    int64_t p = position(c, n, it_in(in, n, 1), -1, s->n_items, 0);
    if (p < 0 || seq_out(c, n, out, 0, s->n_items)) return -1;
    for (int64_t i = 0; i < s->n_items; i++) {
      if (i == p) continue;
      if (it_copy(c, n, &out[0]->items[out[0]->n_items], &s->items[i])) return -1;
      out[0]->n_items++;
    }
    return 0;
  }
  default:
    return it_fail(c, n, "not a sequence op");
  }
}

/* SplitToSequence: split absent gives pieces of 1 (squeezed unless keepdims); a
 * scalar split gives pieces of that size (the last may be shorter); a 1-D split
 * gives the listed sizes, which must add up to the axis length. */
static int op_split_to_sequence(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x = it_in(in, n, 0), *sp = it_in(in, n, 1);
  if (!x) return it_fail(c, n, "input is not a tensor");
  int axis = norm_axis(mg_attr_int(n, "axis", 0), x->rank);
  if (axis < 0) return it_fail(c, n, "axis out of range");
  int64_t D = x->dims[axis], count, piece = 1;
  int keep = 1;
  int64_t *sizes = NULL;
  if (!sp) {
    count = D;
    keep = mg_attr_int(n, "keepdims", 1) != 0;
  } else if (sp->rank == 0) {
    piece = it_get_i64(sp, 0);
    if (piece <= 0) return it_fail(c, n, "split must be positive");
    count = (D + piece - 1) / piece;
  } else if (sp->rank == 1) {
    count = sp->dims[0];
  } else {
    return it_fail(c, n, "split must be a scalar or 1-D");
  }
  sizes = mg_malloc(sizeof(int64_t) * (size_t)(count + 1));
  if (!sizes) return it_fail(c, n, "out of memory");
  int64_t total = 0;
  for (int64_t i = 0; i < count; i++) {
    if (!sp) sizes[i] = 1;
    else if (sp->rank == 0) sizes[i] = D - i * piece < piece ? D - i * piece : piece;
    else sizes[i] = it_get_i64(sp, i);
    if (sizes[i] < 0) {
      mg_free(sizes);
      return it_fail(c, n, "negative split size");
    }
    total += sizes[i];
  }
  if (total != D) {
    mg_free(sizes);
    return it_fail(c, n, "split sizes add up to %lld; the axis has %lld", (long long)total, (long long)D);
  }
  int rc = seq_out(c, n, out, 0, count);
  for (int64_t i = 0, start = 0; i < count && !rc; start += sizes[i], i++) {
    int64_t dims[MG_ARRAY_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
      if (d == axis && !keep) continue;
      dims[r++] = d == axis ? sizes[i] : x->dims[d];
    }
    mg_array *item = &out[0]->items[i];
    if (it_alloc(c, n, item, x->dtype, r, dims)) {
      rc = -1;
      break;
    }
    out[0]->n_items++;
    take_slab(x, axis, start, sizes[i], item);
  }
  mg_free(sizes);
  return rc;
}

/* ConcatFromSequence: concatenates the items along axis, or stacks them along a
 * new axis when new_axis is 1. */
static int op_concat_from_sequence(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_rvalue *s = seq_in(c, n, in, 0);
  if (!s) return -1;
  if (s->n_items == 0) return it_fail(c, n, "cannot concatenate an empty sequence");
  int new_axis = mg_attr_int(n, "new_axis", 0) != 0;
  if (!mg_node_attr(n, "axis")) return it_fail(c, n, "axis is required");
  const mg_array *f = &s->items[0];
  int axis = norm_axis(mg_attr_int(n, "axis", 0), f->rank + new_axis);
  if (axis < 0) return it_fail(c, n, "axis out of range");
  out[0]->kind = MG_RV_TENSOR;
  if (new_axis) return stack_items(c, n, s->items, s->n_items, axis, 0, NULL, &out[0]->t);
  int64_t dims[MG_ARRAY_MAX_RANK];
  memcpy(dims, f->dims, sizeof dims);
  dims[axis] = 0;
  for (int i = 0; i < s->n_items; i++) {
    const mg_array *t = &s->items[i];
    int same = t->rank == f->rank && t->dtype == f->dtype;
    for (int d = 0; same && d < f->rank; d++) same = d == axis || t->dims[d] == f->dims[d];
    if (!same) return it_fail(c, n, "item %d does not match the first in dtype or shape", i);
    dims[axis] += t->dims[axis];
  }
  if (it_alloc(c, n, &out[0]->t, f->dtype, f->rank, dims)) return -1;
  int64_t pos = 0;
  for (int i = 0; i < s->n_items; pos += s->items[i].dims[axis], i++)
    put_slab(&out[0]->t, axis, pos, s->items[i].dims[axis], &s->items[i]);
  return 0;
}

/* SequenceMap: runs the body once per element of the first input; sequence
 * inputs contribute their i-th item, tensor inputs are passed whole. Output j is
 * the sequence of the body's j-th outputs. */
static int op_sequence_map(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out, interp_frame *frame) {
  mg_graph *g = body_of(c, n, "body");
  const mg_rvalue *s = seq_in(c, n, in, 0);
  if (!g || !s) return -1;
  if (g->n_inputs != n->n_in || g->n_outputs != n->n_out)
    return it_fail(c, n, "body signature (%d inputs, %d outputs) does not match the node", g->n_inputs,
                   g->n_outputs);
  int L = s->n_items;
  for (int j = 0; j < n->n_in; j++) {
    if (!in[j]) return it_fail(c, n, "input %d is missing", j);
    if (in[j]->kind == MG_RV_SEQUENCE && in[j]->n_items != L)
      return it_fail(c, n, "input %d has %d items; the first has %d", j, in[j]->n_items, L);
  }
  for (int k = 0; k < n->n_out; k++)
    if (seq_out(c, n, out, k, L)) return -1;
  mg_rvalue *views = mg_calloc((size_t)n->n_in + 1, sizeof *views);
  mg_rvalue **bin = mg_calloc((size_t)n->n_in + 1, sizeof *bin);
  mg_rvalue *res = mg_calloc((size_t)n->n_out + 1, sizeof *res);
  int rc = !views || !bin || !res ? it_fail(c, n, "out of memory") : 0;
  for (int i = 0; i < L && !rc; i++) {
    for (int j = 0; j < n->n_in; j++) {
      if (in[j]->kind != MG_RV_SEQUENCE) {
        bin[j] = in[j];
        continue;
      }
      /* A borrowed view of item i: body inputs are never freed by the body. */
      views[j].kind = MG_RV_TENSOR;
      views[j].borrowed = 1;
      views[j].t = in[j]->items[i];
      bin[j] = &views[j];
    }
    if (interp_run_body(c, frame, n, g, bin, n->n_in, res)) {
      rc = -1;
      break;
    }
    for (int k = 0; k < n->n_out && !rc; k++) {
      if (res[k].kind != MG_RV_TENSOR) rc = it_fail(c, n, "body output %d is not a tensor", k);
      else if (out[k]) {
        out[k]->items[i] = res[k].t;
        out[k]->n_items++;
        memset(&res[k], 0, sizeof res[k]);
      }
    }
    for (int k = 0; k < n->n_out; k++) mg_rvalue_free(&res[k]);
  }
  mg_free(views);
  mg_free(bin);
  mg_free(res);
  return rc;
}

/* Optional, OptionalGetElement, OptionalHasElement. An empty optional is a value
 * of kind NONE; an omitted input counts as empty too. */
static int op_optional(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_rvalue *x = n->n_in > 0 ? in[0] : NULL;
  int has = x && x->kind != MG_RV_NONE;
  switch (n->op) {
  case MG_OP_Optional:
    if (!has) {
      out[0]->kind = MG_RV_NONE;
      return 0;
    }
    return rv_copy(c, n, out[0], x);
  case MG_OP_OptionalGetElement:
    if (!has) return it_fail(c, n, "the optional is empty");
    return rv_copy(c, n, out[0], x);
  default: {
    mg_array *y = it_out(c, n, out, 0, MG_BOOL, 0, NULL);
    if (!y) return -1;
    it_set_i64(y, 0, has);
    return 0;
  }
  }
}

/* MigcSelect (ops.def): each output a copy of the then- or else-branch value. */
static int op_select(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *cond = it_in(in, n, 0);
  int k = n->n_out;
  if (!cond || it_numel(cond) != 1 || n->n_in != 1 + 2 * k) return it_fail(c, n, "bad MigcSelect");
  int take_then = it_get_i64(cond, 0) != 0;
  for (int i = 0; i < k; i++)
    if (out[i] && rv_copy(c, n, out[i], in[take_then ? 1 + i : 1 + k + i])) return -1;
  return 0;
}

/* Dispatches one node of the control family (see interp_families.def); an
 * omitted output of a single-output op leaves nothing to compute. */
int interp_control(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                   interp_frame *frame) {
  switch (n->op) {
  case MG_OP_If: return op_if(c, n, in, out, frame);
  case MG_OP_MigcSelect: return op_select(c, n, in, out);
  case MG_OP_Loop: return op_loop(c, n, in, out, frame);
  case MG_OP_Scan: return op_scan(c, n, in, out, frame);
  case MG_OP_SequenceMap: return op_sequence_map(c, n, in, out, frame);
  case MG_OP_SplitToSequence: return op_split_to_sequence(c, n, in, out);
  case MG_OP_ConcatFromSequence: return op_concat_from_sequence(c, n, in, out);
  case MG_OP_Optional: case MG_OP_OptionalGetElement: case MG_OP_OptionalHasElement:
    if (!out[0]) return 0;
    return op_optional(c, n, in, out);
  default:
    if (!out[0]) return 0;
    return op_sequence(c, n, in, out);
  }
}
