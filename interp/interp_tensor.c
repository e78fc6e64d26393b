/* Shape and data-movement kernels: Shape, Size, Reshape, Flatten, (Un)Squeeze,
 * Transpose, Concat, Split, Slice, Pad, Tile, Expand, the Gather and Scatter ops,
 * Compress, NonZero, TopK, Unique, OneHot, DepthToSpace/SpaceToDepth, Trilu,
 * ReverseSequence, EyeLike, ConstantOfShape, Range and CenterCropPad.
 *
 * Moving data copies element bytes (mg_dtype_size each), never converts through
 * double, so int64 and every other dtype come through bit-exact. Only the ops that
 * compute (scatter reductions, Range, comparisons for TopK/Unique) read values. */
#include "interp_internal.h"
#include "slice_geom.h"
#include "pad_geom.h"
#include <math.h>
#include <string.h>

enum { WALK_MAX = 2 * MG_ARRAY_MAX_RANK };

/* Fills y, in row-major order of the walk shape dims[0..rank) (whose element count
 * is y's), from x's elements at base + sum(coord[d] * istr[d]). Transpose, Slice,
 * Expand, Tile and the space/depth shuffles are all such affine walks. */
static void walk_copy(mg_array *y, const mg_array *x, int rank, const int64_t *dims, int64_t base,
                      const int64_t *istr) {
  size_t es = mg_dtype_size(x->dtype);
  int64_t coord[WALK_MAX] = {0}, off = base, k = it_numel(y);
  for (int64_t i = 0; i < k; i++) {
    memcpy((unsigned char *)y->data + (size_t)i * es, (const unsigned char *)x->data + (size_t)off * es, es);
    for (int d = rank - 1; d >= 0; d--) {
      coord[d]++;
      off += istr[d];
      if (coord[d] < dims[d]) break;
      off -= istr[d] * dims[d];
      coord[d] = 0;
    }
  }
}

/* Shape: the dims [start, end) of the input as int64 (negative bounds count from
 * the end; both are clamped to [0, rank]). */
static int shape_op(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int64_t r = x->rank, s = mg_attr_int(n, "start", 0),
          e = mg_node_attr(n, "end") ? mg_attr_int(n, "end", r) : r;
  if (s < 0) s += r;
  if (e < 0) e += r;
  s = s < 0 ? 0 : s > r ? r : s;
  e = e < 0 ? 0 : e > r ? r : e;
  int64_t len = e > s ? e - s : 0;
  mg_array *y = it_out(c, n, out, 0, MG_I64, 1, &len);
  if (!y) return -1;
  for (int64_t i = 0; i < len; i++) it_set_i64(y, i, x->dims[s + i]);
  return 0;
}

/* Makes out[0] x's data under new dims (Reshape, Flatten, Squeeze, Unsqueeze). */
static int reshaped(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out, int rank,
                    const int64_t *dims) {
  mg_array *y = it_out(c, n, out, 0, x->dtype, rank, dims);
  if (!y) return -1;
  if (it_numel(y) != it_numel(x)) return it_fail(c, n, "cannot reshape %lld elements to %lld",
                                                  (long long)it_numel(x), (long long)it_numel(y));
  it_copy_elems(y, 0, x, 0, it_numel(x));
  return 0;
}

/* Reshape: a 0 copies the input's dim at that position (unless allowzero, when it
 * is a real 0); one -1 is inferred from the element count. */
static int reshape(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int64_t dims[MG_ARRAY_MAX_RANK], known = 1;
  int r = it_int_list(c, n, it_in(in, n, 1), "shape", dims), infer = -1;
  if (r < 0) return -1;
  int allowzero = mg_attr_int(n, "allowzero", 0) != 0;
  for (int i = 0; i < r; i++) {
    if (dims[i] == 0 && !allowzero) {
      if (i >= x->rank) return it_fail(c, n, "shape[%d] = 0 copies a dim the input lacks", i);
      dims[i] = x->dims[i];
    }
    if (dims[i] == -1) {
      if (infer >= 0) return it_fail(c, n, "more than one -1 in the shape");
      infer = i;
      continue;
    }
    if (dims[i] < 0) return it_fail(c, n, "bad shape value %lld", (long long)dims[i]);
    if (!mg_mul_i64(known, dims[i], &known)) return it_fail(c, n, "shape too large");
  }
  if (infer >= 0) {
    if (known == 0 || it_numel(x) % known) return it_fail(c, n, "cannot infer the -1 dimension");
    dims[infer] = it_numel(x) / known;
  }
  return reshaped(c, n, x, out, r, dims);
}

/* Flatten at axis (in [-r, r]) into [prod(dims[:axis]), prod(dims[axis:])]. */
static int flatten(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int64_t a = mg_attr_int(n, "axis", 1), d[2] = {1, 1};
  if (a < -x->rank || a > x->rank) return it_fail(c, n, "axis %lld out of range", (long long)a);
  if (a < 0) a += x->rank;
  for (int i = 0; i < x->rank; i++) d[i >= a] *= x->dims[i];
  return reshaped(c, n, x, out, 2, d);
}

/* Squeeze the listed axes (each must be 1), or every 1 when input 1 is omitted. */
static int squeeze(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int drop[MG_ARRAY_MAX_RANK] = {0}, r = 0;
  const mg_array *ax = it_in(in, n, 1);
  if (ax) {
    int64_t axes[MG_ARRAY_MAX_RANK];
    int na = it_int_list(c, n, ax, "axes", axes);
    if (na < 0) return -1;
    for (int i = 0; i < na; i++) {
      int a = 0;
      if (it_norm_axis(c, n, axes[i], x->rank, &a)) return -1;
      if (x->dims[a] != 1)
        return it_fail(c, n, "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
      drop[a] = 1;
    }
  } else {
    for (int d = 0; d < x->rank; d++) drop[d] = x->dims[d] == 1;
  }
  int64_t dims[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    if (!drop[d]) dims[r++] = x->dims[d];
  return reshaped(c, n, x, out, r, dims);
}

/* Unsqueeze: inserts 1s at the listed axes of the output (negative ones count
 * from the output's end); repeated axes are an error. */
static int unsqueeze(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int64_t axes[MG_ARRAY_MAX_RANK], dims[MG_ARRAY_MAX_RANK];
  int na = it_int_list(c, n, it_in(in, n, 1), "axes", axes);
  if (na < 0) return -1;
  int r = x->rank + na, ins[MG_ARRAY_MAX_RANK] = {0};
  if (r > MG_ARRAY_MAX_RANK) return it_fail(c, n, "output rank %d is too large", r);
  for (int i = 0; i < na; i++) {
    int a = 0;
    if (it_norm_axis(c, n, axes[i], r, &a)) return -1;
    if (ins[a]) return it_fail(c, n, "axis %lld is repeated", (long long)axes[i]);
    ins[a] = 1;
  }
  for (int d = 0, s = 0; d < r; d++) dims[d] = ins[d] ? 1 : x->dims[s++];
  return reshaped(c, n, x, out, r, dims);
}

/* Transpose by perm (default: reversed axes); perm must be a permutation. */
static int transpose(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  const int64_t *p = NULL;
  int64_t perm[MG_ARRAY_MAX_RANK], dims[MG_ARRAY_MAX_RANK], xs[MG_ARRAY_MAX_RANK], is[MG_ARRAY_MAX_RANK];
  size_t np = mg_attr_ints(n, "perm", &p);
  int r = x->rank, seen[MG_ARRAY_MAX_RANK] = {0};
  if (mg_node_attr(n, "perm") && (int)np != r) return it_fail(c, n, "perm has %zu entries for rank %d", np, r);
  for (int d = 0; d < r; d++) {
    perm[d] = mg_node_attr(n, "perm") ? p[d] : r - 1 - d;
    if (perm[d] < 0 || perm[d] >= r || seen[perm[d]]++) return it_fail(c, n, "perm is not a permutation");
  }
  it_strides(r, x->dims, xs);
  for (int d = 0; d < r; d++) dims[d] = x->dims[perm[d]], is[d] = xs[perm[d]];
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  walk_copy(y, x, r, dims, 0, is);
  return 0;
}

/* Concat along axis: all inputs share dtype, rank and every other dim. */
static int concat(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *x0 = it_in(in, n, 0);
  if (!mg_node_attr(n, "axis")) return it_fail(c, n, "missing axis attribute");
  int axis = 0;
  if (x0->rank == 0) return it_fail(c, n, "cannot concatenate scalars");
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x0->rank, &axis)) return -1;
  int64_t dims[MG_ARRAY_MAX_RANK];
  memcpy(dims, x0->dims, sizeof dims);
  dims[axis] = 0;
  for (int i = 0; i < n->n_in; i++) {
    const mg_array *t = it_in(in, n, i);
    if (!t) return it_fail(c, n, "input %d is missing", i);
    if (t->dtype != x0->dtype || t->rank != x0->rank)
      return it_fail(c, n, "input %d's dtype or rank differs", i);
    for (int d = 0; d < t->rank; d++)
      if (d != axis && t->dims[d] != x0->dims[d]) return it_fail(c, n, "input %d's dims do not match", i);
    dims[axis] += t->dims[axis];
  }
  mg_array *y = it_out(c, n, out, 0, x0->dtype, x0->rank, dims);
  if (!y) return -1;
  int64_t outer, len, inner, pos = 0;
  it_split_dims(y, axis, &outer, &len, &inner);
  for (int64_t o = 0; o < outer; o++)
    for (int i = 0; i < n->n_in; i++) {
      const mg_array *t = it_in(in, n, i);
      int64_t blk = t->dims[axis] * inner;
      it_copy_elems(y, pos, t, o * blk, blk);
      pos += blk;
    }
  return 0;
}

/* Split along axis into the node's outputs: by input 1's sizes (which must sum to
 * the dim), else into equal chunks of ceil(dim / count), the last one smaller
 * (count being num_outputs, or the number of outputs). */
static int split(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int axis = 0, no = n->n_out;
  if (x->rank == 0) return it_fail(c, n, "cannot split a scalar");
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
  const mg_array *sp = it_in(in, n, 1);
  int64_t outer, len, inner;
  it_split_dims(x, axis, &outer, &len, &inner);
  int64_t *sizes = mg_malloc(sizeof(int64_t) * (size_t)(no + 1));
  if (!sizes) return it_fail(c, n, "out of memory");
  int rc = 0;
  if (sp && it_numel(sp) > 0) {
    int64_t sum = 0;
    if (it_numel(sp) != no)
      rc = it_fail(c, n, "split has %lld sizes for %d outputs", (long long)it_numel(sp), no);
    for (int i = 0; i < no && !rc; i++) {
      sizes[i] = it_get_i64(sp, i);
      if (sizes[i] < 0 || sizes[i] > len) rc = it_fail(c, n, "bad split size %lld", (long long)sizes[i]);
      else sum += sizes[i];
    }
    if (!rc && sum != len)
      rc = it_fail(c, n, "split sizes sum to %lld, not %lld", (long long)sum, (long long)len);
  } else {
    int64_t cnt = mg_attr_int(n, "num_outputs", no);
    if (cnt != no) rc = it_fail(c, n, "num_outputs %lld differs from the %d outputs", (long long)cnt, no);
    int64_t chunk = no ? (len + no - 1) / no : 0;
    for (int i = 0; i < no; i++) {
      int64_t left = len - chunk * i;
      sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
    }
  }
  for (int i = 0; i < no && !rc; i++) {
    int64_t start = 0;
    for (int j = 0; j < i; j++) start += sizes[j];
    if (!out[i]) continue;
    int64_t dims[MG_ARRAY_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = sizes[i];
    mg_array *y = it_out(c, n, out, i, x->dtype, x->rank, dims);
    if (!y) rc = -1;
    for (int64_t o = 0; o < outer && !rc; o++)
      it_copy_elems(y, o * sizes[i] * inner, x, (o * len + start) * inner, sizes[i] * inner);
  }
  mg_free(sizes);
  return rc;
}

/* Slice by starts/ends (inputs 1, 2), optional axes and steps (3, 4). Bounds follow
 * the ONNX spec: negatives add the dim, then positive steps clamp both to [0, dim],
 * negative steps clamp start to [0, dim-1] and end to [-1, dim-1]. */
static int slice(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int64_t st[MG_ARRAY_MAX_RANK], en[MG_ARRAY_MAX_RANK], ax[MG_ARRAY_MAX_RANK], sp[MG_ARRAY_MAX_RANK];
  int ns = it_int_list(c, n, it_in(in, n, 1), "starts", st);
  int ne = ns < 0 ? -1 : it_int_list(c, n, it_in(in, n, 2), "ends", en);
  if (ns < 0 || ne < 0) return -1;
  if (ns != ne) return it_fail(c, n, "starts and ends differ in length");
  int r = x->rank;
  if (it_in(in, n, 3)) {
    int na = it_int_list(c, n, it_in(in, n, 3), "axes", ax);
    if (na < 0) return -1;
    if (na != ns) return it_fail(c, n, "axes length differs from starts");
  } else {
    if (ns > r) return it_fail(c, n, "more starts than the input's rank");
    for (int i = 0; i < ns; i++) ax[i] = i;
  }
  if (it_in(in, n, 4)) {
    int nsp = it_int_list(c, n, it_in(in, n, 4), "steps", sp);
    if (nsp < 0) return -1;
    if (nsp != ns) return it_fail(c, n, "steps length differs from starts");
  } else {
    for (int i = 0; i < ns; i++) sp[i] = 1;
  }
  int64_t start[MG_ARRAY_MAX_RANK], step[MG_ARRAY_MAX_RANK], dims[MG_ARRAY_MAX_RANK], xs[MG_ARRAY_MAX_RANK];
  int seen[MG_ARRAY_MAX_RANK] = {0};
  for (int d = 0; d < r; d++) start[d] = 0, step[d] = 1, dims[d] = x->dims[d];
  for (int i = 0; i < ns; i++) {
    int a = 0;
    if (it_norm_axis(c, n, ax[i], r, &a)) return -1;
    if (seen[a]++) return it_fail(c, n, "axis %lld is repeated", (long long)ax[i]);
    int64_t s, k = sp[i], cnt;
    if (mg_slice_axis(x->dims[a], st[i], en[i], k, &s, &cnt)) return it_fail(c, n, "step cannot be 0");
    start[a] = s, dims[a] = cnt;
    step[a] = cnt > 1 ? k : 0; /* a single element never steps (and huge steps would overflow) */
  }
  it_strides(r, x->dims, xs);
  int64_t base = 0, is[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < r; d++) {
    if (dims[d] > 0) base += start[d] * xs[d];
    is[d] = step[d] * xs[d];
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  walk_copy(y, x, r, dims, base, is);
  return 0;
}

/* Pad with pads (input 1: begins then ends, over `axes` (input 3) or all axes) in
 * mode constant (input 2's value, default 0), reflect, edge or wrap. Negative pads
 * crop first; the non-constant modes then extend the cropped tensor. */
static int pad(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const char *mode = mg_attr_str(n, "mode", "constant");
  int m = mg_pad_mode(mode);
  if (m < 0) {
    mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "pad mode '%s'", mode);
    return -1;
  }
  int r = x->rank, na = r;
  int64_t axes[MG_ARRAY_MAX_RANK], pb[MG_ARRAY_MAX_RANK] = {0}, pe[MG_ARRAY_MAX_RANK] = {0};
  if (it_in(in, n, 3) && (na = it_int_list(c, n, it_in(in, n, 3), "axes", axes)) < 0) return -1;
  if (!it_in(in, n, 3))
    for (int i = 0; i < r; i++) axes[i] = i;
  const mg_array *pads = it_in(in, n, 1);
  if (!pads || pads->rank > 1 || it_numel(pads) != 2 * na)
    return it_fail(c, n, "pads must hold %d values", 2 * na);
  int seen[MG_ARRAY_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) {
    int a = 0;
    if (it_norm_axis(c, n, axes[i], r, &a)) return -1;
    if (seen[a]++) return it_fail(c, n, "axis %lld is repeated", (long long)axes[i]);
    pb[a] = it_get_i64(pads, i), pe[a] = it_get_i64(pads, na + i);
  }
  int64_t dims[MG_ARRAY_MAX_RANK], cs[MG_ARRAY_MAX_RANK], cl[MG_ARRAY_MAX_RANK], xs[MG_ARRAY_MAX_RANK];
  int64_t total = 0;
  for (int d = 0; d < r; d++) {
    int64_t dim = x->dims[d];
    if (pb[d] < -dim || pe[d] < -dim || pb[d] > ((int64_t)1 << 40) || pe[d] > ((int64_t)1 << 40))
      return it_fail(c, n, "pads out of range for axis %d", d);
    dims[d] = dim + pb[d] + pe[d];
    if (dims[d] < 0) return it_fail(c, n, "pads crop axis %d below zero", d);
    mg_pad_crop(dim, pb[d], pe[d], &cs[d], &cl[d]); /* the cropped region */
    if (m != MG_PADM_CONSTANT && cl[d] == 0 && dims[d] > 0) return it_fail(c, n, "mode %s cannot pad an empty axis", mode);
    total += dims[d];
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  const mg_array *cv = it_in(in, n, 2);
  if (cv && it_numel(cv) > 0 && cv->dtype != x->dtype) return it_fail(c, n, "constant_value's dtype differs");
  if (it_numel(y) == 0) return 0; /* nothing to fill (and the maps below could be huge) */
  /* Per axis, the input index of each output index (-1: the constant). */
  int64_t *map = mg_malloc(sizeof(int64_t) * (size_t)(total + 1)), *mp[MG_ARRAY_MAX_RANK];
  if (!map) return it_fail(c, n, "out of memory");
  int64_t at = 0;
  for (int d = 0; d < r; at += dims[d], d++) {
    mp[d] = map + at;
    int64_t L = cl[d], lead = pb[d] > 0 ? pb[d] : 0;
    for (int64_t o = 0; o < dims[d]; o++) {
      int64_t t = mg_pad_source(m, o, lead, L);
      mp[d][o] = t < 0 ? -1 : cs[d] + t;
    }
  }
  it_strides(r, x->dims, xs);
  int64_t coord[MG_ARRAY_MAX_RANK] = {0}, k = it_numel(y);
  for (int64_t i = 0; i < k; i++) {
    int64_t off = 0;
    int outside = 0;
    for (int d = 0; d < r; d++) {
      int64_t v = mp[d][coord[d]];
      if (v < 0) outside = 1;
      off += v * xs[d];
    }
    if (!outside) it_copy_elems(y, i, x, off, 1);
    else if (cv && it_numel(cv) > 0) it_copy_elems(y, i, cv, 0, 1);
    for (int d = r - 1; d >= 0; d--) {
      if (++coord[d] < dims[d]) break;
      coord[d] = 0;
    }
  }
  mg_free(map);
  return 0;
}

/* Tile by repeats (input 1, one per axis): a walk over (repeat, index) pairs. */
static int tile(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int64_t rep[MG_ARRAY_MAX_RANK], dims[MG_ARRAY_MAX_RANK], xs[MG_ARRAY_MAX_RANK];
  int64_t wd[WALK_MAX], ws[WALK_MAX];
  int nr = it_int_list(c, n, it_in(in, n, 1), "repeats", rep);
  if (nr < 0) return -1;
  if (nr != x->rank) return it_fail(c, n, "repeats has %d values for rank %d", nr, x->rank);
  it_strides(x->rank, x->dims, xs);
  for (int d = 0; d < x->rank; d++) {
    if (rep[d] < 0 || !mg_mul_i64(x->dims[d], rep[d], &dims[d]))
      return it_fail(c, n, "bad repeat %lld", (long long)rep[d]);
    wd[2 * d] = rep[d], ws[2 * d] = 0;
    wd[2 * d + 1] = x->dims[d], ws[2 * d + 1] = xs[d];
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, dims);
  if (!y) return -1;
  walk_copy(y, x, 2 * x->rank, wd, 0, ws);
  return 0;
}

/* Expand: numpy-broadcasts x against the shape of input 1. */
static int expand(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  mg_array shape = {0};
  int ns = it_int_list(c, n, it_in(in, n, 1), "shape", shape.dims);
  if (ns < 0) return -1;
  shape.rank = ns;
  for (int i = 0; i < ns; i++)
    if (shape.dims[i] < 0) return it_fail(c, n, "bad shape value %lld", (long long)shape.dims[i]);
  const mg_array *ts[2] = {x, &shape};
  int r;
  int64_t dims[MG_ARRAY_MAX_RANK], is[MG_ARRAY_MAX_RANK];
  if (it_broadcast(ts, 2, &r, dims)) return it_fail(c, n, "shape does not broadcast with the input");
  it_bcast_strides(x, r, dims, is);
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  walk_copy(y, x, r, dims, 0, is);
  return 0;
}

/* OneHot: a new axis of size depth holding values[1] at each index (negative ones
 * count from depth) and values[0] elsewhere; out-of-range indices give a row of
 * off values. */
static int onehot(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *dep = it_in(in, n, 1), *vals = it_in(in, n, 2);
  if (!dep || it_numel(dep) != 1) return it_fail(c, n, "depth must hold one value");
  if (!vals || it_numel(vals) != 2) return it_fail(c, n, "values must hold two values");
  int64_t depth = it_get_i64(dep, 0); /* floats truncate (saturating, NaN as 0) */
  if (depth < 0) return it_fail(c, n, "negative depth");
  int r = x->rank + 1, axis = 0;
  if (r > MG_ARRAY_MAX_RANK) return it_fail(c, n, "output rank too large");
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", -1), r, &axis)) return -1;
  int64_t dims[MG_ARRAY_MAX_RANK], outer = 1, inner = 1;
  for (int d = 0, s = 0; d < r; d++) dims[d] = d == axis ? depth : x->dims[s++];
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis; d < x->rank; d++) inner *= x->dims[d];
  mg_array *y = it_out(c, n, out, 0, vals->dtype, r, dims);
  if (!y) return -1;
  int64_t k = it_numel(y);
  for (int64_t i = 0; i < k; i++) it_copy_elems(y, i, vals, 0, 1);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t e = o * inner + i;
      int64_t v = it_get_i64(x, e);
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) it_copy_elems(y, (o * depth + v) * inner + i, vals, 1, 1);
    }
  return 0;
}

/* DepthToSpace (DCR or CRD) and SpaceToDepth on NCHW: 6-D transposes of reshapes,
 * done as one strided walk over the output. */
static int space_depth(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int64_t b = mg_attr_int(n, "blocksize", 0);
  if (x->rank != 4) return it_fail(c, n, "input must be 4-D");
  int64_t bb;
  if (b <= 0 || !mg_mul_i64(b, b, &bb)) return it_fail(c, n, "bad blocksize %lld", (long long)b);
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3], dims[4], wd[6], ws[6];
  if (n->op == MG_OP_DepthToSpace) {
    if (C % bb) return it_fail(c, n, "channels %lld not divisible by blocksize^2", (long long)C);
    int64_t Cp = C / bb;
    const char *mode = mg_attr_str(n, "mode", "DCR");
    int crd = !strcmp(mode, "CRD");
    if (!crd && strcmp(mode, "DCR")) {
      mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "mode '%s'", mode);
      return -1;
    }
    dims[0] = N, dims[1] = Cp, dims[2] = H * b, dims[3] = W * b;
    /* walk [N, C', H, b1, W, b2] */
    int64_t w6[6] = {N, Cp, H, b, W, b};
    int64_t sC = crd ? b * b * H * W : H * W, s1 = crd ? b * H * W : b * Cp * H * W,
            s2 = crd ? H * W : Cp * H * W;
    int64_t s6[6] = {C * H * W, sC, W, s1, 1, s2};
    memcpy(wd, w6, sizeof w6), memcpy(ws, s6, sizeof s6);
  } else {
    if (H % b || W % b) return it_fail(c, n, "spatial dims not divisible by blocksize");
    if (!mg_mul_i64(C, bb, &dims[1])) return it_fail(c, n, "output too large");
    dims[0] = N, dims[2] = H / b, dims[3] = W / b;
    /* walk [N, b1, b2, C, H', W'] */
    int64_t w6[6] = {N, b, b, C, H / b, W / b};
    int64_t s6[6] = {C * H * W, W, 1, H * W, b * W, b};
    memcpy(wd, w6, sizeof w6), memcpy(ws, s6, sizeof s6);
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, 4, dims);
  if (!y) return -1;
  walk_copy(y, x, 6, wd, 0, ws);
  return 0;
}

/* Trilu: keeps the upper (j - i >= k) or lower (j - i <= k) triangle of the last
 * two axes, zeroing the rest; k is input 1 (default 0). */
static int trilu(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int64_t k = 0;
  if (it_in(in, n, 1) && it_scalar_int(c, n, it_in(in, n, 1), "k", &k)) return -1;
  if (x->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  int upper = mg_attr_int(n, "upper", 1) != 0;
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  int64_t R = x->dims[x->rank - 2], C = x->dims[x->rank - 1], mats = R * C != 0 ? it_numel(x) / (R * C) : 0;
  for (int64_t m = 0; m < mats; m++)
    for (int64_t i = 0; i < R; i++)
      for (int64_t j = 0; j < C; j++) {
        int keep = upper ? j - i >= k : j - i <= k;
        if (keep) it_copy_elems(y, (m * R + i) * C + j, x, (m * R + i) * C + j, 1);
      }
  return 0;
}

/* ReverseSequence: for each batch entry b, reverses the first sequence_lens[b]
 * steps along time_axis; batch_axis and time_axis are 0 and 1 in some order. */
static int reverse_seq(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *lens = it_in(in, n, 1);
  int64_t ba = mg_attr_int(n, "batch_axis", 1), ta = mg_attr_int(n, "time_axis", 0);
  if (x->rank < 2) return it_fail(c, n, "input must have rank >= 2");
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return it_fail(c, n, "batch_axis and time_axis must be 0 and 1");
  int64_t B = x->dims[ba], T = x->dims[ta], inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  if (!lens || lens->rank != 1 || lens->dims[0] != B)
    return it_fail(c, n, "sequence_lens must have one entry per batch");
  mg_array *y = it_out(c, n, out, 0, x->dtype, x->rank, x->dims);
  if (!y) return -1;
  for (int64_t b = 0; b < B; b++) {
    int64_t L = it_get_i64(lens, b);
    if (L < 0 || L > T) return it_fail(c, n, "sequence length %lld out of range", (long long)L);
    for (int64_t t = 0; t < T; t++) {
      int64_t src = t < L ? L - 1 - t : t;
      int64_t yo = (ta == 0 ? t * B + b : b * T + t) * inner,
              xo = (ta == 0 ? src * B + b : b * T + src) * inner;
      it_copy_elems(y, yo, x, xo, inner);
    }
  }
  return 0;
}

/* EyeLike: a 2-D tensor of x's shape with ones on diagonal k, of dtype `dtype`
 * (default x's). */
static int eyelike(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  if (x->rank != 2) return it_fail(c, n, "input must be 2-D");
  int64_t dt = mg_attr_int(n, "dtype", x->dtype), k = mg_attr_int(n, "k", 0);
  if (!mg_dtype_valid((int)dt) || !mg_dtype_size((mg_dtype)dt) || dt == MG_C64 || dt == MG_C128) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "dtype %lld", (long long)dt);
    return -1;
  }
  mg_array *y = it_out(c, n, out, 0, (mg_dtype)dt, 2, x->dims);
  if (!y) return -1;
  for (int64_t i = 0; i < x->dims[0]; i++)
    if (k > -x->dims[0] && k < x->dims[1] && i + k >= 0 && i + k < x->dims[1])
      it_set_i64(y, i * x->dims[1] + i + k, 1);
  return 0;
}

/* ConstantOfShape: a tensor of the given shape (empty shape: a scalar) filled with
 * the one-element `value` attribute (default float32 0). */
static int const_of_shape(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int64_t dims[MG_ARRAY_MAX_RANK];
  int r = it_int_list(c, n, x, "shape", dims);
  if (r < 0) return -1;
  for (int i = 0; i < r; i++)
    if (dims[i] < 0) return it_fail(c, n, "negative dim %lld", (long long)dims[i]);
  const mg_attr *a = mg_node_attr(n, "value");
  mg_dtype dt = MG_F32;
  const void *val = NULL;
  if (a && a->kind == MG_ATTR_TENSOR && a->t) {
    dt = a->t->dtype;
    if (!mg_dtype_size(dt)) {
      mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "value of dtype %s", mg_dtype_name(dt));
      return -1;
    }
    if (!a->t->data || a->t->nbytes < mg_dtype_size(dt)) return it_fail(c, n, "value must hold one element");
    val = a->t->data;
  }
  mg_array *y = it_out(c, n, out, 0, dt, r, dims);
  if (!y) return -1;
  int64_t k = it_numel(y);
  size_t es = mg_dtype_size(dt);
  if (val)
    for (int64_t i = 0; i < k; i++) memcpy(it_elem_ptr(y, i), val, es);
  return 0;
}

/* Range: start, start + delta, ... up to (excluding) limit; ceil((limit - start) /
 * delta) elements (at least 0) of start's dtype. Integers step exactly in int64. */
static int range(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *s = it_in(in, n, 0), *l = it_in(in, n, 1), *d = it_in(in, n, 2);
  if (!s || !l || !d || it_numel(s) != 1 || it_numel(l) != 1 || it_numel(d) != 1)
    return it_fail(c, n, "start, limit and delta must be scalars");
  int64_t cnt;
  if (it_is_float(s->dtype)) {
    double a = it_get_f64(s, 0), b = it_get_f64(l, 0), st = it_get_f64(d, 0);
    if (st == 0 || isnan(st) || isnan(a) || isnan(b))
      return it_fail(c, n, "delta must be nonzero and values numbers");
    double q = ceil((b - a) / st);
    if (!(q < 1e15)) return it_fail(c, n, "range too large");
    cnt = q > 0 ? (int64_t)q : 0;
    mg_array *y = it_out(c, n, out, 0, s->dtype, 1, &cnt);
    if (!y) return -1;
    for (int64_t i = 0; i < cnt; i++) it_set_f64(y, i, a + (double)i * st);
    return 0;
  }
  int64_t a = it_get_i64(s, 0), b = it_get_i64(l, 0), st = it_get_i64(d, 0), diff;
  if (st == 0) return it_fail(c, n, "delta must be nonzero");
  if (__builtin_sub_overflow(b, a, &diff)) return it_fail(c, n, "range too large");
  if ((diff > 0) != (st > 0) || diff == 0) cnt = 0;
  else if (st > 0) cnt = (diff - 1) / st + 1;
  else cnt = (int64_t)(((uint64_t)0 - (uint64_t)diff - 1) / ((uint64_t)0 - (uint64_t)st)) + 1;
  mg_array *y = it_out(c, n, out, 0, s->dtype, 1, &cnt);
  if (!y) return -1;
  for (int64_t i = 0; i < cnt; i++) it_set_i64(y, i, (int64_t)((uint64_t)a + (uint64_t)i * (uint64_t)st));
  return 0;
}

/* CenterCropPad: crops or zero-pads each listed axis (all when `axes` is absent) to
 * the target length, centred; the odd element goes to the end (floor offsets). */
static int center_crop_pad(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in,
                           mg_rvalue **out) {
  int64_t tgt[MG_ARRAY_MAX_RANK], dims[MG_ARRAY_MAX_RANK];
  int64_t xoff[MG_ARRAY_MAX_RANK] = {0}, yoff[MG_ARRAY_MAX_RANK] = {0}; /* crop and pad offsets */
  int nt = it_int_list(c, n, it_in(in, n, 1), "shape", tgt), r = x->rank;
  if (nt < 0) return -1;
  const int64_t *axes = NULL;
  size_t na = mg_attr_ints(n, "axes", &axes);
  int has = mg_node_attr(n, "axes") != NULL;
  if ((has ? (int)na : r) != nt) return it_fail(c, n, "shape has %d values for %d axes", nt, has ? (int)na : r);
  memcpy(dims, x->dims, sizeof dims);
  int seen[MG_ARRAY_MAX_RANK] = {0};
  for (int i = 0; i < nt; i++) {
    int a = i;
    if (has && it_norm_axis(c, n, axes[i], r, &a)) return -1;
    if (seen[a]++) return it_fail(c, n, "axis repeated");
    if (tgt[i] < 0) return it_fail(c, n, "negative target length");
    dims[a] = tgt[i];
    if (tgt[i] < x->dims[a]) xoff[a] = (x->dims[a] - tgt[i]) / 2;
    else yoff[a] = (tgt[i] - x->dims[a]) / 2;
  }
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  /* Walk the overlap region and copy each element. */
  int64_t ov[MG_ARRAY_MAX_RANK], xs[MG_ARRAY_MAX_RANK], ys[MG_ARRAY_MAX_RANK];
  int64_t coord[MG_ARRAY_MAX_RANK] = {0}, tot = 1;
  for (int d = 0; d < r; d++) ov[d] = dims[d] < x->dims[d] ? dims[d] : x->dims[d], tot *= ov[d];
  it_strides(r, x->dims, xs);
  it_strides(r, dims, ys);
  for (int64_t i = 0; i < tot; i++) {
    int64_t xo = 0, yo = 0;
    for (int d = 0; d < r; d++) xo += (coord[d] + xoff[d]) * xs[d], yo += (coord[d] + yoff[d]) * ys[d];
    it_copy_elems(y, yo, x, xo, 1);
    for (int d = r - 1; d >= 0; d--) {
      if (++coord[d] < ov[d]) break;
      coord[d] = 0;
    }
  }
  return 0;
}

/* Whether input i of n is only moved as bytes, never read as a number: such inputs
 * may have any fixed-size dtype, complex included; the others (indices, shapes,
 * values that are compared or computed with) must be real, because the element
 * readers have no meaning for complex numbers. */
static int moved_only(const mg_node *n, int i) {
  switch (n->op) {
  case MG_OP_Concat: return 1;
  case MG_OP_Pad: return i == 0 || i == 2;
  case MG_OP_ScatterElements: case MG_OP_ScatterND:
    return (i == 0 || i == 2) && !strcmp(mg_attr_str(n, "reduction", "none"), "none");
  case MG_OP_OneHot: return i == 2;
  case MG_OP_NonZero: case MG_OP_TopK: case MG_OP_Unique: case MG_OP_Range: case MG_OP_ConstantOfShape:
    return 0;
  default: return i == 0;
  }
}

int interp_tensor(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                  interp_frame *frame) {
  (void)frame;
  const mg_array *x = it_in(in, n, 0);
  if (!x) return it_fail(c, n, "input 0 is missing or not a tensor");
  if (n->op == MG_OP_Shape) return shape_op(c, n, x, out);
  if (n->op == MG_OP_Size) {
    mg_array *y = it_out(c, n, out, 0, MG_I64, 0, NULL);
    if (!y) return -1;
    it_set_i64(y, 0, it_numel(x));
    return 0;
  }
  /* Every other op moves element bytes: strings (no fixed size) are not supported,
   * and complex numbers only where they are moved, not read. */
  for (int i = 0; i < n->n_in; i++) {
    const mg_array *t = it_in(in, n, i);
    int cplx = t && (t->dtype == MG_C64 || t->dtype == MG_C128);
    if (t && (!mg_dtype_size(t->dtype) || (cplx && !moved_only(n, i)))) {
      mg_error(c->d, UNSUPPORTED_DTYPE, n->name, n->op_type, "%s with a %s input %d is not supported",
               n->op_type, mg_dtype_name(t->dtype), i);
      return -1;
    }
  }
  switch (n->op) {
  case MG_OP_Reshape: return reshape(c, n, x, in, out);
  case MG_OP_Flatten: return flatten(c, n, x, out);
  case MG_OP_Squeeze: return squeeze(c, n, x, in, out);
  case MG_OP_Unsqueeze: return unsqueeze(c, n, x, in, out);
  case MG_OP_Transpose: return transpose(c, n, x, out);
  case MG_OP_Concat: return concat(c, n, in, out);
  case MG_OP_Split: return split(c, n, x, in, out);
  case MG_OP_Slice: return slice(c, n, x, in, out);
  case MG_OP_Pad: return pad(c, n, x, in, out);
  case MG_OP_Tile: return tile(c, n, x, in, out);
  case MG_OP_Expand: return expand(c, n, x, in, out);
  case MG_OP_Gather: case MG_OP_GatherElements: case MG_OP_ScatterElements: case MG_OP_GatherND:
  case MG_OP_ScatterND: case MG_OP_Compress: case MG_OP_NonZero: case MG_OP_TopK: case MG_OP_Unique:
    return interp_tensor_index(c, n, x, in, out);
  case MG_OP_OneHot: return onehot(c, n, x, in, out);
  case MG_OP_DepthToSpace: case MG_OP_SpaceToDepth: return space_depth(c, n, x, out);
  case MG_OP_Trilu: return trilu(c, n, x, in, out);
  case MG_OP_ReverseSequence: return reverse_seq(c, n, x, in, out);
  case MG_OP_EyeLike: return eyelike(c, n, x, out);
  case MG_OP_ConstantOfShape: return const_of_shape(c, n, x, out);
  case MG_OP_Range: return range(c, n, in, out);
  case MG_OP_CenterCropPad: return center_crop_pad(c, n, x, in, out);
  default:
    mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "the interpreter does not implement %s", n->op_type);
    return -1;
  }
}
