/* Shape rules of the ops whose shape_rule in ops.def is OWN: the nn, linalg,
 * control-flow, sequence and misc families here, the tensor family in
 * infer_ops_tensor.c (infer_own hands it every op it does not take). */
#include "infer_internal.h"
#include "window_geom.h"
#include "einsum_geom.h"
#include "resize_geom.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Elementwise arithmetic on partial values: keeps symbols through x*1, x+0, x/1. */
int infer_binary_elems(infer_ctx *c, mg_node *n) {
  if (n->n_in != 2 || !n->in[0] || !n->in[1] || n->out[0]->shape.rank > 1) return 0;
  if (n->op != MG_OP_Add && n->op != MG_OP_Sub && n->op != MG_OP_Mul && n->op != MG_OP_Div)
    return 0;
  if (!mg_dtype_is_int(n->out[0]->dtype)) return 0;
  mg_dim a[MG_SMALL], b[MG_SMALL], r[MG_SMALL];
  int na = infer_elems(n->in[0], a, MG_SMALL), nb = infer_elems(n->in[1], b, MG_SMALL);
  if (na < 0 || nb < 0) return 0;
  int nr = na > nb ? na : nb;
  if ((na != nr && na != 1) || (nb != nr && nb != 1)) return 0;
  for (int i = 0; i < nr; i++) {
    mg_dim x = a[na == 1 ? 0 : i], y = b[nb == 1 ? 0 : i];
    int kx = x.v != MG_UNKNOWN_ELEM, ky = y.v != MG_UNKNOWN_ELEM;
    r[i] = (mg_dim){MG_UNKNOWN_ELEM, NULL};
    if (kx && ky) {
      int64_t v;
      int ok;
      switch (n->op) {
      case MG_OP_Add: ok = mg_add_ovf(x.v, y.v, &v); break;
      case MG_OP_Sub: ok = mg_sub_ovf(x.v, y.v, &v); break;
      case MG_OP_Mul: ok = mg_mul_ovf(x.v, y.v, &v); break;
      default: ok = y.v && !(x.v == INT64_MIN && y.v == -1); v = ok ? x.v / y.v : 0; break;
      }
      if (ok && v != MG_UNKNOWN_ELEM) r[i].v = v;
    } else if (!kx && ky && ((n->op == MG_OP_Mul || n->op == MG_OP_Div) ? y.v == 1 : y.v == 0)) {
      r[i] = x;
    } else if (kx && !ky && ((n->op == MG_OP_Mul && x.v == 1) || (n->op == MG_OP_Add && x.v == 0))) {
      r[i] = y;
    }
  }
  return infer_set_elems(c, n->out[0], r, nr);
}

/* Spatial output size of a conv/pool window axis (core/window_geom.h); a kernel
 * larger than the padded input gives 0, the checks being the consumers'. */
static mg_dim window_out(mg_dim in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe,
                         int mode, int ceil_mode) {
  static const mg_win_limits any = {INT64_MAX, INT64_MAX};
  int64_t b, e, o;
  mg_win_status st = mg_window_axis(mode, in.v, k, s, d, pb, pe, ceil_mode, &any, &b, &e, &o);
  if (st == MG_WIN_EMPTY) return (mg_dim){0, NULL};
  return st == MG_WIN_OK && o >= 0 ? (mg_dim){o, NULL} : UNK;
}

/* Conv, pooling: fills spatial defaults (strides, dilations, pads) when the rank is
 * known, and computes the output. channels: output channel dim. */
static int conv_like(infer_ctx *c, mg_node *n, const mg_value *x, const mg_value *w,
                     mg_dim channels, mg_dtype dt) {
  if (x->shape.rank < 0) {
    infer_out(n, 0, dt, NULL);
    return 0;
  }
  int sp = x->shape.rank - 2;
  if (sp < 1) return bad(c, n, "input must have at least one spatial dimension");
  const int64_t *ks, *st, *dl, *pd;
  int64_t kernel[MG_MAX_RANK];
  size_t nk = mg_attr_ints(n, "kernel_shape", &ks);
  size_t ns = mg_attr_ints(n, "strides", &st);
  size_t nd = mg_attr_ints(n, "dilations", &dl);
  size_t np = mg_attr_ints(n, "pads", &pd);
  if (nk) {
    if ((int)nk != sp) return bad(c, n, "kernel_shape does not match the input's rank");
    memcpy(kernel, ks, sizeof(int64_t) * nk);
  } else if (w && w->shape.rank == x->shape.rank) {
    for (int i = 0; i < sp; i++) {
      if (w->shape.d[i + 2].v < 0) {
        infer_out(n, 0, dt, NULL);
        return 0;
      }
      kernel[i] = w->shape.d[i + 2].v;
    }
  } else {
    return bad(c, n, "kernel_shape is missing");
  }
  if ((ns && (int)ns != sp) || (nd && (int)nd != sp) || (np && (int)np != 2 * sp))
    return bad(c, n, "strides, dilations or pads do not match the input's rank");
  int mode; /* an unknown auto_pad is the consumers' to report; the shape reads pads */
  if (mg_window_auto_pad(n, &mode)) mode = MG_PAD_NOTSET;
  int is_pool = n->op == MG_OP_MaxPool || n->op == MG_OP_AveragePool || n->op == MG_OP_LpPool;
  int ceil_mode = is_pool ? (int)mg_attr_int(n, "ceil_mode", 0) : 0;
  mg_shape s = {.rank = x->shape.rank};
  s.d[0] = x->shape.d[0];
  s.d[1] = channels;
  for (int i = 0; i < sp; i++) {
    int64_t stv = ns ? st[i] : 1, dv = nd ? dl[i] : 1;
    const int64_t lim = (int64_t)1 << 31;
    if (stv <= 0 || dv <= 0 || kernel[i] <= 0 || stv > lim || dv > lim || kernel[i] > lim)
      return bad(c, n, "kernel, stride and dilation must be in 1..2^31");
    if (np && (pd[i] < 0 || pd[i] > lim || pd[i + sp] < 0 || pd[i + sp] > lim))
      return bad(c, n, "pads must be in 0..2^31");
    s.d[i + 2] = window_out(x->shape.d[i + 2], kernel[i], stv, dv, np ? pd[i] : 0,
                            np ? pd[i + sp] : 0, mode, ceil_mode);
  }
  infer_out(n, 0, dt, &s);
  if (n->op == MG_OP_MaxPool) infer_out(n, 1, MG_I64, &s);
  return 0;
}

/* ConvTranspose: the output's spatial dims from core/window_geom.h, unknown
 * where they cannot be computed (the consumers report why). */
static int conv_transpose(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0, *w = IN(1);
  (void)c;
  int64_t group = mg_attr_int(n, "group", 1);
  mg_dim ch = w->shape.rank >= 2 && group > 0 ? dim_mul(w->shape.d[1], (mg_dim){group, NULL}) : UNK;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int sp = x->shape.rank - 2;
  const int64_t *ks;
  size_t nk = mg_attr_ints(n, "kernel_shape", &ks);
  int64_t in[MG_MAX_RANK], k[MG_MAX_RANK];
  for (int i = 0; i < sp; i++) {
    in[i] = x->shape.d[i + 2].v;
    k[i] = nk == (size_t)sp ? ks[i] : w->shape.rank == x->shape.rank ? w->shape.d[i + 2].v : -1;
  }
  static const mg_win_limits any = {INT64_MAX, INT64_MAX};
  mg_window g;
  int ok = mg_window_transpose(n, sp, in, k, &any, &g) == MG_WIN_OK;
  mg_shape s = {.rank = x->shape.rank};
  s.d[0] = x->shape.d[0];
  s.d[1] = ch;
  for (int i = 0; i < sp; i++) s.d[i + 2] = ok && g.out[i] >= 0 ? (mg_dim){g.out[i], NULL} : UNK;
  infer_out(n, 0, x->dtype, &s);
  return 0;
}

static int matmul_shape(infer_ctx *c, mg_node *n, const mg_shape *a, const mg_shape *b,
                        mg_shape *out) {
  if (a->rank < 0 || b->rank < 0) {
    *out = unknown_rank();
    return 0;
  }
  if (a->rank == 0 || b->rank == 0) return bad(c, n, "MatMul of a scalar");
  mg_shape A = *a, B = *b;
  int a1 = A.rank == 1, b1 = B.rank == 1;
  if (a1) { A.rank = 2; A.d[1] = A.d[0]; A.d[0] = (mg_dim){1, NULL}; }
  if (b1) { B.rank = 2; B.d[1] = (mg_dim){1, NULL}; }
  mg_dim ka = A.d[A.rank - 1], kb = B.d[B.rank - 2];
  if (ka.v >= 0 && kb.v >= 0 && ka.v != kb.v) {
    char x[128], y[128];
    mg_error(c->d, SHAPE, n->name, n->op_type, "inner dimensions differ: %s and %s",
             mg_shape_str(a, x, sizeof x), mg_shape_str(b, y, sizeof y));
    return -1;
  }
  mg_shape ba = {.rank = A.rank - 2}, bb = {.rank = B.rank - 2}, bo;
  memcpy(ba.d, A.d, sizeof(mg_dim) * (size_t)ba.rank);
  memcpy(bb.d, B.d, sizeof(mg_dim) * (size_t)bb.rank);
  if (infer_broadcast(&ba, &bb, &bo)) return bad(c, n, "batch dimensions do not broadcast");
  *out = bo;
  if (!a1) out->d[out->rank++] = A.d[A.rank - 2];
  if (!b1) out->d[out->rank++] = B.d[B.rank - 1];
  return 0;
}

/* Einsum: the labels from core/einsum_geom.h; each output dim is its label's
 * dim, symbolic where the operands' are, ellipsis dims broadcast. */
static int einsum(infer_ctx *c, mg_node *n) {
  int rank[MG_EIN_MAX_OPS];
  if (n->n_in > MG_EIN_MAX_OPS) {
    infer_out(n, 0, X0->dtype, NULL);
    return 0;
  }
  for (int k = 0; k < n->n_in; k++) {
    if (!n->in[k]) return bad(c, n, "equation names more operands than given");
    if (n->in[k]->shape.rank < 0) {
      infer_out(n, 0, X0->dtype, NULL);
      return 0;
    }
    rank[k] = n->in[k]->shape.rank;
  }
  mg_einsum_geom p;
  mg_ein_error e;
  switch (mg_einsum_labels(mg_attr_str(n, "equation", ""), n->n_in, rank, &p, &e)) {
  case MG_EIN_OK: break;
  case MG_EIN_FEWER_TERMS:
  case MG_EIN_MORE_TERMS: return bad(c, n, "equation and operands differ in number");
  case MG_EIN_TERM_RANK: return bad(c, n, "equation does not match operand rank");
  case MG_EIN_OUTPUT_UNKNOWN: return bad(c, n, "output names an unknown letter");
  case MG_EIN_OUTPUT_RANK: return bad(c, n, "output rank too large");
  default: return bad(c, n, "bad equation");
  }
  mg_dim dim[MG_EIN_LABELS];
  for (int l = 0; l < MG_EIN_LABELS; l++) dim[l] = (mg_dim){1, NULL}; /* an absent ellipsis dim is 1 */
  for (int k = 0; k < n->n_in; k++)
    for (int d = 0; d < rank[k]; d++) {
      const int l = p.lab[k][d];
      const mg_dim x = n->in[k]->shape.d[d];
      if (l < MG_EIN_LETTERS) {
        if (dim[l].v == 1) dim[l] = x;
        continue;
      }
      mg_shape a = {.rank = 1, .d = {dim[l]}}, b = {.rank = 1, .d = {x}}, r;
      if (infer_broadcast(&a, &b, &r)) return bad(c, n, "ellipsis dims do not broadcast");
      dim[l] = r.d[0];
    }
  mg_shape out = {.rank = p.no};
  for (int i = 0; i < p.no; i++) out.d[i] = dim[p.olab[i]];
  infer_out(n, 0, X0->dtype, &out);
  return 0;
}

static int recurrent(infer_ctx *c, mg_node *n) {
  (void)c;
  const mg_value *x = X0;
  int64_t hidden = mg_attr_int(n, "hidden_size", -1);
  const char *dir = mg_attr_str(n, "direction", "forward");
  int64_t nd = !strcmp(dir, "bidirectional") ? 2 : 1;
  int layout = (int)mg_attr_int(n, "layout", 0);
  if (hidden < 0 && IN(2) && IN(2)->shape.rank == 3) hidden = IN(2)->shape.d[2].v;
  mg_dim seq = UNK, batch = UNK, h = {hidden >= 0 ? hidden : -1, NULL}, dirs = {nd, NULL};
  if (x->shape.rank == 3) {
    seq = x->shape.d[layout ? 1 : 0];
    batch = x->shape.d[layout ? 0 : 1];
  }
  mg_shape y = {.rank = 4}, yh = {.rank = 3};
  if (layout) {
    y.d[0] = batch, y.d[1] = seq, y.d[2] = dirs, y.d[3] = h;
    yh.d[0] = batch, yh.d[1] = dirs, yh.d[2] = h;
  } else {
    y.d[0] = seq, y.d[1] = dirs, y.d[2] = batch, y.d[3] = h;
    yh.d[0] = dirs, yh.d[1] = batch, yh.d[2] = h;
  }
  infer_out(n, 0, x->dtype, &y);
  infer_out(n, 1, x->dtype, &yh);
  infer_out(n, 2, x->dtype, &yh);
  return 0;
}

/* See infer_internal.h. */
int infer_shape_from_input(infer_ctx *c, mg_node *n, int slot, mg_shape *s) {
  (void)c;
  mg_dim e[MG_SMALL];
  int ne = infer_elems(IN(slot), e, MG_SMALL);
  if (ne < 0 || ne > MG_MAX_RANK) {
    const mg_value *v = IN(slot);
    if (v && v->shape.rank == 1 && v->shape.d[0].v >= 0 && v->shape.d[0].v <= MG_MAX_RANK)
      *s = rank_unknown_dims((int)v->shape.d[0].v);
    else
      *s = unknown_rank();
    return 0;
  }
  s->rank = ne;
  for (int i = 0; i < ne; i++) s->d[i] = infer_elem_to_dim(e[i]);
  return 1;
}

static int resize(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  const int64_t *axes_attr;
  size_t nax = mg_attr_ints(n, "axes", &axes_attr);
  int r = x->shape.rank;
  int64_t axes[MG_MAX_RANK];
  int k = nax ? (int)nax : r;
  if (k > MG_MAX_RANK) return bad(c, n, "too many axes");
  for (int i = 0; i < k; i++) {
    axes[i] = nax ? infer_norm_axis(axes_attr[i], r) : i;
    if (axes[i] < 0 || axes[i] >= r) return bad(c, n, "axis out of range");
  }
  mg_shape s = x->shape;
  int64_t sizes[MG_MAX_RANK];
  if (IN(3)) {
    int ns = infer_const_ints(IN(3), sizes, MG_MAX_RANK);
    if (ns < 0) {
      for (int i = 0; i < k; i++) s.d[axes[i]] = UNK;
    } else {
      if (ns != k) return bad(c, n, "sizes has the wrong length");
      const char *policy = mg_attr_str(n, "keep_aspect_ratio_policy", "stretch");
      if (strcmp(policy, "stretch")) {
        double scale = 0;
        int first = 1, known = 1;
        for (int i = 0; i < k; i++) {
          if (x->shape.d[axes[i]].v <= 0) { known = 0; break; }
          double sc = (double)sizes[i] / (double)x->shape.d[axes[i]].v;
          if (first || (!strcmp(policy, "not_larger") ? sc < scale : sc > scale)) scale = sc;
          first = 0;
        }
        for (int i = 0; i < k; i++)
          s.d[axes[i]] = known ? (mg_dim){mg_resize_policy_len(x->shape.d[axes[i]].v, scale), NULL} : UNK;
      } else {
        for (int i = 0; i < k; i++) s.d[axes[i]] = (mg_dim){sizes[i], NULL};
      }
    }
  } else if (IN(2) && IN(2)->data && IN(2)->dtype == MG_F32) {
    int64_t ns = (int64_t)(IN(2)->nbytes / 4);
    if (ns != k) return bad(c, n, "scales has the wrong length");
    for (int i = 0; i < k; i++) {
      float sc;
      memcpy(&sc, (const unsigned char *)IN(2)->data + 4 * i, 4);
      mg_dim d = x->shape.d[axes[i]];
      int64_t o = d.v >= 0 ? mg_resize_scaled_len(d.v, sc) : -1;
      s.d[axes[i]] = d.v >= 0 ? (o >= 0 && o <= MG_DIM_MAX ? (mg_dim){o, NULL} : UNK) : (sc == 1.0f ? d : UNK);
    }
  } else {
    for (int i = 0; i < k; i++) s.d[axes[i]] = UNK;
  }
  infer_out(n, 0, x->dtype, &s);
  return 0;
}

/* Seeds body inputs of a Loop/Scan/If body and infers it. */
static int infer_body(infer_ctx *c, mg_graph *body) { return infer_graph(c, body); }

static int control_flow(infer_ctx *c, mg_node *n) {
  if (n->op == MG_OP_If) {
    const mg_attr *t = mg_node_attr(n, "then_branch"), *e = mg_node_attr(n, "else_branch");
    if (!t || !e || !t->g || !e->g) return bad(c, n, "If needs then_branch and else_branch");
    if (infer_body(c, t->g) || infer_body(c, e->g)) return -1;
    if (t->g->n_outputs != n->n_out || e->g->n_outputs != n->n_out)
      return bad(c, n, "branches do not produce one value per output");
    for (int i = 0; i < n->n_out; i++) {
      const mg_value *a = t->g->outputs[i], *b = e->g->outputs[i];
      mg_shape s = a->shape;
      if (a->shape.rank != b->shape.rank) s = unknown_rank();
      else
        for (int d = 0; d < s.rank; d++)
          if (!infer_dim_eq(a->shape.d[d], b->shape.d[d])) s.d[d] = UNK;
      infer_out(n, i, a->dtype ? a->dtype : b->dtype, &s);
      if (n->out[i]) n->out[i]->vtype = a->vtype;
    }
    return 0;
  }
  const mg_attr *ba = mg_node_attr(n, "body");
  if (!ba || !ba->g) return bad(c, n, "missing body");
  mg_graph *body = ba->g;
  if (n->op == MG_OP_Loop) {
    int carried = n->n_in - 2;
    if (body->n_inputs != carried + 2) return bad(c, n, "body inputs do not match the loop's");
    body->inputs[0]->dtype = MG_I64, body->inputs[0]->shape.rank = 0;
    body->inputs[1]->dtype = MG_BOOL, body->inputs[1]->shape.rank = 0;
    for (int i = 0; i < carried; i++) {
      mg_value *bi = body->inputs[i + 2];
      if (n->in[i + 2]) {
        bi->dtype = n->in[i + 2]->dtype;
        bi->vtype = n->in[i + 2]->vtype;
        if (bi->shape.rank < 0 || !bi->has_decl) bi->shape = n->in[i + 2]->shape;
      }
    }
    if (infer_body(c, body)) return -1;
    if (body->n_outputs != 1 + n->n_out) return bad(c, n, "body outputs do not match the loop's");
    for (int i = 0; i < n->n_out; i++) {
      const mg_value *bo = body->outputs[i + 1];
      if (i < carried) {
        mg_shape s = bo->shape;
        if (n->in[i + 2] && n->in[i + 2]->shape.rank == s.rank)
          for (int d = 0; d < s.rank; d++)
            if (!infer_dim_eq(s.d[d], n->in[i + 2]->shape.d[d])) s.d[d] = UNK;
        infer_out(n, i, bo->dtype, &s);
        if (n->out[i]) n->out[i]->vtype = bo->vtype;
      } else {
        mg_shape s = unknown_rank();
        if (bo->shape.rank >= 0 && bo->shape.rank < MG_MAX_RANK) {
          s.rank = bo->shape.rank + 1;
          s.d[0] = UNK;
          memcpy(&s.d[1], bo->shape.d, sizeof(mg_dim) * (size_t)bo->shape.rank);
        }
        infer_out(n, i, bo->dtype, &s);
      }
    }
    return 0;
  }
  if (n->op == MG_OP_SequenceMap) {
    for (int i = 0; i < body->n_inputs && i < n->n_in; i++) {
      mg_value *bi = body->inputs[i];
      if (!n->in[i]) continue;
      bi->dtype = n->in[i]->dtype;
      bi->vtype = n->in[i]->vtype == MG_VT_SEQUENCE ? MG_VT_TENSOR : n->in[i]->vtype;
      if (!bi->has_decl || bi->shape.rank < 0) bi->shape = n->in[i]->shape;
    }
    if (infer_body(c, body)) return -1;
    for (int i = 0; i < n->n_out && i < body->n_outputs; i++) {
      infer_out(n, i, body->outputs[i]->dtype, NULL);
      if (n->out[i]) n->out[i]->vtype = MG_VT_SEQUENCE;
    }
    return 0;
  }
  /* Scan */
  int64_t nscan = mg_attr_int(n, "num_scan_inputs", 0);
  int nstate = n->n_in - (int)nscan;
  if (nstate < 0 || body->n_inputs != n->n_in) return bad(c, n, "body inputs do not match");
  const int64_t *in_axes, *out_axes;
  size_t nia = mg_attr_ints(n, "scan_input_axes", &in_axes);
  size_t noa = mg_attr_ints(n, "scan_output_axes", &out_axes);
  mg_dim seq = UNK;
  for (int i = 0; i < n->n_in; i++) {
    mg_value *bi = body->inputs[i];
    const mg_value *x = n->in[i];
    if (!x) continue;
    bi->dtype = x->dtype;
    if (i < nstate) {
      if (!bi->has_decl || bi->shape.rank < 0) bi->shape = x->shape;
    } else if (x->shape.rank > 0) {
      if (nia && (size_t)(i - nstate) >= nia) return bad(c, n, "scan_input_axes is too short");
      int64_t ax = nia ? infer_norm_axis(in_axes[i - nstate], x->shape.rank) : 0;
      if (ax < 0 || ax >= x->shape.rank) return bad(c, n, "scan input axis out of range");
      mg_shape s = {0};
      for (int d = 0; d < x->shape.rank; d++)
        if (d != ax) s.d[s.rank++] = x->shape.d[d];
      seq = x->shape.d[ax];
      if (!bi->has_decl || bi->shape.rank < 0) bi->shape = s;
    }
  }
  if (infer_body(c, body)) return -1;
  if (body->n_outputs != n->n_out) return bad(c, n, "body outputs do not match");
  for (int i = 0; i < n->n_out; i++) {
    const mg_value *bo = body->outputs[i];
    if (i < nstate) {
      infer_out(n, i, bo->dtype, &bo->shape);
      continue;
    }
    mg_shape s = unknown_rank();
    if (bo->shape.rank >= 0 && bo->shape.rank < MG_MAX_RANK) {
      int r = bo->shape.rank + 1;
      if (noa && (size_t)(i - nstate) >= noa) return bad(c, n, "scan_output_axes is too short");
      int64_t ax = noa ? infer_norm_axis(out_axes[i - nstate], r) : 0;
      if (ax < 0 || ax >= r) return bad(c, n, "scan output axis out of range");
      s.rank = r;
      for (int d = 0, j = 0; d < r; d++) s.d[d] = d == ax ? seq : bo->shape.d[j++];
    }
    infer_out(n, i, bo->dtype, &s);
  }
  return 0;
}

int infer_sequences(infer_ctx *c, mg_node *n) {
  mg_value *o = n->out[0];
  switch (n->op) {
  case MG_OP_SequenceConstruct: {
    mg_shape s = X0->shape;
    for (int i = 1; i < n->n_in; i++)
      if (!n->in[i] || n->in[i]->shape.rank != s.rank) s = unknown_rank();
      else
        for (int d = 0; d < s.rank; d++)
          if (!infer_dim_eq(s.d[d], n->in[i]->shape.d[d])) s.d[d] = UNK;
    infer_out(n, 0, X0->dtype, &s);
    break;
  }
  case MG_OP_SequenceEmpty:
    infer_out(n, 0, (mg_dtype)mg_attr_int(n, "dtype", MG_F32), NULL);
    break;
  case MG_OP_SequenceInsert:
  case MG_OP_SequenceErase:
    infer_out(n, 0, X0->dtype, X0->shape.rank >= 0 ? &X0->shape : NULL);
    if (n->op == MG_OP_SequenceInsert && IN(1) && IN(1)->shape.rank != X0->shape.rank)
      o->shape.rank = -1;
    if (!X0->dtype && IN(1)) o->dtype = IN(1)->dtype;
    break;
  case MG_OP_SequenceAt:
    infer_out(n, 0, X0->dtype, &X0->shape);
    return 0;
  case MG_OP_SequenceLength: {
    mg_shape s = {0};
    infer_out(n, 0, MG_I64, &s);
    return 0;
  }
  case MG_OP_SplitToSequence:
    infer_out(n, 0, X0->dtype, NULL);
    break;
  case MG_OP_ConcatFromSequence: {
    mg_shape s = X0->shape;
    int64_t axis = mg_attr_int(n, "axis", 0);
    if (s.rank >= 0) {
      if (mg_attr_int(n, "new_axis", 0)) {
        int64_t a = infer_norm_axis(axis, s.rank + 1);
        if (a < 0 || a > s.rank) return bad(c, n, "axis out of range");
        memmove(&s.d[a + 1], &s.d[a], sizeof(mg_dim) * (size_t)(s.rank - a));
        s.rank++;
        s.d[a] = UNK;
      } else {
        int64_t a = infer_norm_axis(axis, s.rank);
        if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
        s.d[a] = UNK;
      }
    }
    infer_out(n, 0, X0->dtype, &s);
    return 0;
  }
  case MG_OP_Optional: {
    const mg_attr *t = mg_node_attr(n, "type");
    if (X0) {
      infer_out(n, 0, X0->dtype, &X0->shape);
      o->vtype = X0->vtype == MG_VT_SEQUENCE ? MG_VT_OPTIONAL_SEQUENCE : MG_VT_OPTIONAL_TENSOR;
    } else {
      infer_out(n, 0, t ? t->tp_dtype : MG_UNDEFINED, NULL);
      o->vtype = t && t->tp == MG_VT_SEQUENCE ? MG_VT_OPTIONAL_SEQUENCE : MG_VT_OPTIONAL_TENSOR;
    }
    return 0;
  }
  case MG_OP_OptionalGetElement:
    infer_out(n, 0, X0->dtype, &X0->shape);
    o->vtype = X0->vtype == MG_VT_OPTIONAL_SEQUENCE || X0->vtype == MG_VT_SEQUENCE
                   ? MG_VT_SEQUENCE : MG_VT_TENSOR;
    return 0;
  case MG_OP_OptionalHasElement: {
    mg_shape s = {0};
    infer_out(n, 0, MG_BOOL, &s);
    return 0;
  }
  default:
    /* the last family: an OWN op no family took (test_completeness finds them) */
    mg_error(c->d, UNSUPPORTED, n->name, n->op_type, "no shape rule for %s (a migc bug)", mg_op_name(n->op));
    return -1;
  }
  o->vtype = MG_VT_SEQUENCE;
  return 0;
}

int infer_own(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  mg_shape s;
  switch (n->op) {
  case MG_OP_Dropout:
    infer_out(n, 0, x->dtype, &x->shape);
    infer_out(n, 1, MG_BOOL, &x->shape);
    return 0;
  case MG_OP_ArgMax:
  case MG_OP_ArgMin: {
    if (x->shape.rank < 0) { infer_out(n, 0, MG_I64, NULL); return 0; }
    int64_t a = infer_norm_axis(mg_attr_int(n, "axis", 0), x->shape.rank);
    if (a < 0 || a >= x->shape.rank) return bad(c, n, "axis out of range");
    s = x->shape;
    if (mg_attr_int(n, "keepdims", 1)) s.d[a] = (mg_dim){1, NULL};
    else { memmove(&s.d[a], &s.d[a + 1], sizeof(mg_dim) * (size_t)(s.rank - a - 1)); s.rank--; }
    infer_out(n, 0, MG_I64, &s);
    return 0;
  }
  case MG_OP_Conv:
  case MG_OP_ConvInteger: {
    const mg_value *w = IN(1);
    mg_dim ch = w->shape.rank >= 1 ? w->shape.d[0] : UNK;
    return conv_like(c, n, x, w, ch, n->op == MG_OP_Conv ? x->dtype : MG_I32);
  }
  case MG_OP_QLinearConv: {
    const mg_value *w = IN(3);
    mg_dim ch = w->shape.rank >= 1 ? w->shape.d[0] : UNK;
    return conv_like(c, n, x, w, ch, IN(7) ? IN(7)->dtype : MG_U8);
  }
  case MG_OP_ConvTranspose:
    return conv_transpose(c, n);
  case MG_OP_AveragePool:
  case MG_OP_MaxPool:
  case MG_OP_LpPool:
    return conv_like(c, n, x, NULL, x->shape.rank >= 2 ? x->shape.d[1] : UNK, x->dtype);
  case MG_OP_MaxUnpool: {
    if (IN(2)) {
      if (infer_shape_from_input(c, n, 2, &s) <= 0) s = rank_unknown_dims(x->shape.rank);
      infer_out(n, 0, x->dtype, &s);
      return 0;
    }
    if (x->shape.rank < 0) { infer_out(n, 0, x->dtype, NULL); return 0; }
    const int64_t *ks, *st, *pd;
    size_t nk = mg_attr_ints(n, "kernel_shape", &ks), ns = mg_attr_ints(n, "strides", &st);
    size_t np = mg_attr_ints(n, "pads", &pd);
    int sp = x->shape.rank - 2;
    if ((int)nk != sp) return bad(c, n, "kernel_shape does not match the input's rank");
    s = x->shape;
    for (int i = 0; i < sp; i++) {
      mg_dim d = x->shape.d[i + 2];
      int64_t stv = ns ? st[i] : 1;
      int64_t r;
      int ok = d.v >= 0 && mg_mul_ovf(d.v - 1, stv, &r) && mg_add_ovf(r, ks[i], &r) &&
               mg_sub_ovf(r, np ? pd[i] : 0, &r) && mg_sub_ovf(r, np ? pd[i + sp] : 0, &r) && r >= 0;
      s.d[i + 2] = ok ? (mg_dim){r, NULL} : UNK;
    }
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_MaxRoiPool:
  case MG_OP_RoiAlign: {
    s = (mg_shape){.rank = 4};
    s.d[0] = IN(1)->shape.rank >= 1 ? IN(1)->shape.d[0] : UNK;
    s.d[1] = x->shape.rank >= 2 ? x->shape.d[1] : UNK;
    if (n->op == MG_OP_RoiAlign) {
      s.d[2] = (mg_dim){mg_attr_int(n, "output_height", 1), NULL};
      s.d[3] = (mg_dim){mg_attr_int(n, "output_width", 1), NULL};
    } else {
      const int64_t *ps;
      if (mg_attr_ints(n, "pooled_shape", &ps) != 2) return bad(c, n, "pooled_shape needs 2 values");
      s.d[2] = (mg_dim){ps[0], NULL};
      s.d[3] = (mg_dim){ps[1], NULL};
    }
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Col2Im: {
    mg_shape img;
    int k = infer_shape_from_input(c, n, 1, &img);
    if (k <= 0 || x->shape.rank != 3) { infer_out(n, 0, x->dtype, NULL); return 0; }
    int64_t block[MG_MAX_RANK];
    int nb = infer_const_ints(IN(2), block, MG_MAX_RANK);
    int64_t bp = 1;
    for (int i = 0; i < nb; i++)
      if (block[i] <= 0 || !mg_mul_i64(bp, block[i], &bp)) bp = -1;
    s = (mg_shape){.rank = 2 + img.rank};
    s.d[0] = x->shape.d[0];
    s.d[1] = nb >= 0 && bp > 0 ? dim_div(x->shape.d[1], bp) : UNK;
    memcpy(&s.d[2], img.d, sizeof(mg_dim) * (size_t)img.rank);
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_GridSample: {
    const mg_value *grid = IN(1);
    if (x->shape.rank < 0 || grid->shape.rank < 0) { infer_out(n, 0, x->dtype, NULL); return 0; }
    s = (mg_shape){.rank = x->shape.rank};
    s.d[0] = x->shape.d[0];
    s.d[1] = x->shape.d[1];
    for (int i = 2; i < s.rank; i++) s.d[i] = grid->shape.d[i - 1];
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_BatchNormalization: {
    infer_out(n, 0, x->dtype, &x->shape);
    mg_shape ch = {.rank = 1, .d = {x->shape.rank >= 2 ? x->shape.d[1] : UNK}};
    infer_out(n, 1, IN(3) ? IN(3)->dtype : x->dtype, &ch);
    infer_out(n, 2, IN(4) ? IN(4)->dtype : x->dtype, &ch);
    return 0;
  }
  case MG_OP_LayerNormalization: {
    infer_out(n, 0, x->dtype, &x->shape);
    s = x->shape;
    if (s.rank >= 0) {
      int64_t a = infer_norm_axis(mg_attr_int(n, "axis", -1), s.rank);
      if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
      for (int i = (int)a; i < s.rank; i++) s.d[i] = (mg_dim){1, NULL};
    }
    mg_dtype st = attr_dtype(n, "stash_type", MG_F32);
    infer_out(n, 1, st, &s);
    infer_out(n, 2, st, &s);
    return 0;
  }
  case MG_OP_MatMul:
  case MG_OP_MatMulInteger:
  case MG_OP_QLinearMatMul: {
    const mg_value *b = n->op == MG_OP_QLinearMatMul ? IN(3) : IN(1);
    if (matmul_shape(c, n, &x->shape, &b->shape, &s)) return -1;
    mg_dtype dt = n->op == MG_OP_MatMul ? x->dtype : n->op == MG_OP_MatMulInteger ? MG_I32
                  : (IN(7) ? IN(7)->dtype : MG_U8);
    infer_out(n, 0, dt, s.rank >= 0 ? &s : NULL);
    return 0;
  }
  case MG_OP_Gemm: {
    const mg_value *b = IN(1);
    if (x->shape.rank != 2 || b->shape.rank != 2) {
      if (x->shape.rank >= 0 && x->shape.rank != 2) return bad(c, n, "Gemm needs 2-D A");
      if (b->shape.rank >= 0 && b->shape.rank != 2) return bad(c, n, "Gemm needs 2-D B");
      s = rank_unknown_dims(2);
      infer_out(n, 0, x->dtype, &s);
      return 0;
    }
    int ta = (int)mg_attr_int(n, "transA", 0), tb = (int)mg_attr_int(n, "transB", 0);
    mg_dim ka = x->shape.d[ta ? 0 : 1], kb = b->shape.d[tb ? 1 : 0];
    if (ka.v >= 0 && kb.v >= 0 && ka.v != kb.v) return bad(c, n, "inner dimensions differ");
    s = (mg_shape){.rank = 2, .d = {x->shape.d[ta ? 1 : 0], b->shape.d[tb ? 0 : 1]}};
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Einsum:
    return einsum(c, n);
  case MG_OP_Det:
    if (x->shape.rank < 2) { infer_out(n, 0, x->dtype, x->shape.rank < 0 ? NULL : &x->shape); return 0; }
    s = x->shape;
    s.rank -= 2;
    infer_out(n, 0, x->dtype, &s);
    return 0;
  case MG_OP_RNN:
  case MG_OP_GRU:
  case MG_OP_LSTM:
    return recurrent(c, n);
  case MG_OP_Resize:
    return resize(c, n);
  case MG_OP_CenterCropPad: {
    mg_shape to;
    s = x->shape;
    int k = infer_shape_from_input(c, n, 1, &to);
    const int64_t *axes;
    size_t na = mg_attr_ints(n, "axes", &axes);
    if (s.rank >= 0) {
      for (int i = 0; i < (na ? (int)na : s.rank); i++) {
        int64_t a = na ? infer_norm_axis(axes[i], s.rank) : i;
        if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
        s.d[a] = k > 0 && i < to.rank ? to.d[i] : UNK;
      }
    }
    infer_out(n, 0, x->dtype, s.rank >= 0 ? &s : NULL);
    return 0;
  }
  case MG_OP_EyeLike:
    infer_out(n, 0, attr_dtype(n, "dtype", x->dtype), &x->shape);
    return 0;
  case MG_OP_ConstantOfShape: {
    const mg_attr *v = mg_node_attr(n, "value");
    infer_shape_from_input(c, n, 0, &s);
    infer_out(n, 0, v && v->t ? v->t->dtype : MG_F32, s.rank >= 0 ? &s : NULL);
    return 0;
  }
  case MG_OP_Range: {
    s = rank_unknown_dims(1);
    double st, lim, dl;
    const mg_value *a = IN(0), *b = IN(1), *d = IN(2);
    if (a->data && b->data && d->data) {
      int64_t ia, ib, id;
      if (mg_dtype_is_float(a->dtype)) {
        if (a->dtype == MG_F32) { float f; memcpy(&f, a->data, 4); st = f; memcpy(&f, b->data, 4); lim = f; memcpy(&f, d->data, 4); dl = f; }
        else { memcpy(&st, a->data, 8); memcpy(&lim, b->data, 8); memcpy(&dl, d->data, 8); }
      } else if (mg_value_ints(a, &ia, 1) == 1 && mg_value_ints(b, &ib, 1) == 1 && mg_value_ints(d, &id, 1) == 1) {
        st = (double)ia, lim = (double)ib, dl = (double)id;
      } else {
        infer_out(n, 0, a->dtype, &s);
        return 0;
      }
      if (dl == 0) return bad(c, n, "delta is zero");
      double cnt = ceil((lim - st) / dl);
      s.d[0] = !(cnt <= (double)MG_DIM_MAX) ? UNK : (mg_dim){cnt > 0 ? (int64_t)cnt : 0, NULL};
    }
    infer_out(n, 0, a->dtype, &s);
    return 0;
  }
  case MG_OP_NonMaxSuppression:
    s = (mg_shape){.rank = 2, .d = {UNK, {3, NULL}}};
    infer_out(n, 0, MG_I64, &s);
    return 0;
  case MG_OP_QuantizeLinear:
    infer_out(n, 0, IN(2) ? IN(2)->dtype : MG_U8, &x->shape);
    return 0;
  case MG_OP_DequantizeLinear:
    infer_out(n, 0, IN(1)->dtype ? IN(1)->dtype : MG_F32, &x->shape);
    return 0;
  case MG_OP_DynamicQuantizeLinear: {
    mg_shape sc = {0};
    infer_out(n, 0, MG_U8, &x->shape);
    infer_out(n, 1, MG_F32, &sc);
    infer_out(n, 2, MG_U8, &sc);
    return 0;
  }
  case MG_OP_DFT: {
    s = x->shape;
    if (s.rank < 2) { infer_out(n, 0, x->dtype, NULL); return 0; }
    int64_t a = infer_norm_axis(mg_attr_int(n, "axis", 1), s.rank);
    if (a < 0 || a >= s.rank - 1) return bad(c, n, "axis out of range");
    int64_t len;
    if (IN(1) && infer_const_ints(IN(1), &len, 1) == 1) s.d[a] = (mg_dim){len, NULL};
    else if (IN(1)) s.d[a] = UNK;
    if (mg_attr_int(n, "onesided", 0) && s.d[a].v >= 0) s.d[a].v = s.d[a].v / 2 + 1;
    s.d[s.rank - 1] = (mg_dim){2, NULL};
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_STFT: {
    int64_t step, flen = -1;
    s = rank_unknown_dims(4);
    if (x->shape.rank == 3) s.d[0] = x->shape.d[0];
    if (IN(3) && infer_const_ints(IN(3), &flen, 1) != 1) flen = -1;
    if (flen < 0 && IN(2) && IN(2)->shape.rank == 1) flen = IN(2)->shape.d[0].v;
    if (infer_const_ints(IN(1), &step, 1) == 1 && step > 0 && flen > 0 && x->shape.rank == 3 &&
        x->shape.d[1].v >= 0)
      s.d[1] = flen <= x->shape.d[1].v ? (mg_dim){(x->shape.d[1].v - flen) / step + 1, NULL} : UNK;
    if (flen > 0) s.d[2] = (mg_dim){mg_attr_int(n, "onesided", 1) ? flen / 2 + 1 : flen, NULL};
    s.d[3] = (mg_dim){2, NULL};
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_HannWindow:
  case MG_OP_HammingWindow:
  case MG_OP_BlackmanWindow: {
    int64_t size;
    s = rank_unknown_dims(1);
    if (infer_const_ints(x, &size, 1) == 1) s.d[0] = (mg_dim){size, NULL};
    infer_out(n, 0, attr_dtype(n, "output_datatype", MG_F32), &s);
    return 0;
  }
  case MG_OP_MelWeightMatrix: {
    int64_t bins, dft;
    s = rank_unknown_dims(2);
    if (infer_const_ints(IN(1), &dft, 1) == 1) s.d[0] = (mg_dim){dft / 2 + 1, NULL};
    if (infer_const_ints(IN(0), &bins, 1) == 1) s.d[1] = (mg_dim){bins, NULL};
    infer_out(n, 0, attr_dtype(n, "output_datatype", MG_F32), &s);
    return 0;
  }
  case MG_OP_RandomNormal:
  case MG_OP_RandomUniform: {
    const int64_t *sh;
    size_t ns = mg_attr_ints(n, "shape", &sh);
    if (ns > MG_MAX_RANK) return bad(c, n, "rank too large");
    s = (mg_shape){.rank = (int)ns};
    for (size_t i = 0; i < ns; i++) s.d[i] = (mg_dim){sh[i], NULL};
    infer_out(n, 0, attr_dtype(n, "dtype", MG_F32), &s);
    return 0;
  }
  case MG_OP_RandomNormalLike:
  case MG_OP_RandomUniformLike:
  case MG_OP_Bernoulli:
    infer_out(n, 0, attr_dtype(n, "dtype", x->dtype), &x->shape);
    return 0;
  case MG_OP_Multinomial:
    s = (mg_shape){.rank = 2, .d = {x->shape.rank == 2 ? x->shape.d[0] : UNK,
                                    {mg_attr_int(n, "sample_size", 1), NULL}}};
    infer_out(n, 0, attr_dtype(n, "dtype", MG_I32), &s);
    return 0;
  case MG_OP_SoftmaxCrossEntropyLoss:
  case MG_OP_NegativeLogLikelihoodLoss: {
    const char *red = mg_attr_str(n, "reduction", "mean");
    mg_shape sc = {0};
    infer_out(n, 0, x->dtype, strcmp(red, "none") ? &sc : &IN(1)->shape);
    infer_out(n, 1, x->dtype, &x->shape);
    return 0;
  }
  case MG_OP_StringNormalizer:
    s = x->shape;
    if (s.rank >= 1) s.d[s.rank - 1] = UNK;
    infer_out(n, 0, MG_STRING, s.rank >= 0 ? &s : NULL);
    return 0;
  case MG_OP_TfIdfVectorizer: {
    const int64_t *idx;
    size_t ni = mg_attr_ints(n, "ngram_indexes", &idx);
    int64_t mx = -1;
    for (size_t i = 0; i < ni; i++) mx = idx[i] > mx ? idx[i] : mx;
    s = x->shape;
    if (s.rank >= 1) s.d[s.rank - 1] = (mg_dim){mx + 1, NULL};
    infer_out(n, 0, MG_F32, s.rank >= 0 ? &s : NULL);
    return 0;
  }
  case MG_OP_Gradient:
    for (int i = 0; i < n->n_out; i++) infer_out(n, i, IN(i) ? IN(i)->dtype : MG_F32, IN(i) ? &IN(i)->shape : NULL);
    return 0;
  case MG_OP_MigcSelect: {
    int k = (n->n_in - 1) / 2;
    if (n->n_in != 1 + 2 * k || n->n_out != k) return bad(c, n, "MigcSelect needs 1 + 2 * outputs inputs");
    for (int i = 0; i < k; i++) {
      const mg_value *t = IN(1 + i), *e = IN(1 + k + i);
      if (!t || !e || t->dtype != e->dtype) return bad(c, n, "MigcSelect branch outputs differ in dtype");
      mg_shape s = t->shape;
      if (t->shape.rank != e->shape.rank) s.rank = -1;
      for (int d = 0; d < s.rank; d++)
        if (!infer_dim_eq(t->shape.d[d], e->shape.d[d])) s.d[d] = infer_dim_unknown();
      infer_out(n, i, t->dtype, &s);
    }
    return 0;
  }
  case MG_OP_If:
  case MG_OP_Loop:
  case MG_OP_Scan:
  case MG_OP_SequenceMap:
    return control_flow(c, n);
  default:
    return infer_own_tensor(c, n);
  }
}
