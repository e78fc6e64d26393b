/* Tensor data movement: the strided copy behind Transpose/Slice/Expand/Tile/Concat/
 * Split/Pad/DepthToSpace, fills, index maps, gathers and scatters, Trilu,
 * ReverseSequence, OneHot and TopK. Everything moves element bytes; only scatter
 * reductions and TopK read values (see mg_rt_tensor.h). */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

typedef unsigned char byte;

/* ------------------------------------------------------ element access */

int mg_tensor_is_float(mg_rt_dtype t) {
  return t == MG_RT_F32 || t == MG_RT_F64 || t == MG_RT_F16 || t == MG_RT_BF16;
}

double mg_tensor_load_f64(mg_rt_dtype t, const void *base, int64_t i) {
  const byte *p = (const byte *)base + (size_t)i * mg_rt_dtype_size(t);
  switch (t) {
  case MG_RT_F32: { float v; memcpy(&v, p, 4); return v; }
  case MG_RT_F64: { double v; memcpy(&v, p, 8); return v; }
  case MG_RT_F16: { uint16_t v; memcpy(&v, p, 2); return mg_rt_f16_to_f32(v); }
  case MG_RT_BF16: { uint16_t v; memcpy(&v, p, 2); return mg_rt_bf16_to_f32(v); }
  case MG_RT_U64: { uint64_t v; memcpy(&v, p, 8); return (double)v; }
  default: return (double)mg_tensor_load_i64(t, base, i);
  }
}

/* Saturating truncation of a double to int64, NaN as 0 (the reference's rule). */
static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

int64_t mg_tensor_load_i64(mg_rt_dtype t, const void *base, int64_t i) {
  const byte *p = (const byte *)base + (size_t)i * mg_rt_dtype_size(t);
  switch (t) {
  case MG_RT_I64: case MG_RT_U64: { int64_t v; memcpy(&v, p, 8); return v; }
  case MG_RT_I32: { int32_t v; memcpy(&v, p, 4); return v; }
  case MG_RT_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
  case MG_RT_I16: { int16_t v; memcpy(&v, p, 2); return v; }
  case MG_RT_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
  case MG_RT_I8: return (int8_t)*p;
  case MG_RT_U8: return *p;
  case MG_RT_BOOL: return *p != 0;
  default: return f64_to_i64(mg_tensor_load_f64(t, base, i));
  }
}

void mg_tensor_store_i64(mg_rt_dtype t, void *base, int64_t i, int64_t v) {
  byte *p = (byte *)base + (size_t)i * mg_rt_dtype_size(t);
  switch (t) {
  case MG_RT_I64: case MG_RT_U64: memcpy(p, &v, 8); return;
  case MG_RT_I32: case MG_RT_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); return; }
  case MG_RT_I16: case MG_RT_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); return; }
  case MG_RT_I8: case MG_RT_U8: *p = (byte)v; return;
  case MG_RT_BOOL: *p = v != 0; return;
  default: mg_tensor_store_f64(t, base, i, (double)v); return;
  }
}

void mg_tensor_store_f64(mg_rt_dtype t, void *base, int64_t i, double v) {
  byte *p = (byte *)base + (size_t)i * mg_rt_dtype_size(t);
  switch (t) {
  case MG_RT_F32: { float x = (float)v; memcpy(p, &x, 4); return; }
  case MG_RT_F64: memcpy(p, &v, 8); return;
  case MG_RT_F16: { uint16_t h = mg_rt_f32_to_f16((float)v); memcpy(p, &h, 2); return; }
  case MG_RT_BF16: { uint16_t h = mg_rt_f32_to_bf16((float)v); memcpy(p, &h, 2); return; }
  case MG_RT_BOOL: *p = v != 0; return;
  case MG_RT_U64:
    if (v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
      uint64_t u = (uint64_t)v;
      memcpy(p, &u, 8);
      return;
    }
    mg_tensor_store_i64(t, base, i, f64_to_i64(v));
    return;
  default: mg_tensor_store_i64(t, base, i, f64_to_i64(v)); return;
  }
}

/* ------------------------------------------------------ strided copy */

/* One element of es bytes; typed for the common sizes so loops stay cheap. */
static void copy_elem(size_t es, byte *d, const byte *s) {
  switch (es) {
  case 1: *d = *s; break;
  case 2: memcpy(d, s, 2); break;
  case 4: memcpy(d, s, 4); break;
  case 8: memcpy(d, s, 8); break;
  default: memcpy(d, s, es); break;
  }
}

/* One innermost run of n elements with element strides ss, ds. */
static void copy_run(size_t es, int64_t n, const byte *s, int64_t ss, byte *d, int64_t ds) {
  int64_t i;
  if (ss == 1 && ds == 1) {
    memcpy(d, s, (size_t)n * es);
    return;
  }
  if (es == 4 && ds == 1) { /* memcpy of 4 bytes compiles to a move */
    for (i = 0; i < n; i++) memcpy(d + 4 * i, s + 4 * i * ss, 4);
    return;
  }
  for (i = 0; i < n; i++) copy_elem(es, d + (size_t)(i * ds) * es, s + (ptrdiff_t)(i * ss) * (ptrdiff_t)es);
}

enum { TILE = 16 };

/* out[r*dr + c] = in[r + c*sc] for r < rows, c < cols (element strides), in
 * TILE x TILE blocks so both sides stay in cache. */
static void transpose_2d(size_t es, int64_t rows, int64_t cols, const byte *s, int64_t sc, byte *d,
                         int64_t dr) {
  int64_t r0, c0, r, c;
  for (r0 = 0; r0 < rows; r0 += TILE) {
    int64_t r1 = r0 + TILE < rows ? r0 + TILE : rows;
    for (c0 = 0; c0 < cols; c0 += TILE) {
      int64_t c1 = c0 + TILE < cols ? c0 + TILE : cols;
      if (es == 4) {
        for (r = r0; r < r1; r++)
          for (c = c0; c < c1; c++) memcpy(d + 4 * (r * dr + c), s + 4 * (ptrdiff_t)(r + c * sc), 4);
      } else {
        for (r = r0; r < r1; r++)
          for (c = c0; c < c1; c++)
            copy_elem(es, d + (size_t)(r * dr + c) * es, s + (ptrdiff_t)(r + c * sc) * (ptrdiff_t)es);
      }
    }
  }
}

void mg_copy_nd(size_t es, int rank, const int64_t *shape, const void *src,
                const int64_t *src_strides, void *dst, const int64_t *dst_strides) {
  int64_t coord[16], dims[16], ss[16], ds[16];
  int d, nouter = 0, tj = -1, last = rank - 1;
  const byte *s = (const byte *)src;
  byte *o = (byte *)dst;
  if (rank <= 0) {
    copy_elem(es, o, s);
    return;
  }
  for (d = 0; d < rank; d++)
    if (shape[d] <= 0) return;
  /* A transpose moving the last axis: output's innermost run reads with a stride
   * while some other axis reads contiguously. Its pair becomes 2-D tiles. */
  if (dst_strides[last] == 1 && src_strides[last] != 1 && shape[last] > 1)
    for (d = 0; d < last; d++)
      if (src_strides[d] == 1 && shape[d] > 1 && dst_strides[d] != 0) tj = d;
  for (d = 0; d < last; d++) {
    if (d == tj) continue;
    dims[nouter] = shape[d], ss[nouter] = src_strides[d], ds[nouter] = dst_strides[d];
    coord[nouter++] = 0;
  }
  for (;;) {
    int64_t so = 0, dofs = 0;
    for (d = 0; d < nouter; d++) so += coord[d] * ss[d], dofs += coord[d] * ds[d];
    {
      const byte *sp = s + (ptrdiff_t)so * (ptrdiff_t)es;
      byte *dp = o + (ptrdiff_t)dofs * (ptrdiff_t)es;
      if (tj >= 0)
        transpose_2d(es, shape[tj], shape[last], sp, src_strides[last], dp, dst_strides[tj]);
      else
        copy_run(es, shape[last], sp, src_strides[last], dp, dst_strides[last]);
    }
    for (d = nouter - 1; d >= 0; d--) {
      if (++coord[d] < dims[d]) break;
      coord[d] = 0;
    }
    if (d < 0) break;
  }
}

void mg_copy_bytes(void *dst, const void *src, size_t bytes) {
  if (dst != src && bytes) memcpy(dst, src, bytes);
}

void mg_fill(size_t es, int64_t n, void *dst, const void *value) {
  byte *d = (byte *)dst;
  int64_t i;
  if (n <= 0) return;
  if (es == 4) {
    for (i = 0; i < n; i++) memcpy(d + 4 * i, value, 4);
    return;
  }
  if (es == 1) {
    memset(d, *(const byte *)value, (size_t)n);
    return;
  }
  memcpy(d, value, es);
  for (i = 1; i < n; i++) copy_elem(es, d + (size_t)i * es, d);
}

void mg_gather_maps(size_t es, int rank, const int64_t *shape, const void *src,
                    const int64_t *maps, void *dst) {
  const int64_t *m[16];
  int64_t coord[16] = {0}, at = 0, k;
  int d, last = rank - 1;
  const byte *s = (const byte *)src;
  byte *o = (byte *)dst;
  if (rank <= 0) {
    copy_elem(es, o, s);
    return;
  }
  for (d = 0; d < rank; d++) {
    if (shape[d] <= 0) return;
    m[d] = maps + at;
    at += shape[d];
  }
  for (;;) {
    int64_t base = 0;
    for (d = 0; d < last; d++) base += m[d][coord[d]];
    if (es == 4)
      for (k = 0; k < shape[last]; k++) memcpy(o + 4 * k, s + 4 * (base + m[last][k]), 4);
    else
      for (k = 0; k < shape[last]; k++) copy_elem(es, o + (size_t)k * es, s + (size_t)(base + m[last][k]) * es);
    o += (size_t)shape[last] * es;
    for (d = last - 1; d >= 0; d--) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
    if (d < 0) break;
  }
}

/* ------------------------------------------------------ gathers and scatters */

/* Index j of an int32/int64 array, negatives counted from n, clamped to [0, n). */
static int64_t index_at(const void *idx, int i64, int64_t j, int64_t n) {
  int64_t v;
  if (i64) memcpy(&v, (const int64_t *)idx + j, 8);
  else {
    int32_t w;
    memcpy(&w, (const int32_t *)idx + j, 4);
    v = w;
  }
  if (v < 0) v += n;
  return v < 0 ? 0 : v >= n ? (n > 0 ? n - 1 : 0) : v;
}

void mg_gather(size_t es, int64_t outer, int64_t axis_n, int64_t inner, const void *src,
               const void *indices, int indices_i64, int64_t n_idx, void *dst) {
  const byte *s = (const byte *)src;
  byte *d = (byte *)dst;
  size_t row = (size_t)inner * es;
  int64_t o, j;
  if (axis_n <= 0) return;
  for (o = 0; o < outer; o++)
    for (j = 0; j < n_idx; j++) {
      int64_t v = index_at(indices, indices_i64, j, axis_n);
      const byte *sp = s + (size_t)(o * axis_n + v) * row;
      byte *dp = d + (size_t)(o * n_idx + j) * row;
      if (inner == 1) copy_elem(es, dp, sp);
      else memcpy(dp, sp, row);
    }
}

/* Walks the C-order coords of idx_shape; for each, the data offset with the axis
 * coordinate replaced by the index. fn gets (k, offset). */
#define WALK_ELEMENTS(BODY)                                                              \
  do {                                                                                   \
    int64_t coord_[16] = {0}, base_ = 0, k_ = 0;                                         \
    int d_;                                                                              \
    for (d_ = 0; d_ < rank; d_++)                                                        \
      if (idx_shape[d_] <= 0 || (d_ == axis && axis_n <= 0)) return;                     \
    for (;;) {                                                                           \
      int64_t off = base_ + data_strides[axis] * index_at(indices, indices_i64, k_, axis_n); \
      int64_t k = k_;                                                                    \
      BODY;                                                                              \
      k_++;                                                                              \
      for (d_ = rank - 1; d_ >= 0; d_--) {                                               \
        if (d_ != axis) base_ += data_strides[d_];                                       \
        if (++coord_[d_] < idx_shape[d_]) break;                                         \
        if (d_ != axis) base_ -= data_strides[d_] * idx_shape[d_];                       \
        coord_[d_] = 0;                                                                  \
      }                                                                                  \
      if (d_ < 0) break;                                                                 \
    }                                                                                    \
  } while (0)

void mg_gather_elements(size_t es, int rank, const int64_t *idx_shape, const int64_t *data_strides,
                        int axis, int64_t axis_n, const void *data, const void *indices,
                        int indices_i64, void *dst) {
  const byte *s = (const byte *)data;
  byte *o = (byte *)dst;
  WALK_ELEMENTS(copy_elem(es, o + (size_t)k * es, s + (size_t)off * es));
}

/* dst[i] = dst[i] (red) upd[j] in dtype t: floats in double (exact for + and * of
 * two floats before the single rounding), integers in wrapping int64. */
static void combine(mg_rt_dtype t, mg_scatter_reduction red, void *dst, int64_t i,
                    const void *upd, int64_t j) {
  size_t es = mg_rt_dtype_size(t);
  if (red == MG_SCATTER_NONE) {
    copy_elem(es, (byte *)dst + (size_t)i * es, (const byte *)upd + (size_t)j * es);
  } else if (mg_tensor_is_float(t)) {
    double a = mg_tensor_load_f64(t, dst, i), b = mg_tensor_load_f64(t, upd, j), r;
    if (red == MG_SCATTER_ADD) r = a + b;
    else if (red == MG_SCATTER_MUL) r = a * b;
    else if (red == MG_SCATTER_MAX) r = (a != a || a >= b) ? a : b;
    else r = (a != a || a <= b) ? a : b;
    mg_tensor_store_f64(t, dst, i, r);
  } else {
    int64_t a = mg_tensor_load_i64(t, dst, i), b = mg_tensor_load_i64(t, upd, j), r;
    int gt = t == MG_RT_U64 ? (uint64_t)a > (uint64_t)b : a > b;
    if (red == MG_SCATTER_ADD) r = (int64_t)((uint64_t)a + (uint64_t)b);
    else if (red == MG_SCATTER_MUL) r = (int64_t)((uint64_t)a * (uint64_t)b);
    else if (red == MG_SCATTER_MAX) r = gt ? a : b;
    else r = gt ? b : a;
    mg_tensor_store_i64(t, dst, i, r);
  }
}

void mg_scatter_elements(mg_rt_dtype t, mg_scatter_reduction red, int rank,
                         const int64_t *idx_shape, const int64_t *data_strides, int axis,
                         int64_t axis_n, const void *indices, int indices_i64,
                         const void *updates, void *dst) {
  WALK_ELEMENTS(combine(t, red, dst, off, updates, k));
}

/* Element offset of index tuple `tuple` within a batch. */
static int64_t tuple_offset(const void *indices, int i64, int64_t tuple, int k,
                            const int64_t *axis_dims, const int64_t *axis_strides) {
  int64_t off = 0;
  int j;
  for (j = 0; j < k; j++) off += axis_strides[j] * index_at(indices, i64, tuple * k + j, axis_dims[j]);
  return off;
}

void mg_gather_nd(size_t es, int64_t batches, int64_t batch_stride, int64_t n_tuples, int k,
                  const int64_t *axis_dims, const int64_t *axis_strides, int64_t inner,
                  const void *data, const void *indices, int indices_i64, void *dst) {
  const byte *s = (const byte *)data;
  byte *o = (byte *)dst;
  int64_t b, t;
  int j;
  for (j = 0; j < k; j++)
    if (axis_dims[j] <= 0) return;
  for (b = 0; b < batches; b++)
    for (t = 0; t < n_tuples; t++) {
      int64_t row = b * n_tuples + t;
      int64_t off = b * batch_stride + tuple_offset(indices, indices_i64, row, k, axis_dims, axis_strides);
      memcpy(o + (size_t)(row * inner) * es, s + (size_t)off * es, (size_t)inner * es);
    }
}

void mg_scatter_nd(mg_rt_dtype t, mg_scatter_reduction red, int64_t n_tuples, int k,
                   const int64_t *axis_dims, const int64_t *axis_strides, int64_t inner,
                   const void *indices, int indices_i64, const void *updates, void *dst) {
  size_t es = mg_rt_dtype_size(t);
  int64_t u, e;
  int j;
  for (j = 0; j < k; j++)
    if (axis_dims[j] <= 0) return;
  for (u = 0; u < n_tuples; u++) {
    int64_t off = tuple_offset(indices, indices_i64, u, k, axis_dims, axis_strides);
    if (red == MG_SCATTER_NONE)
      memcpy((byte *)dst + (size_t)off * es, (const byte *)updates + (size_t)(u * inner) * es,
             (size_t)inner * es);
    else
      for (e = 0; e < inner; e++) combine(t, red, dst, off + e, updates, u * inner + e);
  }
}

/* ------------------------------------------------------ other movement */

void mg_trilu(size_t es, int64_t mats, int64_t rows, int64_t cols, int64_t k, int upper,
              const void *src, void *dst) {
  const byte *s = (const byte *)src;
  byte *o = (byte *)dst;
  int64_t m, i;
  for (m = 0; m < mats; m++)
    for (i = 0; i < rows; i++) {
      size_t row = (size_t)((m * rows + i) * cols) * es;
      /* kept columns: upper j >= i + k, lower j <= i + k */
      int64_t lim = i + k, a, b; /* [a, b) kept */
      if (upper) a = lim < 0 ? 0 : lim > cols ? cols : lim, b = cols;
      else a = 0, b = lim + 1 < 0 ? 0 : lim + 1 > cols ? cols : lim + 1;
      if (a > 0) memset(o + row, 0, (size_t)a * es);
      if (b > a && o != s) memcpy(o + row + (size_t)a * es, s + row + (size_t)a * es, (size_t)(b - a) * es);
      if (b < cols) memset(o + row + (size_t)b * es, 0, (size_t)(cols - b) * es);
    }
}

void mg_reverse_sequence(size_t es, int64_t batch, int64_t time, int64_t inner, int time_major,
                         const void *lens, int lens_i64, const void *src, void *dst) {
  const byte *s = (const byte *)src;
  byte *o = (byte *)dst;
  size_t row = (size_t)inner * es;
  int64_t b, t;
  for (b = 0; b < batch; b++) {
    int64_t L = index_at(lens, lens_i64, b, time + 1); /* clamp to [0, time] */
    for (t = 0; t < time; t++) {
      int64_t from = t < L ? L - 1 - t : t;
      int64_t yo = time_major ? t * batch + b : b * time + t;
      int64_t xo = time_major ? from * batch + b : b * time + from;
      memcpy(o + (size_t)yo * row, s + (size_t)xo * row, row);
    }
  }
}

void mg_onehot(size_t es, mg_rt_dtype idx_t, int64_t outer, int64_t depth, int64_t inner,
               const void *indices, const void *values, void *dst) {
  byte *o = (byte *)dst;
  const byte *on = (const byte *)values + es;
  int64_t a, i;
  mg_fill(es, outer * depth * inner, dst, values);
  for (a = 0; a < outer; a++)
    for (i = 0; i < inner; i++) {
      int64_t v = mg_tensor_load_i64(idx_t, indices, a * inner + i);
      if (v < 0) v += depth;
      if (v >= 0 && v < depth) copy_elem(es, o + (size_t)((a * depth + v) * inner + i) * es, on);
    }
}

/* ------------------------------------------------------ TopK */

/* Three-way comparison of elements i and j of x in TopK's order: NaN above every
 * number and equal to NaN; uint64 unsigned. */
static int cmp_elems(mg_rt_dtype t, const void *x, int64_t i, int64_t j) {
  if (mg_tensor_is_float(t)) {
    double a = mg_tensor_load_f64(t, x, i), b = mg_tensor_load_f64(t, x, j);
    int na = a != a, nb = b != b;
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
  }
  {
    int64_t a = mg_tensor_load_i64(t, x, i), b = mg_tensor_load_i64(t, x, j);
    if (t == MG_RT_U64) return ((uint64_t)a > (uint64_t)b) - ((uint64_t)a < (uint64_t)b);
    return (a > b) - (a < b);
  }
}

size_t mg_topk_scratch(int64_t n) { return (size_t)(n > 0 ? n : 1) * 4 + 4; }

void mg_topk(mg_rt_dtype t, int64_t outer, int64_t n, int64_t inner, int64_t k, int largest,
             const void *src, void *values, int64_t *indices, float *scratch) {
  size_t es = mg_rt_dtype_size(t);
  /* two int64 arrays of n inside scratch, 8-byte aligned */
  uintptr_t at = ((uintptr_t)scratch + 7) & ~(uintptr_t)7;
  int64_t *ord = (int64_t *)at, *tmp = ord + (n > 0 ? n : 1);
  int64_t o, i, j;
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      int64_t base = o * n * inner + i, w;
      for (j = 0; j < n; j++) ord[j] = base + j * inner;
      /* bottom-up stable merge sort; "before" = larger (or smaller), ties by index */
      for (w = 1; w < n; w *= 2) {
        int64_t lo;
        for (lo = 0; lo < n; lo += 2 * w) {
          int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
          int64_t a = lo, b = mid, c = lo;
          while (a < mid && b < hi) {
            int r = cmp_elems(t, src, ord[b], ord[a]);
            if (largest ? r > 0 : r < 0) tmp[c++] = ord[b++];
            else tmp[c++] = ord[a++];
          }
          while (a < mid) tmp[c++] = ord[a++];
          while (b < hi) tmp[c++] = ord[b++];
        }
        memcpy(ord, tmp, (size_t)n * sizeof *ord);
      }
      for (j = 0; j < k; j++) {
        int64_t y = (o * k + j) * inner + i;
        if (values) copy_elem(es, (byte *)values + (size_t)y * es, (const byte *)src + (size_t)ord[j] * es);
        if (indices) indices[y] = (ord[j] - base) / inner;
      }
    }
}
