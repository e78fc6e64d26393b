/* Unit tests for the elementwise runtime family (runtime/elementwise.c): every kernel
 * against references written here (double precision for floats, explicit modular
 * arithmetic for integers), over randomised shapes with size-1 dims, broadcasting
 * on either side, odd sizes, in-place calls, and the edge values ONNX pins down
 * (integer wraparound, NaN propagation, casts that saturate or wrap, float16
 * rounding without double rounding). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mg_runtime.h"

static const double PI = 3.14159265358979323846;

/* ------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint32_t rnd(void) { /* xorshift64*: deterministic across platforms */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rnd_float(float lo, float hi) {
  return (float)(lo + (double)rnd() / 4294967296.0 * (hi - lo));
}
static uint64_t rnd64(void) { return ((uint64_t)rnd() << 32) | rnd(); }

/* A random broadcast problem: the output shape, and per input a shape of rank
 * <= the output's whose dims are the output's or 1, as strides over the output. */
typedef struct {
  int rank;
  int64_t shape[6], numel;
  int64_t strides[3][6]; /* element strides along the output shape, 0 = broadcast */
  int64_t in_numel[3];
} bcast_case;

static void make_case(bcast_case *bc, int n_in, int force_same) {
  int d, k;
  bc->rank = rnd_int(1, 5);
  bc->numel = 1;
  for (d = 0; d < bc->rank; d++) {
    static const int sizes[] = {1, 1, 2, 3, 4, 5, 7, 8, 13, 17};
    bc->shape[d] = sizes[rnd() % 10];
    bc->numel *= bc->shape[d];
  }
  for (k = 0; k < n_in; k++) {
    int64_t s = 1;
    const int lead = force_same && k == 0 ? 0 : rnd_int(0, bc->rank); /* missing leading dims */
    for (d = bc->rank - 1; d >= 0; d--) {
      const int bcast = d < lead || (!(force_same && k == 0) && rnd_int(0, 2) == 0);
      if (bcast || bc->shape[d] == 1) {
        bc->strides[k][d] = 0;
      } else {
        bc->strides[k][d] = s;
        s *= bc->shape[d];
      }
    }
    bc->in_numel[k] = s;
  }
}

/* Offset in input k of output element i. */
static int64_t in_off(const bcast_case *bc, int k, int64_t i) {
  int64_t off = 0;
  int d;
  for (d = bc->rank - 1; d >= 0; d--) {
    off += (i % bc->shape[d]) * bc->strides[k][d];
    i /= bc->shape[d];
  }
  return off;
}

static void assert_close(double got, double ref, double rtol, double atol) {
  if (isnan(ref)) {
    if (!isnan(got)) fail_msg("got %.9g, expected NaN", got);
    return;
  }
  if (isinf(ref)) {
    if (got != ref) fail_msg("got %.9g, expected %.9g", got, ref);
    return;
  }
  if (fabs(got - ref) > atol + rtol * fabs(ref)) fail_msg("got %.9g, expected %.9g", got, ref);
}

static double ref_act(double v, mg_act act, double a, double b) {
  switch (act) {
  case MG_ACT_NONE: return v;
  case MG_ACT_RELU: return v < 0 ? 0 : v;
  case MG_ACT_CLIP: return v < a ? a : v > b ? b : v;
  case MG_ACT_LEAKY_RELU: return v < 0 ? a * v : v;
  case MG_ACT_HARDSIGMOID: return fmax(0, fmin(1, a * v + b));
  case MG_ACT_HARDSWISH: return v * fmax(0, fmin(1, v / 6 + 0.5));
  case MG_ACT_SIGMOID: return 1 / (1 + exp(-v));
  case MG_ACT_SILU: return v / (1 + exp(-v));
  case MG_ACT_TANH: return tanh(v);
  case MG_ACT_GELU: return v / 2 * (1 + erf(v / sqrt(2.0)));
  case MG_ACT_GELU_TANH: return v / 2 * (1 + tanh(sqrt(2 / PI) * (v + 0.044715 * v * v * v)));
  }
  return v;
}

/* ------------------------------------------------------ binary float32 */

static double ref_bin_f(mg_binop op, double u, double v) {
  switch (op) {
  case MG_BIN_ADD: return u + v;
  case MG_BIN_SUB: return u - v;
  case MG_BIN_MUL: return u * v;
  case MG_BIN_DIV: return u / v;
  case MG_BIN_POW: return pow(u, v);
  case MG_BIN_FMOD: return fmod(u, v);
  case MG_BIN_MAX: return isnan(u) || isnan(v) ? NAN : u > v ? u : v;
  case MG_BIN_MIN: return isnan(u) || isnan(v) ? NAN : u < v ? u : v;
  case MG_BIN_PRELU: return u < 0 ? u * v : u;
  default: return NAN;
  }
}

static void check_binary_f32(mg_binop op, mg_act act, int in_place) {
  bcast_case bc;
  float *a, *b, *y;
  const float act_a = act == MG_ACT_CLIP ? -0.5f : 0.2f, act_b = act == MG_ACT_CLIP ? 0.5f : 0.5f;
  int64_t i;
  make_case(&bc, 2, in_place);
  a = malloc((size_t)bc.in_numel[0] * sizeof(float));
  b = malloc((size_t)bc.in_numel[1] * sizeof(float));
  y = in_place ? a : malloc((size_t)bc.numel * sizeof(float));
  assert_non_null(a);
  assert_non_null(b);
  assert_non_null(y);
  for (i = 0; i < bc.in_numel[0]; i++) a[i] = op == MG_BIN_POW ? rnd_float(0.1f, 3) : rnd_float(-2, 2);
  for (i = 0; i < bc.in_numel[1]; i++) b[i] = rnd_float(-2, 2);
  if (op == MG_BIN_DIV || op == MG_BIN_FMOD)
    for (i = 0; i < bc.in_numel[1]; i++) b[i] = b[i] < 0 ? b[i] - 0.25f : b[i] + 0.25f;
  if ((op == MG_BIN_MAX || op == MG_BIN_MIN) && bc.in_numel[0] > 2) a[1] = NAN;
  if ((op == MG_BIN_MAX || op == MG_BIN_MIN) && bc.in_numel[1] > 2) b[2] = NAN;
  {
    float *a0 = malloc((size_t)bc.in_numel[0] * sizeof(float));
    assert_non_null(a0);
    memcpy(a0, a, (size_t)bc.in_numel[0] * sizeof(float));
    mg_binary_f32(op, bc.rank, bc.shape, a, bc.strides[0], b, bc.strides[1], y, act, act_a, act_b);
    for (i = 0; i < bc.numel; i++) {
      const double r = ref_act((float)ref_bin_f(op, a0[in_off(&bc, 0, i)], b[in_off(&bc, 1, i)]),
                               act, act_a, act_b);
      assert_close(y[i], r, 4e-6, 1e-6);
    }
    free(a0);
  }
  if (!in_place) free(y);
  free(a);
  free(b);
}

static void test_binary_f32(void **state) {
  static const mg_binop ops[] = {MG_BIN_ADD, MG_BIN_SUB, MG_BIN_MUL, MG_BIN_DIV, MG_BIN_POW,
                                 MG_BIN_FMOD, MG_BIN_MAX, MG_BIN_MIN, MG_BIN_PRELU};
  size_t o;
  int rep;
  (void)state;
  for (o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (rep = 0; rep < 40; rep++) check_binary_f32(ops[o], MG_ACT_NONE, rep % 3 == 0);
}

static void test_binary_f32_epilogue(void **state) {
  int act, rep;
  (void)state;
  for (act = MG_ACT_NONE; act <= MG_ACT_GELU_TANH; act++)
    for (rep = 0; rep < 10; rep++) check_binary_f32(rep & 1 ? MG_BIN_ADD : MG_BIN_MUL, (mg_act)act, rep % 4 == 0);
}

/* The specialised inner loops: same shape, per-channel scale, bias row, scalar. */
static void test_binary_f32_patterns(void **state) {
  enum { C = 5, HW = 37 };
  float x[C * HW], s[C], bias[HW], y[C * HW];
  const int64_t shape[2] = {C, HW}, dense[2] = {HW, 1}, chan[2] = {1, 0}, row[2] = {0, 1},
                scalar[2] = {0, 0};
  int i;
  (void)state;
  for (i = 0; i < C * HW; i++) x[i] = rnd_float(-3, 3);
  for (i = 0; i < C; i++) s[i] = rnd_float(-3, 3);
  for (i = 0; i < HW; i++) bias[i] = rnd_float(-3, 3);
  mg_binary_f32(MG_BIN_MUL, 2, shape, x, dense, s, chan, y, MG_ACT_NONE, 0, 0);
  for (i = 0; i < C * HW; i++) assert_true(y[i] == x[i] * s[i / HW]);
  mg_binary_f32(MG_BIN_SUB, 2, shape, bias, row, x, dense, y, MG_ACT_NONE, 0, 0);
  for (i = 0; i < C * HW; i++) assert_true(y[i] == bias[i % HW] - x[i]);
  mg_binary_f32(MG_BIN_DIV, 2, shape, x, dense, s, scalar, y, MG_ACT_RELU, 0, 0);
  for (i = 0; i < C * HW; i++) assert_true(y[i] == fmaxf(x[i] / s[0], 0.0f));
  { /* x^2 by a broadcast exponent 2 (a path of its own): as pow, NaN and inf too */
    float two = 2.0f;
    x[0] = NAN, x[1] = -INFINITY, x[2] = -0.0f;
    mg_binary_f32(MG_BIN_POW, 2, shape, x, dense, &two, scalar, y, MG_ACT_NONE, 0, 0);
    for (i = 0; i < C * HW; i++) {
      const double r = pow(x[i], 2.0);
      assert_true(isnan(r) ? isnan(y[i]) : (y[i] == (float)r && !signbit(y[i])));
    }
    x[0] = 1.5f, x[1] = -2.0f, x[2] = 0.25f; /* finite again for the checks below */
  }
  memcpy(y, x, sizeof x);
  mg_binary_f32(MG_BIN_ADD, 2, shape, x, dense, x, dense, x, MG_ACT_NONE, 0, 0); /* x += x */
  for (i = 0; i < C * HW; i++) assert_true(x[i] == 2 * y[i]);
}

/* ---------------------------------------------------------- unary float32 */

typedef struct {
  mg_unop op;
  float lo, hi; /* input domain */
  float a, b;
} unary_case;

static double ref_unary(mg_unop op, double v, double a, double b) {
  switch (op) {
  case MG_UN_IDENTITY: return v;
  case MG_UN_ABS: return fabs(v);
  case MG_UN_NEG: return -v;
  case MG_UN_RELU: return v > 0 ? v : 0;
  case MG_UN_LEAKY_RELU: return v >= 0 ? v : a * v;
  case MG_UN_SIGMOID: return 1 / (1 + exp(-v));
  case MG_UN_TANH: return tanh(v);
  case MG_UN_EXP: return exp(v);
  case MG_UN_LOG: return log(v);
  case MG_UN_SQRT: return sqrt(v);
  case MG_UN_ERF: return erf(v);
  case MG_UN_RECIPROCAL: return 1 / v;
  case MG_UN_GELU: return 0.5 * v * (1 + erf(v / sqrt(2.0)));
  case MG_UN_GELU_TANH: return 0.5 * v * (1 + tanh(sqrt(2 / PI) * (v + 0.044715 * pow(v, 3))));
  case MG_UN_HARDSIGMOID: return fmax(0, fmin(1, a * v + b));
  case MG_UN_HARDSWISH: return v * fmax(0, fmin(1, v / 6 + 0.5));
  case MG_UN_ELU: return v >= 0 ? v : a * expm1(v);
  case MG_UN_SELU: return v > 0 ? b * v : b * a * expm1(v);
  case MG_UN_CELU: return fmax(0, v) + fmin(0, a * expm1(v / a));
  case MG_UN_SOFTPLUS: return log1p(exp(v));
  case MG_UN_SOFTSIGN: return v / (1 + fabs(v));
  case MG_UN_MISH: return v * tanh(log1p(exp(v)));
  case MG_UN_SHRINK: return v < -a ? v + b : v > a ? v - b : 0;
  case MG_UN_THRESHOLDED_RELU: return v > a ? v : 0;
  case MG_UN_FLOOR: return floor(v);
  case MG_UN_CEIL: return ceil(v);
  case MG_UN_ROUND: { /* half to even, written out */
    double f = floor(v), d = v - f;
    return d < 0.5 ? f : d > 0.5 ? f + 1 : fmod(f, 2) == 0 ? f : f + 1;
  }
  case MG_UN_SIGN: return v > 0 ? 1 : v < 0 ? -1 : 0;
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
  default: return NAN;
  }
}

static const unary_case unary_cases[] = {
    {MG_UN_IDENTITY, -5, 5, 0, 0},       {MG_UN_ABS, -5, 5, 0, 0},
    {MG_UN_NEG, -5, 5, 0, 0},            {MG_UN_RELU, -5, 5, 0, 0},
    {MG_UN_LEAKY_RELU, -5, 5, 0.01f, 0}, {MG_UN_SIGMOID, -20, 20, 0, 0},
    {MG_UN_TANH, -5, 5, 0, 0},           {MG_UN_EXP, -10, 10, 0, 0},
    {MG_UN_LOG, 0.001f, 100, 0, 0},      {MG_UN_SQRT, 0, 100, 0, 0},
    {MG_UN_ERF, -4, 4, 0, 0},            {MG_UN_RECIPROCAL, 0.5f, 9, 0, 0},
    {MG_UN_GELU, -6, 6, 0, 0},           {MG_UN_GELU_TANH, -6, 6, 0, 0},
    {MG_UN_HARDSIGMOID, -6, 6, 0.2f, 0.5f}, {MG_UN_HARDSWISH, -6, 6, 0, 0},
    {MG_UN_ELU, -5, 5, 1.5f, 0},         {MG_UN_SELU, -5, 5, 1.6732632f, 1.0507010f},
    {MG_UN_CELU, -5, 5, 2.0f, 0},        {MG_UN_SOFTPLUS, -20, 20, 0, 0},
    {MG_UN_SOFTSIGN, -5, 5, 0, 0},       {MG_UN_MISH, -10, 10, 0, 0},
    {MG_UN_SHRINK, -3, 3, 1.5f, 0.25f},  {MG_UN_THRESHOLDED_RELU, -3, 3, 1.0f, 0},
    {MG_UN_FLOOR, -9, 9, 0, 0},          {MG_UN_CEIL, -9, 9, 0, 0},
    {MG_UN_ROUND, -9, 9, 0, 0},          {MG_UN_SIGN, -2, 2, 0, 0},
    {MG_UN_SIN, -7, 7, 0, 0},            {MG_UN_COS, -7, 7, 0, 0},
    {MG_UN_TAN, -1.4f, 1.4f, 0, 0},      {MG_UN_ASIN, -1, 1, 0, 0},
    {MG_UN_ACOS, -1, 1, 0, 0},           {MG_UN_ATAN, -9, 9, 0, 0},
    {MG_UN_SINH, -5, 5, 0, 0},           {MG_UN_COSH, -5, 5, 0, 0},
    {MG_UN_ASINH, -9, 9, 0, 0},          {MG_UN_ACOSH, 1, 9, 0, 0},
    {MG_UN_ATANH, -0.99f, 0.99f, 0, 0},
};

static void test_unary_f32(void **state) {
  size_t c;
  (void)state;
  for (c = 0; c < sizeof unary_cases / sizeof unary_cases[0]; c++) {
    const unary_case *u = &unary_cases[c];
    const int n = rnd_int(1, 300);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    int i, in_place = c & 1;
    assert_non_null(x);
    assert_non_null(y);
    for (i = 0; i < n; i++) x[i] = rnd_float(u->lo, u->hi);
    if (u->op == MG_UN_ROUND && n > 3) x[0] = 2.5f, x[1] = -3.5f, x[2] = 0.5f;
    if (n > 4 && u->op != MG_UN_SIGN) x[3] = 0.0f;
    if (u->op == MG_UN_LOG || u->op == MG_UN_RECIPROCAL || u->op == MG_UN_ACOSH) x[3 % n] = u->lo;
    memcpy(y, x, (size_t)n * sizeof(float));
    mg_unary_f32(u->op, n, in_place ? y : x, y, u->a, u->b);
    for (i = 0; i < n; i++) {
      const double r = ref_unary(u->op, x[i], u->a, u->b);
      assert_close(y[i], r, 2e-6, 2e-7);
    }
    /* NaN stays NaN for the ops that pass values through */
    if (u->op == MG_UN_RELU || u->op == MG_UN_SIGMOID || u->op == MG_UN_GELU || u->op == MG_UN_SIGN) {
      x[0] = NAN;
      mg_unary_f32(u->op, 1, x, y, u->a, u->b);
      assert_true(isnan(y[0]));
    }
    free(x);
    free(y);
  }
}

/* float64, float16 and bfloat16 through the generic path. */
static void test_unary_float_dtypes(void **state) {
  size_t c;
  (void)state;
  for (c = 0; c < sizeof unary_cases / sizeof unary_cases[0]; c++) {
    const unary_case *u = &unary_cases[c];
    enum { N = 64 };
    double xd[N], yd[N];
    uint16_t xh[N], yh[N], xb[N], yb[N];
    int i;
    for (i = 0; i < N; i++) {
      xd[i] = rnd_float(u->lo, u->hi);
      xh[i] = mg_rt_f32_to_f16((float)xd[i]);
      xb[i] = mg_rt_f32_to_bf16((float)xd[i]);
    }
    mg_unary_any(u->op, MG_RT_F64, N, xd, yd, u->a, u->b);
    mg_unary_any(u->op, MG_RT_F16, N, xh, yh, u->a, u->b);
    mg_unary_any(u->op, MG_RT_BF16, N, xb, yb, u->a, u->b);
    for (i = 0; i < N; i++) {
      assert_close(yd[i], ref_unary(u->op, xd[i], u->a, u->b), 1e-12, 1e-14);
      assert_close(mg_rt_f16_to_f32(yh[i]), ref_unary(u->op, mg_rt_f16_to_f32(xh[i]), u->a, u->b), 1e-3, 1e-4);
      assert_close(mg_rt_bf16_to_f32(yb[i]), ref_unary(u->op, mg_rt_bf16_to_f32(xb[i]), u->a, u->b), 8e-3, 1e-3);
    }
  }
}

static void test_unary_int(void **state) {
  int8_t x8[6] = {-128, -1, 0, 1, 127, -7}, y8[6];
  uint8_t xu[4] = {0, 1, 200, 255}, yu[4];
  int64_t x64[4] = {INT64_MIN, -5, 0, 9}, y64[4];
  uint8_t xb[3] = {0, 1, 1}, yb[3];
  (void)state;
  mg_unary_any(MG_UN_ABS, MG_RT_I8, 6, x8, y8, 0, 0);
  assert_int_equal(y8[0], -128); /* wraps, as int8 abs does */
  assert_int_equal(y8[1], 1);
  assert_int_equal(y8[5], 7);
  mg_unary_any(MG_UN_NEG, MG_RT_I8, 6, x8, y8, 0, 0);
  assert_int_equal(y8[0], -128);
  assert_int_equal(y8[4], -127);
  mg_unary_any(MG_UN_SIGN, MG_RT_I8, 6, x8, y8, 0, 0);
  assert_int_equal(y8[0], -1);
  assert_int_equal(y8[2], 0);
  assert_int_equal(y8[4], 1);
  mg_unary_any(MG_UN_RELU, MG_RT_I8, 6, x8, y8, 0, 0);
  assert_int_equal(y8[0], 0);
  assert_int_equal(y8[4], 127);
  mg_unary_any(MG_UN_BITWISE_NOT, MG_RT_I8, 6, x8, y8, 0, 0);
  assert_int_equal(y8[0], 127);
  assert_int_equal(y8[2], -1);
  mg_unary_any(MG_UN_BITWISE_NOT, MG_RT_U8, 4, xu, yu, 0, 0);
  assert_int_equal(yu[0], 255);
  assert_int_equal(yu[2], 55);
  mg_unary_any(MG_UN_SIGN, MG_RT_U8, 4, xu, yu, 0, 0);
  assert_int_equal(yu[0], 0);
  assert_int_equal(yu[3], 1);
  mg_unary_any(MG_UN_ABS, MG_RT_U8, 4, xu, yu, 0, 0);
  assert_int_equal(yu[3], 255);
  mg_unary_any(MG_UN_ABS, MG_RT_I64, 4, x64, y64, 0, 0);
  assert_true(y64[0] == INT64_MIN);
  assert_true(y64[1] == 5);
  mg_unary_any(MG_UN_NOT, MG_RT_BOOL, 3, xb, yb, 0, 0);
  assert_int_equal(yb[0], 1);
  assert_int_equal(yb[1], 0);
  mg_unary_any(MG_UN_NOT, MG_RT_BOOL, 3, xb, xb, 0, 0); /* in place */
  assert_int_equal(xb[2], 0);
}

/* ------------------------------------------------------------ binary any */

static const mg_rt_dtype int_types[] = {MG_RT_I8, MG_RT_U8, MG_RT_I16, MG_RT_U16,
                                        MG_RT_I32, MG_RT_U32, MG_RT_I64, MG_RT_U64};

static int bits_of(mg_rt_dtype t) { return (int)mg_rt_dtype_size(t) * 8; }
static int is_uns(mg_rt_dtype t) {
  return t == MG_RT_U8 || t == MG_RT_U16 || t == MG_RT_U32 || t == MG_RT_U64;
}

/* v reduced to the dtype's range: the value of its low `bits` bits, signed or not. */
static int64_t wrap_to(mg_rt_dtype t, uint64_t v) {
  const int bits = bits_of(t);
  if (bits < 64) {
    v &= ((uint64_t)1 << bits) - 1;
    if (!is_uns(t) && (v >> (bits - 1))) return (int64_t)v - ((int64_t)1 << (bits - 1)) * 2;
  }
  return (int64_t)v;
}

static int64_t read_int(mg_rt_dtype t, const void *p, int64_t k) {
  uint64_t v = 0;
  memcpy(&v, (const char *)p + k * (int64_t)mg_rt_dtype_size(t), mg_rt_dtype_size(t));
  return wrap_to(t, v); /* little-endian */
}
static void write_int(mg_rt_dtype t, void *p, int64_t k, int64_t v) {
  memcpy((char *)p + k * (int64_t)mg_rt_dtype_size(t), &v, mg_rt_dtype_size(t));
}

/* Reference integer op: values are already in the dtype's range. Returns the
 * result before wrapping (callers wrap). */
static uint64_t ref_bin_i(mg_binop op, mg_rt_dtype t, int64_t a, int64_t b) {
  const int uns = is_uns(t);
  const uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  /* unsigned values of a 64-bit dtype compare as unsigned */
  const int lt = uns ? ua < ub : a < b, gt = uns ? ua > ub : a > b;
  switch (op) {
  case MG_BIN_ADD: return ua + ub;
  case MG_BIN_SUB: return ua - ub;
  case MG_BIN_MUL: return ua * ub;
  case MG_BIN_DIV:
    if (b == 0) return 0;
    if (uns) return ua / ub;
    if (a == INT64_MIN && b == -1) return ua;
    { /* truncation toward zero, from magnitudes */
      uint64_t q = (a < 0 ? 0 - ua : ua) / (b < 0 ? 0 - ub : ub);
      return (a < 0) != (b < 0) ? 0 - q : q;
    }
  case MG_BIN_MOD: case MG_BIN_FMOD: {
    int64_t q, r;
    if (b == 0) return 0;
    if (uns) return ua % ub;
    if (b == -1) return 0;
    q = a / b;
    if (op == MG_BIN_MOD && (a - q * b) != 0 && ((a < 0) != (b < 0))) q -= 1; /* floor */
    r = (int64_t)((uint64_t)a - (uint64_t)q * (uint64_t)b);
    return (uint64_t)r;
  }
  case MG_BIN_POW: {
    uint64_t acc = 1;
    int64_t e;
    if (!uns && b < 0) return a == 1 ? 1 : a == -1 ? ((b % 2) ? ua : 1) : 0;
    assert_true(ub <= 70); /* the test draws small exponents */
    for (e = 0; e < (int64_t)ub; e++) acc *= ua;
    return acc;
  }
  case MG_BIN_SHIFT_LEFT: return ub >= 64 ? 0 : ua << ub;
  case MG_BIN_SHIFT_RIGHT: return ub >= 64 ? 0 : ua >> ub;
  case MG_BIN_BITWISE_AND: return ua & ub;
  case MG_BIN_BITWISE_OR: return ua | ub;
  case MG_BIN_BITWISE_XOR: return ua ^ ub;
  case MG_BIN_MAX: return gt ? ua : ub;
  case MG_BIN_MIN: return lt ? ua : ub;
  case MG_BIN_PRELU: return !uns && a < 0 ? ua * ub : ua;
  case MG_BIN_EQUAL: return a == b;
  case MG_BIN_GREATER: return gt;
  case MG_BIN_GREATER_EQUAL: return !lt;
  case MG_BIN_LESS: return lt;
  case MG_BIN_LESS_EQUAL: return !gt;
  default: return 0;
  }
}

static int is_compare(mg_binop op) { return op >= MG_BIN_EQUAL; }

static void test_binary_int(void **state) {
  static const mg_binop ops[] = {MG_BIN_ADD, MG_BIN_SUB, MG_BIN_MUL, MG_BIN_DIV, MG_BIN_MOD,
                                 MG_BIN_FMOD, MG_BIN_POW, MG_BIN_SHIFT_LEFT, MG_BIN_SHIFT_RIGHT,
                                 MG_BIN_BITWISE_AND, MG_BIN_BITWISE_OR, MG_BIN_BITWISE_XOR,
                                 MG_BIN_MAX, MG_BIN_MIN, MG_BIN_PRELU, MG_BIN_EQUAL,
                                 MG_BIN_GREATER, MG_BIN_GREATER_EQUAL, MG_BIN_LESS,
                                 MG_BIN_LESS_EQUAL};
  size_t o, t;
  int rep;
  (void)state;
  for (o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (t = 0; t < sizeof int_types / sizeof int_types[0]; t++)
      for (rep = 0; rep < 6; rep++) {
        const mg_rt_dtype dt = int_types[t], ty = is_compare(ops[o]) ? MG_RT_BOOL : dt;
        const int in_place = rep == 0 && ty == dt;
        bcast_case bc;
        char *a, *b, *y, *a0;
        int64_t i;
        const size_t es = mg_rt_dtype_size(dt);
        make_case(&bc, 2, in_place);
        a = malloc((size_t)bc.in_numel[0] * es);
        a0 = malloc((size_t)bc.in_numel[0] * es);
        b = malloc((size_t)bc.in_numel[1] * es);
        y = in_place ? a : malloc((size_t)bc.numel * mg_rt_dtype_size(ty));
        assert_non_null(a);
        assert_non_null(a0);
        assert_non_null(b);
        assert_non_null(y);
        for (i = 0; i < bc.in_numel[0]; i++) {
          uint64_t v = rnd64();
          if (rnd() % 3 == 0) v = (uint64_t)rnd_int(-9, 9);
          if (rnd() % 7 == 0) v = (uint64_t)1 << (bits_of(dt) - 1); /* the minimum */
          write_int(dt, a, i, wrap_to(dt, v));
        }
        for (i = 0; i < bc.in_numel[1]; i++) {
          uint64_t v = rnd64();
          if (rnd() % 2 == 0) v = (uint64_t)rnd_int(-9, 9);
          if (ops[o] == MG_BIN_SHIFT_LEFT || ops[o] == MG_BIN_SHIFT_RIGHT || ops[o] == MG_BIN_POW)
            v = (uint64_t)rnd_int(0, bits_of(dt) + 2);
          if (rnd() % 9 == 0) v = 0;
          if (rnd() % 9 == 0) v = (uint64_t)-1;
          if (ops[o] == MG_BIN_POW && is_uns(dt) && v > 70) v = 3;
          write_int(dt, b, i, wrap_to(dt, v));
        }
        memcpy(a0, a, (size_t)bc.in_numel[0] * es);
        mg_binary_any(ops[o], dt, dt, ty, bc.rank, bc.shape, a, bc.strides[0], b, bc.strides[1], y);
        for (i = 0; i < bc.numel; i++) {
          const int64_t av = read_int(dt, a0, in_off(&bc, 0, i)), bv = read_int(dt, b, in_off(&bc, 1, i));
          const uint64_t r = ref_bin_i(ops[o], dt, av, bv);
          if (ty == MG_RT_BOOL) {
            if (((const uint8_t *)y)[i] != (r != 0))
              fail_msg("op %d dtype %d: %lld, %lld gave %d", (int)ops[o], (int)dt, (long long)av,
                       (long long)bv, ((const uint8_t *)y)[i]);
          } else if (read_int(dt, y, i) != wrap_to(dt, r)) {
            fail_msg("op %d dtype %d: %lld, %lld gave %lld, expected %lld", (int)ops[o], (int)dt,
                     (long long)av, (long long)bv, (long long)read_int(dt, y, i),
                     (long long)wrap_to(dt, r));
          }
        }
        if (!in_place) free(y);
        free(a);
        free(a0);
        free(b);
      }
}

static void test_binary_float_dtypes(void **state) {
  static const mg_binop ops[] = {MG_BIN_ADD, MG_BIN_SUB, MG_BIN_MUL, MG_BIN_DIV, MG_BIN_POW,
                                 MG_BIN_MOD, MG_BIN_FMOD, MG_BIN_MAX, MG_BIN_MIN, MG_BIN_PRELU,
                                 MG_BIN_EQUAL, MG_BIN_GREATER, MG_BIN_GREATER_EQUAL,
                                 MG_BIN_LESS, MG_BIN_LESS_EQUAL};
  size_t o;
  int rep;
  (void)state;
  for (o = 0; o < sizeof ops / sizeof ops[0]; o++)
    for (rep = 0; rep < 8; rep++) {
      const mg_binop op = ops[o];
      const int cmp = is_compare(op);
      bcast_case bc;
      double *a, *b, *y;
      uint16_t *ah, *bh, *yh;
      uint8_t *yc;
      float *af, *bf, *yf;
      int64_t i;
      make_case(&bc, 2, 0);
      a = malloc((size_t)bc.in_numel[0] * 8);
      b = malloc((size_t)bc.in_numel[1] * 8);
      y = malloc((size_t)bc.numel * 8);
      ah = malloc((size_t)bc.in_numel[0] * 2);
      bh = malloc((size_t)bc.in_numel[1] * 2);
      yh = malloc((size_t)bc.numel * 2);
      af = malloc((size_t)bc.in_numel[0] * 4);
      bf = malloc((size_t)bc.in_numel[1] * 4);
      yf = malloc((size_t)bc.numel * 4);
      yc = malloc((size_t)bc.numel);
      for (i = 0; i < bc.in_numel[0]; i++) {
        a[i] = rnd_float(op == MG_BIN_POW ? 0.1f : -4, 4);
        ah[i] = mg_rt_f32_to_f16((float)a[i]);
        af[i] = (float)a[i];
      }
      for (i = 0; i < bc.in_numel[1]; i++) {
        b[i] = rnd_float(-4, 4);
        if (rnd() % 5 == 0 && i > 0) b[i] = b[i - 1];
        bh[i] = mg_rt_f32_to_f16((float)b[i]);
        bf[i] = (float)b[i];
      }
      if (cmp) {
        mg_binary_any(op, MG_RT_F64, MG_RT_F64, MG_RT_BOOL, bc.rank, bc.shape, a, bc.strides[0], b, bc.strides[1], yc);
        for (i = 0; i < bc.numel; i++) {
          const double u = a[in_off(&bc, 0, i)], v = b[in_off(&bc, 1, i)];
          const int r = op == MG_BIN_EQUAL ? u == v : op == MG_BIN_GREATER ? u > v
                      : op == MG_BIN_GREATER_EQUAL ? u >= v : op == MG_BIN_LESS ? u < v : u <= v;
          assert_int_equal(yc[i], r);
        }
        mg_binary_any(op, MG_RT_F32, MG_RT_F32, MG_RT_BOOL, bc.rank, bc.shape, af, bc.strides[0], bf, bc.strides[1], yc);
        for (i = 0; i < bc.numel; i++) {
          const float u = af[in_off(&bc, 0, i)], v = bf[in_off(&bc, 1, i)];
          const int r = op == MG_BIN_EQUAL ? u == v : op == MG_BIN_GREATER ? u > v
                      : op == MG_BIN_GREATER_EQUAL ? u >= v : op == MG_BIN_LESS ? u < v : u <= v;
          assert_int_equal(yc[i], r);
        }
      } else {
        mg_binary_any(op, MG_RT_F64, MG_RT_F64, MG_RT_F64, bc.rank, bc.shape, a, bc.strides[0], b, bc.strides[1], y);
        mg_binary_any(op, MG_RT_F16, MG_RT_F16, MG_RT_F16, bc.rank, bc.shape, ah, bc.strides[0], bh, bc.strides[1], yh);
        for (i = 0; i < bc.numel; i++) {
          double u = a[in_off(&bc, 0, i)], v = b[in_off(&bc, 1, i)], r;
          if (op == MG_BIN_MOD) {
            r = u - v * floor(u / v);
          } else {
            r = ref_bin_f(op, u, v);
          }
          assert_close(y[i], r, 1e-12, 1e-12);
          u = mg_rt_f16_to_f32(ah[in_off(&bc, 0, i)]);
          v = mg_rt_f16_to_f32(bh[in_off(&bc, 1, i)]);
          r = op == MG_BIN_MOD ? u - v * floor(u / v) : ref_bin_f(op, u, v);
          assert_close(mg_rt_f16_to_f32(yh[i]), r, 1e-3, 1e-3);
        }
      }
      free(a), free(b), free(y), free(ah), free(bh), free(yh), free(af), free(bf), free(yf), free(yc);
    }
}

/* Pow with an exponent of another dtype, and logical ops on bool. */
static void test_binary_mixed(void **state) {
  const int64_t shape[1] = {4}, one[1] = {1};
  float base[4] = {2, -3, 0.5f, 4}, yf[4];
  int32_t e[4] = {3, 2, -1, 0}, bi[4] = {2, -3, 7, 10}, yi[4];
  float ef[4] = {0.5f, 2, 1.5f, -1};
  uint8_t p[4] = {0, 0, 1, 1}, q[4] = {0, 1, 0, 1}, r[4];
  int k;
  (void)state;
  mg_binary_any(MG_BIN_POW, MG_RT_F32, MG_RT_I32, MG_RT_F32, 1, shape, base, one, e, one, yf);
  assert_true(yf[0] == 8.0f && yf[1] == 9.0f && yf[2] == 2.0f && yf[3] == 1.0f);
  mg_binary_any(MG_BIN_POW, MG_RT_I32, MG_RT_F32, MG_RT_I32, 1, shape, bi, one, ef, one, yi);
  assert_int_equal(yi[0], 1);   /* trunc(sqrt 2) */
  assert_int_equal(yi[1], 9);
  assert_int_equal(yi[2], 18);  /* trunc(7^1.5 = 18.52) */
  assert_int_equal(yi[3], 0);   /* trunc(0.1) */
  mg_binary_any(MG_BIN_AND, MG_RT_BOOL, MG_RT_BOOL, MG_RT_BOOL, 1, shape, p, one, q, one, r);
  for (k = 0; k < 4; k++) assert_int_equal(r[k], p[k] && q[k]);
  mg_binary_any(MG_BIN_OR, MG_RT_BOOL, MG_RT_BOOL, MG_RT_BOOL, 1, shape, p, one, q, one, r);
  for (k = 0; k < 4; k++) assert_int_equal(r[k], p[k] || q[k]);
  mg_binary_any(MG_BIN_XOR, MG_RT_BOOL, MG_RT_BOOL, MG_RT_BOOL, 1, shape, p, one, q, one, r);
  for (k = 0; k < 4; k++) assert_int_equal(r[k], p[k] != q[k]);
  mg_binary_any(MG_BIN_EQUAL, MG_RT_BOOL, MG_RT_BOOL, MG_RT_BOOL, 1, shape, p, one, q, one, r);
  for (k = 0; k < 4; k++) assert_int_equal(r[k], p[k] == q[k]);
}

/* ------------------------------------------------------------------ Where */

static void test_where(void **state) {
  static const size_t sizes[] = {1, 2, 4, 8, 3};
  size_t s;
  int rep;
  (void)state;
  for (s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
    for (rep = 0; rep < 20; rep++) {
      const size_t es = sizes[s];
      bcast_case bc;
      uint8_t *c;
      unsigned char *x, *y, *o;
      int64_t i;
      make_case(&bc, 3, 0);
      c = malloc((size_t)bc.in_numel[0]);
      x = malloc((size_t)bc.in_numel[1] * es);
      y = malloc((size_t)bc.in_numel[2] * es);
      o = malloc((size_t)bc.numel * es);
      for (i = 0; i < bc.in_numel[0]; i++) c[i] = rnd() & 1;
      for (i = 0; i < bc.in_numel[1] * (int64_t)es; i++) x[i] = (unsigned char)rnd();
      for (i = 0; i < bc.in_numel[2] * (int64_t)es; i++) y[i] = (unsigned char)rnd();
      mg_where(es, bc.rank, bc.shape, c, bc.strides[0], x, bc.strides[1], y, bc.strides[2], o);
      for (i = 0; i < bc.numel; i++) {
        const unsigned char *src = c[in_off(&bc, 0, i)] ? x + in_off(&bc, 1, i) * (int64_t)es
                                                        : y + in_off(&bc, 2, i) * (int64_t)es;
        assert_memory_equal(o + i * (int64_t)es, src, es);
      }
      free(c), free(x), free(y), free(o);
    }
}

/* ------------------------------------------------------------------- Clip */

static void test_clip(void **state) {
  float x[6] = {-3, -0.5f, 0, 0.5f, 3, NAN}, y[6], lo = -1, hi = 1, lo2 = 2;
  int8_t xi[5] = {-128, -5, 0, 5, 127}, yi[5], loi = -10, hii = 3;
  uint8_t xu[3] = {0, 100, 255}, yu[3], hiu = 200;
  double xd[3] = {-2, 0.25, 2}, yd[3], lod = -1;
  uint16_t xh[2], yh[2], hih = mg_rt_f32_to_f16(0.5f);
  (void)state;
  mg_clip_f32(6, x, y, &lo, &hi);
  assert_true(y[0] == -1 && y[1] == -0.5f && y[2] == 0 && y[3] == 0.5f && y[4] == 1 && isnan(y[5]));
  mg_clip_f32(6, x, y, NULL, &hi);
  assert_true(y[0] == -3 && y[4] == 1);
  mg_clip_f32(6, x, y, &lo, NULL);
  assert_true(y[0] == -1 && y[4] == 3);
  mg_clip_f32(5, x, y, &lo2, &hi); /* min > max: everything is max */
  assert_true(y[0] == 1 && y[4] == 1);
  mg_clip_f32(6, x, x, &lo, &hi); /* in place */
  assert_true(x[0] == -1 && x[4] == 1);
  mg_clip_any(MG_RT_I8, 5, xi, yi, &loi, &hii);
  assert_true(yi[0] == -10 && yi[1] == -5 && yi[3] == 3 && yi[4] == 3);
  mg_clip_any(MG_RT_U8, 3, xu, yu, NULL, &hiu);
  assert_true(yu[0] == 0 && yu[1] == 100 && yu[2] == 200);
  mg_clip_any(MG_RT_F64, 3, xd, yd, &lod, NULL);
  assert_true(yd[0] == -1 && yd[1] == 0.25 && yd[2] == 2);
  xh[0] = mg_rt_f32_to_f16(0.75f);
  xh[1] = mg_rt_f32_to_f16(-0.75f);
  mg_clip_any(MG_RT_F16, 2, xh, yh, NULL, &hih);
  assert_true(mg_rt_f16_to_f32(yh[0]) == 0.5f && mg_rt_f16_to_f32(yh[1]) == -0.75f);
}

/* ------------------------------------------------------------------- Cast */

static void test_cast(void **state) {
  const float f[8] = {300.7f, -1.5f, NAN, 1e30f, -1e30f, 2.5f, -0.0f, 127.9f};
  int8_t i8[8];
  uint8_t u8[8], b[8];
  int64_t i64[8];
  uint64_t u64[2];
  const double big[2] = {9223372036854775808.0 * 1.5, -1};
  const double dh[4] = {1.0 + 1.0 / 2048 + 1.0 / 1099511627776.0, /* just above a half tie */
                        1.0 + 1.0 / 2048,                          /* an exact tie: even */
                        65504, 1e6};
  uint16_t h[4], hb[2];
  const int64_t li[3] = {(int64_t)1 << 53 | 1, -7, INT64_MIN};
  float lf[3];
  const uint64_t lu[1] = {UINT64_MAX};
  double ld[1];
  const float fb[2] = {1.0f + 1.0f / 256 + 1.0f / 65536, -2.0f};
  int k;
  (void)state;
  mg_cast(MG_RT_F32, MG_RT_I8, 8, f, i8);
  /* trunc, then saturate to int64, then wrap: 300 -> 44, 1e30 -> INT64_MAX -> -1 */
  assert_int_equal(i8[0], 44);
  assert_int_equal(i8[1], -1);
  assert_int_equal(i8[2], 0);
  assert_int_equal(i8[3], -1);
  assert_int_equal(i8[4], 0);
  assert_int_equal(i8[5], 2);
  assert_int_equal(i8[6], 0);
  assert_int_equal(i8[7], 127);
  mg_cast(MG_RT_F32, MG_RT_U8, 8, f, u8);
  assert_int_equal(u8[0], 44);
  assert_int_equal(u8[1], 255);
  mg_cast(MG_RT_F32, MG_RT_I64, 8, f, i64);
  assert_true(i64[3] == INT64_MAX && i64[4] == INT64_MIN && i64[2] == 0 && i64[0] == 300);
  mg_cast(MG_RT_F64, MG_RT_U64, 2, big, u64);
  assert_true(u64[0] == (uint64_t)13835058055282163712.0);
  assert_true(u64[1] == UINT64_MAX); /* -1 -> int64 -1 -> wraps */
  mg_cast(MG_RT_F32, MG_RT_BOOL, 8, f, b);
  assert_true(b[0] == 1 && b[2] == 1 && b[6] == 0);
  mg_cast(MG_RT_F64, MG_RT_F16, 4, dh, h);
  assert_int_equal(h[0], 0x3C01); /* rounding through float would give 0x3C00 */
  assert_int_equal(h[1], 0x3C00);
  assert_int_equal(h[2], 0x7BFF);
  assert_int_equal(h[3], 0x7C00);
  mg_cast(MG_RT_F32, MG_RT_BF16, 2, fb, hb);
  assert_int_equal(hb[0], 0x3F81);
  assert_int_equal(hb[1], 0xC000);
  mg_cast(MG_RT_I64, MG_RT_F32, 3, li, lf);
  assert_true(lf[0] == 9007199254740992.0f && lf[1] == -7.0f && lf[2] == -9223372036854775808.0f);
  mg_cast(MG_RT_U64, MG_RT_F64, 1, lu, ld);
  assert_true(ld[0] == 18446744073709551616.0);
  {
    const int16_t s[3] = {-1, 300, -32768};
    uint8_t o8[3];
    uint32_t o32[3];
    float of[3];
    uint16_t oh[3];
    mg_cast(MG_RT_I16, MG_RT_U8, 3, s, o8);
    assert_true(o8[0] == 255 && o8[1] == 44 && o8[2] == 0);
    mg_cast(MG_RT_I16, MG_RT_U32, 3, s, o32);
    assert_true(o32[0] == 0xFFFFFFFFu && o32[2] == 0xFFFF8000u);
    mg_cast(MG_RT_I16, MG_RT_F32, 3, s, of);
    assert_true(of[0] == -1 && of[1] == 300 && of[2] == -32768);
    mg_cast(MG_RT_I16, MG_RT_F16, 3, s, oh);
    assert_true(mg_rt_f16_to_f32(oh[1]) == 300 && mg_rt_f16_to_f32(oh[2]) == -32768);
    mg_cast(MG_RT_I16, MG_RT_BOOL, 3, s, o8);
    assert_true(o8[0] == 1 && o8[1] == 1);
  }
  {
    const uint8_t bb[3] = {0, 1, 1};
    float of[3];
    int32_t oi[3];
    mg_cast(MG_RT_BOOL, MG_RT_F32, 3, bb, of);
    assert_true(of[0] == 0 && of[1] == 1);
    mg_cast(MG_RT_BOOL, MG_RT_I32, 3, bb, oi);
    assert_true(oi[0] == 0 && oi[2] == 1);
  }
  {
    uint16_t hh[3];
    float back[3];
    const float src[3] = {1.0f / 3, 65520.0f, -1e-8f};
    mg_cast(MG_RT_F32, MG_RT_F16, 3, src, hh);
    assert_int_equal(hh[0], 0x3555);
    assert_int_equal(hh[1], 0x7C00); /* rounds up to inf */
    assert_int_equal(hh[2], 0x8000);
    mg_cast(MG_RT_F16, MG_RT_F32, 3, hh, back);
    assert_true(isinf(back[1]) && back[2] == 0);
  }
  for (k = 0; k < 8; k++) i64[k] = k - 3;
  mg_cast(MG_RT_I64, MG_RT_I64, 8, i64, i64); /* same dtype, in place */
  assert_true(i64[0] == -3);
}

/* ------------------------------------------------------------ IsNaN, IsInf */

static void test_isnan_isinf(void **state) {
  const float f[5] = {1, NAN, INFINITY, -INFINITY, 0};
  const double d[3] = {NAN, -INFINITY, 5};
  uint16_t h[3];
  uint8_t y[5];
  (void)state;
  h[0] = 0x7E00, h[1] = 0xFC00, h[2] = 0x3C00;
  mg_isnan(MG_RT_F32, 5, f, y);
  assert_true(!y[0] && y[1] && !y[2] && !y[3] && !y[4]);
  mg_isnan(MG_RT_F64, 3, d, y);
  assert_true(y[0] && !y[1] && !y[2]);
  mg_isnan(MG_RT_F16, 3, h, y);
  assert_true(y[0] && !y[1] && !y[2]);
  mg_isinf(MG_RT_F32, 5, f, y, 1, 1);
  assert_true(!y[0] && !y[1] && y[2] && y[3] && !y[4]);
  mg_isinf(MG_RT_F32, 5, f, y, 0, 1);
  assert_true(y[2] && !y[3]);
  mg_isinf(MG_RT_F32, 5, f, y, 1, 0);
  assert_true(!y[2] && y[3]);
  mg_isinf(MG_RT_F16, 3, h, y, 1, 1);
  assert_true(!y[0] && y[1] && !y[2]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_binary_f32),          cmocka_unit_test(test_binary_f32_epilogue),
      cmocka_unit_test(test_binary_f32_patterns), cmocka_unit_test(test_unary_f32),
      cmocka_unit_test(test_unary_float_dtypes),  cmocka_unit_test(test_unary_int),
      cmocka_unit_test(test_binary_int),          cmocka_unit_test(test_binary_float_dtypes),
      cmocka_unit_test(test_binary_mixed),        cmocka_unit_test(test_where),
      cmocka_unit_test(test_clip),                cmocka_unit_test(test_cast),
      cmocka_unit_test(test_isnan_isinf),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
