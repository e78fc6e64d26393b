#include "dtype.h"
#include <string.h>

static const struct {
  size_t size;
  const char *name;
} info[] = {
#define X(name, id, size, str) [id] = {size, str},
    MG_DTYPES(X)
#undef X
};
_Static_assert(sizeof info / sizeof info[0] == MG_DTYPE_COUNT, "dtype table is dense");

int mg_dtype_valid(int id) { return id > 0 && id < MG_DTYPE_COUNT; }
size_t mg_dtype_size(mg_dtype t) { return (unsigned)t < MG_DTYPE_COUNT ? info[t].size : 0; }
const char *mg_dtype_name(mg_dtype t) {
  return (unsigned)t < MG_DTYPE_COUNT ? info[t].name : "?";
}

int mg_dtype_is_float(mg_dtype t) {
  return t == MG_F32 || t == MG_F64 || t == MG_F16 || t == MG_BF16;
}
int mg_dtype_is_int(mg_dtype t) {
  switch (t) {
  case MG_U8: case MG_I8: case MG_U16: case MG_I16: case MG_I32: case MG_I64:
  case MG_U32: case MG_U64:
    return 1;
  default:
    return 0;
  }
}
int mg_dtype_is_signed(mg_dtype t) {
  return t == MG_I8 || t == MG_I16 || t == MG_I32 || t == MG_I64 || mg_dtype_is_float(t);
}

mg_dtype mg_dtype_parse(const char *s) {
  static const struct { const char *alias; mg_dtype t; } aliases[] = {
      {"f32", MG_F32}, {"float", MG_F32}, {"fp32", MG_F32}, {"f16", MG_F16},
      {"half", MG_F16}, {"fp16", MG_F16}, {"bf16", MG_BF16}, {"f64", MG_F64},
      {"double", MG_F64}, {"i64", MG_I64}, {"long", MG_I64}, {"i32", MG_I32},
      {"int", MG_I32}, {"i8", MG_I8}, {"u8", MG_U8}, {"i16", MG_I16}};
  for (int i = 1; i < MG_DTYPE_COUNT; i++)
    if (info[i].name && !strcmp(s, info[i].name)) return (mg_dtype)i;
  for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
    if (!strcmp(s, aliases[i].alias)) return aliases[i].t;
  return MG_UNDEFINED;
}

double mg_load_f64(mg_dtype t, const void *p) {
  switch (t) {
  case MG_F32: { float x; memcpy(&x, p, 4); return x; }
  case MG_F64: { double x; memcpy(&x, p, 8); return x; }
  case MG_F16: { uint16_t h; memcpy(&h, p, 2); return mg_f16_to_f32(h); }
  case MG_BF16: { uint16_t h; memcpy(&h, p, 2); return mg_bf16_to_f32(h); }
  case MG_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
  case MG_U64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
  case MG_I32: { int32_t x; memcpy(&x, p, 4); return x; }
  case MG_U32: { uint32_t x; memcpy(&x, p, 4); return x; }
  case MG_I16: { int16_t x; memcpy(&x, p, 2); return x; }
  case MG_U16: { uint16_t x; memcpy(&x, p, 2); return x; }
  case MG_I8: return *(const int8_t *)p;
  case MG_U8: return *(const uint8_t *)p;
  case MG_BOOL: return *(const uint8_t *)p != 0;
  default: return 0;
  }
}

void mg_load_f64_n(mg_dtype t, const void *p, int64_t n, double *out) {
  const unsigned char *b = p;
  if (t == MG_F32) {
    for (int64_t i = 0; i < n; i++) {
      float x;
      memcpy(&x, b + 4 * i, 4);
      out[i] = x;
    }
    return;
  }
  size_t es = mg_dtype_size(t);
  for (int64_t i = 0; i < n; i++) out[i] = mg_load_f64(t, b + (size_t)i * es);
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float mg_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (!man) return u2f(sign);
    /* subnormal half: value is man * 2^-24 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t mg_f32_to_f16(float f) {
  uint32_t u = f2u(f), sign = (u >> 16) & 0x8000;
  uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return (uint16_t)(sign | 0x7e00 | ((au >> 13) & 0x3ff)); /* NaN */
  if (au >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to inf */
  if (au < 0x38800000u) { /* result is subnormal or zero */
    if (au < 0x33000000u) return (uint16_t)sign; /* below half the smallest subnormal */
    uint32_t man = (au & 0x7fffff) | 0x800000;
    int shift = 126 - (int)(au >> 23); /* 14..24 */
    uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = au - 0x38000000u; /* rebias exponent 127 -> 15 */
  uint32_t res = r >> 13, rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (res & 1))) res++;
  return (uint16_t)(sign | res);
}

float mg_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t mg_f32_to_bf16(float f) {
  uint32_t u = f2u(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
