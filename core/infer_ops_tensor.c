/* Shape rules of the tensor family whose shape_rule in ops.def is OWN: casts,
 * Shape and Size, reshapes, squeezes, transposes, concatenation and splits,
 * slices and pads, gathers, the data-dependent ops (Compress, NonZero, TopK,
 * Unique), OneHot, depth/space moves, constant-shaped generators (EyeLike,
 * ConstantOfShape, Range). The other families are in infer_ops.c. */
#include "infer_internal.h"
#include "slice_geom.h"
#include <string.h>

/* Compress and Unique: without an axis the result is 1-D of unknown length; with
 * one, x's shape with that axis's length unknown (it depends on the data). */
static int data_dependent_axis(infer_ctx *c, mg_node *n, const mg_value *x, mg_shape *s) {
  const mg_attr *ax = mg_node_attr(n, "axis");
  if (!ax) *s = rank_unknown_dims(1);
  else if (x->shape.rank < 0) *s = unknown_rank();
  else {
    *s = x->shape;
    int64_t a = infer_norm_axis(ax->i, s->rank);
    if (a < 0 || a >= s->rank) return bad(c, n, "axis out of range");
    s->d[a] = UNK;
  }
  return 0;
}

static int reshape(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  mg_dim e[MG_SMALL];
  int ne = infer_elems(IN(1), e, MG_SMALL);
  if (ne < 0) {
    const mg_value *sh = IN(1);
    int r = sh->shape.rank == 1 && sh->shape.d[0].v >= 0 ? (int)sh->shape.d[0].v : -1;
    mg_shape s = r >= 0 ? rank_unknown_dims(r) : unknown_rank();
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  if (ne > MG_MAX_RANK) return bad(c, n, "target rank too large");
  int allowzero = (int)mg_attr_int(n, "allowzero", 0);
  mg_shape s = {.rank = ne};
  int infer_at = -1;
  for (int i = 0; i < ne; i++) {
    if (e[i].v == MG_UNKNOWN_ELEM) s.d[i] = infer_elem_to_dim(e[i]);
    else if (e[i].v == -1) {
      if (infer_at >= 0) return bad(c, n, "more than one -1 in the target shape");
      infer_at = i;
      s.d[i] = UNK;
    } else if (e[i].v == 0 && !allowzero) {
      if (x->shape.rank < 0 || i >= x->shape.rank) s.d[i] = UNK;
      else s.d[i] = x->shape.d[i];
    } else if (e[i].v < 0) return bad(c, n, "negative dimension in the target shape");
    else s.d[i] = e[i];
  }
  if (infer_at >= 0) {
    int64_t total = mg_shape_numel(&x->shape), rest = 1;
    int known = total >= 0;
    for (int i = 0; i < ne && known; i++)
      if (i != infer_at) {
        if (s.d[i].v < 0 || !mg_mul_i64(rest, s.d[i].v, &rest)) known = 0;
      }
    if (known && rest > 0) {
      if (total % rest) return bad(c, n, "element count does not divide the target shape");
      s.d[infer_at] = (mg_dim){total / rest, NULL};
    } else if (x->shape.rank >= 0) {
      /* x = a*b*S, target = a*b*(-1): the -1 is S when the other dims match x's. */
      int64_t xk = 1, tk = 1;
      const char *xsym = NULL;
      int xsyms = 0, ok = 1;
      for (int i = 0; i < x->shape.rank; i++) {
        if (x->shape.d[i].v >= 0) ok &= mg_mul_i64(xk, x->shape.d[i].v, &xk);
        else if (x->shape.d[i].sym) { xsyms++; xsym = x->shape.d[i].sym; }
        else ok = 0;
      }
      int tsyms = 0;
      for (int i = 0; i < ne; i++) {
        if (i == infer_at) continue;
        if (s.d[i].v >= 0) ok &= mg_mul_i64(tk, s.d[i].v, &tk);
        else if (s.d[i].sym && xsym && !strcmp(s.d[i].sym, xsym)) tsyms++;
        else ok = 0;
      }
      if (ok && xsyms == 1 && tsyms == 0 && tk > 0 && xk % tk == 0 && xk / tk == 1)
        s.d[infer_at] = (mg_dim){-1, xsym};
      else if (ok && xsyms == tsyms && tk > 0 && xk % tk == 0)
        s.d[infer_at] = (mg_dim){xk / tk, NULL};
    }
  } else {
    int64_t a = mg_shape_numel(&x->shape), b = mg_shape_numel(&s);
    if (a >= 0 && b >= 0 && a != b) {
      char p[128], q[128];
      mg_error(c->d, SHAPE, n->name, n->op_type, "cannot reshape %s (%lld elements) to %s",
               mg_shape_str(&x->shape, p, sizeof p), (long long)a, mg_shape_str(&s, q, sizeof q));
      return -1;
    }
  }
  infer_out(n, 0, x->dtype, &s);
  if (x->elems && ne <= 1) return infer_set_elems(c, n->out[0], x->elems, x->n_elems);
  return 0;
}

static int axes_input(infer_ctx *c, mg_node *n, int slot, int rank, int64_t *axes, int *na) {
  (void)c;
  *na = 0;
  if (!IN(slot)) return 0;
  int k = infer_const_ints(IN(slot), axes, MG_MAX_RANK);
  if (k < 0) return 1; /* unknown at compile time */
  for (int i = 0; i < k; i++) axes[i] = infer_norm_axis(axes[i], rank);
  *na = k;
  return 0;
}

static int squeeze(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int64_t axes[MG_MAX_RANK];
  int na;
  if (axes_input(c, n, 1, x->shape.rank, axes, &na)) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int drop[MG_MAX_RANK] = {0};
  if (!IN(1)) {
    for (int i = 0; i < x->shape.rank; i++) {
      if (x->shape.d[i].v < 0) {
        infer_out(n, 0, x->dtype, NULL);
        return 0;
      }
      drop[i] = x->shape.d[i].v == 1;
    }
  }
  for (int i = 0; i < na; i++) {
    if (axes[i] < 0 || axes[i] >= x->shape.rank) return bad(c, n, "axis out of range");
    if (x->shape.d[axes[i]].v > 1) return bad(c, n, "squeezed axis is not 1");
    drop[axes[i]] = 1;
  }
  mg_shape s = {0};
  for (int i = 0; i < x->shape.rank; i++)
    if (!drop[i]) s.d[s.rank++] = x->shape.d[i];
  infer_out(n, 0, x->dtype, &s);
  if (x->elems && s.rank <= 1) return infer_set_elems(c, n->out[0], x->elems, x->n_elems);
  return 0;
}

static int unsqueeze(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  int64_t axes[MG_MAX_RANK];
  int na;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int64_t raw[MG_MAX_RANK];
  int k = IN(1) ? infer_const_ints(IN(1), raw, MG_MAX_RANK) : -1;
  if (k < 0) {
    int r = IN(1) && IN(1)->shape.rank == 1 && IN(1)->shape.d[0].v >= 0
                ? x->shape.rank + (int)IN(1)->shape.d[0].v : -1;
    mg_shape s = r >= 0 ? rank_unknown_dims(r) : unknown_rank();
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  int r = x->shape.rank + k;
  if (r > MG_MAX_RANK) return bad(c, n, "rank too large");
  na = k;
  for (int i = 0; i < na; i++) axes[i] = infer_norm_axis(raw[i], r);
  int ins[MG_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    if (axes[i] < 0 || axes[i] >= r || ins[axes[i]]) return bad(c, n, "bad axes");
    ins[axes[i]] = 1;
  }
  mg_shape s = {.rank = r};
  for (int i = 0, j = 0; i < r; i++) s.d[i] = ins[i] ? (mg_dim){1, NULL} : x->shape.d[j++];
  infer_out(n, 0, x->dtype, &s);
  if (x->elems && r <= 1) return infer_set_elems(c, n->out[0], x->elems, x->n_elems);
  if (x->shape.rank == 0 && r == 1 && !x->data && x->elems)
    return infer_set_elems(c, n->out[0], x->elems, 1);
  return 0;
}

static int concat(infer_ctx *c, mg_node *n) {
  if (!mg_node_attr(n, "axis")) return bad(c, n, "Concat requires the attribute 'axis'");
  int64_t axis = mg_attr_int(n, "axis", 0);
  mg_shape s = unknown_rank();
  mg_dtype dt = MG_UNDEFINED;
  for (int i = 0; i < n->n_in; i++)
    if (n->in[i] && n->in[i]->shape.rank >= 0) {
      s = n->in[i]->shape;
      dt = n->in[i]->dtype;
      break;
    }
  if (!dt && X0) dt = X0->dtype;
  if (s.rank < 0) {
    infer_out(n, 0, dt, NULL);
    return 0;
  }
  int64_t a = infer_norm_axis(axis, s.rank);
  if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
  mg_dim total = {0, NULL};
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    if (!v) continue;
    if (v->shape.rank < 0) {
      total = UNK;
      continue;
    }
    if (v->shape.rank != s.rank) return bad(c, n, "inputs have different ranks");
    for (int d = 0; d < s.rank; d++) {
      if (d == a) continue;
      if (s.d[d].v < 0 && v->shape.d[d].v >= 0) s.d[d] = v->shape.d[d];
      else if (s.d[d].v >= 0 && v->shape.d[d].v >= 0 && s.d[d].v != v->shape.d[d].v)
        return bad(c, n, "inputs differ outside the concat axis");
    }
    if (total.v >= 0 && v->shape.d[a].v >= 0) total.v += v->shape.d[a].v;
    else total = UNK;
  }
  s.d[a] = total;
  infer_out(n, 0, dt, &s);
  if (s.rank == 1) { /* shape arithmetic: concatenate partial values */
    mg_dim e[MG_SMALL];
    int ne = 0;
    for (int i = 0; i < n->n_in; i++) {
      if (!n->in[i]) continue;
      int k = infer_elems(n->in[i], e + ne, MG_SMALL - ne);
      if (k < 0) return 0;
      ne += k;
    }
    return infer_set_elems(c, n->out[0], e, ne);
  }
  return 0;
}

static int split(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  if (x->shape.rank < 0) {
    for (int i = 0; i < n->n_out; i++) infer_out(n, i, x->dtype, NULL);
    return 0;
  }
  int64_t axis = infer_norm_axis(mg_attr_int(n, "axis", 0), x->shape.rank);
  if (axis < 0 || axis >= x->shape.rank) return bad(c, n, "axis out of range");
  int64_t parts[256];
  int np = IN(1) ? infer_const_ints(IN(1), parts, 256) : -1;
  mg_dim dim = x->shape.d[axis];
  for (int i = 0; i < n->n_out; i++) {
    mg_shape s = x->shape;
    if (np >= 0) {
      if (np != n->n_out) return bad(c, n, "split sizes do not match the outputs");
      s.d[axis] = (mg_dim){parts[i], NULL};
    } else if (IN(1)) {
      s.d[axis] = UNK;
    } else if (dim.v >= 0) {
      int64_t k = n->n_out, chunk = (dim.v + k - 1) / k;
      int64_t v = dim.v - chunk * i;
      s.d[axis] = (mg_dim){v < 0 ? 0 : v > chunk ? chunk : v, NULL};
    } else {
      s.d[axis] = UNK;
    }
    infer_out(n, i, x->dtype, &s);
  }
  return 0;
}

static int slice(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int64_t st[MG_MAX_RANK], en[MG_MAX_RANK], ax[MG_MAX_RANK], sp[MG_MAX_RANK];
  int ns = infer_const_ints(IN(1), st, MG_MAX_RANK), ne = infer_const_ints(IN(2), en, MG_MAX_RANK);
  int na = IN(3) ? infer_const_ints(IN(3), ax, MG_MAX_RANK) : -2;
  int nst = IN(4) ? infer_const_ints(IN(4), sp, MG_MAX_RANK) : -2;
  mg_shape s = x->shape;
  if (ns < 0 || ne < 0 || na == -1 || nst == -1) {
    if (na >= 0)
      for (int i = 0; i < na; i++) {
        int64_t a = infer_norm_axis(ax[i], s.rank);
        if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
        s.d[a] = UNK;
      }
    else for (int i = 0; i < s.rank; i++) s.d[i] = UNK;
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  if (ns != ne || (na >= 0 && na != ns) || (nst >= 0 && nst != ns))
    return bad(c, n, "starts, ends, axes and steps differ in length");
  mg_dim e[MG_SMALL];
  int nelem = s.rank == 1 ? infer_elems(x, e, MG_SMALL) : -1;
  int64_t from = 0, step1 = 1, cnt = -1;
  for (int i = 0; i < ns; i++) {
    int64_t a = na >= 0 ? infer_norm_axis(ax[i], s.rank) : i;
    int64_t step = nst >= 0 ? sp[i] : 1;
    if (a < 0 || a >= s.rank || step == 0) return bad(c, n, "bad axis or zero step");
    int64_t dim = x->shape.d[a].v;
    if (dim < 0) {
      s.d[a] = UNK;
      continue;
    }
    int64_t b, len;
    mg_slice_axis(dim, st[i], en[i], step, &b, &len);
    s.d[a] = (mg_dim){len, NULL};
    if (a == 0) from = b, step1 = step, cnt = len;
  }
  infer_out(n, 0, x->dtype, &s);
  if (nelem >= 0 && cnt >= 0 && !x->data) {
    mg_dim r[MG_SMALL];
    for (int64_t k = 0; k < cnt; k++) r[k] = e[from + k * step1];
    return infer_set_elems(c, n->out[0], r, (int)cnt);
  }
  return 0;
}

static int pad(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  if (x->shape.rank < 0) {
    infer_out(n, 0, x->dtype, NULL);
    return 0;
  }
  int64_t p[2 * MG_MAX_RANK], ax[MG_MAX_RANK];
  int np = infer_const_ints(IN(1), p, 2 * MG_MAX_RANK);
  int na = IN(3) ? infer_const_ints(IN(3), ax, MG_MAX_RANK) : -2;
  mg_shape s = x->shape;
  if (np < 0 || na == -1) {
    for (int i = 0; i < s.rank; i++) s.d[i] = UNK;
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  int k = na >= 0 ? na : s.rank;
  if (np != 2 * k) return bad(c, n, "pads has the wrong length");
  for (int i = 0; i < k; i++) {
    int64_t a = na >= 0 ? infer_norm_axis(ax[i], s.rank) : i;
    if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
    int64_t r;
    if (s.d[a].v >= 0 && mg_add_ovf(s.d[a].v, p[i], &r) && mg_add_ovf(r, p[i + k], &r) && r >= 0)
      s.d[a].v = r;
    else s.d[a] = UNK;
  }
  infer_out(n, 0, x->dtype, &s);
  return 0;
}

/* The tensor family's rules (see the file comment); any other op goes to the
 * sequence rules, which report an op without a rule. */
int infer_own_tensor(infer_ctx *c, mg_node *n) {
  const mg_value *x = X0;
  mg_shape s;
  switch (n->op) {
  case MG_OP_Cast:
  case MG_OP_CastLike: {
    mg_dtype to = n->op == MG_OP_Cast ? (mg_dtype)mg_attr_int(n, "to", 0) : IN(1)->dtype;
    if (n->op == MG_OP_Cast && !mg_dtype_valid((int)mg_attr_int(n, "to", 0)))
      return bad(c, n, "Cast to an unknown type");
    infer_out(n, 0, to, &x->shape);
    if (x->elems && mg_dtype_is_int(to)) return infer_set_elems(c, n->out[0], x->elems, x->n_elems);
    return 0;
  }
  case MG_OP_Shape: {
    int r = x->shape.rank;
    if (r < 0) {
      s = rank_unknown_dims(1);
      infer_out(n, 0, MG_I64, &s);
      return 0;
    }
    int64_t start = infer_norm_axis(mg_attr_int(n, "start", 0), r);
    int64_t end = infer_norm_axis(mg_attr_int(n, "end", r), r);
    start = start < 0 ? 0 : start > r ? r : start;
    end = end < 0 ? 0 : end > r ? r : end;
    int64_t len = end > start ? end - start : 0;
    s = (mg_shape){.rank = 1, .d = {{len, NULL}}};
    infer_out(n, 0, MG_I64, &s);
    mg_dim e[MG_MAX_RANK];
    for (int64_t i = 0; i < len; i++) e[i] = infer_dim_to_elem(x->shape.d[start + i]);
    return infer_set_elems(c, n->out[0], e, (int)len);
  }
  case MG_OP_Size: {
    s = (mg_shape){0};
    infer_out(n, 0, MG_I64, &s);
    int64_t k = mg_shape_numel(&x->shape);
    mg_dim e = {k >= 0 ? k : MG_UNKNOWN_ELEM, NULL};
    return infer_set_elems(c, n->out[0], &e, 1);
  }
  case MG_OP_Reshape:
    return reshape(c, n);
  case MG_OP_Flatten: {
    if (x->shape.rank < 0) { s = rank_unknown_dims(2); infer_out(n, 0, x->dtype, &s); return 0; }
    int64_t a = infer_norm_axis(mg_attr_int(n, "axis", 1), x->shape.rank);
    if (a < 0 || a > x->shape.rank) return bad(c, n, "axis out of range");
    mg_dim p = {1, NULL}, q = {1, NULL};
    for (int i = 0; i < x->shape.rank; i++) {
      if (i < a) p = dim_mul(p, x->shape.d[i]);
      else q = dim_mul(q, x->shape.d[i]);
    }
    s = (mg_shape){.rank = 2, .d = {p, q}};
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Squeeze:
    return squeeze(c, n);
  case MG_OP_Unsqueeze:
    return unsqueeze(c, n);
  case MG_OP_Transpose: {
    if (x->shape.rank < 0) { infer_out(n, 0, x->dtype, NULL); return 0; }
    const int64_t *perm;
    size_t np = mg_attr_ints(n, "perm", &perm);
    if (np && (int)np != x->shape.rank) return bad(c, n, "perm does not match the rank");
    s.rank = x->shape.rank;
    int seen[MG_MAX_RANK] = {0};
    for (int i = 0; i < s.rank; i++) {
      int64_t p = np ? perm[i] : s.rank - 1 - i;
      if (p < 0 || p >= s.rank || seen[p]++) return bad(c, n, "perm is not a permutation");
      s.d[i] = x->shape.d[p];
    }
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Concat:
    return concat(c, n);
  case MG_OP_Split:
    return split(c, n);
  case MG_OP_Slice:
    return slice(c, n);
  case MG_OP_Pad:
    return pad(c, n);
  case MG_OP_Tile: {
    int64_t rep[MG_MAX_RANK];
    int nr = infer_const_ints(IN(1), rep, MG_MAX_RANK);
    s = x->shape;
    if (s.rank < 0) { infer_out(n, 0, x->dtype, NULL); return 0; }
    if (nr >= 0 && nr != s.rank) return bad(c, n, "repeats does not match the rank");
    for (int i = 0; i < s.rank; i++)
      s.d[i] = nr < 0 ? UNK : dim_mul(s.d[i], (mg_dim){rep[i], NULL});
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Expand: {
    mg_shape to;
    infer_shape_from_input(c, n, 1, &to);
    if (to.rank >= 0) {
      /* In the target, 1 keeps x's dim; unknown dims stay unknown unless x fixes them. */
      mg_shape out;
      if (infer_broadcast(&x->shape, &to, &out)) return bad(c, n, "shape does not broadcast");
      infer_out(n, 0, x->dtype, &out);
    } else {
      infer_out(n, 0, x->dtype, NULL);
    }
    return 0;
  }
  case MG_OP_Gather: {
    const mg_value *idx = IN(1);
    if (x->shape.rank < 1 || idx->shape.rank < 0) { infer_out(n, 0, x->dtype, NULL); return 0; }
    int64_t a = infer_norm_axis(mg_attr_int(n, "axis", 0), x->shape.rank);
    if (a < 0 || a >= x->shape.rank) return bad(c, n, "axis out of range");
    if (x->shape.rank - 1 + idx->shape.rank > MG_MAX_RANK) return bad(c, n, "rank too large");
    s.rank = 0;
    for (int i = 0; i < a; i++) s.d[s.rank++] = x->shape.d[i];
    for (int i = 0; i < idx->shape.rank; i++) s.d[s.rank++] = idx->shape.d[i];
    for (int i = (int)a + 1; i < x->shape.rank; i++) s.d[s.rank++] = x->shape.d[i];
    infer_out(n, 0, x->dtype, &s);
    if (x->shape.rank == 1 && idx->shape.rank <= 1) {
      mg_dim e[MG_SMALL];
      int64_t ix[MG_SMALL];
      int ne = infer_elems(x, e, MG_SMALL), ni = infer_const_ints(idx, ix, MG_SMALL);
      if (ne >= 0 && ni >= 0) {
        mg_dim r[MG_SMALL];
        for (int i = 0; i < ni; i++) {
          int64_t j = ix[i] < 0 ? ix[i] + ne : ix[i];
          if (j < 0 || j >= ne) return bad(c, n, "index out of range");
          r[i] = e[j];
        }
        return infer_set_elems(c, n->out[0], r, ni);
      }
    }
    return 0;
  }
  case MG_OP_GatherElements:
    infer_out(n, 0, x->dtype, &IN(1)->shape);
    return 0;
  case MG_OP_GatherND: {
    const mg_value *idx = IN(1);
    int64_t b = mg_attr_int(n, "batch_dims", 0);
    if (x->shape.rank < 0 || idx->shape.rank < 1 || idx->shape.d[idx->shape.rank - 1].v < 0) {
      infer_out(n, 0, x->dtype, NULL);
      return 0;
    }
    int64_t last = idx->shape.d[idx->shape.rank - 1].v;
    if (b < 0 || last < 0 || b + last > x->shape.rank ||
        idx->shape.rank - 1 + x->shape.rank - (b + last) > MG_MAX_RANK)
      return bad(c, n, "batch_dims and index depth do not fit the data's rank");
    s.rank = 0;
    for (int i = 0; i < idx->shape.rank - 1; i++) s.d[s.rank++] = idx->shape.d[i];
    for (int64_t i = b + last; i < x->shape.rank; i++) s.d[s.rank++] = x->shape.d[i];
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  case MG_OP_Where: {
    mg_shape t;
    if (infer_broadcast(&x->shape, &IN(1)->shape, &t) || infer_broadcast(&t, &IN(2)->shape, &s))
      return bad(c, n, "inputs do not broadcast");
    infer_out(n, 0, IN(1)->dtype, &s);
    return 0;
  }
  case MG_OP_Compress:
    if (data_dependent_axis(c, n, x, &s)) return -1;
    infer_out(n, 0, x->dtype, &s);
    return 0;
  case MG_OP_NonZero:
    s = (mg_shape){.rank = 2, .d = {{x->shape.rank >= 0 ? x->shape.rank : -1, NULL}, UNK}};
    infer_out(n, 0, MG_I64, &s);
    return 0;
  case MG_OP_TopK: {
    int64_t k;
    s = x->shape;
    if (s.rank >= 0) {
      int64_t a = infer_norm_axis(mg_attr_int(n, "axis", -1), s.rank);
      if (a < 0 || a >= s.rank) return bad(c, n, "axis out of range");
      s.d[a] = infer_const_ints(IN(1), &k, 1) == 1 ? (mg_dim){k, NULL} : UNK;
    }
    infer_out(n, 0, x->dtype, s.rank >= 0 ? &s : NULL);
    infer_out(n, 1, MG_I64, s.rank >= 0 ? &s : NULL);
    return 0;
  }
  case MG_OP_Unique: {
    if (data_dependent_axis(c, n, x, &s)) return -1;
    infer_out(n, 0, x->dtype, &s);
    mg_shape v = rank_unknown_dims(1);
    infer_out(n, 1, MG_I64, &v);
    infer_out(n, 2, MG_I64, &v);
    infer_out(n, 3, MG_I64, &v);
    return 0;
  }
  case MG_OP_OneHot: {
    if (x->shape.rank < 0 || x->shape.rank >= MG_MAX_RANK) { infer_out(n, 0, IN(2)->dtype, NULL); return 0; }
    int r = x->shape.rank + 1;
    int64_t a = infer_norm_axis(mg_attr_int(n, "axis", -1), r), depth;
    if (a < 0 || a >= r) return bad(c, n, "axis out of range");
    mg_dim dd = UNK;
    if (IN(1)->data) {
      double dv = 0;
      if (mg_dtype_is_float(IN(1)->dtype)) {
        if (IN(1)->dtype == MG_F32) { float f; memcpy(&f, IN(1)->data, 4); dv = f; }
        else if (IN(1)->dtype == MG_F64) memcpy(&dv, IN(1)->data, 8);
        dd = dv >= 0 && dv <= (double)MG_DIM_MAX ? (mg_dim){(int64_t)dv, NULL} : UNK;
      } else if (infer_const_ints(IN(1), &depth, 1) == 1) {
        dd = (mg_dim){depth, NULL};
      }
    }
    s.rank = r;
    for (int i = 0, j = 0; i < r; i++) s.d[i] = i == a ? dd : x->shape.d[j++];
    infer_out(n, 0, IN(2)->dtype, &s);
    return 0;
  }
  case MG_OP_DepthToSpace:
  case MG_OP_SpaceToDepth: {
    int64_t b = mg_attr_int(n, "blocksize", 0);
    int64_t bb;
    if (b <= 0 || !mg_mul_i64(b, b, &bb)) return bad(c, n, "blocksize must be positive and small");
    if (x->shape.rank != 4) { infer_out(n, 0, x->dtype, x->shape.rank < 0 ? NULL : &x->shape); return 0; }
    s = x->shape;
    if (n->op == MG_OP_DepthToSpace) {
      s.d[1] = dim_div(s.d[1], bb);
      s.d[2] = dim_mul(s.d[2], (mg_dim){b, NULL});
      s.d[3] = dim_mul(s.d[3], (mg_dim){b, NULL});
    } else {
      s.d[1] = dim_mul(s.d[1], (mg_dim){bb, NULL});
      s.d[2] = dim_div(s.d[2], b);
      s.d[3] = dim_div(s.d[3], b);
    }
    infer_out(n, 0, x->dtype, &s);
    return 0;
  }
  default:
    return infer_sequences(c, n);
  }
}
