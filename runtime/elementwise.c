/* migc CPU runtime: the float32 elementwise kernels (unary maths and activations,
 * broadcasting binary ops, Where, Clip) and the broadcasting odometer. Contracts in
 * mg_rt_elementwise.h. float32 gets one loop per op so compilers vectorise it; the
 * other dtypes share a generic element-at-a-time path in elementwise_any.c. */
#include "mg_runtime.h"
#include "mg_rt_select.h"

#include <math.h>
#include <string.h>

enum { MAX_RANK = 16 };

/* EW_LOOP(m, y, BODY): y[k] = r for k < m, where BODY computes float r from k.
 * gcc at -O2 (the generated Makefile's default) vectorises only loops whose trip
 * count is a whole number of vectors and that need no run-time alias check, so for
 * gcc the loop runs in fixed blocks through a local buffer: the block loops
 * vectorise, and y may still equal an input (every read of a block precedes its
 * writes). clang vectorises the plain loop at -O2 (with alias checks) and runs the
 * blocked form slower, so it gets the plain loop. */
#if defined(__GNUC__) && !defined(__clang__)
enum { EW_BLOCK = 16 };
#define EW_LOOP(m, y, BODY)                                                           \
  do {                                                                                \
    int64_t i0_ = 0;                                                                  \
    for (; i0_ + EW_BLOCK <= (m); i0_ += EW_BLOCK) {                                  \
      float t_[EW_BLOCK];                                                             \
      int j_;                                                                         \
      for (j_ = 0; j_ < EW_BLOCK; j_++) {                                             \
        const int64_t k = i0_ + j_;                                                   \
        float r;                                                                      \
        BODY;                                                                         \
        t_[j_] = r;                                                                   \
      }                                                                               \
      for (j_ = 0; j_ < EW_BLOCK; j_++) (y)[i0_ + j_] = t_[j_];                       \
    }                                                                                 \
    for (; i0_ < (m); i0_++) {                                                        \
      const int64_t k = i0_;                                                          \
      float r;                                                                        \
      BODY;                                                                           \
      (y)[k] = r;                                                                     \
    }                                                                                 \
  } while (0)
#else
#define EW_LOOP(m, y, BODY)                                                           \
  do {                                                                                \
    int64_t k;                                                                        \
    for (k = 0; k < (m); k++) {                                                       \
      float r;                                                                        \
      BODY;                                                                           \
      (y)[k] = r;                                                                     \
    }                                                                                 \
  } while (0)
#endif

/* --------------------------------------------------------------------- unary */

#define UNARY_LOOP(EXPR) EW_LOOP(n, y, const float v = x[k]; r = (EXPR))

/* erf(v) as a rational function of v on [-4, 4] (erf is +-1 in float beyond): no
 * branches or calls, so loops of it vectorise, and it agrees with erf to a few
 * float ulps (the unit test checks it against double erf). NaN stays NaN. */
static float erf_fast(float v) {
  const float x = v > 4.0f ? 4.0f : (v < -4.0f ? -4.0f : v), x2 = x * x;
  float p = x2 * -2.72614225801306e-10f + 2.77068142495902e-08f;
  float q = x2 * -1.45660718464996e-05f + -2.13374055278905e-04f;
  p = x2 * p + -2.10102402082508e-06f;
  p = x2 * p + -5.69250639462346e-05f;
  p = x2 * p + -7.34990630326855e-04f;
  p = x2 * p + -2.95459980854025e-03f;
  p = x2 * p + -1.60960333262415e-02f;
  q = x2 * q + -1.68282697438203e-03f;
  q = x2 * q + -7.37332916720468e-03f;
  q = x2 * q + -1.42647390514189e-02f;
  return x * p / q;
}

static float softplus_f(float v) { return (v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v))); }

void mg_unary_f32(mg_unop op, int64_t n, const float *x, float *y, float a, float b) {
  int64_t i;
  switch (op) {
  case MG_UN_IDENTITY: if (x != y) memmove(y, x, (size_t)n * sizeof(float)); return;
  case MG_UN_ABS: UNARY_LOOP(fabsf(v)); return;
  case MG_UN_NEG: UNARY_LOOP(-v); return;
  case MG_UN_RELU: UNARY_LOOP(v < 0.0f ? 0.0f : v); return;
  case MG_UN_LEAKY_RELU: UNARY_LOOP(v >= 0.0f ? v : a * v); return;
  case MG_UN_SIGMOID: UNARY_LOOP(1.0f / (1.0f + expf(-v))); return;
  case MG_UN_TANH: UNARY_LOOP(tanhf(v)); return;
  case MG_UN_EXP: UNARY_LOOP(expf(v)); return;
  case MG_UN_LOG: UNARY_LOOP(logf(v)); return;
  case MG_UN_SQRT: UNARY_LOOP(sqrtf(v)); return;
  case MG_UN_ERF: UNARY_LOOP(erf_fast(v)); return;
  case MG_UN_RECIPROCAL: UNARY_LOOP(1.0f / v); return;
  /* 1 + erf(z) as erfc(-z): no cancellation for negative v, where 1 + erf(z)
   * would lose most digits of the small result */
  case MG_UN_GELU: UNARY_LOOP(0.5f * v * erfcf(-v * 0.70710678118654752f)); return;
  case MG_UN_GELU_TANH:
    UNARY_LOOP(0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v))));
    return;
  case MG_UN_HARDSIGMOID: {
    UNARY_LOOP(a * v + b < 0.0f ? 0.0f : (a * v + b > 1.0f ? 1.0f : a * v + b));
    return;
  }
  case MG_UN_HARDSWISH: {
    UNARY_LOOP(v * (v / 6.0f + 0.5f < 0.0f ? 0.0f : (v / 6.0f + 0.5f > 1.0f ? 1.0f : v / 6.0f + 0.5f)));
    return;
  }
  case MG_UN_ELU: UNARY_LOOP(v >= 0.0f ? v : a * (expf(v) - 1.0f)); return;
  case MG_UN_SELU: UNARY_LOOP(b * (v > 0.0f ? v : a * (expf(v) - 1.0f))); return;
  case MG_UN_CELU: {
    UNARY_LOOP((v > 0.0f ? v : 0.0f) + fminf(0.0f, a * (expf(v / a) - 1.0f)));
    return;
  }
  case MG_UN_SOFTPLUS: UNARY_LOOP(softplus_f(v)); return;
  case MG_UN_SOFTSIGN: UNARY_LOOP(v / (1.0f + fabsf(v))); return;
  case MG_UN_MISH: UNARY_LOOP(v * tanhf(softplus_f(v))); return;
  case MG_UN_SHRINK: UNARY_LOOP(v < -a ? v + b : (v > a ? v - b : 0.0f)); return;
  case MG_UN_THRESHOLDED_RELU: UNARY_LOOP(v > a ? v : 0.0f); return;
  case MG_UN_FLOOR: UNARY_LOOP(floorf(v)); return;
  case MG_UN_CEIL: UNARY_LOOP(ceilf(v)); return;
  case MG_UN_ROUND: UNARY_LOOP(nearbyintf(v)); return; /* half to even by default */
  case MG_UN_SIGN: UNARY_LOOP(v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : v)); return;
  case MG_UN_SIN: UNARY_LOOP(sinf(v)); return;
  case MG_UN_COS: UNARY_LOOP(cosf(v)); return;
  case MG_UN_TAN: UNARY_LOOP(tanf(v)); return;
  case MG_UN_ASIN: UNARY_LOOP(asinf(v)); return;
  case MG_UN_ACOS: UNARY_LOOP(acosf(v)); return;
  case MG_UN_ATAN: UNARY_LOOP(atanf(v)); return;
  case MG_UN_SINH: UNARY_LOOP(sinhf(v)); return;
  case MG_UN_COSH: UNARY_LOOP(coshf(v)); return;
  case MG_UN_ASINH: UNARY_LOOP(asinhf(v)); return;
  case MG_UN_ACOSH: UNARY_LOOP(acoshf(v)); return;
  case MG_UN_ATANH: UNARY_LOOP(atanhf(v)); return;
  case MG_UN_BITWISE_NOT: case MG_UN_NOT: /* not float ops: zeros, as documented */
    for (i = 0; i < n; i++) y[i] = 0.0f;
    return;
  }
}
#undef UNARY_LOOP

/* One float op in double (for float64, float16 and bfloat16). */
/* ------------------------------------------------------------- binary float32 */

/* One row of m outputs: y[k] = ACT(EXPR(u = a[k*sa], v = b[k*sb])), with the
 * common stride patterns as loops of their own so that they vectorise. */
#define BINARY_STRIDES(EXPR, ACT)                                                     \
  do {                                                                                \
    if (sa == 1 && sb == 1) {                                                         \
      EW_LOOP(m, y, const float u = a[k]; const float v = b[k]; r = (EXPR); ACT);     \
    } else if (sa == 1 && sb == 0) {                                                  \
      const float v = b[0];                                                           \
      EW_LOOP(m, y, const float u = a[k]; r = (EXPR); ACT);                           \
    } else if (sa == 0 && sb == 1) {                                                  \
      const float u = a[0];                                                           \
      EW_LOOP(m, y, const float v = b[k]; r = (EXPR); ACT);                           \
    } else {                                                                          \
      EW_LOOP(m, y, const float u = a[k * sa]; const float v = b[k * sb]; r = (EXPR); ACT); \
    }                                                                                 \
  } while (0)
/* Relu and Clip (Relu6) run inside the loop; other activations after it. */
#define BINARY_ROW(EXPR)                                                              \
  do {                                                                                \
    if (act == MG_ACT_RELU) BINARY_STRIDES(EXPR, r = r < 0.0f ? 0.0f : r);             \
    else if (act == MG_ACT_CLIP) BINARY_STRIDES(EXPR, r = r < lo ? lo : (r > hi ? hi : r)); \
    else BINARY_STRIDES(EXPR, (void)0);                                               \
  } while (0)

/* One function per float32 binary op, called through a table: a single function
 * holding every op's loops (x 4 stride patterns x 3 in-loop activations) is so
 * large that compilers spend most of a minute optimising it. Only the ops that
 * take a fused activation (CG_EPILOGUE) get the activation variants. */
typedef void (*binary_row_fn)(int64_t m, const float *a, int64_t sa, const float *b, int64_t sb,
                              float *y, mg_act act, float lo, float hi);
#define ROW_WITH_ACT(name, EXPR)                                                      \
  static void name(int64_t m, const float *a, int64_t sa, const float *b, int64_t sb, \
                   float *y, mg_act act, float lo, float hi) {                        \
    BINARY_ROW(EXPR);                                                                 \
  }
#define ROW_PLAIN(name, EXPR)                                                         \
  static void name(int64_t m, const float *a, int64_t sa, const float *b, int64_t sb, \
                   float *y, mg_act act, float lo, float hi) {                        \
    (void)act, (void)lo, (void)hi;                                                    \
    BINARY_STRIDES(EXPR, (void)0);                                                    \
  }
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_ADD)
ROW_WITH_ACT(row_add, u + v)
#else
#define row_add 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_SUB)
ROW_WITH_ACT(row_sub, u - v)
#else
#define row_sub 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_MUL)
ROW_WITH_ACT(row_mul, u * v)
#else
#define row_mul 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_DIV)
ROW_WITH_ACT(row_div, u / v)
#else
#define row_div 0
#endif
/* NaN in either input gives NaN: u when u is NaN, else v when v is */
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_MAX)
ROW_WITH_ACT(row_max, u > v || u != u ? u : v)
#else
#define row_max 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_MIN)
ROW_WITH_ACT(row_min, u < v || u != u ? u : v)
#else
#define row_min 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_FMOD)
ROW_PLAIN(row_fmod, fmodf(u, v))
#else
#define row_fmod 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_PRELU)
ROW_PLAIN(row_prelu, u < 0.0f ? u * v : u)
#else
#define row_prelu 0
#endif
#if !defined(MG_RT_SELECT) || defined(MG_RT_USE_BIN_POW)
ROW_PLAIN(row_powf, powf(u, v))
ROW_PLAIN(row_square, ((void)v, u * u))

/* x^2 (LayerNorm's variance as exported at opset < 17): u * u is the same
 * correctly rounded result as powf, at memory speed */
static void row_pow(int64_t m, const float *a, int64_t sa, const float *b, int64_t sb, float *y,
                    mg_act act, float lo, float hi) {
  if (sb == 0 && b[0] == 2.0f) row_square(m, a, sa, b, sb, y, act, lo, hi);
  else row_powf(m, a, sa, b, sb, y, act, lo, hi);
}
#else
#define row_pow 0
#endif

static const binary_row_fn binary_row_of[MG_BIN_LESS_EQUAL + 1] = {
    row_add, row_sub, row_mul, row_div, row_pow, 0 /* MOD */, row_fmod, 0, 0, 0, 0, 0, 0, 0, 0,
    row_max, row_min, row_prelu, 0, 0, 0, 0, 0};

/* One row of the float32 binary op with the in-loop activations (RELU, CLIP with
 * bounds lo, hi); any other act is left to the caller. */
static void binary_row_f32(mg_binop op, int64_t m, const float *a, int64_t sa,
                           const float *b, int64_t sb, float *y, mg_act act, float lo, float hi) {
  int64_t i;
  const binary_row_fn row = (unsigned)op <= MG_BIN_LESS_EQUAL ? binary_row_of[op] : 0;
  if (row) {
    row(m, a, sa, b, sb, y, act, lo, hi);
    return;
  }
  /* not a float32 op (see the header), or not selected (mg_rt_select.h): NaN */
  for (i = 0; i < m; i++) y[i] = NAN;
}
#undef BINARY_ROW

/* Advances the odometer over dims [0, rank-1) (the last dim is the row); adds the
 * step to each offset. Returns 0 once every row is done. */
int mg_rt_next_row(int rank, const int64_t *shape, int64_t *idx, int n_in,
                    const int64_t *const *strides, int64_t *off) {
  int d, k;
  for (d = rank - 2; d >= 0; d--) {
    idx[d]++;
    for (k = 0; k < n_in; k++) off[k] += strides[k][d];
    if (idx[d] < shape[d]) return 1;
    for (k = 0; k < n_in; k++) off[k] -= strides[k][d] * shape[d];
    idx[d] = 0;
  }
  return 0;
}

int64_t mg_rt_count(int rank, const int64_t *shape) {
  int64_t total = 1;
  int d;
  for (d = 0; d < rank; d++) total *= shape[d];
  return total;
}

void mg_binary_f32(mg_binop op, int rank, const int64_t *shape, const float *a,
                   const int64_t *a_strides, const float *b, const int64_t *b_strides,
                   float *y, mg_act act, float act_a, float act_b) {
  int64_t idx[MAX_RANK] = {0}, off[2] = {0, 0}, yo = 0;
  const int64_t *strides[2];
  const int64_t m = shape[rank - 1];
  strides[0] = a_strides;
  strides[1] = b_strides;
  if (mg_rt_count(rank, shape) == 0) return;
  do {
    binary_row_f32(op, m, a + off[0], a_strides[rank - 1], b + off[1], b_strides[rank - 1],
                   y + yo, act, act_a, act_b);
    /* the other activations run on the row while it is in cache */
    if (act != MG_ACT_NONE && act != MG_ACT_RELU && act != MG_ACT_CLIP)
      mg_bias_act(y + yo, 1, (int)m, (int)m, NULL, act, act_a, act_b);
    yo += m;
  } while (mg_rt_next_row(rank, shape, idx, 2, strides, off));
}

/* -------------------------------------------------------------------- Where */

#define WHERE_ROW(T)                                                                  \
  do {                                                                                \
    const T *xs = (const T *)x + off[1], *ys = (const T *)y + off[2];                 \
    T *os = (T *)out + oo;                                                            \
    for (i = 0; i < m; i++) os[i] = c[i * sc] ? xs[i * sx] : ys[i * sy];              \
  } while (0)

void mg_where(size_t elem_size, int rank, const int64_t *shape, const uint8_t *cond,
              const int64_t *cond_strides, const void *x, const int64_t *x_strides,
              const void *y, const int64_t *y_strides, void *out) {
  int64_t idx[MAX_RANK] = {0}, off[3] = {0, 0, 0}, oo = 0, i;
  const int64_t *strides[3];
  const int64_t m = shape[rank - 1], sc = cond_strides[rank - 1];
  const int64_t sx = x_strides[rank - 1], sy = y_strides[rank - 1];
  strides[0] = cond_strides;
  strides[1] = x_strides;
  strides[2] = y_strides;
  if (mg_rt_count(rank, shape) == 0) return;
  do {
    const uint8_t *c = cond + off[0];
    switch (elem_size) {
    case 1: WHERE_ROW(uint8_t); break;
    case 2: WHERE_ROW(uint16_t); break;
    case 4: WHERE_ROW(uint32_t); break;
    case 8: WHERE_ROW(uint64_t); break;
    default:
      for (i = 0; i < m; i++) {
        const unsigned char *src = c[i * sc]
            ? (const unsigned char *)x + (size_t)(off[1] + i * sx) * elem_size
            : (const unsigned char *)y + (size_t)(off[2] + i * sy) * elem_size;
        memmove((unsigned char *)out + (size_t)(oo + i) * elem_size, src, elem_size);
      }
      break;
    }
    oo += m;
  } while (mg_rt_next_row(rank, shape, idx, 3, strides, off));
}
#undef WHERE_ROW

/* --------------------------------------------------------------------- Clip */

void mg_clip_f32(int64_t n, const float *x, float *y, const float *lo, const float *hi) {
  const float l = lo ? *lo : -HUGE_VALF, h = hi ? *hi : HUGE_VALF;
  /* max then min, as ONNX (numpy.clip): with l > h everything becomes h */
  EW_LOOP(n, y, const float v = x[k]; const float t = v < l ? l : v; r = v != v ? v : (t > h ? h : t));
}

