/* The named translations of values.def (docs/rules-notes.md section 3): ONNX
 * attributes and inputs turned into what an API parameter takes. Each evaluator
 * fails, naming why, when the node's values cannot be known at conversion. */
#include "values_internal.h"
#include <stdio.h>
#include <string.h>

/* An ints attribute of the node: its count, or -1 when absent. Read with
 * mg_node_attr: an op without the attribute is a failure, not a debug abort. */
static int ints_attr(const mg_node *n, const char *name, const int64_t **v) {
  const mg_attr *a = mg_node_attr(n, name);
  if (!a || a->kind != MG_ATTR_INTS) return -1;
  *v = a->ints;
  return (int)a->n;
}

/* The number of spatial axes of a Conv/pool node: input 0's rank - 2, else the
 * kernel_shape attribute's length, else the weight's rank - 2. */
static int spatial_count(ev_ctx *c, const char *what, int *k) {
  const mg_value *x = ev_in(c, 0), *w = ev_in(c, 1);
  const int64_t *ks;
  int nk = ints_attr(c->n, "kernel_shape", &ks);
  if (x && x->shape.rank >= 2) *k = x->shape.rank - 2;
  else if (nk >= 0) *k = nk;
  else if (c->n->op == MG_OP_Conv && w && w->shape.rank >= 2) *k = w->shape.rank - 2;
  else return ev_fail(c, MAP_DYNAMIC_SHAPE, "%s: the number of spatial axes is unknown", what);
  if (*k > MG_MAX_RANK) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: too many spatial axes", what);
  return 0;
}

/* kernel_shape: the attribute, or the weight's spatial dims. */
static int kernel(ev_ctx *c, int64_t *kern, int *k) {
  const int64_t *ks;
  int nk = ints_attr(c->n, "kernel_shape", &ks);
  if (nk >= 0) {
    memcpy(kern, ks, sizeof *kern * (size_t)nk);
    *k = nk;
    return 0;
  }
  const mg_value *w = c->n->op == MG_OP_Conv ? ev_in(c, 1) : NULL;
  int64_t dims[MG_MAX_RANK];
  int rank = 0;
  if (!w) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "kernel_shape: no attribute and no weight to read it from");
  if (ev_static_dims(c, w, "kernel_shape", dims, &rank)) return -1;
  *k = rank - 2;
  memcpy(kern, dims + 2, sizeof *kern * (size_t)*k);
  return 0;
}

/* An ints attribute with one value per spatial axis, each `fill` when absent. */
static int per_axis(ev_ctx *c, const char *name, int64_t fill, int64_t *out, int *k) {
  if (spatial_count(c, name, k)) return -1;
  const int64_t *v = NULL;
  int n = ints_attr(c->n, name, &v);
  if (n >= 0 && n != *k) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s has %d values for %d spatial axes", name, n, *k);
  for (int i = 0; i < *k; i++) out[i] = n >= 0 ? v[i] : fill;
  return 0;
}

/* SAME_UPPER / SAME_LOWER pads: output = ceil(in / stride) per axis. */
static int same_pads(ev_ctx *c, int lower, int64_t *pads, int k) {
  int64_t kern[MG_MAX_RANK], st[MG_MAX_RANK], dil[MG_MAX_RANK], dims[MG_MAX_RANK];
  int nk, rank;
  if (kernel(c, kern, &nk) || per_axis(c, "strides", 1, st, &k) || per_axis(c, "dilations", 1, dil, &k) ||
      ev_static_dims(c, ev_need_in(c, 0, "pads"), "pads (auto_pad SAME)", dims, &rank))
    return -1;
  for (int i = 0; i < k; i++) {
    int64_t in = dims[2 + i], out = (in + st[i] - 1) / st[i];
    int64_t total = (out - 1) * st[i] + (kern[i] - 1) * dil[i] + 1 - in;
    if (total < 0) total = 0;
    pads[i] = lower ? total - total / 2 : total / 2;
    pads[i + k] = total - pads[i];
  }
  return 0;
}

/* The ONNX pads of a Conv/pool node (begins, then ends), auto_pad resolved. */
static int node_pads(ev_ctx *c, int64_t *pads, int *k) {
  if (spatial_count(c, "pads", k)) return -1;
  const mg_attr *ap = mg_node_attr(c->n, "auto_pad");
  const char *mode = ap && ap->kind == MG_ATTR_STRING ? ap->s : "NOTSET";
  if (!strcmp(mode, "SAME_UPPER") || !strcmp(mode, "SAME_LOWER")) return same_pads(c, mode[5] == 'L', pads, *k);
  const int64_t *v = NULL;
  int n = strcmp(mode, "VALID") ? ints_attr(c->n, "pads", &v) : -1;
  if (n >= 0 && n != 2 * *k) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "pads has %d values for %d spatial axes", n, *k);
  for (int i = 0; i < 2 * *k; i++) pads[i] = n >= 0 ? v[i] : 0;
  return 0;
}

int ev_kernel_shape(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t kern[MG_MAX_RANK];
  int k;
  return kernel(c, kern, &k) ? -1 : ev_set_ints(c, out, kern, k);
}

int ev_strides(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t v[MG_MAX_RANK];
  int k;
  return per_axis(c, "strides", 1, v, &k) ? -1 : ev_set_ints(c, out, v, k);
}

int ev_dilations(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t v[MG_MAX_RANK];
  int k;
  return per_axis(c, "dilations", 1, v, &k) ? -1 : ev_set_ints(c, out, v, k);
}

int ev_pads(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t p[2 * MG_MAX_RANK];
  int k;
  return node_pads(c, p, &k) ? -1 : ev_set_ints(c, out, p, 2 * k);
}

/* 2-D ONNX (t, l, b, r) as (t, b, l, r). */
int ev_pads_tblr(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t p[2 * MG_MAX_RANK];
  int k;
  if (node_pads(c, p, &k)) return -1;
  if (k != 2) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "pads_tblr needs 2 spatial axes, the node has %d", k);
  int64_t tblr[4] = {p[0], p[2], p[1], p[3]};
  return ev_set_ints(c, out, tblr, 4);
}

int ev_pads_hw(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t p[2 * MG_MAX_RANK];
  int k;
  if (node_pads(c, p, &k)) return -1;
  for (int i = 0; i < k; i++)
    if (p[i] != p[i + k])
      return ev_fail(c, MAP_UNSUPPORTED_ATTR, "pads_hw: axis %d pads %lld before and %lld after", i,
                     (long long)p[i], (long long)p[i + k]);
  return ev_set_ints(c, out, p, k);
}

/* ConvTranspose's output_padding per spatial axis, 0 where absent. */
int ev_output_padding(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t v[MG_MAX_RANK];
  int k;
  return per_axis(c, "output_padding", 0, v, &k) ? -1 : ev_set_ints(c, out, v, k);
}

int ev_zeros_spatial(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t z[MG_MAX_RANK] = {0};
  int k;
  return spatial_count(c, "zeros_spatial", &k) ? -1 : ev_set_ints(c, out, z, k);
}

int ev_spatial_axes(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t ax[MG_MAX_RANK];
  int rank = 0;
  if (ev_rank_of(c, ev_need_in(c, 0, "spatial_axes"), "spatial_axes", &rank)) return -1;
  for (int r = 2; r < rank; r++) ax[r - 2] = r;
  return ev_set_ints(c, out, ax, rank > 2 ? rank - 2 : 0);
}

/* Transpose's perm written non-negative; absent: the dims reversed. */
int ev_perm(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t p[MG_MAX_RANK];
  int rank = 0;
  if (ev_rank_of(c, ev_need_in(c, 0, "perm"), "perm", &rank)) return -1;
  const int64_t *v = NULL;
  int n = ints_attr(c->n, "perm", &v);
  if (n >= 0 && n != rank) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "perm has %d entries for rank %d", n, rank);
  for (int r = 0; r < rank; r++) p[r] = n >= 0 ? (v[r] < 0 ? v[r] + rank : v[r]) : rank - 1 - r;
  return ev_set_ints(c, out, p, rank);
}

/* An axes list made non-negative for rank. */
static int normalise_axes(ev_ctx *c, const char *what, int64_t *ax, int n, int rank) {
  for (int i = 0; i < n; i++) {
    if (ax[i] < 0) ax[i] += rank;
    if (ax[i] < 0 || ax[i] >= rank) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: axis out of range", what);
  }
  return 0;
}

/* Pad's pads in torch order (last dim first, begin then end), the pairs of
 * unpadded leading dims dropped. */
int ev_pads_torch(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t pads[2 * MG_MAX_RANK], axes[MG_MAX_RANK], begin[MG_MAX_RANK] = {0}, end[MG_MAX_RANK] = {0};
  int rank, np, na;
  if (ev_rank_of(c, ev_need_in(c, 0, "pads_torch"), "pads_torch", &rank) ||
      ev_const_ints(c, 1, "pads_torch", pads, 2 * MG_MAX_RANK, &np))
    return -1;
  if (ev_in(c, 3)) {
    if (ev_const_ints(c, 3, "pads_torch", axes, MG_MAX_RANK, &na) || normalise_axes(c, "pads_torch", axes, na, rank))
      return -1;
  } else {
    na = rank;
    for (int r = 0; r < rank; r++) axes[r] = r;
  }
  if (np != 2 * na) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "pads_torch: %d pads for %d axes", np, na);
  for (int i = 0; i < na; i++) begin[axes[i]] = pads[i], end[axes[i]] = pads[i + na];
  int64_t t[2 * MG_MAX_RANK];
  int n = 0;
  for (int r = rank - 1; r >= 0; r--) t[n++] = begin[r], t[n++] = end[r];
  while (n >= 2 && !t[n - 1] && !t[n - 2]) n -= 2;
  if (!c->ascend && n > 6)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "pads_torch: ops.pad pads at most 3 dims, this Pad pads %d", n / 2);
  return ev_set_ints(c, out, t, n);
}

/* A reduction's axes input, non-negative; omitted or empty: None (mindspore) or an
 * empty list (aclnn). */
int ev_reduce_axes(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t ax[MG_MAX_RANK];
  int n, rank;
  if (!ev_in(c, 1)) return c->ascend ? ev_set_ints(c, out, ax, 0) : (memset(out, 0, sizeof *out), 0);
  if (ev_const_ints(c, 1, "reduce_axes", ax, MG_MAX_RANK, &n) ||
      ev_rank_of(c, ev_need_in(c, 0, "reduce_axes"), "reduce_axes", &rank) ||
      normalise_axes(c, "reduce_axes", ax, n, rank))
    return -1;
  /* empty axes reduce every axis (the rules require noop_with_empty_axes 0): None */
  if (!n && !c->ascend) return memset(out, 0, sizeof *out), 0;
  return ev_set_ints(c, out, ax, n);
}

/* The output's static shape, for a value that can be read off it. */
static int out_dims(ev_ctx *c, const char *what, map_value *out) {
  int64_t dims[MG_MAX_RANK];
  int rank = 0;
  const mg_value *y = ev_out(c, 0);
  if (!y) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: the node has no output", what);
  return ev_static_dims(c, y, what, dims, &rank) ? -1 : ev_set_ints(c, out, dims, rank);
}

/* Reshape's target with 0 ('copy the input dim', allowzero 0) resolved; a
 * decomposition into Reshape (Flatten, Unsqueeze) reshapes to its output. */
int ev_reshape_shape(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  const mg_value *s = ev_in(c, 1);
  if (c->n->op != MG_OP_Reshape || !s || !s->data) return out_dims(c, "reshape_shape", out);
  int64_t t[MG_MAX_RANK];
  int n;
  if (ev_const_ints(c, 1, "reshape_shape", t, MG_MAX_RANK, &n)) return -1;
  const mg_attr *az = mg_node_attr(c->n, "allowzero");
  const mg_value *x = ev_in(c, 0);
  for (int i = 0; i < n && !(az && az->i); i++) {
    if (t[i]) continue;
    if (!x || x->shape.rank <= i || x->shape.d[i].v < 0)
      return ev_fail(c, MAP_DYNAMIC_SHAPE, "reshape_shape: target dim %d copies an input dim that is not static", i);
    t[i] = x->shape.d[i].v;
  }
  return ev_set_ints(c, out, t, n);
}

/* Expand's result: the bidirectional broadcast of shape(0) and const(1). */
int ev_expand_shape(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  const mg_value *x = ev_need_in(c, 0, "expand_shape"), *s = ev_in(c, 1);
  if (!x) return -1;
  if (!s || !s->data) return out_dims(c, "expand_shape", out);
  int64_t t[MG_MAX_RANK], r[MG_MAX_RANK];
  int n, rank;
  if (ev_const_ints(c, 1, "expand_shape", t, MG_MAX_RANK, &n) || ev_rank_of(c, x, "expand_shape", &rank)) return -1;
  int m = n > rank ? n : rank;
  for (int i = 0; i < m; i++) {
    int xi = i - (m - rank), ti = i - (m - n);
    int64_t a = xi >= 0 ? x->shape.d[xi].v : 1, b = ti >= 0 ? t[ti] : 1;
    if (b == 1 && a < 0) return ev_fail(c, MAP_DYNAMIC_SHAPE, "expand_shape: dim %d of '%s' is not static", xi, x->name);
    if (a != 1 && b != 1 && a >= 0 && a != b)
      return ev_fail(c, MAP_UNSUPPORTED_ATTR, "expand_shape: %lld does not broadcast to %lld", (long long)a, (long long)b);
    r[i] = b == 1 ? a : b;
  }
  return ev_set_ints(c, out, r, m);
}

/* Split's sizes: the split input, or ONNX's split over the outputs. */
int ev_split_sizes(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t sz[MG_SMALL];
  int n, rank;
  if (ev_in(c, 1)) return ev_const_ints(c, 1, "split_sizes", sz, MG_SMALL, &n) ? -1 : ev_set_ints(c, out, sz, n);
  const mg_value *x = ev_need_in(c, 0, "split_sizes");
  if (!x || ev_rank_of(c, x, "split_sizes", &rank)) return -1;
  const mg_attr *ax = mg_node_attr(c->n, "axis"), *no = mg_node_attr(c->n, "num_outputs");
  int64_t axis = ax ? ax->i : 0, parts = no ? no->i : c->n->n_out;
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || parts < 1 || parts > MG_SMALL)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "split_sizes: bad axis or output count");
  int64_t d = x->shape.d[axis].v;
  if (d < 0) return ev_fail(c, MAP_DYNAMIC_SHAPE, "split_sizes: dim %lld of '%s' is not static", (long long)axis, x->name);
  int64_t chunk = no ? (d + parts - 1) / parts : d / parts;
  if (!no && d % parts)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "split_sizes: %lld does not split into %lld equal parts", (long long)d,
                   (long long)parts);
  for (int64_t i = 0; i < parts; i++) sz[i] = i + 1 < parts ? chunk : d - chunk * (parts - 1);
  return ev_set_ints(c, out, sz, (int)parts);
}

/* Resize's output spatial dims: the sizes input, or floor(in * scale). */
int ev_resize_size(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t dims[MG_MAX_RANK], sz[MG_MAX_RANK];
  int rank, n;
  const mg_value *x = ev_need_in(c, 0, "resize_size"), *scales = ev_in(c, 2);
  if (!x || ev_rank_of(c, x, "resize_size", &rank)) return -1;
  if (rank < 2 || mg_node_attr(c->n, "axes")) {
    if (out_dims(c, "resize_size", out)) return -1;
    out->ints += 2, out->n -= 2;
    return 0;
  }
  if (ev_in(c, 3)) {
    if (ev_const_ints(c, 3, "resize_size", sz, MG_MAX_RANK, &n)) return -1;
    if (n != rank) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "resize_size: %d sizes for rank %d", n, rank);
    return ev_set_ints(c, out, sz + 2, rank - 2);
  }
  if (!scales || !scales->data) return ev_fail(c, MAP_DYNAMIC_SHAPE, "resize_size: neither sizes nor scales is a constant");
  size_t es = mg_dtype_size(scales->dtype);
  if (!es || scales->nbytes / es != (size_t)rank)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "resize_size: scales does not have %d values", rank);
  if (ev_static_dims(c, x, "resize_size", dims, &rank)) return -1;
  const char *ctm = mg_attr_str(c->n, "coordinate_transformation_mode", "half_pixel");
  for (int r = 2; r < rank; r++) {
    double scale = mg_load_f64(scales->dtype, (const char *)scales->data + (size_t)r * es);
    double exact = (double)dims[r] * scale;
    sz[r - 2] = (int64_t)exact;
    /* ONNX maps coordinates by the scale, an explicit size by in/out: the same
     * only when the scale gives a whole length (align_corners uses the lengths).
     * Both targets' calls take the size (aclnnUpsampleBilinear2d's rule passes its
     * scales as 0.0: derived from the sizes), so neither may take the node then. */
    if (exact != (double)sz[r - 2] && strcmp(ctm, "align_corners"))
      return ev_fail(c, MAP_UNSUPPORTED_ATTR,
                     "resize_size: scale %g of axis %d gives length %g, not whole: ONNX maps coordinates by the "
                     "scale, an output size maps them by the lengths' ratio", scale, r, exact);
  }
  return ev_set_ints(c, out, sz, rank - 2);
}

/* Gather's axis, non-negative, and the data input's rank. */
static int gather_axis(ev_ctx *c, const char *what, int *axis, int *rank) {
  if (ev_rank_of(c, ev_need_in(c, 0, what), what, rank)) return -1;
  const mg_attr *a = mg_node_attr(c->n, "axis");
  int64_t ax = a ? a->i : 0;
  if (ax < 0) ax += *rank;
  if (ax < 0 || ax >= *rank) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: axis out of range", what);
  *axis = (int)ax;
  return 0;
}

/* The decoded constant indices of ref, negatives made non-negative for axis dim d. */
static int normalise_indices(ev_ctx *c, map_ref *ref, int64_t d) {
  int64_t *iv = mg_arena_memdup(c->a, ref->ints, sizeof *iv * (size_t)(ref->n_elems + 1));
  if (!iv) return ev_oom(c);
  for (int64_t i = 0; i < ref->n_elems; i++) {
    if (iv[i] >= 0) continue;
    if (d < 0) return ev_fail(c, MAP_DYNAMIC_SHAPE, "gather_index: a negative index on an axis that is not static");
    iv[i] += d;
  }
  ref->ints = iv;
  return 0;
}

/* Gather's indices: constant negatives made non-negative; a 0-D index viewed as
 * [1] on aclnn. */
int ev_gather_index(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int axis, rank;
  const mg_value *idx = ev_need_in(c, 1, "gather_index");
  if (!idx || gather_axis(c, "gather_index", &axis, &rank)) return -1;
  if (!idx->data) {
    ev_set_ref(out, MAP_REF_INPUT, 1, idx);
  } else {
    map_value which;
    ev_set_int(&which, 1);
    if (ev_const(c, 1, &which, out)) return -1;
    if (out->ref.ints && normalise_indices(c, &out->ref, ev_in(c, 0)->shape.d[axis].v)) return -1;
  }
  int64_t one = 1;
  return c->ascend && idx->shape.rank == 0 ? ev_set_view(c, &out->ref, 1, &one, NULL, 0) : 0;
}

/* aclnn: output 0, viewed with the gathered axis kept when the index is 0-D. */
int ev_gather_out(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int axis, rank, orank;
  int64_t od[MG_MAX_RANK], view[MG_MAX_RANK];
  const mg_value *idx = ev_need_in(c, 1, "gather_out"), *y = ev_out(c, 0);
  if (!idx || gather_axis(c, "gather_out", &axis, &rank)) return -1;
  ev_set_ref(out, MAP_REF_OUTPUT, 0, y);
  if (!c->ascend || idx->shape.rank != 0) return 0;
  if (ev_static_dims(c, y, "gather_out", od, &orank)) return -1;
  for (int r = 0, k = 0; r <= orank; r++) view[r] = r == axis ? 1 : od[k++];
  return ev_set_view(c, &out->ref, orank + 1, view, NULL, 0);
}

/* Gemm's C viewed as 2-D; a (1,1) zero when omitted. */
int ev_gemm_c(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  const mg_value *cv = ev_in(c, 2), *a = ev_need_in(c, 0, "gemm_c");
  int64_t dims[MG_MAX_RANK], view[2] = {1, 1};
  int rank = 0;
  if (!a) return -1;
  if (!cv) {
    ev_set_ref(out, MAP_REF_ZEROS, 2, NULL);
    out->ref.dtype = a->dtype;
    return ev_set_view(c, &out->ref, 2, view, NULL, 0);
  }
  ev_set_ref(out, MAP_REF_INPUT, 2, cv);
  if (ev_rank_of(c, cv, "gemm_c", &rank)) return -1;
  if (rank == 2) return 0;
  if (rank > 2) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "gemm_c: C has rank %d", rank);
  if (ev_static_dims(c, cv, "gemm_c", dims, &rank)) return -1;
  if (rank == 1) view[1] = dims[0];
  return ev_set_view(c, &out->ref, 2, view, NULL, 0);
}

/* KEEP_DTYPE (exact parity), except a FLOAT convolution: aclnnConvolution's doc
 * refuses KEEP_DTYPE with FLOAT input on A2/A3 and its example passes 1
 * (ALLOW_FP32_DOWN_PRECISION, HF32 on those chips) (aclnn-api.json
 * aclnnConvolutionGetWorkspaceSize; docs/rules-notes.md J8). */
int ev_cube_math_type(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  const mg_value *x = c->n->n_in > 0 ? c->n->in[0] : NULL;
  ev_set_int(out, (c->n->op == MG_OP_Conv || c->n->op == MG_OP_ConvTranspose) && x && x->dtype == MG_F32 ? 1 : 0);
  return 0;
}

int slice_ranges(const mg_node *n, slice_range *out, int *n_out, map_status *st, char *why, size_t wn) {
  ev_ctx c = {.n = n, .why = why, .wn = wn};
  int64_t starts[MG_MAX_RANK], ends[MG_MAX_RANK], axes[MG_MAX_RANK], steps[MG_MAX_RANK];
  int ns, ne, na, nt, rank;
  const mg_value *x = ev_need_in(&c, 0, "Slice");
  if (!x || ev_rank_of(&c, x, "Slice", &rank) || ev_const_ints(&c, 1, "Slice starts", starts, MG_MAX_RANK, &ns) ||
      ev_const_ints(&c, 2, "Slice ends", ends, MG_MAX_RANK, &ne))
    goto fail;
  na = nt = ns;
  for (int i = 0; i < ns; i++) axes[i] = i, steps[i] = 1;
  if ((ev_in(&c, 3) && ev_const_ints(&c, 3, "Slice axes", axes, MG_MAX_RANK, &na)) ||
      (ev_in(&c, 4) && ev_const_ints(&c, 4, "Slice steps", steps, MG_MAX_RANK, &nt)) ||
      normalise_axes(&c, "Slice", axes, na, rank))
    goto fail;
  if (ne != ns || na != ns || nt != ns) {
    ev_fail(&c, MAP_UNSUPPORTED_ATTR, "Slice: starts, ends, axes and steps differ in length");
    goto fail;
  }
  for (int i = 0; i < ns; i++) {
    int64_t d = x->shape.d[axes[i]].v, s = starts[i], e = ends[i], k = steps[i];
    if (d < 0) {
      ev_fail(&c, MAP_DYNAMIC_SHAPE, "Slice: dim %lld of '%s' is not static", (long long)axes[i], x->name);
      goto fail;
    }
    if (!k) {
      ev_fail(&c, MAP_UNSUPPORTED_ATTR, "Slice: a step of 0");
      goto fail;
    }
    if (s < 0) s += d;
    if (e < 0) e += d;
    int64_t lo = k > 0 ? 0 : -1, hi = k > 0 ? d : d - 1;
    s = s < 0 ? 0 : s > hi ? hi : s;
    e = e < lo ? lo : e > hi ? hi : e;
    int64_t count = k > 0 ? (e - s + k - 1) / k : (s - e - k - 1) / -k;
    out[i] = (slice_range){(int)axes[i], s, k, count > 0 ? count : 0};
  }
  *n_out = ns;
  return 0;
fail:
  *st = c.status;
  return -1;
}

/* aclCreateTensor over input 0's buffer: the sliced strided view. */
int ev_slice_view(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  slice_range sr[MG_MAX_RANK];
  int64_t dims[MG_MAX_RANK], strides[MG_MAX_RANK], offset = 0;
  int n, rank;
  map_status st;
  const mg_value *x = ev_need_in(c, 0, "slice_view");
  if (!x || ev_static_dims(c, x, "slice_view", dims, &rank)) return -1;
  if (slice_ranges(c->n, sr, &n, &st, c->why, c->wn)) return ev_fail(c, st, "%s", c->why);
  int64_t step = 1;
  for (int r = rank - 1; r >= 0; r--) strides[r] = step, step *= dims[r] > 0 ? dims[r] : 1;
  for (int i = 0; i < n; i++) {
    if (sr[i].step < 0) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "slice_view: a negative step (strides are non-negative)");
    offset += sr[i].start * strides[sr[i].axis];
    strides[sr[i].axis] *= sr[i].step;
    dims[sr[i].axis] = sr[i].count;
  }
  ev_set_ref(out, MAP_REF_INPUT, 0, x);
  return ev_set_view(c, &out->ref, rank, dims, strides, offset);
}

/* aclnnDropout's maskOut: align(numel, 128) / 8 bytes. */
int ev_dropout_mask_scratch(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t dims[MG_MAX_RANK], numel = 1;
  int rank = 0;
  const mg_value *x = ev_need_in(c, 0, "dropout_mask_scratch");
  if (!x || ev_static_dims(c, x, "dropout_mask_scratch", dims, &rank)) return -1;
  for (int r = 0; r < rank; r++) numel *= dims[r];
  ev_set_ref(out, MAP_REF_SCRATCH, -1, NULL);
  out->ref.dtype = MG_U8;
  out->ref.scratch_bytes = (size_t)((numel + 127) / 128 * 128 / 8);
  return 0;
}

/* aclnnPrelu's weight (aclnn-api.json aclnnPreluGetWorkspaceSize: "weight element
 * count must be 1 or equal to channels (channels = self.shape[1] for rank>1, else
 * 1) - i.e. per-channel on dim 1 only; ONNX slopes that broadcast differently ...
 * need aclnnMul/aclnnMaximum decomposition"): the slope viewed 1-D, when it is one
 * element or per channel on dim 1 as ONNX broadcasts it (right-aligned). */
int ev_prelu_weight(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t xd[MG_MAX_RANK], sd[MG_MAX_RANK], numel = 1;
  int xr, sr;
  const mg_value *x = ev_need_in(c, 0, "prelu_weight"), *s = ev_need_in(c, 1, "prelu_weight");
  if (!x || !s || ev_static_dims(c, x, "prelu_weight", xd, &xr) || ev_static_dims(c, s, "prelu_weight", sd, &sr))
    return -1;
  for (int k = 0; k < sr; k++) numel *= sd[k];
  if (numel != 1) {
    int channel_axis = sr - (xr - 1); /* the slope's axis that lines up with input dim 1 */
    if (xr < 2 || channel_axis < 0 || sd[channel_axis] != xd[1])
      return ev_fail(c, MAP_UNSUPPORTED_ATTR, "prelu_weight: a slope of shape other than per channel on dim 1 "
                                             "(aclnnPrelu's weight is 1 or C elements)");
    for (int k = 0; k < sr; k++)
      if (k != channel_axis && sd[k] != 1)
        return ev_fail(c, MAP_UNSUPPORTED_ATTR, "prelu_weight: the slope varies along more than the channel axis");
  }
  ev_set_ref(out, MAP_REF_INPUT, 1, s);
  return ev_set_view(c, &out->ref, 1, &numel, NULL, 0);
}

int ev_spatial_numel(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t d[MG_MAX_RANK], numel = 1;
  int r;
  const mg_value *x = ev_need_in(c, 0, "spatial_numel");
  if (!x || ev_static_dims(c, x, "spatial_numel", d, &r)) return -1;
  for (int k = 2; k < r; k++) numel *= d[k];
  ev_set_int(out, numel);
  return 0;
}

/* aclnnGroupNorm's meanOut and rstdOut (aclnn-api.json
 * aclnnGroupNormGetWorkspaceSize: "REQUIRED ... with shape (N, group) and self's
 * dtype"), with group = C: scratch the program never reads. */
int ev_group_stats_scratch(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  int64_t d[MG_MAX_RANK];
  int r;
  const mg_value *x = ev_need_in(c, 0, "group_stats_scratch");
  if (!x || ev_static_dims(c, x, "group_stats_scratch", d, &r)) return -1;
  if (r < 2) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "group_stats_scratch: input of rank %d has no channel axis", r);
  ev_set_ref(out, MAP_REF_SCRATCH, -1, NULL);
  out->ref.dtype = x->dtype;
  out->ref.scratch_bytes = (size_t)(d[0] * d[1]) * mg_dtype_size(x->dtype);
  return ev_set_view(c, &out->ref, 2, d, NULL, 0);
}

/* lstm_gates_iofc_to_ifgo(X, D[, P]): a transform the weight writer applies; None
 * when X is an omitted input. */
int ev_lstm_gates_iofc_to_ifgo(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  if (argc < 2 || argc > 3 || (argv[0].kind != MV_TENSOR && argv[0].kind != MV_NONE) || argv[1].kind != MV_INT ||
      (argc == 3 && (argv[2].kind != MV_STRING || (strcmp(argv[2].s, "ih") && strcmp(argv[2].s, "hh")))))
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "lstm_gates_iofc_to_ifgo(X, D[, 'ih'|'hh']) in '%s'", c->expr);
  memset(out, 0, sizeof *out);
  if (argv[0].kind == MV_NONE) return 0;
  map_value *args = mg_arena_memdup(c->a, argv, sizeof *argv * (size_t)argc);
  if (!args) return ev_oom(c);
  out->kind = MV_TRANSFORM, out->s = "lstm_gates_iofc_to_ifgo", out->args = args, out->n = argc;
  return 0;
}
