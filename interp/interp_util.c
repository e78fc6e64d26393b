#include "interp_internal.h"
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int it_fail(interp_ctx *c, const mg_node *n, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mg_error(c->d, INVALID, n ? n->name : NULL, n ? n->op_type : NULL, "%s", msg);
  return -1;
}

const mg_array *it_in(mg_rvalue **in, const mg_node *n, int i) {
  if (i >= n->n_in || !in[i] || in[i]->kind != MG_RV_TENSOR) return NULL;
  return &in[i]->t;
}

int64_t it_numel(const mg_array *t) {
  int64_t k = 1;
  for (int i = 0; i < t->rank; i++) k *= t->dims[i];
  return k;
}

int it_is_float(mg_dtype dt) { return mg_dtype_is_float(dt); }

int it_alloc(interp_ctx *c, const mg_node *n, mg_array *t, mg_dtype dt, int rank,
             const int64_t *dims) {
  memset(t, 0, sizeof *t);
  if (rank < 0 || rank > MG_ARRAY_MAX_RANK) return it_fail(c, n, "rank %d out of range", rank);
  size_t es = dt == MG_STRING ? sizeof(char *) : mg_dtype_size(dt);
  if (!es) {
    mg_error(c->d, UNSUPPORTED_DTYPE, n ? n->name : NULL, n ? n->op_type : NULL,
             "cannot compute with dtype %s", mg_dtype_name(dt));
    return -1;
  }
  int64_t k = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0 || !mg_mul_i64(k, dims[i], &k)) return it_fail(c, n, "bad dimension %lld", (long long)dims[i]);
    t->dims[i] = dims[i];
  }
  size_t bytes;
  if (!mg_mul_size((size_t)k, es, &bytes) || bytes > ((size_t)1 << 40))
    return it_fail(c, n, "tensor too large");
  t->data = mg_calloc(bytes ? bytes : 1, 1);
  if (!t->data) {
    mg_error(c->d, OOM, n ? n->name : NULL, n ? n->op_type : NULL, "out of memory (%zu bytes)", bytes);
    return -1;
  }
  t->dtype = dt;
  t->rank = rank;
  t->nbytes = bytes;
  return 0;
}

mg_array *it_out(interp_ctx *c, const mg_node *n, mg_rvalue **out, int i, mg_dtype dt, int rank,
                 const int64_t *dims) {
  if (i >= n->n_out || !out[i]) return NULL;
  out[i]->kind = MG_RV_TENSOR;
  if (it_alloc(c, n, &out[i]->t, dt, rank, dims)) return NULL;
  return &out[i]->t;
}

double it_get_f64(const mg_array *t, int64_t k) {
  const unsigned char *p = (const unsigned char *)t->data + (size_t)k * mg_dtype_size(t->dtype);
  return mg_load_f64(t->dtype, p);
}

int64_t it_get_i64(const mg_array *t, int64_t k) {
  const unsigned char *p = (const unsigned char *)t->data + (size_t)k * mg_dtype_size(t->dtype);
  switch (t->dtype) {
  case MG_I64: case MG_U64: { int64_t x; memcpy(&x, p, 8); return x; }
  case MG_I32: { int32_t x; memcpy(&x, p, 4); return x; }
  case MG_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
  case MG_I16: { int16_t x; memcpy(&x, p, 2); return x; }
  case MG_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
  case MG_I8: return *(const int8_t *)p;
  case MG_U8: return *p;
  case MG_BOOL: return *p != 0;
  default: {
    double v = it_get_f64(t, k);
    if (isnan(v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
  }
  }
}

/* v as a float that rounds to any narrower format exactly as v itself would:
 * truncated toward zero, with the lowest bit set when inexact (a sticky bit), so
 * that rounding double -> float -> half does not round twice. */
static float to_f32_sticky(double v) {
  float f = (float)v;
  if ((double)f == v || !isfinite(v)) return f;
  uint32_t u;
  memcpy(&u, &f, 4);
  int away = ((double)f > v) == (f > 0);
  if ((u & 0x7fffffffu) != 0 && away) u -= 1;
  u |= 1;
  memcpy(&f, &u, 4);
  return f;
}

void it_set_f64(mg_array *t, int64_t k, double v) {
  unsigned char *p = (unsigned char *)t->data + (size_t)k * mg_dtype_size(t->dtype);
  switch (t->dtype) {
  case MG_F32: { float x = (float)v; memcpy(p, &x, 4); return; }
  case MG_F64: memcpy(p, &v, 8); return;
  case MG_F16: { uint16_t h = mg_f32_to_f16(to_f32_sticky(v)); memcpy(p, &h, 2); return; }
  case MG_BF16: { uint16_t h = mg_f32_to_bf16(to_f32_sticky(v)); memcpy(p, &h, 2); return; }
  case MG_BOOL: *p = v != 0; return;
  default: {
    int64_t i;
    if (isnan(v)) i = 0;
    else if (v >= 9.2233720368547758e18) i = INT64_MAX;
    else if (v <= -9.2233720368547758e18) i = INT64_MIN;
    else i = (int64_t)v;
    if (t->dtype == MG_U64 && v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) {
      uint64_t u = (uint64_t)v;
      memcpy(p, &u, 8);
      return;
    }
    it_set_i64(t, k, i);
  }
  }
}

void it_set_i64(mg_array *t, int64_t k, int64_t v) {
  unsigned char *p = (unsigned char *)t->data + (size_t)k * mg_dtype_size(t->dtype);
  switch (t->dtype) {
  case MG_I64: case MG_U64: memcpy(p, &v, 8); return;
  case MG_I32: case MG_U32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); return; }
  case MG_I16: case MG_U16: { uint16_t x = (uint16_t)v; memcpy(p, &x, 2); return; }
  case MG_I8: case MG_U8: *p = (unsigned char)v; return;
  case MG_BOOL: *p = v != 0; return;
  default: it_set_f64(t, k, (double)v); return;
  }
}

double *it_f64(interp_ctx *c, const mg_node *n, const mg_array *t) {
  int64_t k = it_numel(t);
  double *v = mg_malloc(sizeof(double) * (size_t)(k ? k : 1));
  if (!v) {
    mg_error(c->d, OOM, n ? n->name : NULL, n ? n->op_type : NULL, "out of memory");
    return NULL;
  }
  if (t->dtype == MG_F32) {
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < k; i++) {
      float x;
      memcpy(&x, p + 4 * i, 4);
      v[i] = x;
    }
  } else {
    for (int64_t i = 0; i < k; i++) v[i] = it_get_f64(t, i);
  }
  return v;
}

int64_t *it_i64(interp_ctx *c, const mg_node *n, const mg_array *t) {
  int64_t k = it_numel(t);
  int64_t *v = mg_malloc(sizeof(int64_t) * (size_t)(k ? k : 1));
  if (!v) {
    mg_error(c->d, OOM, n ? n->name : NULL, n ? n->op_type : NULL, "out of memory");
    return NULL;
  }
  for (int64_t i = 0; i < k; i++) v[i] = it_get_i64(t, i);
  return v;
}

void it_store_f64(mg_array *t, const double *v) {
  int64_t k = it_numel(t);
  if (t->dtype == MG_F32) {
    unsigned char *p = t->data;
    for (int64_t i = 0; i < k; i++) {
      float x = (float)v[i];
      memcpy(p + 4 * i, &x, 4);
    }
    return;
  }
  for (int64_t i = 0; i < k; i++) it_set_f64(t, i, v[i]);
}

void it_store_i64(mg_array *t, const int64_t *v) {
  int64_t k = it_numel(t);
  for (int64_t i = 0; i < k; i++) it_set_i64(t, i, v[i]);
}

int it_broadcast(const mg_array *const *ts, int n, int *rank, int64_t *dims) {
  int r = 0;
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->rank > r) r = ts[i]->rank;
  for (int d = 0; d < r; d++) dims[d] = 1;
  for (int i = 0; i < n; i++) {
    if (!ts[i]) continue;
    for (int d = 0; d < ts[i]->rank; d++) {
      int od = r - ts[i]->rank + d;
      int64_t x = ts[i]->dims[d];
      if (x == dims[od]) continue;
      if (dims[od] == 1) dims[od] = x;
      else if (x != 1) return -1;
    }
  }
  *rank = r;
  return 0;
}

void it_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; d--) {
    strides[d] = s;
    s *= dims[d];
  }
}

void it_bcast_strides(const mg_array *t, int rank, const int64_t *dims, int64_t *strides) {
  int64_t own[MG_ARRAY_MAX_RANK];
  it_strides(t->rank, t->dims, own);
  for (int d = 0; d < rank; d++) {
    int td = d - (rank - t->rank);
    strides[d] = td < 0 || t->dims[td] == 1 ? 0 : own[td];
  }
  (void)dims;
}

int it_ints(const mg_array *t, int64_t *out, int cap) {
  if (!t || t->rank > 1) return -1;
  int64_t k = it_numel(t);
  if (k > cap) return -1;
  for (int64_t i = 0; i < k; i++) out[i] = it_get_i64(t, i);
  return (int)k;
}

int it_copy(interp_ctx *c, const mg_node *n, mg_array *dst, const mg_array *src) {
  if (it_alloc(c, n, dst, src->dtype, src->rank, src->dims)) return -1;
  if (src->dtype == MG_STRING) {
    for (int64_t i = 0; i < it_numel(src); i++)
      if (it_set_str(c, n, dst, i, ((char *const *)src->data)[i])) return -1;
    return 0;
  }
  if (src->nbytes) memcpy(dst->data, src->data, src->nbytes);
  return 0;
}

int it_set_str(interp_ctx *c, const mg_node *n, mg_array *t, int64_t k, const char *s) {
  size_t len = strlen(s ? s : "");
  char *d = mg_malloc(len + 1);
  if (!d) {
    mg_error(c->d, OOM, n ? n->name : NULL, n ? n->op_type : NULL, "out of memory");
    return -1;
  }
  memcpy(d, s ? s : "", len + 1);
  char **slot = (char **)t->data + k;
  mg_free(*slot);
  *slot = d;
  return 0;
}
