/* Emitters for the data-movement ops of the tensor family (runtime/tensor.c).
 *
 * Most ops become one or a few mg_copy_nd calls whose shapes, strides and offsets
 * are computed here from the static shapes: the emitter coalesces the walk (drops
 * size-1 dims, merges dims that are contiguous on both sides) so the runtime sees
 * the fewest, longest runs. Shapes come from the values (static); inputs whose
 * data decides the result's layout (Slice starts, Pad pads, Trilu k...) must be
 * constants, and anything else is reported with cg_unsupported. */
#include "cg.h"
#include "slice_geom.h"
#include "pad_geom.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WALK_MAX = 2 * MG_MAX_RANK };

/* Row-major element strides of dims. */
static void strides_of(int rank, const int64_t *dims, int64_t *st) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) st[d] = s, s *= dims[d];
}

/* The element size of v's dtype, or 0 after cg_unsupported when the runtime cannot
 * hold it (strings, complex). */
static size_t elem_size(cg_ctx *c, const mg_node *n, const mg_value *v) {
  if (!v || !cg_ctype(v->dtype) || !mg_dtype_size(v->dtype)) {
    cg_unsupported(c, n, "dtype %s", v ? mg_dtype_name(v->dtype) : "(missing)");
    return 0;
  }
  return mg_dtype_size(v->dtype);
}

/* Normalises axis against rank into *out; -1 after cg_unsupported. */
static int norm_axis(cg_ctx *c, const mg_node *n, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return cg_unsupported(c, n, "axis %lld out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return 0;
}

/* Emits mg_copy_nd for the walk shape[rank] from src_expr + src_off (elements)
 * with src strides into dst_expr + dst_off with dst strides, after coalescing. */
static int emit_copy(cg_ctx *c, const mg_node *n, size_t es, int rank, const int64_t *shape,
                     const char *src_expr, int64_t src_off, const int64_t *sst,
                     const char *dst_expr, int64_t dst_off, const int64_t *dst_st) {
  int64_t sh[WALK_MAX], ss[WALK_MAX], ds[WALK_MAX];
  int r = 0;
  for (int d = 0; d < rank; d++) {
    if (shape[d] == 0) return 0; /* nothing to copy */
    if (shape[d] == 1) continue;
    if (r > 0 && ss[r - 1] == sst[d] * shape[d] && ds[r - 1] == dst_st[d] * shape[d]) {
      sh[r - 1] *= shape[d], ss[r - 1] = sst[d], ds[r - 1] = dst_st[d];
      continue;
    }
    sh[r] = shape[d], ss[r] = sst[d], ds[r] = dst_st[d];
    r++;
  }
  if (r > MG_MAX_RANK) return cg_unsupported(c, n, "a copy of %d non-mergeable dims", r);
  if (r == 0) sh[0] = 1, ss[0] = 1, ds[0] = 1, r = 1;
  if (r == 1 && ss[0] == 1 && ds[0] == 1) {
    cg_line(c, "mg_copy_bytes((char *)%s + %lld, (const char *)%s + %lld, %lld);", dst_expr,
            (long long)(dst_off * (int64_t)es), src_expr, (long long)(src_off * (int64_t)es),
            (long long)(sh[0] * (int64_t)es));
    return 0;
  }
  cg_kernel(c, 0, "mg_copy_nd", "%zu, %d, %s, (const char *)%s + %lld, %s, (char *)%s + %lld, %s", es, r,
          cg_i64s(c, sh, r), src_expr, (long long)(src_off * (int64_t)es), cg_i64s(c, ss, r),
          dst_expr, (long long)(dst_off * (int64_t)es), cg_i64s(c, ds, r));
  return 0;
}

/* The common preamble: n's input 0 and output 0 with their dims and element size;
 * 0 when usable, -1 after cg_unsupported. */
typedef struct {
  const mg_value *x, *y;
  int xr, yr;
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK], xs[MG_MAX_RANK], ys[MG_MAX_RANK];
  size_t es;
} io;

static int io_get(cg_ctx *c, const mg_node *n, io *t) {
  memset(t, 0, sizeof *t);
  t->x = n->n_in > 0 ? n->in[0] : NULL;
  t->y = n->n_out > 0 ? n->out[0] : NULL;
  if (!t->x || !t->y) return cg_unsupported(c, n, "missing input or output");
  if (!(t->es = elem_size(c, n, t->x)) || !elem_size(c, n, t->y)) return -1;
  t->xr = cg_dims(t->x, t->xd);
  t->yr = cg_dims(t->y, t->yd);
  strides_of(t->xr, t->xd, t->xs);
  strides_of(t->yr, t->yd, t->ys);
  return 0;
}

/* Reads a constant int vector input (NULL allowed: returns 0 with *present 0). */
static int const_list(cg_ctx *c, const mg_node *n, int i, const char *what, int64_t *v, int cap,
                      int *present) {
  const mg_value *a = n->n_in > i ? n->in[i] : NULL;
  *present = a != NULL;
  if (!a) return 0;
  int64_t k = cg_const_ints(a, v, cap);
  if (k < 0) return cg_unsupported(c, n, "%s must be a constant of at most %d values", what, cap);
  return (int)k;
}

/* Whether the input-i index tensor is int64 (1) or int32 (0); -1 otherwise. */
static int index_kind(cg_ctx *c, const mg_node *n, int i) {
  const mg_value *v = n->n_in > i ? n->in[i] : NULL;
  if (v && v->dtype == MG_I64) return 1;
  if (v && v->dtype == MG_I32) return 0;
  return cg_unsupported(c, n, "indices of dtype %s (int32 or int64 only)",
                        v ? mg_dtype_name(v->dtype) : "(missing)");
}

static int64_t prod(const int64_t *d, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= d[i];
  return p;
}

/* Transpose: the output walked in order, reading input strides permuted. */
int cg_emit_Transpose(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  const int64_t *p = NULL;
  size_t np = mg_attr_ints(n, "perm", &p);
  int has = mg_node_attr(n, "perm") != NULL, seen[MG_MAX_RANK] = {0};
  int64_t is[MG_MAX_RANK];
  if (has && (int)np != t.xr) return cg_unsupported(c, n, "perm has %zu entries for rank %d", np, t.xr);
  for (int d = 0; d < t.xr; d++) {
    int64_t a = has ? p[d] : t.xr - 1 - d;
    if (a < 0 || a >= t.xr || seen[a]++) return cg_unsupported(c, n, "perm is not a permutation");
    if (t.yd[d] != t.xd[a]) return cg_unsupported(c, n, "output shape disagrees with perm");
    is[d] = t.xs[a];
  }
  cg_need(c, "tensor.c");
  return emit_copy(c, n, t.es, t.yr, t.yd, cg_vin(c, t.x), 0, is, cg_vout(c, t.y), 0, t.ys);
}

/* Concat: each input copied into its slab of the output. */
int cg_emit_Concat(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int axis = 0;
  if (!mg_node_attr(n, "axis")) return cg_unsupported(c, n, "missing axis");
  if (norm_axis(c, n, mg_attr_int(n, "axis", 0), t.yr, &axis)) return -1;
  int64_t pos = 0;
  cg_need(c, "tensor.c");
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    int64_t d[MG_MAX_RANK], s[MG_MAX_RANK];
    if (!v || v->dtype != t.y->dtype) return cg_unsupported(c, n, "input %d missing or of another dtype", i);
    if (cg_dims(v, d) != t.yr) return cg_unsupported(c, n, "input %d has another rank", i);
    strides_of(t.yr, d, s);
    if (emit_copy(c, n, t.es, t.yr, d, cg_vin(c, v), 0, s, cg_vout(c, t.y), pos * t.ys[axis], t.ys))
      return -1;
    pos += d[axis];
  }
  if (pos != t.yd[axis]) return cg_unsupported(c, n, "input lengths do not add up to the output's");
  return 0;
}

/* Split: each output is a slab of the input (sizes from the static output shapes,
 * which inference derived from `split` or num_outputs). */
int cg_emit_Split(cg_ctx *c, const mg_node *n) {
  io t;
  t.x = n->in[0];
  if (!t.x || !(t.es = elem_size(c, n, t.x))) return -1;
  t.xr = cg_dims(t.x, t.xd);
  strides_of(t.xr, t.xd, t.xs);
  int axis = 0;
  if (norm_axis(c, n, mg_attr_int(n, "axis", 0), t.xr, &axis)) return -1;
  int64_t pos = 0;
  cg_need(c, "tensor.c");
  for (int i = 0; i < n->n_out; i++) {
    const mg_value *v = n->out[i];
    int64_t d[MG_MAX_RANK], s[MG_MAX_RANK];
    if (!v) return cg_unsupported(c, n, "omitted output %d (its length is unknown)", i);
    if (cg_dims(v, d) != t.xr || v->dtype != t.x->dtype)
      return cg_unsupported(c, n, "output %d has another rank or dtype", i);
    strides_of(t.xr, d, s);
    if (emit_copy(c, n, t.es, t.xr, d, cg_vin(c, t.x), pos * t.xs[axis], t.xs, cg_vout(c, v), 0, s))
      return -1;
    pos += d[axis];
  }
  if (pos != t.xd[axis]) return cg_unsupported(c, n, "output lengths do not add up to the input's");
  return 0;
}

/* Slice: starts/ends/axes/steps constant; the ONNX clamping rules, then one copy
 * with (possibly negative) steps as strides. */
int cg_emit_Slice(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int64_t st[MG_MAX_RANK], en[MG_MAX_RANK], ax[MG_MAX_RANK], sp[MG_MAX_RANK];
  int has, ns = const_list(c, n, 1, "starts", st, MG_MAX_RANK, &has);
  if (ns < 0) return -1;
  int ne = const_list(c, n, 2, "ends", en, MG_MAX_RANK, &has);
  if (ne < 0) return -1;
  if (ns != ne) return cg_unsupported(c, n, "starts and ends differ in length");
  int na = const_list(c, n, 3, "axes", ax, MG_MAX_RANK, &has);
  if (na < 0) return -1;
  if (!has) for (int i = 0; i < ns; i++) ax[i] = i;
  else if (na != ns) return cg_unsupported(c, n, "axes length differs from starts");
  int nst = const_list(c, n, 4, "steps", sp, MG_MAX_RANK, &has);
  if (nst < 0) return -1;
  if (!has) for (int i = 0; i < ns; i++) sp[i] = 1;
  else if (nst != ns) return cg_unsupported(c, n, "steps length differs from starts");
  int64_t start[MG_MAX_RANK] = {0}, step[MG_MAX_RANK], dims[MG_MAX_RANK], is[MG_MAX_RANK];
  int seen[MG_MAX_RANK] = {0};
  for (int d = 0; d < t.xr; d++) step[d] = 1, dims[d] = t.xd[d];
  for (int i = 0; i < ns; i++) {
    int a = 0;
    if (norm_axis(c, n, ax[i], t.xr, &a)) return -1;
    if (seen[a]++) return cg_unsupported(c, n, "axis %lld is repeated", (long long)ax[i]);
    int64_t s, k = sp[i], cnt;
    if (mg_slice_axis(t.xd[a], st[i], en[i], k, &s, &cnt)) return cg_unsupported(c, n, "step 0");
    start[a] = s, dims[a] = cnt, step[a] = cnt > 1 ? k : 1;
  }
  int64_t base = 0;
  for (int d = 0; d < t.xr; d++) {
    if (dims[d] != t.yd[d]) return cg_unsupported(c, n, "output shape disagrees with the slice");
    if (dims[d] == 0) return 0; /* empty output: nothing to write */
    base += start[d] * t.xs[d];
    is[d] = step[d] * t.xs[d];
  }
  cg_need(c, "tensor.c");
  return emit_copy(c, n, t.es, t.xr, dims, cg_vin(c, t.x), base, is, cg_vout(c, t.y), 0, t.ys);
}

/* Pad: constant mode fills the output (with input 2's value, or zeros) and copies
 * the (possibly cropped) input into it; reflect/edge/wrap gather through per-axis
 * index maps computed here, exactly as the ONNX reference defines them. */
int cg_emit_Pad(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  const char *mode = mg_attr_str(n, "mode", "constant");
  int m = mg_pad_mode(mode);
  if (m < 0) return cg_unsupported(c, n, "mode '%s'", mode);
  int64_t axes[MG_MAX_RANK], pads[2 * MG_MAX_RANK], pb[MG_MAX_RANK] = {0}, pe[MG_MAX_RANK] = {0};
  int has_axes, has;
  int na = const_list(c, n, 3, "axes", axes, MG_MAX_RANK, &has_axes);
  if (na < 0) return -1;
  if (!has_axes) {
    na = t.xr;
    for (int i = 0; i < na; i++) axes[i] = i;
  }
  int np = const_list(c, n, 1, "pads", pads, 2 * MG_MAX_RANK, &has);
  if (np < 0) return -1;
  if (!has || np != 2 * na) return cg_unsupported(c, n, "pads must be a constant of %d values", 2 * na);
  int seen[MG_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int a = 0;
    if (norm_axis(c, n, axes[i], t.xr, &a)) return -1;
    if (seen[a]++) return cg_unsupported(c, n, "axis repeated");
    pb[a] = pads[i], pe[a] = pads[na + i];
  }
  const mg_value *cv = n->n_in > 2 ? n->in[2] : NULL;
  if (cv && cg_numel(cv) > 0 && cv->dtype != t.x->dtype)
    return cg_unsupported(c, n, "constant_value of another dtype");
  int64_t cs[MG_MAX_RANK], cl[MG_MAX_RANK], total = 0;
  for (int d = 0; d < t.xr; d++) {
    if (t.xd[d] + pb[d] + pe[d] != t.yd[d]) return cg_unsupported(c, n, "output shape disagrees with pads");
    mg_pad_crop(t.xd[d], pb[d], pe[d], &cs[d], &cl[d]);
    if (cl[d] < 0) return cg_unsupported(c, n, "pads crop axis %d below zero", d);
    if (m != MG_PADM_CONSTANT && cl[d] == 0 && t.yd[d] > 0) return cg_unsupported(c, n, "mode %s on an empty axis", mode);
    total += t.yd[d];
  }
  if (cg_numel(t.y) == 0) return 0;
  cg_need(c, "tensor.c");
  if (m == MG_PADM_CONSTANT) {
    const char *val;
    if (cv && cg_numel(cv) > 0) val = cg_vin(c, cv);
    else val = cg_static(c, "uint64_t", "0"); /* zero bytes of any element size <= 8 */
    cg_line(c, "mg_fill(%zu, %lld, %s, %s%s);", t.es, (long long)cg_numel(t.y), cg_vout(c, t.y),
            cv && cg_numel(cv) > 0 ? "" : "&", val);
    int64_t src_off = 0, dst_off = 0;
    for (int d = 0; d < t.xr; d++) {
      src_off += cs[d] * t.xs[d];
      dst_off += (pb[d] > 0 ? pb[d] : 0) * t.ys[d];
    }
    return emit_copy(c, n, t.es, t.xr, cl, cg_vin(c, t.x), src_off, t.xs, cg_vout(c, t.y), dst_off, t.ys);
  }
  if (total > ((int64_t)1 << 24)) return cg_unsupported(c, n, "index maps too large");
  int64_t *map = calloc((size_t)total + 1, sizeof *map);
  if (!map) return cg_unsupported(c, n, "out of memory");
  int64_t at = 0;
  for (int d = 0; d < t.xr; d++) {
    int64_t L = cl[d], lead = pb[d] > 0 ? pb[d] : 0;
    for (int64_t o = 0; o < t.yd[d]; o++) {
      map[at++] = (cs[d] + mg_pad_source(m, o, lead, L)) * t.xs[d];
    }
  }
  int rank = t.xr ? t.xr : 1;
  int64_t one = 1;
  cg_line(c, "mg_gather_maps(%zu, %d, %s, %s, %s, %s);", t.es, rank,
          t.xr ? cg_i64s(c, t.yd, t.xr) : cg_i64s(c, &one, 1), cg_vin(c, t.x),
          t.xr ? cg_i64s(c, map, (int)total) : cg_i64s(c, &one, 0), cg_vout(c, t.y));
  free(map);
  return 0;
}

/* Tile: the output viewed as [r0, d0, r1, d1, ...] reading the input with stride 0
 * on the repeat axes. */
int cg_emit_Tile(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  if (t.xr != t.yr) return cg_unsupported(c, n, "output rank differs from input rank");
  int64_t wd[WALK_MAX], ws[WALK_MAX], wo[WALK_MAX];
  for (int d = 0; d < t.xr; d++) {
    if (t.xd[d] == 0 || t.yd[d] == 0) return 0; /* empty output */
    if (t.yd[d] % t.xd[d]) return cg_unsupported(c, n, "output dim not a multiple of the input's");
    wd[2 * d] = t.yd[d] / t.xd[d], ws[2 * d] = 0;
    wd[2 * d + 1] = t.xd[d], ws[2 * d + 1] = t.xs[d];
  }
  strides_of(2 * t.xr, wd, wo);
  cg_need(c, "tensor.c");
  return emit_copy(c, n, t.es, 2 * t.xr, wd, cg_vin(c, t.x), 0, ws, cg_vout(c, t.y), 0, wo);
}

/* Expand: numpy broadcast of the input to the output shape (stride 0 where the
 * input's dim is 1 or missing). */
int cg_emit_Expand(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  if (t.yr < t.xr) return cg_unsupported(c, n, "output rank below input rank");
  int64_t is[MG_MAX_RANK];
  for (int d = 0; d < t.yr; d++) {
    int xd = d - (t.yr - t.xr);
    if (xd < 0) is[d] = 0;
    else if (t.xd[xd] == t.yd[d]) is[d] = t.xs[xd];
    else if (t.xd[xd] == 1) is[d] = 0;
    else return cg_unsupported(c, n, "input does not broadcast to the output");
  }
  cg_need(c, "tensor.c");
  return emit_copy(c, n, t.es, t.yr, t.yd, cg_vin(c, t.x), 0, is, cg_vout(c, t.y), 0, t.ys);
}

/* Gather along axis: [outer, axis_n, inner] rows picked by the run-time indices. */
int cg_emit_Gather(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int axis = 0, i64 = index_kind(c, n, 1);
  if (i64 < 0) return -1;
  if (t.xr == 0) return cg_unsupported(c, n, "gather from a scalar");
  if (norm_axis(c, n, mg_attr_int(n, "axis", 0), t.xr, &axis)) return -1;
  int64_t ni = cg_numel(n->in[1]);
  if (cg_numel(t.y) == 0) return 0;
  if (t.xd[axis] == 0) return cg_unsupported(c, n, "gather from an empty axis");
  cg_need(c, "tensor.c");
  cg_line(c, "mg_gather(%zu, %lld, %lld, %lld, %s, %s, %d, %lld, %s);", t.es,
          (long long)prod(t.xd, 0, axis), (long long)t.xd[axis], (long long)prod(t.xd, axis + 1, t.xr),
          cg_vin(c, t.x), cg_vin(c, n->in[1]), i64, (long long)ni, cg_vout(c, t.y));
  return 0;
}

/* The mg_scatter_reduction enumerator of n's `reduction`; NULL after
 * cg_unsupported for an unknown one. */
static const char *scatter_reduction(cg_ctx *c, const mg_node *n) {
  const char *red = mg_attr_str(n, "reduction", "none");
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  static const char *const enums[] = {"MG_SCATTER_NONE", "MG_SCATTER_ADD", "MG_SCATTER_MUL",
                                      "MG_SCATTER_MAX", "MG_SCATTER_MIN"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(red, names[i])) return enums[i];
  cg_unsupported(c, n, "reduction '%s'", red);
  return NULL;
}

/* GatherElements / ScatterElements share the index walk; scatter first copies
 * data into the output (nothing when it works in place). */
static int elements(cg_ctx *c, const mg_node *n, int scatter) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int axis = 0, i64 = index_kind(c, n, 1);
  if (i64 < 0) return -1;
  int64_t id[MG_MAX_RANK];
  int ir = cg_dims(n->in[1], id);
  if (ir != t.xr || t.xr == 0) return cg_unsupported(c, n, "indices must have data's rank (>= 1)");
  if (norm_axis(c, n, mg_attr_int(n, "axis", 0), t.xr, &axis)) return -1;
  for (int d = 0; d < t.xr; d++)
    if (d != axis && id[d] > t.xd[d]) return cg_unsupported(c, n, "indices dim %d exceeds data's", d);
  cg_need(c, "tensor.c");
  if (!scatter) {
    if (cg_numel(t.y) == 0) return 0;
    if (t.xd[axis] == 0) return cg_unsupported(c, n, "gather from an empty axis");
    cg_line(c, "mg_gather_elements(%zu, %d, %s, %s, %d, %lld, %s, %s, %d, %s);", t.es, t.xr,
            cg_i64s(c, id, ir), cg_i64s(c, t.xs, t.xr), axis, (long long)t.xd[axis], cg_vin(c, t.x),
            cg_vin(c, n->in[1]), i64, cg_vout(c, t.y));
    return 0;
  }
  const mg_value *u = n->in[2];
  int64_t ud[MG_MAX_RANK];
  if (!u || u->dtype != t.x->dtype || cg_dims(u, ud) != ir || memcmp(ud, id, sizeof(int64_t) * (size_t)ir))
    return cg_unsupported(c, n, "updates must match indices in shape and data in dtype");
  const char *red = scatter_reduction(c, n);
  if (!red) return -1;
  cg_line(c, "mg_copy_bytes(%s, %s, %lld);", cg_vout(c, t.y), cg_vin(c, t.x),
          (long long)(cg_numel(t.x) * (int64_t)t.es));
  if (cg_numel(n->in[1]) == 0) return 0;
  if (t.xd[axis] == 0) return cg_unsupported(c, n, "scatter into an empty axis");
  /* the actual index dims and axis length when they vary at run time (cg_dim) */
  cg_line(c, "mg_scatter_elements(%s, %s, %d, %s, %s, %d, %s, %s, %d, %s, %s);",
          cg_rt_dtype(t.x->dtype), red, t.xr, cg_dims_expr(c, n->in[1]),
          cg_i64s(c, t.xs, t.xr), axis, cg_dim(c, t.x, axis), cg_vin(c, n->in[1]), i64,
          cg_vin(c, u), cg_vout(c, t.y));
  return 0;
}

int cg_emit_GatherElements(cg_ctx *c, const mg_node *n) { return elements(c, n, 0); }
int cg_emit_ScatterElements(cg_ctx *c, const mg_node *n) { return elements(c, n, 1); }

/* GatherND with batch_dims: index tuples over data's axes [b, b+k), each copying a
 * contiguous slice of the remaining axes. */
int cg_emit_GatherND(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int i64 = index_kind(c, n, 1);
  if (i64 < 0) return -1;
  int64_t id[MG_MAX_RANK], b = mg_attr_int(n, "batch_dims", 0);
  int q = cg_dims(n->in[1], id), r = t.xr;
  if (q < 1 || r < 1 || b < 0 || b >= q || b >= r) return cg_unsupported(c, n, "bad ranks or batch_dims");
  int64_t k = id[q - 1];
  if (k < 0 || k > r - b) return cg_unsupported(c, n, "index tuples longer than data's rank");
  for (int d = 0; d < b; d++)
    if (id[d] != t.xd[d]) return cg_unsupported(c, n, "batch dims of data and indices differ");
  int64_t ad[MG_MAX_RANK], as[MG_MAX_RANK];
  for (int j = 0; j < k; j++) {
    ad[j] = t.xd[b + j], as[j] = t.xs[b + j];
    if (!ad[j] && cg_numel(t.y)) return cg_unsupported(c, n, "indexing an empty axis");
  }
  if (cg_numel(t.y) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_gather_nd(%zu, %lld, %lld, %lld, %d, %s, %s, %lld, %s, %s, %d, %s);", t.es,
          (long long)prod(t.xd, 0, (int)b), (long long)prod(t.xd, (int)b, r),
          (long long)prod(id, (int)b, q - 1), (int)k, cg_i64s(c, ad, (int)k), cg_i64s(c, as, (int)k),
          (long long)prod(t.xd, (int)(b + k), r), cg_vin(c, t.x), cg_vin(c, n->in[1]), i64,
          cg_vout(c, t.y));
  return 0;
}

/* ScatterND: a copy of data, then each index tuple's slice combined with updates. */
int cg_emit_ScatterND(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int i64 = index_kind(c, n, 1);
  if (i64 < 0) return -1;
  const char *red = scatter_reduction(c, n);
  if (!red) return -1;
  int64_t id[MG_MAX_RANK], ud[MG_MAX_RANK];
  int q = cg_dims(n->in[1], id), r = t.xr;
  const mg_value *u = n->in[2];
  if (q < 1 || id[q - 1] > r) return cg_unsupported(c, n, "bad indices shape");
  int k = (int)id[q - 1];
  int ur = u ? cg_dims(u, ud) : -1;
  if (!u || u->dtype != t.x->dtype || ur != q - 1 + r - k) return cg_unsupported(c, n, "updates have the wrong rank or dtype");
  for (int d = 0; d < q - 1; d++)
    if (ud[d] != id[d]) return cg_unsupported(c, n, "updates' shape does not match indices");
  for (int d = k; d < r; d++)
    if (ud[q - 1 + d - k] != t.xd[d]) return cg_unsupported(c, n, "updates' shape does not match data");
  int64_t ad[MG_MAX_RANK], as[MG_MAX_RANK];
  for (int j = 0; j < k; j++) ad[j] = t.xd[j], as[j] = t.xs[j];
  cg_need(c, "tensor.c");
  cg_line(c, "mg_copy_bytes(%s, %s, %lld);", cg_vout(c, t.y), cg_vin(c, t.x),
          (long long)(cg_numel(t.x) * (int64_t)t.es));
  int64_t nt = prod(id, 0, q - 1);
  if (nt == 0 || cg_numel(t.x) == 0) return 0;
  cg_line(c, "mg_scatter_nd(%s, %s, %lld, %d, %s, %s, %lld, %s, %d, %s, %s);", cg_rt_dtype(t.x->dtype),
          red, (long long)nt, k, cg_i64s(c, ad, k), cg_i64s(c, as, k), (long long)prod(t.xd, k, r),
          cg_vin(c, n->in[1]), i64, cg_vin(c, u), cg_vout(c, t.y));
  return 0;
}

/* DepthToSpace (DCR/CRD) and SpaceToDepth: a 6-D walk of the output (its row-major
 * layout) reading permuted input strides. */
static int space_depth(cg_ctx *c, const mg_node *n, int to_space) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int64_t b = mg_attr_int(n, "blocksize", 0);
  if (t.xr != 4) return cg_unsupported(c, n, "input must be 4-D");
  if (b <= 0) return cg_unsupported(c, n, "blocksize %lld", (long long)b);
  int64_t N = t.xd[0], C = t.xd[1], H = t.xd[2], W = t.xd[3], wd[6], ws[6], wo[6], od[4];
  if (to_space) {
    const char *mode = mg_attr_str(n, "mode", "DCR");
    int crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR")) return cg_unsupported(c, n, "mode '%s'", mode);
    if (C % (b * b)) return cg_unsupported(c, n, "channels not divisible by blocksize^2");
    int64_t Cp = C / (b * b);
    int64_t w6[6] = {N, Cp, H, b, W, b};
    int64_t s6[6] = {C * H * W, crd ? b * b * H * W : H * W, W, crd ? b * H * W : b * Cp * H * W, 1,
                     crd ? H * W : Cp * H * W};
    memcpy(wd, w6, sizeof w6), memcpy(ws, s6, sizeof s6);
    od[0] = N, od[1] = Cp, od[2] = H * b, od[3] = W * b;
  } else {
    if (H % b || W % b) return cg_unsupported(c, n, "spatial dims not divisible by blocksize");
    int64_t w6[6] = {N, b, b, C, H / b, W / b};
    int64_t s6[6] = {C * H * W, W, 1, H * W, b * W, b};
    memcpy(wd, w6, sizeof w6), memcpy(ws, s6, sizeof s6);
    od[0] = N, od[1] = C * b * b, od[2] = H / b, od[3] = W / b;
  }
  if (t.yr != 4 || memcmp(od, t.yd, sizeof od)) return cg_unsupported(c, n, "output shape disagrees");
  strides_of(6, wd, wo);
  cg_need(c, "tensor.c");
  return emit_copy(c, n, t.es, 6, wd, cg_vin(c, t.x), 0, ws, cg_vout(c, t.y), 0, wo);
}

int cg_emit_DepthToSpace(cg_ctx *c, const mg_node *n) { return space_depth(c, n, 1); }
int cg_emit_SpaceToDepth(cg_ctx *c, const mg_node *n) { return space_depth(c, n, 0); }

/* Trilu: k from the optional input 1, a constant or read at run time. In place. */
int cg_emit_Trilu(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  const mg_value *kv = n->n_in > 1 ? n->in[1] : NULL;
  char kexpr[256] = "0";
  if (kv) {
    int64_t k = 0;
    if (cg_numel(kv) != 1 || !cg_rt_dtype(kv->dtype) || kv->dtype == MG_BOOL)
      return cg_unsupported(c, n, "k must hold one integer");
    if (cg_is_const(kv)) {
      if (cg_const_ints(kv, &k, 1) != 1) return cg_unsupported(c, n, "cannot read k");
      snprintf(kexpr, sizeof kexpr, "%lldLL", (long long)k);
    } else {
      snprintf(kexpr, sizeof kexpr, "mg_tensor_load_i64(%s, %s, 0)", cg_rt_dtype(kv->dtype), cg_vin(c, kv));
    }
  }
  if (t.xr < 2) return cg_unsupported(c, n, "input must have rank >= 2");
  int64_t R = t.xd[t.xr - 2], C = t.xd[t.xr - 1];
  if (cg_numel(t.x) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_trilu(%zu, %lld, %lld, %lld, %s, %d, %s, %s);", t.es,
          (long long)(cg_numel(t.x) / (R * C)), (long long)R, (long long)C, kexpr,
          mg_attr_int(n, "upper", 1) != 0, cg_vin(c, t.x), cg_vout(c, t.y));
  return 0;
}

/* ReverseSequence: batch_axis/time_axis 0 and 1 in some order, lens at run time. */
int cg_emit_ReverseSequence(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  int i64 = index_kind(c, n, 1);
  if (i64 < 0) return -1;
  int64_t ba = mg_attr_int(n, "batch_axis", 1), ta = mg_attr_int(n, "time_axis", 0);
  if (t.xr < 2) return cg_unsupported(c, n, "input must have rank >= 2");
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return cg_unsupported(c, n, "batch_axis and time_axis must be 0 and 1");
  if (cg_numel(n->in[1]) != t.xd[ba]) return cg_unsupported(c, n, "sequence_lens must have one entry per batch");
  if (cg_numel(t.x) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_reverse_sequence(%zu, %lld, %lld, %lld, %d, %s, %d, %s, %s);", t.es,
          (long long)t.xd[ba], (long long)t.xd[ta], (long long)prod(t.xd, 2, t.xr), ta == 0,
          cg_vin(c, n->in[1]), i64, cg_vin(c, t.x), cg_vout(c, t.y));
  return 0;
}

/* OneHot: depth from the static output shape, indices and values at run time. */
int cg_emit_OneHot(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->in[0], *vals = n->in[2], *y = n->out[0];
  if (!x || !vals || !y) return cg_unsupported(c, n, "missing input");
  size_t es = elem_size(c, n, vals);
  if (!es || !elem_size(c, n, x)) return -1;
  if (!cg_rt_dtype(x->dtype) || x->dtype == MG_BOOL)
    return cg_unsupported(c, n, "indices of dtype %s", mg_dtype_name(x->dtype));
  if (cg_numel(vals) != 2 || y->dtype != vals->dtype) return cg_unsupported(c, n, "values must hold two values");
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK];
  int xr = cg_dims(x, xd), yr = cg_dims(y, yd), axis = 0;
  if (yr != xr + 1) return cg_unsupported(c, n, "output rank must be the indices' plus one");
  if (norm_axis(c, n, mg_attr_int(n, "axis", -1), yr, &axis)) return -1;
  if (cg_numel(y) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_onehot(%zu, %s, %lld, %lld, %lld, %s, %s, %s);", es, cg_rt_dtype(x->dtype),
          (long long)prod(xd, 0, axis), (long long)yd[axis], (long long)prod(xd, axis, xr),
          cg_vin(c, x), cg_vin(c, vals), cg_vout(c, y));
  return 0;
}

/* CenterCropPad: zeros, then the centred overlap of input and output (offsets
 * floor((in - out) / 2) on cropped axes, floor((out - in) / 2) on padded ones).
 * The target lengths and `axes` are already the static output shape. */
int cg_emit_CenterCropPad(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  if (t.xr != t.yr) return cg_unsupported(c, n, "output rank differs");
  const int64_t *axes = NULL;
  size_t na = mg_attr_ints(n, "axes", &axes);
  int listed[MG_MAX_RANK] = {0};
  if (!mg_node_attr(n, "axes")) for (int d = 0; d < t.xr; d++) listed[d] = 1;
  for (size_t i = 0; i < na; i++) {
    int a = 0;
    if (norm_axis(c, n, axes[i], t.xr, &a)) return -1;
    listed[a] = 1;
  }
  int64_t ov[MG_MAX_RANK], xo = 0, yo = 0;
  for (int d = 0; d < t.xr; d++) {
    if (!listed[d] && t.xd[d] != t.yd[d]) return cg_unsupported(c, n, "unlisted axis %d changes length", d);
    ov[d] = t.xd[d] < t.yd[d] ? t.xd[d] : t.yd[d];
    if (t.yd[d] < t.xd[d]) xo += (t.xd[d] - t.yd[d]) / 2 * t.xs[d];
    else yo += (t.yd[d] - t.xd[d]) / 2 * t.ys[d];
  }
  if (cg_numel(t.y) == 0) return 0;
  cg_need(c, "tensor.c");
  cg_line(c, "mg_fill(%zu, %lld, %s, &%s);", t.es, (long long)cg_numel(t.y), cg_vout(c, t.y),
          cg_static(c, "uint64_t", "0"));
  return emit_copy(c, n, t.es, t.xr, ov, cg_vin(c, t.x), xo, t.xs, cg_vout(c, t.y), yo, t.ys);
}

/* EyeLike: zeros with ones on diagonal k (one strided copy of a static one). */
int cg_emit_EyeLike(cg_ctx *c, const mg_node *n) {
  const mg_value *y = n->out[0];
  size_t es = y ? elem_size(c, n, y) : 0;
  if (!es) return y ? -1 : cg_unsupported(c, n, "missing output");
  int64_t d[MG_MAX_RANK], k = mg_attr_int(n, "k", 0);
  int64_t xd[MG_MAX_RANK];
  if (cg_dims(y, d) != 2) return cg_unsupported(c, n, "output must be 2-D");
  if (!n->in[0] || cg_dims(n->in[0], xd) != 2 || xd[0] != d[0] || xd[1] != d[1])
    return cg_unsupported(c, n, "output shape differs from the input's");
  if (mg_node_attr(n, "dtype") && mg_attr_int(n, "dtype", 0) != (int64_t)y->dtype)
    return cg_unsupported(c, n, "output dtype differs from the dtype attribute");
  if (cg_numel(y) == 0) return 0;
  const char *one = y->dtype == MG_F16 ? "0x3C00" : y->dtype == MG_BF16 ? "0x3F80" : "1";
  cg_need(c, "tensor.c");
  cg_line(c, "mg_fill(%zu, %lld, %s, &%s);", es, (long long)cg_numel(y), cg_vout(c, y),
          cg_static(c, "uint64_t", "0"));
  int64_t i0 = k < 0 ? -k : 0, rows = d[0] - i0, cols = d[1] - (i0 + k);
  int64_t cnt = rows < cols ? rows : cols;
  if (cnt <= 0) return 0;
  int64_t shape = cnt, ss = 0, ds = d[1] + 1;
  char src[128];
  snprintf(src, sizeof src, "&%s", cg_static(c, cg_ctype(y->dtype), "%s", one));
  return emit_copy(c, n, es, 1, &shape, src, 0, &ss, cg_vout(c, y), i0 * d[1] + i0 + k, &ds);
}

/* TopK: k from the static output shape; `sorted` needs no case: the result is
 * always sorted, which sorted=0 (any order) allows too. Ties to the lower index. */
int cg_emit_TopK(cg_ctx *c, const mg_node *n) {
  io t;
  if (io_get(c, n, &t)) return -1;
  if (!cg_rt_dtype(t.x->dtype) || t.x->dtype == MG_BOOL) return cg_unsupported(c, n, "dtype %s", mg_dtype_name(t.x->dtype));
  int axis = 0;
  if (t.xr == 0) return cg_unsupported(c, n, "input must have rank >= 1");
  if (norm_axis(c, n, mg_attr_int(n, "axis", -1), t.xr, &axis)) return -1;
  const mg_value *ix = n->n_out > 1 ? n->out[1] : NULL;
  if (ix && ix->dtype != MG_I64) return cg_unsupported(c, n, "indices output of dtype %s", mg_dtype_name(ix->dtype));
  int64_t k = t.yd[axis], len = t.xd[axis];
  if (n->in[1] && cg_is_const(n->in[1])) {
    int64_t kk = 0;
    if (cg_const_ints(n->in[1], &kk, 1) != 1 || kk != k) return cg_unsupported(c, n, "K disagrees with the output shape");
  }
  if (k > len) return cg_unsupported(c, n, "K > axis length");
  if (cg_numel(t.y) == 0) return 0;
  const char *scratch = cg_scratch(c, "%lld", (long long)(len * 4 + 4));
  cg_need(c, "tensor.c");
  cg_line(c, "mg_topk(%s, %lld, %lld, %lld, %lld, %d, %s, %s, %s, %s);", cg_rt_dtype(t.x->dtype),
          (long long)prod(t.xd, 0, axis), (long long)len, (long long)prod(t.xd, axis + 1, t.xr),
          (long long)k, mg_attr_int(n, "largest", 1) != 0, cg_vin(c, t.x), cg_vout(c, t.y),
          ix ? cg_out(c, ix) : "(int64_t *)0", scratch);
  return 0;
}
