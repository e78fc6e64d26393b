/* The interpreter's indexing kernels of the tensor family: Gather, GatherElements
 * and ScatterElements, GatherND and ScatterND, Compress, NonZero, TopK (a stable
 * merge sort) and Unique. The data-movement kernels are in interp_tensor.c. */
#include "interp_internal.h"
#include <math.h>
#include <string.h>

/* Index v into an axis of size dim (negatives count from the end); -1 after a
 * diagnostic when out of range. */
static int fix_index(interp_ctx *c, const mg_node *n, int64_t v, int64_t dim, int64_t *out) {
  if (v < -dim || v >= dim)
    return it_fail(c, n, "index %lld is out of range for a dim of %lld", (long long)v, (long long)dim);
  *out = v < 0 ? v + dim : v;
  return 0;
}

/* Gather along axis: out = data[:axis] + indices.shape + data[axis+1:]. */
static int gather(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *ind = it_in(in, n, 1);
  if (!ind) return it_fail(c, n, "missing indices");
  if (x->rank == 0) return it_fail(c, n, "cannot gather from a scalar");
  int axis = 0, r = 0;
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
  if (x->rank - 1 + ind->rank > MG_ARRAY_MAX_RANK) return it_fail(c, n, "output rank too large");
  int64_t dims[MG_ARRAY_MAX_RANK], outer, len, inner, ni = it_numel(ind);
  for (int d = 0; d < axis; d++) dims[r++] = x->dims[d];
  for (int d = 0; d < ind->rank; d++) dims[r++] = ind->dims[d];
  for (int d = axis + 1; d < x->rank; d++) dims[r++] = x->dims[d];
  it_split_dims(x, axis, &outer, &len, &inner);
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, dims);
  if (!y) return -1;
  for (int64_t j = 0; j < ni; j++) {
    int64_t v = 0;
    if (fix_index(c, n, it_get_i64(ind, j), len, &v)) return -1;
    for (int64_t o = 0; o < outer; o++) it_copy_elems(y, (o * ni + j) * inner, x, (o * len + v) * inner, inner);
  }
  return 0;
}

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

/* The scatter reduction attribute; -1 after a diagnostic for an unknown one. */
static int scatter_reduction(interp_ctx *c, const mg_node *n) {
  const char *s = mg_attr_str(n, "reduction", "none");
  static const char *const names[] = {"none", "add", "mul", "max", "min"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(s, names[i])) return i;
  mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type, "reduction '%s'", s);
  return -1;
}

/* y[yi] = y[yi] (reduction) u[ui]; none copies the bytes. Floats combine in double,
 * integers in int64 (wrapping; uint64 compares unsigned). */
static void scatter_one(mg_array *y, int64_t yi, const mg_array *u, int64_t ui, int red) {
  if (red == RED_NONE) {
    it_copy_elems(y, yi, u, ui, 1);
    return;
  }
  if (it_is_float(y->dtype)) {
    double a = it_get_f64(y, yi), b = it_get_f64(u, ui);
    double r = red == RED_ADD ? a + b : red == RED_MUL ? a * b : red == RED_MAX ? (isnan(a) || a >= b ? a : b)
                                                                             : (isnan(a) || a <= b ? a : b);
    it_set_f64(y, yi, r);
    return;
  }
  int64_t a = it_get_i64(y, yi), b = it_get_i64(u, ui), r;
  int gt = y->dtype == MG_U64 ? (uint64_t)a > (uint64_t)b : a > b;
  if (red == RED_ADD) r = (int64_t)((uint64_t)a + (uint64_t)b);
  else if (red == RED_MUL) r = (int64_t)((uint64_t)a * (uint64_t)b);
  else if (red == RED_MAX) r = gt ? a : b;
  else r = gt ? b : a;
  it_set_i64(y, yi, r);
}

/* GatherElements / ScatterElements: element e of indices (same rank as data, and no
 * larger on the other axes) addresses data at e's coordinates with the axis one
 * replaced by the index value. Scatter copies data and applies updates (shaped as
 * indices) in order. */
static int elements(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *ind = it_in(in, n, 1), *upd = it_in(in, n, 2);
  int scatter = n->op == MG_OP_ScatterElements, axis = 0, red = 0;
  if (!ind || (scatter && !upd)) return it_fail(c, n, "missing input");
  if (ind->rank != x->rank || x->rank == 0) return it_fail(c, n, "indices must have data's rank (>= 1)");
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
  for (int d = 0; d < x->rank; d++)
    if (d != axis && ind->dims[d] > x->dims[d]) return it_fail(c, n, "indices dim %d exceeds data's", d);
  if (scatter) {
    if (upd->dtype != x->dtype || upd->rank != ind->rank ||
        memcmp(upd->dims, ind->dims, sizeof(int64_t) * (size_t)ind->rank))
      return it_fail(c, n, "updates must match indices in shape and data in dtype");
    if ((red = scatter_reduction(c, n)) < 0) return -1;
  }
  mg_array *y = scatter ? it_out(c, n, out, 0, x->dtype, x->rank, x->dims)
                        : it_out(c, n, out, 0, x->dtype, ind->rank, ind->dims);
  if (!y) return -1;
  if (scatter) it_copy_elems(y, 0, x, 0, it_numel(x));
  int64_t xs[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0}, k = it_numel(ind);
  it_strides(x->rank, x->dims, xs);
  for (int64_t i = 0; i < k; i++) {
    int64_t v = 0, off = 0;
    if (fix_index(c, n, it_get_i64(ind, i), x->dims[axis], &v)) return -1;
    for (int d = 0; d < x->rank; d++) off += (d == axis ? v : coord[d]) * xs[d];
    if (scatter) scatter_one(y, off, upd, i, red);
    else it_copy_elems(y, i, x, off, 1);
    for (int d = x->rank - 1; d >= 0; d--) {
      if (++coord[d] < ind->dims[d]) break;
      coord[d] = 0;
    }
  }
  return 0;
}

/* GatherND with batch_dims b: each index tuple (indices' last dim, k) picks a slice
 * data[batch][i0..ik-1] of shape data.dims[b+k:]. */
static int gather_nd(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *ind = it_in(in, n, 1);
  if (!ind) return it_fail(c, n, "missing indices");
  int64_t b = mg_attr_int(n, "batch_dims", 0);
  int q = ind->rank, r = x->rank;
  if (q < 1 || r < 1 || b < 0 || b >= q || b >= r) return it_fail(c, n, "bad ranks or batch_dims");
  int64_t kk = ind->dims[q - 1];
  if (kk < 0 || kk > r - b) return it_fail(c, n, "index tuples of %lld exceed data's rank", (long long)kk);
  int k = (int)kk, orank = 0;
  if (q - 1 + r - (int)b - k > MG_ARRAY_MAX_RANK) return it_fail(c, n, "output rank too large");
  int64_t dims[MG_ARRAY_MAX_RANK], nb = 1, ni = 1, inner = 1, ds = 1, st[MG_ARRAY_MAX_RANK];
  for (int d = 0; d < b; d++) {
    if (ind->dims[d] != x->dims[d]) return it_fail(c, n, "batch dims of data and indices differ");
    nb *= x->dims[d];
  }
  for (int d = 0; d < q - 1; d++) dims[orank++] = ind->dims[d];
  for (int d = (int)b; d < q - 1; d++) ni *= ind->dims[d];
  for (int d = (int)b + k; d < r; d++) dims[orank++] = x->dims[d], inner *= x->dims[d];
  for (int d = (int)b; d < r; d++) ds *= x->dims[d];
  for (int j = k - 1; j >= 0; j--) /* element strides of the indexed axes within a batch */
    st[j] = j == k - 1 ? inner : st[j + 1] * x->dims[b + j + 1];
  mg_array *y = it_out(c, n, out, 0, x->dtype, orank, dims);
  if (!y) return -1;
  for (int64_t bb = 0; bb < nb; bb++)
    for (int64_t t = 0; t < ni; t++) {
      int64_t off = 0, row = bb * ni + t;
      for (int j = 0; j < k; j++) {
        int64_t v = 0;
        if (fix_index(c, n, it_get_i64(ind, row * k + j), x->dims[b + j], &v)) return -1;
        off += v * st[j];
      }
      it_copy_elems(y, row * inner, x, bb * ds + off, inner);
    }
  return 0;
}

/* ScatterND: a copy of data where each index tuple (indices' last dim k) receives
 * the matching slice of updates (shape indices.dims[:-1] + data.dims[k:]),
 * combined by the reduction; tuples apply in order. */
static int scatter_nd(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *ind = it_in(in, n, 1), *upd = it_in(in, n, 2);
  if (!ind || !upd) return it_fail(c, n, "missing input");
  int q = ind->rank, r = x->rank, red = scatter_reduction(c, n);
  if (red < 0) return -1;
  if (q < 1 || ind->dims[q - 1] > r) return it_fail(c, n, "bad indices shape");
  int k = (int)ind->dims[q - 1];
  if (upd->dtype != x->dtype || upd->rank != q - 1 + r - k)
    return it_fail(c, n, "updates have the wrong rank or dtype");
  for (int d = 0; d < q - 1; d++)
    if (upd->dims[d] != ind->dims[d]) return it_fail(c, n, "updates' shape does not match indices");
  for (int d = k; d < r; d++)
    if (upd->dims[q - 1 + d - k] != x->dims[d]) return it_fail(c, n, "updates' shape does not match data");
  mg_array *y = it_out(c, n, out, 0, x->dtype, r, x->dims);
  if (!y) return -1;
  it_copy_elems(y, 0, x, 0, it_numel(x));
  int64_t xs[MG_ARRAY_MAX_RANK], ni = 1, inner = 1;
  it_strides(r, x->dims, xs);
  for (int d = 0; d < q - 1; d++) ni *= ind->dims[d];
  for (int d = k; d < r; d++) inner *= x->dims[d];
  for (int64_t t = 0; t < ni; t++) {
    int64_t off = 0;
    for (int j = 0; j < k; j++) {
      int64_t v = 0;
      if (fix_index(c, n, it_get_i64(ind, t * k + j), x->dims[j], &v)) return -1;
      off += v * xs[j];
    }
    for (int64_t e = 0; e < inner; e++) scatter_one(y, off + e, upd, t * inner + e, red);
  }
  return 0;
}

/* Compress: keeps the slices along axis (or the elements of the flattened input
 * when axis is absent) whose condition entry is true. A condition shorter than the
 * axis drops the rest; a true entry beyond its end is an error. */
static int compress(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  const mg_array *cond = it_in(in, n, 1);
  if (!cond || cond->rank != 1) return it_fail(c, n, "condition must be 1-D");
  int has_axis = mg_node_attr(n, "axis") != NULL, axis = 0;
  int64_t outer = 1, len = it_numel(x), inner = 1, cl = it_numel(cond), kept = 0;
  if (has_axis) {
    if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    it_split_dims(x, axis, &outer, &len, &inner);
  }
  for (int64_t j = 0; j < cl; j++)
    if (it_get_i64(cond, j)) {
      if (j >= len) return it_fail(c, n, "condition selects index %lld beyond the axis", (long long)j);
      kept++;
    }
  int64_t dims[MG_ARRAY_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = kept;
  mg_array *y =
      has_axis ? it_out(c, n, out, 0, x->dtype, x->rank, dims) : it_out(c, n, out, 0, x->dtype, 1, &kept);
  if (!y) return -1;
  int64_t pos = 0;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t j = 0; j < cl && j < len; j++)
      if (it_get_i64(cond, j)) {
        it_copy_elems(y, pos, x, (o * len + j) * inner, inner);
        pos += inner;
      }
  return 0;
}

/* Whether element k is nonzero (NaN counts; -0.0 does not). */
static int nonzero_at(const mg_array *x, int64_t k) {
  return it_is_float(x->dtype) ? it_get_f64(x, k) != 0 : it_get_i64(x, k) != 0;
}

/* NonZero: [rank, count] int64 coordinates of the nonzero elements in row-major
 * order; a scalar counts as rank 1, as numpy does. */
static int nonzero(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int64_t k = it_numel(x), cnt = 0;
  int r = x->rank ? x->rank : 1;
  for (int64_t i = 0; i < k; i++) cnt += nonzero_at(x, i);
  int64_t dims[2] = {r, cnt}, coord[MG_ARRAY_MAX_RANK] = {0}, at = 0;
  mg_array *y = it_out(c, n, out, 0, MG_I64, 2, dims);
  if (!y) return -1;
  for (int64_t i = 0; i < k; i++) {
    if (nonzero_at(x, i)) {
      for (int d = 0; d < r; d++) it_set_i64(y, d * cnt + at, coord[d]);
      at++;
    }
    for (int d = x->rank - 1; d >= 0; d--) {
      if (++coord[d] < x->dims[d]) break;
      coord[d] = 0;
    }
  }
  return 0;
}

/* Sort keys: values of one dtype class read once, so comparisons are cheap. */
typedef struct {
  const double *f; /* float data, or NULL */
  const int64_t *i; /* integer data */
  int uns;          /* uint64: compare unsigned */
  int64_t width;    /* elements compared per item (Unique along an axis) */
  int64_t stride;   /* distance between consecutive items' element runs */
  int64_t step;     /* distance between an item's elements */
} sort_keys;

/* Total order on one element: NaN above everything and equal to NaN. */
static int cmp_elem(const sort_keys *s, int64_t a, int64_t b) {
  if (s->f) {
    double x = s->f[a], y = s->f[b];
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x > y) - (x < y);
  }
  int64_t x = s->i[a], y = s->i[b];
  if (s->uns) return ((uint64_t)x > (uint64_t)y) - ((uint64_t)x < (uint64_t)y);
  return (x > y) - (x < y);
}

/* Lexicographic order of items a and b (Unique's slices; TopK's single values). */
static int cmp_item(const sort_keys *s, int64_t a, int64_t b) {
  for (int64_t e = 0; e < s->width; e++) {
    int r = cmp_elem(s, a * s->stride + e * s->step, b * s->stride + e * s->step);
    if (r) return r;
  }
  return 0;
}

/* Stable merge sort of v[0..cnt) by cmp_item, descending when desc; equal items
 * keep their order, so ties resolve to the lower index. */
static int merge_sort(interp_ctx *c, const mg_node *n, int64_t *v, int64_t cnt, const sort_keys *s, int desc) {
  int64_t *tmp = mg_malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
  if (!tmp) return it_fail(c, n, "out of memory");
  for (int64_t w = 1; w < cnt; w *= 2) {
    for (int64_t lo = 0; lo < cnt; lo += 2 * w) {
      int64_t mid = lo + w < cnt ? lo + w : cnt, hi = lo + 2 * w < cnt ? lo + 2 * w : cnt;
      int64_t a = lo, b = mid, o = lo;
      while (a < mid && b < hi) {
        int r = cmp_item(s, v[a], v[b]);
        tmp[o++] = (desc ? r >= 0 : r <= 0) ? v[a++] : v[b++];
      }
      while (a < mid) tmp[o++] = v[a++];
      while (b < hi) tmp[o++] = v[b++];
    }
    memcpy(v, tmp, sizeof(int64_t) * (size_t)cnt);
  }
  mg_free(tmp);
  return 0;
}

/* Reads all of x as sort keys (doubles for floats, int64 otherwise); NULL on OOM. */
static void *read_keys(interp_ctx *c, const mg_node *n, const mg_array *x, sort_keys *s) {
  memset(s, 0, sizeof *s);
  s->uns = x->dtype == MG_U64;
  if (it_is_float(x->dtype)) return (void *)(s->f = it_f64(c, n, x));
  return (void *)(s->i = it_i64(c, n, x));
}

/* TopK: the k largest (or smallest) values along axis with their int64 indices,
 * ordered best first; equal values keep the lower index first. NaN ranks above
 * every number. The output is always sorted (allowed when sorted=0). */
static int topk(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  int axis = 0;
  int64_t k = 0, outer, len, inner;
  if (it_scalar_int(c, n, it_in(in, n, 1), "K", &k)) return -1;
  if (x->rank == 0) return it_fail(c, n, "input must have rank >= 1");
  if (it_norm_axis(c, n, mg_attr_int(n, "axis", -1), x->rank, &axis)) return -1;
  it_split_dims(x, axis, &outer, &len, &inner);
  if (k < 0 || k > len)
    return it_fail(c, n, "K = %lld is out of range for an axis of %lld", (long long)k, (long long)len);
  int64_t dims[MG_ARRAY_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[axis] = k;
  mg_array *v = it_out(c, n, out, 0, x->dtype, x->rank, dims);
  if (!v && out[0]) return -1;
  mg_array *ix = it_out(c, n, out, 1, MG_I64, x->rank, dims);
  if (!ix && n->n_out > 1 && out[1]) return -1;
  sort_keys s;
  void *keys = read_keys(c, n, x, &s);
  int64_t *order = mg_malloc(sizeof(int64_t) * (size_t)(len ? len : 1));
  if (!keys || !order) {
    mg_free(keys), mg_free(order);
    return it_fail(c, n, "out of memory");
  }
  int desc = mg_attr_int(n, "largest", 1) != 0, rc = 0;
  s.width = 1, s.stride = inner, s.step = 0;
  for (int64_t o = 0; o < outer && !rc; o++)
    for (int64_t i = 0; i < inner && !rc; i++) {
      int64_t base = o * len * inner + i;
      sort_keys sl = s;
      if (sl.f) sl.f += base;
      else sl.i += base;
      for (int64_t j = 0; j < len; j++) order[j] = j;
      rc = merge_sort(c, n, order, len, &sl, desc);
      for (int64_t j = 0; j < k && !rc; j++) {
        int64_t at = (o * k + j) * inner + i;
        if (v) it_copy_elems(v, at, x, base + order[j] * inner, 1);
        if (ix) it_set_i64(ix, at, order[j]);
      }
    }
  mg_free(keys), mg_free(order);
  return rc;
}

/* Unique over the flattened input, or over slices along axis. Outputs (any may be
 * omitted): Y the unique values/slices, sorted ascending (lexicographically for
 * slices) or in order of first occurrence when sorted=0; indices of each one's
 * first occurrence; inverse_indices mapping every input item to its Y position;
 * counts. */
static int unique(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **out) {
  int has_axis = mg_node_attr(n, "axis") != NULL, axis = 0;
  int64_t outer = 1, len = it_numel(x), inner = 1;
  if (has_axis) {
    if (it_norm_axis(c, n, mg_attr_int(n, "axis", 0), x->rank, &axis)) return -1;
    it_split_dims(x, axis, &outer, &len, &inner);
  }
  sort_keys s;
  void *keys = read_keys(c, n, x, &s);
  size_t cap = (size_t)(len ? len : 1);
  int64_t *order = mg_malloc(sizeof(int64_t) * cap), *grp = mg_malloc(sizeof(int64_t) * cap);
  int64_t *first = mg_malloc(sizeof(int64_t) * cap), *cnt = mg_malloc(sizeof(int64_t) * cap);
  int64_t *pos = mg_malloc(sizeof(int64_t) * cap);
  int rc = 0;
  if (!keys || !order || !grp || !first || !cnt || !pos) rc = it_fail(c, n, "out of memory");
  /* Item j's elements are (o, j, i) for all o, i, compared in (o, i) order. With
   * outer == 1 they lie contiguously at j*inner; otherwise they are first gathered
   * into a contiguous run per item. */
  s.stride = inner, s.step = 1, s.width = inner;
  int64_t u = 0;
  if (!rc) {
    for (int64_t j = 0; j < len; j++) order[j] = j;
    if (outer > 1) {
      /* Regroup so that item j's elements are contiguous: keys2[j][o*inner + i]. */
      size_t tot = (size_t)(outer * len * inner);
      void *k2 = mg_malloc((s.f ? sizeof(double) : sizeof(int64_t)) * (tot ? tot : 1));
      if (!k2) rc = it_fail(c, n, "out of memory");
      for (int64_t o = 0; o < outer && !rc; o++)
        for (int64_t j = 0; j < len; j++)
          for (int64_t i = 0; i < inner; i++) {
            int64_t from = (o * len + j) * inner + i, to = j * outer * inner + o * inner + i;
            if (s.f) ((double *)k2)[to] = s.f[from];
            else ((int64_t *)k2)[to] = s.i[from];
          }
      if (!rc) {
        mg_free(keys);
        keys = k2;
        if (s.f) s.f = k2;
        else s.i = k2;
        s.stride = s.width = outer * inner;
      }
    }
  }
  if (!rc) rc = merge_sort(c, n, order, len, &s, 0);
  if (!rc) {
    for (int64_t t = 0; t < len; t++) {
      if (t == 0 || cmp_item(&s, order[t - 1], order[t])) first[u] = order[t], cnt[u++] = 0;
      grp[order[t]] = u - 1;
      cnt[u - 1]++;
    }
    /* pos[g]: where group g lands in Y. */
    if (mg_attr_int(n, "sorted", 1)) {
      for (int64_t g = 0; g < u; g++) pos[g] = g;
    } else {
      int64_t next = 0;
      for (int64_t j = 0; j < len; j++)
        if (first[grp[j]] == j) pos[grp[j]] = next++;
    }
    int64_t dims[MG_ARRAY_MAX_RANK];
    memcpy(dims, x->dims, sizeof dims);
    dims[axis] = u;
    mg_array *y = NULL, *oi = NULL, *inv = NULL, *oc = NULL;
    if (out[0] && !(y = has_axis ? it_out(c, n, out, 0, x->dtype, x->rank, dims)
                                 : it_out(c, n, out, 0, x->dtype, 1, &u)))
      rc = -1;
    if (!rc && n->n_out > 1 && out[1] && !(oi = it_out(c, n, out, 1, MG_I64, 1, &u))) rc = -1;
    if (!rc && n->n_out > 2 && out[2] && !(inv = it_out(c, n, out, 2, MG_I64, 1, &len))) rc = -1;
    if (!rc && n->n_out > 3 && out[3] && !(oc = it_out(c, n, out, 3, MG_I64, 1, &u))) rc = -1;
    for (int64_t g = 0; g < u && !rc; g++) {
      if (y)
        for (int64_t o = 0; o < outer; o++)
          it_copy_elems(y, (o * u + pos[g]) * inner, x, (o * len + first[g]) * inner, inner);
      if (oi) it_set_i64(oi, pos[g], first[g]);
      if (oc) it_set_i64(oc, pos[g], cnt[g]);
    }
    for (int64_t j = 0; j < len && inv && !rc; j++) it_set_i64(inv, j, pos[grp[j]]);
  }
  mg_free(keys), mg_free(order), mg_free(grp), mg_free(first), mg_free(cnt), mg_free(pos);
  return rc;
}

/* See interp_internal.h. */
int interp_tensor_index(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out) {
  switch (n->op) {
  case MG_OP_Gather: return gather(c, n, x, in, out);
  case MG_OP_GatherElements: case MG_OP_ScatterElements: return elements(c, n, x, in, out);
  case MG_OP_GatherND: return gather_nd(c, n, x, in, out);
  case MG_OP_ScatterND: return scatter_nd(c, n, x, in, out);
  case MG_OP_Compress: return compress(c, n, x, in, out);
  case MG_OP_NonZero: return nonzero(c, n, x, out);
  case MG_OP_TopK: return topk(c, n, x, in, out);
  case MG_OP_Unique: return unique(c, n, x, out);
  default: return it_fail(c, n, "not an indexing op");
  }
}
