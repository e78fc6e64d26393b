/* Host-side aclnn objects (tensors, arrays, scalars, tensor lists, executors), the
 * object registry behind the use-after-destroy and leak checks, element access
 * through a tensor's view, and the two-phase framework every aclnn op goes through.
 * Facts: ../shared/aclnn-api.json (acl_meta.h entries, conventions.two_phase) and
 * facts.md §3. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emu_internal.h"

const aclDataType EMU_FLOATS[3] = {ACL_FLOAT, ACL_FLOAT16, ACL_BF16};

/* ---- registry ------------------------------------------------------------------ */
static emu_obj **g_all;      /* every object ever made, in creation order */
static size_t g_nall, g_capall;
static emu_obj **g_hash;     /* open addressing on the pointer */
static size_t g_caphash;
static unsigned g_serial[EK_COUNT];

void *emu_xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  if (!p) { fputs("acl-emu: out of host memory\n", stderr); exit(4); }
  return p;
}

static size_t emu_hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static void emu_hash_put(emu_obj *o) {
  size_t i;
  if ((g_nall + 1) * 2 > g_caphash) {
    size_t old = g_caphash, j;
    emu_obj **oh = g_hash;
    g_caphash = g_caphash ? 2 * g_caphash : 256;
    g_hash = emu_xmalloc(g_caphash * sizeof *g_hash);
    for (j = 0; j < old; j++)
      if (oh[j]) {
        i = emu_hash_ptr(oh[j], g_caphash);
        while (g_hash[i]) i = (i + 1) & (g_caphash - 1);
        g_hash[i] = oh[j];
      }
    free(oh);
  }
  i = emu_hash_ptr(o, g_caphash);
  while (g_hash[i]) i = (i + 1) & (g_caphash - 1);
  g_hash[i] = o;
}

emu_obj *emu_lookup(const void *p) {
  size_t i;
  if (!p || !g_caphash) return NULL;
  i = emu_hash_ptr(p, g_caphash);
  while (g_hash[i]) {
    if ((const void *)g_hash[i] == p) return g_hash[i];
    i = (i + 1) & (g_caphash - 1);
  }
  return NULL;
}

void *emu_obj_new(emu_kind kind, size_t size, const char *creator) {
  emu_obj *o = emu_xmalloc(size);
  o->kind = kind;
  o->serial = ++g_serial[kind];
  o->creator = creator;
  o->alive = 1;
  emu_hash_put(o);
  if (g_nall == g_capall) {
    g_capall = g_capall ? 2 * g_capall : 256;
    g_all = realloc(g_all, g_capall * sizeof *g_all);
    if (!g_all) { fputs("acl-emu: out of host memory\n", stderr); exit(4); }
  }
  g_all[g_nall++] = o;
  return o;
}

const char *emu_kind_name(emu_kind k) {
  static const char *n[] = {"?", "aclTensor", "aclIntArray", "aclFloatArray", "aclBoolArray",
                            "aclScalar", "aclTensorList", "aclOpExecutor", "aclrtStream"};
  return k > 0 && k < EK_COUNT ? n[k] : "?";
}

void emu_sync_objects(emu_stream *s) {
  size_t i;
  for (i = 0; i < g_nall; i++)
    if (g_all[i]->pending == s) g_all[i]->pending = NULL;
}

void emu_report_leaks(unsigned *leaks) {
  size_t i;
  for (i = 0; i < g_nall; i++) {
    emu_obj *o = g_all[i];
    if (!o->alive) continue;
    if (o->kind == EK_TENSOR && ((aclTensor *)o)->owner) continue; /* reported as its list */
    if (o->kind == EK_EXECUTOR && !((aclOpExecutor *)o)->repeatable)
      fprintf(stderr, "acl-emu: error: leak: aclOpExecutor #%u created by %s was never run "
                      "(its phase 2 consumes it)\n", o->serial, o->creator);
    else if (o->kind == EK_EXECUTOR)
      fprintf(stderr, "acl-emu: error: leak: aclOpExecutor #%u created by %s was never destroyed "
                      "with aclDestroyAclOpExecutor (aclSetAclOpExecutorRepeatable note)\n",
              o->serial, o->creator);
    else
      fprintf(stderr, "acl-emu: error: leak: %s #%u created by %s was never destroyed\n",
              emu_kind_name(o->kind), o->serial, o->creator);
    (*leaks)++;
  }
}

void emu_objects_release(void) {
  size_t i;
  for (i = 0; i < g_nall; i++) {
    emu_obj *o = g_all[i];
    if (o->kind == EK_INTARRAY) free(((aclIntArray *)o)->v);
    if (o->kind == EK_FLOATARRAY) free(((aclFloatArray *)o)->v);
    if (o->kind == EK_BOOLARRAY) free(((aclBoolArray *)o)->v);
    if (o->kind == EK_TENSORLIST) free(((aclTensorList *)o)->v);
    free(o);
  }
  free(g_all);
  free(g_hash);
  g_all = g_hash = NULL;
  g_nall = g_capall = g_caphash = 0;
}

int emu_check_obj(const char *fn, const char *param, int pos, const void *p, emu_kind kind,
                  int required) {
  emu_obj *o;
  int inval = kind == EK_STREAM ? ACL_ERROR_INVALID_PARAM : ACLNN_ERR_PARAM_INVALID;
  if (!p) {
    if (!required) return 0;
    return emu_arg_error(kind == EK_STREAM ? ACL_ERROR_INVALID_PARAM : ACLNN_ERR_PARAM_NULLPTR,
                         fn, param, pos, "is NULL; a %s is required here", emu_kind_name(kind));
  }
  o = emu_lookup(p);
  if (!o)
    return emu_arg_error(inval, fn, param, pos, "%p is not a %s made by this program's acl calls",
                         p, emu_kind_name(kind));
  if (o->kind != kind)
    return emu_arg_error(inval, fn, param, pos, "is %s #%u (created by %s), not a %s",
                         emu_kind_name(o->kind), o->serial, o->creator, emu_kind_name(kind));
  if (!o->alive)
    return emu_arg_error(inval, fn, param, pos, "%s #%u (created by %s) was already %s by %s",
                         emu_kind_name(kind), o->serial, o->creator,
                         kind == EK_EXECUTOR ? "consumed or destroyed" : "destroyed", o->killer);
  return 0;
}

/* ---- dtypes -------------------------------------------------------------------- */
size_t emu_dtype_size(aclDataType dt) {
  switch (dt) {
  case ACL_FLOAT: case ACL_INT32: case ACL_UINT32: return 4;
  case ACL_FLOAT16: case ACL_BF16: case ACL_INT16: case ACL_UINT16: return 2;
  case ACL_INT8: case ACL_UINT8: case ACL_BOOL: return 1;
  case ACL_INT64: case ACL_UINT64: case ACL_DOUBLE: return 8;
  default: return 0;
  }
}

const char *emu_dtype_name(aclDataType dt) {
  switch (dt) {
  case ACL_FLOAT: return "FLOAT"; case ACL_FLOAT16: return "FLOAT16";
  case ACL_INT8: return "INT8"; case ACL_INT32: return "INT32"; case ACL_UINT8: return "UINT8";
  case ACL_INT16: return "INT16"; case ACL_UINT16: return "UINT16";
  case ACL_UINT32: return "UINT32"; case ACL_INT64: return "INT64";
  case ACL_UINT64: return "UINT64"; case ACL_DOUBLE: return "DOUBLE"; case ACL_BOOL: return "BOOL";
  case ACL_BF16: return "BFLOAT16";
  default: return "an aclDataType the emulator does not hold";
  }
}

const char *emu_format_name(aclFormat f) {
  switch (f) {
  case ACL_FORMAT_NCHW: return "ACL_FORMAT_NCHW"; case ACL_FORMAT_NHWC: return "ACL_FORMAT_NHWC";
  case ACL_FORMAT_ND: return "ACL_FORMAT_ND"; case ACL_FORMAT_NCDHW: return "ACL_FORMAT_NCDHW";
  case ACL_FORMAT_NC: return "ACL_FORMAT_NC"; case ACL_FORMAT_NCL: return "ACL_FORMAT_NCL";
  case ACL_FORMAT_NDHWC: return "ACL_FORMAT_NDHWC"; case ACL_FORMAT_HWCN: return "ACL_FORMAT_HWCN";
  default: return "a device-private aclFormat";
  }
}

int emu_is_float(aclDataType dt) {
  return dt == ACL_FLOAT || dt == ACL_FLOAT16 || dt == ACL_BF16 || dt == ACL_DOUBLE;
}

/* binary16 / bfloat16: decode exactly, encode with round-to-nearest-even */
static double emu_dec_small(uint16_t h, int mbits, int bias) {
  int e = (h >> mbits) & ((1 << (15 - mbits)) - 1), emax = (1 << (15 - mbits)) - 1;
  double m = (double)(h & ((1 << mbits) - 1)), s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == emax) return m ? NAN : s * INFINITY;
  if (e == 0) return s * ldexp(m, 1 - bias - mbits);
  return s * ldexp(m + (double)(1 << mbits), e - bias - mbits);
}

static uint16_t emu_enc_small(double v, int mbits, int bias) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  int emax = (1 << (15 - mbits)) - 1, e;
  double a = fabs(v), q;
  if (isnan(v)) return (uint16_t)(0x7fff & ~((1 << (mbits - 1)) - 1));
  if (a == 0) return sign;
  frexp(a, &e);
  e -= 1; /* a = 1.xxx * 2^e */
  if (e < 1 - bias) { /* subnormal: units of 2^(1-bias-mbits) */
    q = nearbyint(ldexp(a, bias - 1 + mbits));
    return (uint16_t)(sign | (uint16_t)q); /* q == 2^mbits carries into the exponent */
  }
  q = nearbyint(ldexp(a, mbits - e));
  if (q >= (double)(2 << mbits)) { q /= 2; e++; }
  if (e + bias >= emax) return (uint16_t)(sign | (emax << mbits));
  return (uint16_t)(sign | ((e + bias) << mbits) | ((uint16_t)q - (1 << mbits)));
}

double emu_get(const char *p, aclDataType dt) {
  union { float f; double d; int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32;
          uint32_t u32; int64_t i64; uint64_t u64; } u;
  memcpy(&u, p, emu_dtype_size(dt));
  switch (dt) {
  case ACL_FLOAT: return u.f;
  case ACL_DOUBLE: return u.d;
  case ACL_FLOAT16: return emu_dec_small(u.u16, 10, 15);
  case ACL_BF16: return emu_dec_small(u.u16, 7, 127);
  case ACL_INT8: return u.i8;
  case ACL_UINT8: return u.u8;
  case ACL_BOOL: return u.u8 != 0;
  case ACL_INT16: return u.i16;
  case ACL_UINT16: return u.u16;
  case ACL_INT32: return u.i32;
  case ACL_UINT32: return u.u32;
  case ACL_INT64: return (double)u.i64;
  case ACL_UINT64: return (double)u.u64;
  default: return NAN;
  }
}

void emu_put(char *p, aclDataType dt, double v) {
  union { float f; double d; int8_t i8; uint8_t u8; int16_t i16; uint16_t u16; int32_t i32;
          uint32_t u32; int64_t i64; uint64_t u64; } u;
  switch (dt) {
  case ACL_FLOAT: u.f = (float)v; break;
  case ACL_DOUBLE: u.d = v; break;
  case ACL_FLOAT16: u.u16 = emu_enc_small(v, 10, 15); break;
  case ACL_BF16: u.u16 = emu_enc_small(v, 7, 127); break;
  case ACL_INT8: u.i8 = (int8_t)v; break;
  case ACL_UINT8: u.u8 = (uint8_t)v; break;
  case ACL_BOOL: u.u8 = v != 0; break;
  case ACL_INT16: u.i16 = (int16_t)v; break;
  case ACL_UINT16: u.u16 = (uint16_t)v; break;
  case ACL_INT32: u.i32 = (int32_t)v; break;
  case ACL_UINT32: u.u32 = (uint32_t)v; break;
  case ACL_INT64: u.i64 = (int64_t)v; break;
  case ACL_UINT64: u.u64 = (uint64_t)v; break;
  default: return;
  }
  memcpy(p, &u, emu_dtype_size(dt));
}

/* aclFloat16ToFloat / aclFloatToFloat16: aclFloat16 is uint16_t (types.aclFloat16) */
float aclFloat16ToFloat(aclFloat16 value) { return (float)emu_dec_small(value, 10, 15); }
aclFloat16 aclFloatToFloat16(float value) { return emu_enc_small(value, 10, 15); }

int64_t emu_numel(const aclTensor *t) {
  int64_t n = 1;
  int i;
  for (i = 0; i < t->ndim; i++) n *= t->dims[i];
  return n;
}

char *emu_shape_str(const int64_t *d, int n, char *buf, size_t len) {
  size_t k = 0;
  int i;
  k += (size_t)snprintf(buf + k, len - k, "[");
  for (i = 0; i < n && k < len; i++)
    k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)d[i]);
  if (k < len) snprintf(buf + k, len - k, "]");
  return buf;
}

/* ---- element access through views --------------------------------------------- */
emu_view emu_view_of(const aclTensor *t) {
  emu_view v;
  int i;
  v.nd = t->ndim;
  v.offset = t->offset;
  for (i = 0; i < t->ndim; i++) { v.dims[i] = t->dims[i]; v.strides[i] = t->strides[i]; }
  return v;
}

int emu_view_bcast(const aclTensor *t, const int64_t *dims, int nd, emu_view *v) {
  int i, k = nd - t->ndim;
  if (k < 0 || nd > EMU_MAXDIM) return -1;
  v->nd = nd;
  v->offset = t->offset;
  for (i = 0; i < nd; i++) {
    v->dims[i] = dims[i];
    if (i < k) { v->strides[i] = 0; continue; }
    if (t->dims[i - k] == dims[i]) v->strides[i] = t->strides[i - k];
    else if (t->dims[i - k] == 1) v->strides[i] = 0;
    else return -1;
  }
  return 0;
}

static int64_t emu_view_numel(const emu_view *v) {
  int64_t n = 1;
  int i;
  for (i = 0; i < v->nd; i++) n *= v->dims[i];
  return n;
}

/* walk v's index space row-major, calling back with each element's byte address */
static void emu_walk(const emu_view *v, char *base, size_t es, char *dense, int to_dense) {
  int64_t idx[EMU_MAXDIM] = {0}, n = emu_view_numel(v), k, off = v->offset;
  int d;
  for (k = 0; k < n; k++) {
    if (to_dense) memcpy(dense + (size_t)k * es, base + off * (int64_t)es, es);
    else memcpy(base + off * (int64_t)es, dense + (size_t)k * es, es);
    for (d = v->nd - 1; d >= 0; d--) {
      idx[d]++;
      off += v->strides[d];
      if (idx[d] < v->dims[d]) break;
      off -= v->strides[d] * idx[d];
      idx[d] = 0;
    }
  }
}

void emu_gather(const aclTensor *t, const emu_view *v, void *dst) {
  emu_walk(v, emu_shadow(t->data), emu_dtype_size(t->dtype), dst, 1);
}

void emu_scatter(aclTensor *t, const void *src) {
  emu_view v = emu_view_of(t);
  emu_walk(&v, emu_shadow(t->data), emu_dtype_size(t->dtype), (char *)src, 0);
}

void emu_scatter_view(aclTensor *t, const emu_view *v, const void *src) {
  emu_walk(v, emu_shadow(t->data), emu_dtype_size(t->dtype), (char *)src, 0);
}

double *emu_load_view(const aclTensor *t, const emu_view *v) {
  int64_t n = emu_view_numel(v), k;
  size_t es = emu_dtype_size(t->dtype);
  char *raw = emu_xmalloc((size_t)n * es);
  double *out = emu_xmalloc((size_t)n * sizeof *out);
  emu_gather(t, v, raw);
  for (k = 0; k < n; k++) out[k] = emu_get(raw + (size_t)k * es, t->dtype);
  free(raw);
  return out;
}

double *emu_load(const aclTensor *t) {
  emu_view v = emu_view_of(t);
  return emu_load_view(t, &v);
}

void emu_store(aclTensor *t, const double *v) {
  int64_t n = emu_numel(t), k;
  size_t es = emu_dtype_size(t->dtype);
  char *raw = emu_xmalloc((size_t)n * es);
  for (k = 0; k < n; k++) emu_put(raw + (size_t)k * es, t->dtype, v[k]);
  emu_scatter(t, raw);
  free(raw);
}

/* ---- aclCreateTensor and friends ---------------------------------------------- */
static int emu_obj_ready(const char *fn) { return emu_ready(fn, 0) ? 1 : 0; }

aclTensor *aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                           const int64_t *stride, int64_t offset, aclFormat format,
                           const int64_t *storageDims, uint64_t storageDimsNum,
                           void *tensorData) {
  static const char *fn = "aclCreateTensor";
  aclTensor *t;
  emu_buf *b;
  size_t es = emu_dtype_size(dataType);
  int64_t extent = 0, sn = 1, avail, i;
  int f = (int)format;
  char s1[160], s2[160], s3[160];
  if (emu_obj_ready(fn)) return NULL;
  /* viewDims = logical shape; the op notes allow at most 8 dims */
  if (viewDimsNum > EMU_MAXDIM) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "viewDimsNum", 1,
                  "is %llu; no aclnn op of the fact table takes more than 8 dims",
                  (unsigned long long)viewDimsNum);
    return NULL;
  }
  if (viewDimsNum && !viewDims) {
    emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "viewDims", 0, "is NULL with viewDimsNum %llu",
                  (unsigned long long)viewDimsNum);
    return NULL;
  }
  for (i = 0; i < (int64_t)viewDimsNum; i++)
    if (viewDims[i] < 0) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "viewDims", 0, "dim %lld is %lld (negative)",
                    (long long)i, (long long)viewDims[i]);
      return NULL;
    }
  if (!es) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dataType", 2,
                  "is %d; the emulator holds FLOAT, FLOAT16, BFLOAT16, DOUBLE, BOOL and the "
                  "8/16/32/64-bit integers only", (int)dataType);
    return NULL;
  }
  /* aclCreateTensor note: "stride = per-dim step IN ELEMENTS (non-negative)" */
  for (i = 0; stride && i < (int64_t)viewDimsNum; i++)
    if (stride[i] < 0) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "stride", 3,
                    "stride %lld is %lld; the note says strides are non-negative", (long long)i,
                    (long long)stride[i]);
      return NULL;
    }
  /* aclCreateTensor note: "offset = first element offset IN ELEMENTS from tensorData" */
  if (offset < 0) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "offset", 4, "is %lld (negative)",
                  (long long)offset);
    return NULL;
  }
  if (!((f >= -1 && f <= 4) || f == 12 || f == 16 || f == 27 || f == 29 || f == 30 ||
        (f >= 32 && f <= 33) || f == 35 || f == 47 || (f >= 50 && f <= 54))) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "format", 5, "is %d, not an aclFormat value", f);
    return NULL;
  }
  if (storageDimsNum > EMU_MAXDIM || (storageDimsNum && !storageDims)) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "storageDims", 6,
                  "is NULL or longer than 8 (storageDimsNum %llu)",
                  (unsigned long long)storageDimsNum);
    return NULL;
  }
  /* aclCreateTensor note: "tensorData = DEVICE address, must be 32-byte aligned" */
  b = emu_buf_of(tensorData);
  if (!tensorData || !b || !b->alive) {
    emu_arg_error(tensorData ? ACLNN_ERR_PARAM_INVALID : ACLNN_ERR_PARAM_NULLPTR, fn, "tensorData",
                  8, "%p is not in a live aclrtMalloc buffer (the note: tensorData is a DEVICE "
                  "address)%s", tensorData,
                  tensorData && !emu_in_device_range(tensorData) ? "; it is host memory" : "");
    return NULL;
  }
  if ((uintptr_t)tensorData % 32) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "tensorData", 8,
                  "%p is not 32-byte aligned (aclCreateTensor note: must be 32-byte aligned)",
                  tensorData);
    return NULL;
  }
  if (b->device != emu_current_device()) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "tensorData", 8,
                  "aclrtMalloc buffer #%u belongs to device %d, the current device is %d",
                  b->serial, b->device, emu_current_device());
    return NULL;
  }
  {
    int64_t st[EMU_MAXDIM], n = 1, k, used = (int64_t)emu_buf_offset(b, tensorData);
    avail = ((int64_t)b->size - used) / (int64_t)es; /* whole elements from tensorData on */
    for (k = (int64_t)viewDimsNum - 1; k >= 0; k--) {
      /* src (opbase common_types.cpp): stride==NULL => contiguous strides computed */
      st[k] = stride ? stride[k] : (k == (int64_t)viewDimsNum - 1 ? 1 : st[k + 1] * viewDims[k + 1]);
      n *= viewDims[k];
    }
    if (n > 0) {
      extent = offset + 1;
      for (k = 0; k < (int64_t)viewDimsNum; k++) extent += (viewDims[k] - 1) * st[k];
    }
    for (k = 0; k < (int64_t)storageDimsNum; k++) sn *= storageDims[k];
    /* the view (offset + extent from strides, in elements) must lie inside the
     * allocation tensorData points into: every element it names is device memory of
     * that aclrtMalloc buffer */
    if (extent > avail) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "viewDims", 0,
                    "the view %s with strides %s and offset %lld reaches element %lld, but "
                    "aclrtMalloc buffer #%u holds only %lld %s elements from tensorData (%zu "
                    "bytes, tensorData at byte %lld)",
                    emu_shape_str(viewDims, (int)viewDimsNum, s1, sizeof s1),
                    emu_shape_str(st, (int)viewDimsNum, s2, sizeof s2), (long long)offset,
                    (long long)extent - 1, b->serial, (long long)avail, emu_dtype_name(dataType),
                    b->size, (long long)used);
      return NULL;
    }
    /* aclCreateTensor note: "storageDims = physical shape of the underlying buffer": the
     * view lies in the storage, and the storage in the allocation */
    if (extent > sn) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "storageDims", 6,
                    "storage %s holds %lld elements but the view %s (strides %s, offset %lld) "
                    "reaches element %lld",
                    emu_shape_str(storageDims, (int)storageDimsNum, s1, sizeof s1), (long long)sn,
                    emu_shape_str(viewDims, (int)viewDimsNum, s2, sizeof s2),
                    emu_shape_str(st, (int)viewDimsNum, s3, sizeof s3), (long long)offset,
                    (long long)extent - 1);
      return NULL;
    }
    if (sn > avail) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "storageDims", 6,
                    "storage %s needs %lld elements but aclrtMalloc buffer #%u holds %lld from "
                    "tensorData", emu_shape_str(storageDims, (int)storageDimsNum, s1, sizeof s1),
                    (long long)sn, b->serial, (long long)avail);
      return NULL;
    }
    t = emu_obj_new(EK_TENSOR, sizeof *t, fn);
    for (k = 0; k < (int64_t)viewDimsNum; k++) { t->dims[k] = viewDims[k]; t->strides[k] = st[k]; }
    for (k = 0; k < (int64_t)storageDimsNum; k++) t->sdims[k] = storageDims[k];
  }
  t->ndim = (int)viewDimsNum;
  t->sndim = (int)storageDimsNum;
  t->dtype = dataType;
  t->format = format;
  t->offset = offset;
  t->data = tensorData;
  t->buf = b;
  return t;
}

/* destroy: the object stays as a tombstone so that a later use or a second destroy is
 * reported instead of reading freed memory */
static aclnnStatus emu_destroy(const char *fn, const char *param, const void *p, emu_kind kind) {
  emu_obj *o;
  EMU_CHK(emu_ready(fn, 0));
  EMU_CHK(emu_check_obj(fn, param, 0, p, kind, 1));
  o = (emu_obj *)p;
  /* conventions.two_phase: "keep workspace and tensors alive until
   * aclrtSynchronizeStream" */
  if (o->pending)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, param, 0,
                         "%s #%u is used by work queued on aclrtStream #%u that was not "
                         "synchronized (conventions.two_phase: keep tensors alive until "
                         "aclrtSynchronizeStream)", emu_kind_name(kind), o->serial,
                         o->pending->h.serial);
  o->alive = 0;
  o->killer = fn;
  return ACLNN_SUCCESS;
}

aclnnStatus aclDestroyTensor(const aclTensor *tensor) {
  /* aclDestroyTensor note: "NULL is accepted (src returns OK). Does not free device
   * memory." */
  if (!tensor) return emu_ready("aclDestroyTensor", 0);
  if (emu_lookup(tensor) && tensor->h.kind == EK_TENSOR && tensor->h.alive && tensor->owner)
    /* aclCreateTensorList note: "aclDestroyTensorList also destroys the member tensors
     * (doc: do not destroy them again)" */
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, "aclDestroyTensor", "tensor", 0,
                         "aclTensor #%u belongs to aclTensorList #%u, which destroys it "
                         "(aclCreateTensorList note: do not destroy member tensors again)",
                         tensor->h.serial, tensor->owner->h.serial);
  return emu_destroy("aclDestroyTensor", "tensor", tensor, EK_TENSOR);
}
/* The other destroy functions: the fact table says nothing about NULL, so NULL is
 * refused (only aclDestroyTensor's note accepts it). */
aclnnStatus aclDestroyScalar(const aclScalar *scalar) {
  return emu_destroy("aclDestroyScalar", "scalar", scalar, EK_SCALAR);
}
aclnnStatus aclDestroyIntArray(const aclIntArray *array) {
  return emu_destroy("aclDestroyIntArray", "array", array, EK_INTARRAY);
}
aclnnStatus aclDestroyFloatArray(const aclFloatArray *array) {
  return emu_destroy("aclDestroyFloatArray", "array", array, EK_FLOATARRAY);
}
aclnnStatus aclDestroyBoolArray(const aclBoolArray *array) {
  return emu_destroy("aclDestroyBoolArray", "array", array, EK_BOOLARRAY);
}
aclnnStatus aclDestroyTensorList(const aclTensorList *array) {
  uint64_t i;
  aclnnStatus s = emu_destroy("aclDestroyTensorList", "array", array, EK_TENSORLIST);
  if (s) return s;
  /* aclCreateTensorList note: "aclDestroyTensorList also destroys the member tensors" */
  for (i = 0; i < array->n; i++) {
    array->v[i]->h.alive = 0;
    array->v[i]->h.killer = "aclDestroyTensorList";
  }
  return ACLNN_SUCCESS;
}

/* aclCreateIntArray note: "value = host int64 array, copied into the object" (also
 * aclCreateFloatArray, aclCreateBoolArray: host arrays) */
static void *emu_new_array(const char *fn, emu_kind kind, const void *value, uint64_t size,
                           size_t es, size_t objsize, void **copy) {
  void *o;
  if (emu_obj_ready(fn)) return NULL;
  if (size && !value) {
    emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "value", 0, "is NULL with size %llu",
                  (unsigned long long)size);
    return NULL;
  }
  if (size && emu_in_device_range(value)) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "value", 0,
                  "%p is device memory; the note says value is a host array", value);
    return NULL;
  }
  o = emu_obj_new(kind, objsize, fn);
  *copy = emu_xmalloc((size_t)size * es);
  if (size) memcpy(*copy, value, (size_t)size * es);
  return o;
}

aclIntArray *aclCreateIntArray(const int64_t *value, uint64_t size) {
  void *c;
  aclIntArray *a = emu_new_array("aclCreateIntArray", EK_INTARRAY, value, size, sizeof *value,
                                 sizeof *a, &c);
  if (a) { a->n = size; a->v = c; }
  return a;
}

aclFloatArray *aclCreateFloatArray(const float *value, uint64_t size) {
  void *c;
  aclFloatArray *a = emu_new_array("aclCreateFloatArray", EK_FLOATARRAY, value, size,
                                   sizeof *value, sizeof *a, &c);
  if (a) { a->n = size; a->v = c; }
  return a;
}

aclBoolArray *aclCreateBoolArray(const bool *value, uint64_t size) {
  void *c;
  aclBoolArray *a = emu_new_array("aclCreateBoolArray", EK_BOOLARRAY, value, size,
                                  sizeof *value, sizeof *a, &c);
  if (a) { a->n = size; a->v = c; }
  return a;
}

/* aclCreateScalar note: "value = HOST pointer read immediately according to dataType
 * (src copies by value)" */
aclScalar *aclCreateScalar(void *value, aclDataType dataType) {
  static const char *fn = "aclCreateScalar";
  aclScalar *s;
  if (emu_obj_ready(fn)) return NULL;
  if (!value) {
    emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "value", 0, "is NULL");
    return NULL;
  }
  if (emu_in_device_range(value)) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "value", 0,
                  "%p is device memory; the note says value is a HOST pointer", value);
    return NULL;
  }
  if (!emu_dtype_size(dataType)) {
    emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "dataType", 1, "is %d, a dtype the emulator "
                  "does not hold", (int)dataType);
    return NULL;
  }
  s = emu_obj_new(EK_SCALAR, sizeof *s, fn);
  s->dtype = dataType;
  s->v = emu_get(value, dataType);
  return s;
}

/* aclCreateTensorList note: "value = array of aclTensor*; aclDestroyTensorList also
 * destroys the member tensors (doc: do not destroy them again)" */
aclTensorList *aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
  static const char *fn = "aclCreateTensorList";
  aclTensorList *l;
  uint64_t i;
  if (emu_obj_ready(fn)) return NULL;
  /* an empty list has no use in the fact table's ops (aclnnCat: 1-8 D tensors) */
  if (!size || !value) {
    emu_arg_error(size ? ACLNN_ERR_PARAM_NULLPTR : ACLNN_ERR_PARAM_INVALID, fn,
                  size ? "value" : "size", size ? 0 : 1, "%s",
                  size ? "is NULL" : "is 0; the emulator refuses an empty tensor list");
    return NULL;
  }
  for (i = 0; i < size; i++) {
    char nm[40];
    snprintf(nm, sizeof nm, "value[%llu]", (unsigned long long)i);
    if (emu_check_obj(fn, nm, 0, value[i], EK_TENSOR, 1)) return NULL;
    if (value[i]->owner) {
      emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, nm, 0,
                    "aclTensor #%u already belongs to aclTensorList #%u (each list destroys "
                    "its members)", value[i]->h.serial, value[i]->owner->h.serial);
      return NULL;
    }
  }
  l = emu_obj_new(EK_TENSORLIST, sizeof *l, fn);
  l->n = size;
  l->v = emu_xmalloc((size_t)size * sizeof *l->v);
  for (i = 0; i < size; i++) {
    l->v[i] = (aclTensor *)value[i];
    l->v[i]->owner = l;
  }
  return l;
}

/* ---- argument checks ----------------------------------------------------------- */
int emu_need_tensor(const char *fn, const char *p, int pos, const aclTensor *t, int required) {
  EMU_CHK(emu_check_obj(fn, p, pos, t, EK_TENSOR, required));
  if (t && !t->buf->alive)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                         "aclTensor #%u points into aclrtMalloc buffer #%u, which was freed",
                         t->h.serial, t->buf->serial);
  return 0;
}

int emu_need_dtype(const char *fn, const char *p, int pos, const aclTensor *t,
                   const aclDataType *ok, int nok, const char *fact) {
  char list[200];
  size_t k = 0;
  int i;
  for (i = 0; i < nok; i++)
    if (t->dtype == ok[i]) return 0;
  list[0] = 0;
  for (i = 0; i < nok && k < sizeof list; i++)
    k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", emu_dtype_name(ok[i]));
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                       "dtype is %s; allowed on Atlas A2/A3: %s (%s)", emu_dtype_name(t->dtype),
                       list, fact);
}

int emu_need_rank(const char *fn, const char *p, int pos, const aclTensor *t, int lo, int hi,
                  const char *fact) {
  if (t->ndim >= lo && t->ndim <= hi) return 0;
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos, "has %d dims; allowed %d to %d (%s)",
                       t->ndim, lo, hi, fact);
}

int emu_need_format(const char *fn, const char *p, int pos, const aclTensor *t, aclFormat f,
                    const char *fact) {
  if (t->format == f) return 0;
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                       "format is %s; a %d-D tensor here must be %s (%s)",
                       emu_format_name(t->format), t->ndim, emu_format_name(f), fact);
}

int emu_need_same_dtype(const char *fn, const char *p, int pos, const aclTensor *t,
                        const aclTensor *ref, const char *refname) {
  if (t->dtype == ref->dtype) return 0;
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos,
                       "dtype is %s but %s is %s; the fact table gives no promotion for this "
                       "pair, so the emulator requires the same dtype",
                       emu_dtype_name(t->dtype), refname, emu_dtype_name(ref->dtype));
}

int emu_need_shape(const char *fn, const char *p, int pos, const aclTensor *t,
                   const int64_t *dims, int nd, const char *why) {
  char a[160], b[160];
  int i, same = t->ndim == nd;
  for (i = 0; same && i < nd; i++) same = t->dims[i] == dims[i];
  if (same) return 0;
  return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, p, pos, "has shape %s but the op produces %s (%s)",
                       emu_shape_str(t->dims, t->ndim, a, sizeof a),
                       emu_shape_str(dims, nd, b, sizeof b), why);
}

int emu_need_array(const char *fn, const char *p, int pos, const aclIntArray *a, int required) {
  return emu_check_obj(fn, p, pos, a, EK_INTARRAY, required);
}

int emu_need_scalar(const char *fn, const char *p, int pos, const aclScalar *s, int required) {
  return emu_check_obj(fn, p, pos, s, EK_SCALAR, required);
}

int emu_broadcast(const int64_t *a, int na, const int64_t *b, int nb, int64_t *out, int *nout) {
  int n = na > nb ? na : nb, i;
  if (n > EMU_MAXDIM) return -1;
  for (i = 0; i < n; i++) {
    int64_t x = i - (n - na) >= 0 ? a[i - (n - na)] : 1, y = i - (n - nb) >= 0 ? b[i - (n - nb)] : 1;
    if (x != y && x != 1 && y != 1) return -1;
    out[i] = x == 1 ? y : x;
  }
  *nout = n;
  return 0;
}

/* ---- executors and the two phases --------------------------------------------- */
int emu_phase1_outs(const char *fn, uint64_t *ws, int ws_pos, aclOpExecutor **ex) {
  if (emu_ready(fn, 1)) return ACLNN_ERR_RUNTIME_ERROR;
  /* conventions.two_phase: GetWorkspaceSize(..., uint64_t* workspaceSize,
   * aclOpExecutor** executor) */
  if (!ws) return emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "workspaceSize", ws_pos, "is NULL");
  if (!ex) return emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "executor", ws_pos + 1, "is NULL");
  *ex = NULL;
  *ws = 0;
  return 0;
}

aclOpExecutor *emu_exec_new(const char *fn, uint64_t ws, emu_run_fn run) {
  static char names[64][64];
  static int nnames;
  const char *creator = NULL;
  aclOpExecutor *e;
  int i;
  char want[64];
  snprintf(want, sizeof want, "%sGetWorkspaceSize", fn);
  for (i = 0; i < nnames; i++)
    if (!strcmp(names[i], want)) creator = names[i];
  if (!creator && nnames < 64) {
    strcpy(names[nnames], want);
    creator = names[nnames++];
  }
  e = emu_obj_new(EK_EXECUTOR, sizeof *e, creator ? creator : "an aclnn GetWorkspaceSize");
  e->fn = fn;
  e->ws = ws;
  e->run = run;
  e->device = emu_current_device();
  return e;
}

aclnnStatus emu_phase1_done(aclOpExecutor *e, uint64_t *ws, aclOpExecutor **ex) {
  *ws = e->ws;
  *ex = e;
  return ACLNN_SUCCESS;
}

/* aclSetAclOpExecutorRepeatable note: "Makes executor reusable across repeated
 * second-phase calls; must later call aclDestroyAclOpExecutor"; facts.md §3: "called
 * right after phase 1". */
aclnnStatus aclSetAclOpExecutorRepeatable(aclOpExecutor *executor) {
  static const char *fn = "aclSetAclOpExecutorRepeatable";
  EMU_CHK(emu_ready(fn, 0));
  EMU_CHK(emu_check_obj(fn, "executor", 0, executor, EK_EXECUTOR, 1));
  if (executor->repeatable)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 0,
                         "aclOpExecutor #%u is already repeatable", executor->h.serial);
  executor->repeatable = 1;
  return ACLNN_SUCCESS;
}

/* aclDestroyAclOpExecutor note: "Only for executors made repeatable with
 * aclSetAclOpExecutorRepeatable; normal executors are consumed by the second-phase
 * call." */
aclnnStatus aclDestroyAclOpExecutor(aclOpExecutor *executor) {
  static const char *fn = "aclDestroyAclOpExecutor";
  EMU_CHK(emu_ready(fn, 0));
  EMU_CHK(emu_check_obj(fn, "executor", 0, executor, EK_EXECUTOR, 1));
  if (!executor->repeatable)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 0,
                         "aclOpExecutor #%u (from %s) was not made repeatable; the note says "
                         "aclDestroyAclOpExecutor is only for repeatable executors",
                         executor->h.serial, executor->h.creator);
  executor->h.alive = 0;
  executor->h.killer = fn;
  return ACLNN_SUCCESS;
}

aclnnStatus emu_phase2(const char *fn, void *ws, uint64_t wsSize, aclOpExecutor *ex,
                       aclrtStream stream) {
  emu_obj *o;
  emu_stream *s;
  emu_buf *wb = NULL;
  int st, i;
  aclnnStatus rc;
  if (emu_ready(fn, 1)) return ACLNN_ERR_RUNTIME_ERROR;
  /* conventions.two_phase: phase 2 = aclnnXxx(workspace, workspaceSize, executor,
   * stream) with the executor phase 1 returned */
  if (!ex) return emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "executor", 2, "is NULL");
  o = emu_lookup(ex);
  if (!o || o->kind != EK_EXECUTOR)
    return emu_check_obj(fn, "executor", 2, ex, EK_EXECUTOR, 1);
  if (strcmp(ex->fn, fn))
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 2,
                         "aclOpExecutor #%u was made by %s; %s takes only the executor of "
                         "%sGetWorkspaceSize (conventions.two_phase)", o->serial, o->creator, fn, fn);
  /* facts.md §3: "Phase 2 cannot be called twice on the same executor" unless
   * aclSetAclOpExecutorRepeatable was called right after phase 1 */
  if (!o->alive && o->killer == ex->fn)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 2,
                         "aclOpExecutor #%u (from %s) was already used by a phase-2 %s and is not "
                         "repeatable (facts.md §3: phase 2 cannot be called twice on one executor "
                         "unless aclSetAclOpExecutorRepeatable was called right after phase 1)",
                         o->serial, o->creator, fn);
  if (!o->alive)
    return emu_check_obj(fn, "executor", 2, ex, EK_EXECUTOR, 1);
  /* the workspace size phase 1 returned is the one phase 2 must get */
  if (wsSize != ex->ws)
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "workspaceSize", 1,
                         "is %llu but %sGetWorkspaceSize requested %llu for aclOpExecutor #%u",
                         (unsigned long long)wsSize, fn, (unsigned long long)ex->ws, o->serial);
  /* conventions.two_phase: "Allocate workspace with aclrtMalloc only if workspaceSize > 0
   * (official example), pass NULL otherwise" - a shared non-NULL buffer is accepted
   * with size 0 (facts.md §3: one workspace buffer reused by every op), but it must be
   * device memory. */
  if (ex->ws > 0 && !ws)
    return emu_arg_error(ACLNN_ERR_PARAM_NULLPTR, fn, "workspace", 0,
                         "is NULL but %llu bytes were requested", (unsigned long long)ex->ws);
  if (ws) {
    wb = emu_buf_of(ws);
    if (!wb || !wb->alive)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "workspace", 0,
                           "%p is not in a live aclrtMalloc buffer (the workspace is device "
                           "memory from aclrtMalloc)", ws);
    if (emu_buf_offset(wb, ws) + ex->ws > wb->size)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "workspace", 0,
                           "aclrtMalloc buffer #%u has %zu bytes from the workspace pointer, %llu "
                           "were requested", wb->serial, wb->size - emu_buf_offset(wb, ws),
                           (unsigned long long)ex->ws);
  }
  s = emu_stream_of(stream, fn, "stream", 3, &st);
  if (!s) return ACLNN_ERR_PARAM_INVALID;
  if (ex->device != emu_current_device())
    return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 2,
                         "aclOpExecutor #%u was made on device %d, the current device is %d",
                         o->serial, ex->device, emu_current_device());
  /* conventions.two_phase: tensors stay alive until the stream is synchronized; in
   * particular until the phase 2 that uses them */
  for (i = 0; i < ex->nt; i++) {
    aclTensor *t = ex->t[i];
    if (!t) continue;
    if (!t->h.alive)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 2,
                           "aclOpExecutor #%u uses aclTensor #%u, which was destroyed by %s "
                           "(keep tensors alive until aclrtSynchronizeStream)", o->serial,
                           t->h.serial, t->h.killer);
    if (!t->buf->alive)
      return emu_arg_error(ACLNN_ERR_PARAM_INVALID, fn, "executor", 2,
                           "aclOpExecutor #%u uses aclTensor #%u over aclrtMalloc buffer #%u, "
                           "which was freed", o->serial, t->h.serial, t->buf->serial);
  }
  /* the workspace holds garbage for the op: a program that aliases it with a tensor
   * gets wrong results, as it could on the device */
  if (wb && ex->ws) memset(emu_shadow(ws), 0xa5, (size_t)ex->ws);
  rc = ex->run(ex);
  if (rc) return rc;
  for (i = 0; i < ex->nt; i++)
    if (ex->t[i]) {
      ex->t[i]->h.pending = s;
      emu_mark_pending(ex->t[i]->buf, s);
      if (ex->t[i]->owner) ((aclTensorList *)ex->t[i]->owner)->h.pending = s;
    }
  if (wb) emu_mark_pending(wb, s);
  s->queued = 1;
  ex->runs++;
  /* aclnnXxx notes: "Executor is consumed by this call" unless repeatable */
  if (!ex->repeatable) {
    o->alive = 0;
    o->killer = ex->fn;
  }
  return ACLNN_SUCCESS;
}
