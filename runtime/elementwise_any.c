/* migc CPU runtime: the elementwise kernels of every dtype but the float32 fast
 * paths (elementwise.c): unary and binary maths on doubles and int64, Clip, Cast,
 * IsNaN/IsInf. Contracts in mg_rt_elementwise.h. Split from elementwise.c so that a
 * float32 model compiles only the float32 loops: this generic, element-at-a-time
 * path is most of the family's compile time. */
#include "mg_runtime.h"

#include <math.h>
#include <string.h>

enum { MAX_RANK = 16 };

/* ------------------------------------------------------------ element access */

static int is_float_dtype(mg_rt_dtype t) {
  return t == MG_RT_F32 || t == MG_RT_F64 || t == MG_RT_F16 || t == MG_RT_BF16;
}
static int is_unsigned_dtype(mg_rt_dtype t) {
  return t == MG_RT_U8 || t == MG_RT_U16 || t == MG_RT_U32 || t == MG_RT_U64 ||
         t == MG_RT_BOOL;
}

/* Element access for the generic (non-float32) paths goes through const tables of
 * per-dtype functions indexed by dtype, not through switches: a switch inlined into
 * an element loop lets compilers unswitch and clone the loop once per dtype and op
 * (minutes of compile time for no run-time gain); a table lookup is one indirect
 * call they leave alone. */
typedef double (*load_f64_fn)(const void *p, int64_t k);
typedef int64_t (*load_i64_fn)(const void *p, int64_t k);
typedef void (*store_i64_fn)(void *p, int64_t k, int64_t v);
typedef void (*store_f64_fn)(void *p, int64_t k, double v);

#define LOAD_F64(name, T, EXPR) \
  static double name(const void *p, int64_t k) { const T x = ((const T *)p)[k]; return (EXPR); }
LOAD_F64(ldf_f32, float, x)
LOAD_F64(ldf_f64, double, x)
LOAD_F64(ldf_f16, uint16_t, mg_rt_f16_to_f32(x))
LOAD_F64(ldf_bf16, uint16_t, mg_rt_bf16_to_f32(x))
LOAD_F64(ldf_i8, int8_t, (double)x)
LOAD_F64(ldf_i16, int16_t, (double)x)
LOAD_F64(ldf_i32, int32_t, (double)x)
LOAD_F64(ldf_i64, int64_t, (double)x)
LOAD_F64(ldf_u8, uint8_t, (double)x)
LOAD_F64(ldf_u16, uint16_t, (double)x)
LOAD_F64(ldf_u32, uint32_t, (double)x)
LOAD_F64(ldf_u64, uint64_t, (double)x)
LOAD_F64(ldf_bool, uint8_t, x != 0)
static double ldf_none(const void *p, int64_t k) { (void)p; (void)k; return 0.0; }

#define LOAD_I64(name, T, EXPR) \
  static int64_t name(const void *p, int64_t k) { const T x = ((const T *)p)[k]; return (EXPR); }
LOAD_I64(ldi_i8, int8_t, x)
LOAD_I64(ldi_i16, int16_t, x)
LOAD_I64(ldi_i32, int32_t, x)
LOAD_I64(ldi_i64, int64_t, x)
LOAD_I64(ldi_u8, uint8_t, x)
LOAD_I64(ldi_u16, uint16_t, x)
LOAD_I64(ldi_u32, uint32_t, x)
LOAD_I64(ldi_u64, uint64_t, (int64_t)x)
LOAD_I64(ldi_bool, uint8_t, x != 0)
static int64_t ldi_none(const void *p, int64_t k) { (void)p; (void)k; return 0; }

/* Stores wrap v to the width of the integer dtype (bool: v != 0). */
#define STORE_I64(name, T, EXPR) \
  static void name(void *p, int64_t k, int64_t v) { ((T *)p)[k] = (EXPR); }
STORE_I64(sti_i8, int8_t, (int8_t)(uint8_t)v)
STORE_I64(sti_i16, int16_t, (int16_t)(uint16_t)v)
STORE_I64(sti_i32, int32_t, (int32_t)(uint32_t)v)
STORE_I64(sti_i64, int64_t, v)
STORE_I64(sti_u8, uint8_t, (uint8_t)v)
STORE_I64(sti_u16, uint16_t, (uint16_t)v)
STORE_I64(sti_u32, uint32_t, (uint32_t)v)
STORE_I64(sti_u64, uint64_t, (uint64_t)v)
STORE_I64(sti_bool, uint8_t, v != 0)
static void sti_none(void *p, int64_t k, int64_t v) { (void)p; (void)k; (void)v; }

/* Indexed by mg_rt_dtype (ONNX numbering, 0..16). */
static const load_f64_fn load_f64_of[17] = {
    ldf_none, ldf_f32, ldf_u8, ldf_i8, ldf_u16, ldf_i16, ldf_i32, ldf_i64, ldf_none,
    ldf_bool, ldf_f16, ldf_f64, ldf_u32, ldf_u64, ldf_none, ldf_none, ldf_bf16};
static const load_i64_fn load_i64_of[17] = {
    ldi_none, ldi_none, ldi_u8, ldi_i8, ldi_u16, ldi_i16, ldi_i32, ldi_i64, ldi_none,
    ldi_bool, ldi_none, ldi_none, ldi_u32, ldi_u64, ldi_none, ldi_none, ldi_none};
static const store_i64_fn store_i64_of[17] = {
    sti_none, sti_none, sti_u8, sti_i8, sti_u16, sti_i16, sti_i32, sti_i64, sti_none,
    sti_bool, sti_none, sti_none, sti_u32, sti_u64, sti_none, sti_none, sti_none};

static unsigned dtype_index(mg_rt_dtype t) { return (unsigned)t < 17u ? (unsigned)t : 0u; }

/* Element k of a float dtype as double. */
static double load_f(mg_rt_dtype t, const void *p, int64_t k) { return load_f64_of[dtype_index(t)](p, k); }

/* Element k of an integer or bool dtype as int64 (uint64 as its bit pattern). */
static int64_t load_i(mg_rt_dtype t, const void *p, int64_t k) { return load_i64_of[dtype_index(t)](p, k); }

/* Element k of any numeric dtype as double (uint64 as unsigned). */
static double load_any_f(mg_rt_dtype t, const void *p, int64_t k) { return load_f64_of[dtype_index(t)](p, k); }

/* Stores v wrapped to the width of integer dtype t (bool: v != 0). */
static void store_i(mg_rt_dtype t, void *p, int64_t k, int64_t v) { store_i64_of[dtype_index(t)](p, k, v); }

/* v as a float that rounds to float16/bfloat16 exactly as v itself would: truncated
 * toward zero with the lowest bit set when inexact (a sticky bit), so rounding
 * double -> float -> half never rounds twice. */
static float to_f32_sticky(double v) {
  float f = (float)v;
  uint32_t u;
  if ((double)f == v || v != v || v - v != 0.0) return f; /* exact, NaN or inf */
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) != 0 && (((double)f > v) == (f > 0.0f))) u -= 1; /* toward 0 */
  u |= 1;
  memcpy(&f, &u, 4);
  return f;
}

/* A double as int64 the defined way: NaN 0, saturating beyond int64, truncating. */
static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9.2233720368547758e18) return INT64_MAX;
  if (v <= -9.2233720368547758e18) return INT64_MIN;
  return (int64_t)v;
}

/* Stores of a double into each dtype (floats round to nearest even; see the header
 * for integers; bool: v != 0, so NaN is true). */
static void stf_f32(void *p, int64_t k, double v) { ((float *)p)[k] = (float)v; }
static void stf_f64(void *p, int64_t k, double v) { ((double *)p)[k] = v; }
static void stf_f16(void *p, int64_t k, double v) { ((uint16_t *)p)[k] = mg_rt_f32_to_f16(to_f32_sticky(v)); }
static void stf_bf16(void *p, int64_t k, double v) { ((uint16_t *)p)[k] = mg_rt_f32_to_bf16(to_f32_sticky(v)); }
static void stf_bool(void *p, int64_t k, double v) { ((uint8_t *)p)[k] = v != 0.0; }
static void stf_u64(void *p, int64_t k, double v) {
  if (v >= 9.2233720368547758e18 && v < 1.8446744073709552e19) ((uint64_t *)p)[k] = (uint64_t)v;
  else ((uint64_t *)p)[k] = (uint64_t)f64_to_i64(v);
}
#define STORE_F64_INT(name, T) \
  static void name(void *p, int64_t k, double v) { store_i64_of[T](p, k, f64_to_i64(v)); }
STORE_F64_INT(stf_i8, MG_RT_I8)
STORE_F64_INT(stf_i16, MG_RT_I16)
STORE_F64_INT(stf_i32, MG_RT_I32)
STORE_F64_INT(stf_i64, MG_RT_I64)
STORE_F64_INT(stf_u8, MG_RT_U8)
STORE_F64_INT(stf_u16, MG_RT_U16)
STORE_F64_INT(stf_u32, MG_RT_U32)
static void stf_none(void *p, int64_t k, double v) { (void)p; (void)k; (void)v; }
static const store_f64_fn store_f64_of[17] = {
    stf_none, stf_f32, stf_u8, stf_i8, stf_u16, stf_i16, stf_i32, stf_i64, stf_none,
    stf_bool, stf_f16, stf_f64, stf_u32, stf_u64, stf_none, stf_none, stf_bf16};

/* Stores double v into element k of any dtype. */
static void store_f(mg_rt_dtype t, void *p, int64_t k, double v) { store_f64_of[dtype_index(t)](p, k, v); }

/* Stores an integer computed with `uns` (unsigned) semantics into any dtype. */
static void store_int_any(mg_rt_dtype t, void *p, int64_t k, int64_t v, int uns) {
  if (is_float_dtype(t))
    store_f(t, p, k, uns ? (double)(uint64_t)v : (double)v);
  else
    store_i(t, p, k, v);
}

static double unary_d(mg_unop op, double v, double a, double b) {
  switch (op) {
  case MG_UN_IDENTITY: return v;
  case MG_UN_ABS: return fabs(v);
  case MG_UN_NEG: return -v;
  case MG_UN_RELU: return v < 0 ? 0.0 : v;
  case MG_UN_LEAKY_RELU: return v >= 0 ? v : a * v;
  case MG_UN_SIGMOID: return v >= 0 ? 1 / (1 + exp(-v)) : exp(v) / (1 + exp(v));
  case MG_UN_TANH: return tanh(v);
  case MG_UN_EXP: return exp(v);
  case MG_UN_LOG: return log(v);
  case MG_UN_SQRT: return sqrt(v);
  case MG_UN_ERF: return erf(v);
  case MG_UN_RECIPROCAL: return 1 / v;
  case MG_UN_GELU: return 0.5 * v * erfc(-v / sqrt(2.0));
  case MG_UN_GELU_TANH:
    return 0.5 * v * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (v + 0.044715 * v * v * v)));
  case MG_UN_HARDSIGMOID: return fmax(0, fmin(1, a * v + b));
  case MG_UN_HARDSWISH: return v * fmax(0, fmin(1, v / 6 + 0.5));
  case MG_UN_ELU: return v >= 0 ? v : a * (exp(v) - 1);
  case MG_UN_SELU: return b * (v > 0 ? v : a * (exp(v) - 1));
  case MG_UN_CELU: return (v > 0 ? v : 0) + fmin(0, a * (exp(v / a) - 1));
  case MG_UN_SOFTPLUS: return (v > 0 ? v : 0) + log1p(exp(-fabs(v)));
  case MG_UN_SOFTSIGN: return v / (1 + fabs(v));
  case MG_UN_MISH: return v * tanh((v > 0 ? v : 0) + log1p(exp(-fabs(v))));
  case MG_UN_SHRINK: return v < -a ? v + b : v > a ? v - b : 0;
  case MG_UN_THRESHOLDED_RELU: return v > a ? v : 0;
  case MG_UN_FLOOR: return floor(v);
  case MG_UN_CEIL: return ceil(v);
  case MG_UN_ROUND: return nearbyint(v);
  case MG_UN_SIGN: return v > 0 ? 1.0 : v < 0 ? -1.0 : v;
  case MG_UN_SIN: return sin(v);
  case MG_UN_COS: return cos(v);
  case MG_UN_TAN: return tan(v);
  case MG_UN_ASIN: return asin(v);
  case MG_UN_ACOS: return acos(v);
  case MG_UN_ATAN: return atan(v);
  case MG_UN_SINH: return sinh(v);
  case MG_UN_COSH: return cosh(v);
  case MG_UN_ASINH: return asinh(v);
  case MG_UN_ACOSH: return acosh(v);
  case MG_UN_ATANH: return atanh(v);
  case MG_UN_BITWISE_NOT: case MG_UN_NOT: return 0;
  }
  return 0;
}

/* One integer op with 64-bit wraparound; uns: the dtype is unsigned. */
static int64_t unary_i(mg_unop op, int64_t v, int uns) {
  switch (op) {
  case MG_UN_ABS: return !uns && v < 0 ? (int64_t)(0 - (uint64_t)v) : v;
  case MG_UN_NEG: return (int64_t)(0 - (uint64_t)v);
  case MG_UN_SIGN: return uns ? v != 0 : (v > 0) - (v < 0);
  case MG_UN_RELU: return !uns && v < 0 ? 0 : v;
  case MG_UN_BITWISE_NOT: return ~v;
  case MG_UN_NOT: return !v;
  case MG_UN_IDENTITY: case MG_UN_CEIL: case MG_UN_FLOOR: case MG_UN_ROUND: return v;
  default: return 0;
  }
}

void mg_unary_any(mg_unop op, mg_rt_dtype t, int64_t n, const void *x, void *y,
                  float a, float b) {
  int64_t i;
  if (t == MG_RT_F32) {
    mg_unary_f32(op, n, (const float *)x, (float *)y, a, b);
  } else if (is_float_dtype(t)) {
    for (i = 0; i < n; i++) store_f(t, y, i, unary_d(op, load_f(t, x, i), a, b));
  } else {
    const int uns = is_unsigned_dtype(t);
    for (i = 0; i < n; i++) store_i(t, y, i, unary_i(op, load_i(t, x, i), uns));
  }
}

/* --------------------------------------------------------------- binary any */

static double binary_d(mg_binop op, double u, double v) {
  switch (op) {
  case MG_BIN_ADD: return u + v;
  case MG_BIN_SUB: return u - v;
  case MG_BIN_MUL: return u * v;
  case MG_BIN_DIV: return u / v;
  case MG_BIN_POW: return pow(u, v);
  case MG_BIN_FMOD: return fmod(u, v);
  case MG_BIN_MOD: { /* Python's: the sign of the divisor */
    double r = fmod(u, v);
    return r != 0 && ((r < 0) != (v < 0)) ? r + v : r;
  }
  case MG_BIN_MAX: return u != u || v != v ? u + v : u > v ? u : v;
  case MG_BIN_MIN: return u != u || v != v ? u + v : u < v ? u : v;
  case MG_BIN_PRELU: return u < 0 ? u * v : u;
  case MG_BIN_EQUAL: return u == v;
  case MG_BIN_GREATER: return u > v;
  case MG_BIN_GREATER_EQUAL: return u >= v;
  case MG_BIN_LESS: return u < v;
  case MG_BIN_LESS_EQUAL: return u <= v;
  case MG_BIN_AND: return u != 0 && v != 0;
  case MG_BIN_OR: return u != 0 || v != 0;
  case MG_BIN_XOR: return (u != 0) != (v != 0);
  default: return 0;
  }
}

/* Integer base to a non-negative integer power, wrapping mod 2^64. */
static uint64_t ipow(uint64_t base, uint64_t e) {
  uint64_t acc = 1;
  while (e) {
    if (e & 1) acc *= base;
    base *= base;
    e >>= 1;
  }
  return acc;
}

static int64_t binary_i(mg_binop op, int64_t a, int64_t b, int uns) {
  const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case MG_BIN_ADD: return (int64_t)(ua + ub);
  case MG_BIN_SUB: return (int64_t)(ua - ub);
  case MG_BIN_MUL: return (int64_t)(ua * ub);
  case MG_BIN_DIV:
    if (b == 0) return 0;
    if (uns) return (int64_t)(ua / ub);
    return a == INT64_MIN && b == -1 ? a : a / b;
  case MG_BIN_MOD: case MG_BIN_FMOD: {
    int64_t r;
    if (b == 0) return 0;
    if (uns) return (int64_t)(ua % ub);
    r = a == INT64_MIN && b == -1 ? 0 : a % b;
    if (op == MG_BIN_MOD && r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  case MG_BIN_POW:
    if (!uns && b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    return (int64_t)ipow(ua, ub);
  case MG_BIN_SHIFT_LEFT: return ub >= 64 ? 0 : (int64_t)(ua << ub);
  case MG_BIN_SHIFT_RIGHT: return ub >= 64 ? 0 : (int64_t)(ua >> ub);
  case MG_BIN_BITWISE_AND: return a & b;
  case MG_BIN_BITWISE_OR: return a | b;
  case MG_BIN_BITWISE_XOR: return a ^ b;
  case MG_BIN_AND: return a && b;
  case MG_BIN_OR: return a || b;
  case MG_BIN_XOR: return !a != !b;
  case MG_BIN_MAX: return uns ? (int64_t)(ua > ub ? ua : ub) : (a > b ? a : b);
  case MG_BIN_MIN: return uns ? (int64_t)(ua < ub ? ua : ub) : (a < b ? a : b);
  case MG_BIN_PRELU: return !uns && a < 0 ? (int64_t)(ua * ub) : a;
  case MG_BIN_EQUAL: return a == b;
  case MG_BIN_GREATER: return uns ? ua > ub : a > b;
  case MG_BIN_GREATER_EQUAL: return uns ? ua >= ub : a >= b;
  case MG_BIN_LESS: return uns ? ua < ub : a < b;
  case MG_BIN_LESS_EQUAL: return uns ? ua <= ub : a <= b;
  }
  return 0;
}

void mg_binary_any(mg_binop op, mg_rt_dtype ta, mg_rt_dtype tb, mg_rt_dtype ty,
                   int rank, const int64_t *shape, const void *a,
                   const int64_t *a_strides, const void *b, const int64_t *b_strides,
                   void *y) {
  int64_t idx[MAX_RANK] = {0}, off[2] = {0, 0}, yo = 0, i;
  const int64_t *strides[2];
  const int64_t m = shape[rank - 1], sa = a_strides[rank - 1], sb = b_strides[rank - 1];
  const int uns = is_unsigned_dtype(ta);
  /* float maths when the base is a float, or (POW) when the exponent is */
  const int in_float = is_float_dtype(ta) || is_float_dtype(tb);
  const int int_result = !is_float_dtype(ta) && ty == ta; /* POW int ** float */
  if (ta == MG_RT_F32 && tb == MG_RT_F32 && ty == MG_RT_F32 &&
      (op == MG_BIN_ADD || op == MG_BIN_SUB || op == MG_BIN_MUL || op == MG_BIN_DIV ||
       op == MG_BIN_POW || op == MG_BIN_FMOD || op == MG_BIN_MAX || op == MG_BIN_MIN ||
       op == MG_BIN_PRELU)) {
    mg_binary_f32(op, rank, shape, (const float *)a, a_strides, (const float *)b, b_strides,
                  (float *)y, MG_ACT_NONE, 0.0f, 0.0f);
    return;
  }
  strides[0] = a_strides;
  strides[1] = b_strides;
  if (mg_rt_count(rank, shape) == 0) return;
  do {
    for (i = 0; i < m; i++) {
      const int64_t ka = off[0] + i * sa, kb = off[1] + i * sb;
      if (in_float) {
        double r = binary_d(op, load_any_f(ta, a, ka), load_any_f(tb, b, kb));
        if (int_result) r = trunc(r);
        store_f(ty, y, yo + i, r);
      } else {
        store_int_any(ty, y, yo + i, binary_i(op, load_i(ta, a, ka), load_i(tb, b, kb), uns), uns);
      }
    }
    yo += m;
  } while (mg_rt_next_row(rank, shape, idx, 2, strides, off));
}

void mg_clip_any(mg_rt_dtype t, int64_t n, const void *x, void *y, const void *lo,
                 const void *hi) {
  int64_t i;
  if (t == MG_RT_F32) {
    mg_clip_f32(n, (const float *)x, (float *)y, (const float *)lo, (const float *)hi);
  } else if (is_float_dtype(t)) {
    const double l = lo ? load_f(t, lo, 0) : -HUGE_VAL, h = hi ? load_f(t, hi, 0) : HUGE_VAL;
    for (i = 0; i < n; i++) {
      const double v = load_f(t, x, i), c = v < l ? l : v;
      store_f(t, y, i, v != v ? v : (c > h ? h : c));
    }
  } else {
    const int uns = is_unsigned_dtype(t);
    for (i = 0; i < n; i++) {
      int64_t v = load_i(t, x, i);
      if (lo && binary_i(MG_BIN_LESS, v, load_i(t, lo, 0), uns)) v = load_i(t, lo, 0);
      if (hi && binary_i(MG_BIN_GREATER, v, load_i(t, hi, 0), uns)) v = load_i(t, hi, 0);
      store_i(t, y, i, v);
    }
  }
}

/* --------------------------------------------------------------------- Cast */

void mg_cast(mg_rt_dtype from, mg_rt_dtype to, int64_t n, const void *x, void *y) {
  int64_t i;
  /* the hot pairs get loops of their own */
  if (from == to) {
    if (x != y) memmove(y, x, (size_t)n * mg_rt_dtype_size(from));
  } else if (from == MG_RT_F32 && to == MG_RT_F16) {
    for (i = 0; i < n; i++) ((uint16_t *)y)[i] = mg_rt_f32_to_f16(((const float *)x)[i]);
  } else if (from == MG_RT_F16 && to == MG_RT_F32) {
    for (i = 0; i < n; i++) ((float *)y)[i] = mg_rt_f16_to_f32(((const uint16_t *)x)[i]);
  } else if (from == MG_RT_I64 && to == MG_RT_F32) {
    /* through double, as the reference interpreter converts */
    for (i = 0; i < n; i++) ((float *)y)[i] = (float)(double)((const int64_t *)x)[i];
  } else if (from == MG_RT_BOOL && to == MG_RT_F32) {
    for (i = 0; i < n; i++) ((float *)y)[i] = ((const uint8_t *)x)[i] ? 1.0f : 0.0f;
  } else if (is_float_dtype(from)) {
    for (i = 0; i < n; i++) store_f(to, y, i, load_f(from, x, i));
  } else if (is_float_dtype(to)) {
    for (i = 0; i < n; i++) store_f(to, y, i, load_any_f(from, x, i));
  } else {
    for (i = 0; i < n; i++) store_i(to, y, i, load_i(from, x, i));
  }
}

/* -------------------------------------------------------------- IsNaN, IsInf */

void mg_isnan(mg_rt_dtype t, int64_t n, const void *x, uint8_t *y) {
  int64_t i;
  if (t == MG_RT_F32) {
    for (i = 0; i < n; i++) y[i] = ((const float *)x)[i] != ((const float *)x)[i];
  } else {
    for (i = 0; i < n; i++) {
      const double v = load_f(t, x, i);
      y[i] = v != v;
    }
  }
}

void mg_isinf(mg_rt_dtype t, int64_t n, const void *x, uint8_t *y, int detect_negative,
              int detect_positive) {
  int64_t i;
  for (i = 0; i < n; i++) {
    const double v = load_f(t, x, i);
    y[i] = (detect_positive && v == HUGE_VAL) || (detect_negative && v == -HUGE_VAL);
  }
}
