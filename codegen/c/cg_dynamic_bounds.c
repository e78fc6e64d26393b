/* Value bounds of cg_dynamic.c: upper bounds (and which are exact) of the
 * elements of small int tensors computed at run time, from Shape of a dynamic
 * value through Gather, Concat, the views, Cast, Where, Equal, Min, ReduceMin and
 * Add/Mul, so that a ConstantOfShape or Expand of a computed shape gets a plan. */
#include "cg_internal.h"
#include <string.h>

/* ------------------------------------------------------------ value bounds */

/* See cg_internal.h. */
int cg_dyn_vbound(cg_ctx *c, const mg_value *v, int64_t *hi, unsigned *exact) {
  *exact = 0;
  if (!v) return 0;
  if (cg_is_const(v)) {
    int64_t n = cg_const_ints(v, hi, 8);
    if (n > 0) *exact = (1u << n) - 1;
    return n > 0 ? (int)n : 0;
  }
  if (!in_graph(c, v) || !c->n_vbound[v->id]) return 0;
  memcpy(hi, c->vbound[v->id], sizeof(int64_t) * (size_t)c->n_vbound[v->id]);
  *exact = c->vexact[v->id];
  return c->n_vbound[v->id];
}

static void vb_set(cg_ctx *c, const mg_value *v, const int64_t *hi, int n, unsigned exact) {
  if (!in_graph(c, v) || n <= 0 || n > 8 || mg_shape_numel(&v->shape) != n) return;
  memcpy(c->vbound[v->id], hi, sizeof(int64_t) * (size_t)n);
  c->n_vbound[v->id] = (char)n;
  c->vexact[v->id] = (unsigned char)exact;
}

/* See cg_internal.h. */
void cg_dyn_track_vbounds(cg_ctx *c, const mg_node *n) {
  const mg_value *y = n->n_out ? n->out[0] : NULL, *x = n->n_in ? n->in[0] : NULL;
  if (!y || !x || !in_graph(c, y) || cg_is_const(y) || (y->dtype != MG_I64 && y->dtype != MG_I32 && y->dtype != MG_BOOL))
    return;
  int64_t a[8], b[8], o[8];
  unsigned ea, eb, eo = 0;
  int na, nb, no = 0;
  /* a view keeps the elements in order: its bounds are its input's */
  switch (mg_op_is_view(n->op) ? MG_OP_Identity : n->op) {
  case MG_OP_Shape:
    if (is_dyn(c, x) || is_static(x)) {
      int r = x->shape.rank, s = (int)mg_attr_int(n, "start", 0), e = (int)mg_attr_int(n, "end", r);
      if (s < 0) s += r;
      if (e < 0) e += r;
      s = s < 0 ? 0 : s > r ? r : s, e = e < 0 ? 0 : e > r ? r : e;
      if (e - s > 8) return;
      unsigned m = is_dyn(c, x) ? c->rd_mask[x->id] : 0;
      for (int k = s; k < e; k++, no++) {
        o[no] = x->shape.d[k].v;
        if (!(m >> k & 1)) eo |= 1u << no;
      }
    }
    break;
  case MG_OP_Identity: case MG_OP_Cast:
    no = cg_dyn_vbound(c, x, o, &eo);
    break;
  case MG_OP_Mul: case MG_OP_Add: case MG_OP_Sub: {
    /* exact elements only (an inexact one gets no usable bound: INT64_MAX) */
    na = cg_dyn_vbound(c, x, a, &ea);
    nb = cg_dyn_vbound(c, n->in[1], b, &eb);
    int64_t numel = mg_shape_numel(&y->shape);
    if (numel < 1 || numel > 8 || (na != numel && na != 1) || (nb != numel && nb != 1)) return;
    for (no = 0; no < numel; no++) {
      int ia = na == 1 ? 0 : no, ib = nb == 1 ? 0 : no;
      int64_t p = a[ia], q = b[ib], v;
      int ok = (ea >> ia & 1) && (eb >> ib & 1) &&
               !(n->op == MG_OP_Mul ? __builtin_mul_overflow(p, q, &v)
                 : n->op == MG_OP_Add ? __builtin_add_overflow(p, q, &v) : __builtin_sub_overflow(p, q, &v));
      o[no] = ok ? v : INT64_MAX;
      if (ok) eo |= 1u << no;
    }
    break;
  }
  case MG_OP_Equal: case MG_OP_Not: {
    /* exact only: a condition known at conversion (a static dim compared) */
    na = cg_dyn_vbound(c, x, a, &ea);
    nb = n->op == MG_OP_Equal ? cg_dyn_vbound(c, n->in[1], b, &eb) : 1;
    if (n->op == MG_OP_Not) b[0] = 0, eb = 1;
    int64_t numel = mg_shape_numel(&y->shape);
    if (numel < 1 || numel > 8 || (na != numel && na != 1) || (nb != numel && nb != 1)) return;
    for (no = 0; no < numel; no++) {
      int ia = na == 1 ? 0 : no, ib = nb == 1 ? 0 : no;
      o[no] = 1; /* a bool's bound when it is not known */
      if (!(ea >> ia & 1) || !(eb >> ib & 1)) continue;
      o[no] = a[ia] == b[ib];
      eo |= 1u << no;
    }
    break;
  }
  case MG_OP_ConstantOfShape: {
    const mg_attr *va = mg_node_attr(n, "value");
    int64_t v = 0, numel = mg_shape_numel(&y->shape);
    if (va && (va->kind != MG_ATTR_TENSOR || cg_const_ints(va->t, &v, 1) != 1)) return;
    if (numel < 1 || numel > 8 || is_dyn(c, y)) return;
    for (no = 0; no < numel; no++) o[no] = v;
    eo = (1u << no) - 1;
    break;
  }
  case MG_OP_Gather: {
    int64_t idx[8];
    na = cg_dyn_vbound(c, x, a, &ea);
    int64_t ni = cg_const_ints(n->in[1], idx, 8);
    if (na <= 0 || ni <= 0 || x->shape.rank != 1) break;
    for (int i = 0; i < ni; i++, no++) {
      int64_t k = idx[i] < 0 ? idx[i] + na : idx[i];
      if (k < 0 || k >= na) return;
      o[no] = a[k];
      eo |= (ea >> k & 1u) << no;
    }
    break;
  }
  case MG_OP_Concat:
    for (int i = 0; i < n->n_in; i++) {
      if (n->in[i] && n->in[i]->shape.rank > 1) return;
      nb = cg_dyn_vbound(c, n->in[i], b, &eb);
      if (nb <= 0 || no + nb > 8) return;
      memcpy(o + no, b, sizeof(int64_t) * (size_t)nb);
      eo |= eb << no;
      no += nb;
    }
    break;
  case MG_OP_ReduceMin: case MG_OP_ReduceMax:
    if (n->n_in > 1 && n->in[1]) return; /* axes: only the reduce-all case */
    na = cg_dyn_vbound(c, x, a, &ea);
    if (na <= 0) return;
    o[0] = a[0];
    for (int i = 1; i < na; i++) o[0] = n->op == MG_OP_ReduceMin ? (a[i] < o[0] ? a[i] : o[0]) : (a[i] > o[0] ? a[i] : o[0]);
    no = 1;
    eo = ea == (1u << na) - 1; /* exact when every element is */
    break;
  case MG_OP_Where: case MG_OP_Min: case MG_OP_Max: {
    /* a bound of Min is any input's bound; of Max and Where the largest (all known) */
    int64_t numel = mg_shape_numel(&y->shape);
    if (numel < 1 || numel > 8) return;
    int have = 0, first = n->op == MG_OP_Where ? 1 : 0;
    unsigned all_exact = (1u << numel) - 1;
    for (int i = first; i < n->n_in; i++) {
      nb = cg_dyn_vbound(c, n->in[i], b, &eb);
      if (nb != 1 && nb != numel) {
        if (n->op != MG_OP_Min) return;
        all_exact = 0;
        continue;
      }
      for (int k = 0; k < numel; k++) {
        int64_t v = b[nb == 1 ? 0 : k];
        int e = (int)(eb >> (nb == 1 ? 0 : k) & 1);
        if (have && (!e || v != o[k])) all_exact &= ~(1u << k);
        if (!have && !e) all_exact &= ~(1u << k);
        o[k] = !have ? v : n->op == MG_OP_Min ? (v < o[k] ? v : o[k]) : (v > o[k] ? v : o[k]);
      }
      have = 1;
    }
    no = have ? (int)numel : 0;
    eo = all_exact;
    if (n->op == MG_OP_Where && no) {
      /* an element whose condition is known is its branch's, exactly as that is */
      int64_t cv[8], t[8], f[8];
      unsigned ce, te, fe;
      int ncv = cg_dyn_vbound(c, n->in[0], cv, &ce), nt = cg_dyn_vbound(c, n->in[1], t, &te), nf = cg_dyn_vbound(c, n->in[2], f, &fe);
      for (int k = 0; k < no && ncv && nt && nf; k++) {
        int ic = ncv == 1 ? 0 : k, it = nt == 1 ? 0 : k, jf = nf == 1 ? 0 : k;
        if (!(ce >> ic & 1)) continue;
        o[k] = cv[ic] ? t[it] : f[jf];
        eo = (eo & ~(1u << k)) | ((cv[ic] ? te >> it : fe >> jf) & 1u) << k;
      }
    }
    break;
  }
  default:
    return;
  }
  vb_set(c, y, o, no, eo);
}

/* See cg_internal.h. */
int64_t cg_dyn_known_ints(cg_ctx *c, const mg_value *v, int64_t *out, int64_t cap) {
  if (!v) return -1;
  if (cg_is_const(v)) return cg_const_ints(v, out, cap);
  int64_t hi[8];
  unsigned exact;
  int n = cg_dyn_vbound(c, v, hi, &exact);
  if (n <= 0 || n > cap || exact != (1u << n) - 1) return -1;
  memcpy(out, hi, sizeof(int64_t) * (size_t)n);
  return n;
}

