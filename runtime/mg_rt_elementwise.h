/* migc CPU runtime: the elementwise kernel family (see mg_runtime.h for the rules every
 * kernel keeps: C99, no allocation, no mutable globals).
 *
 * Conventions shared by every function here:
 *   - Broadcasting is resolved by the code generator: a broadcast kernel gets the
 *     output shape (already coalesced, usually rank 1-3) and, per input, strides in
 *     elements along that shape, 0 on broadcast dims. rank >= 1 and rank <= 16.
 *   - Every kernel reads element i of its inputs before writing element i of its
 *     output and never reads an output position it already wrote, so out may be the
 *     same buffer as an input that has the output's shape (in-place).
 *   - float32 has fast paths computed in float. Other float dtypes compute in double
 *     and round once to the output dtype (float16/bfloat16: nearest even, through a
 *     sticky float so that no value is rounded twice). Integers compute in 64 bits
 *     and wrap to the output width; bool is one byte 0/1.
 *   - Where ONNX leaves a result undefined (integer division or modulo by zero, a
 *     NaN or out-of-range float cast to an integer) the result is defined here: x/0
 *     and x%0 give 0; float -> integer truncates toward zero, NaN gives 0, values
 *     beyond int64 saturate to INT64_MIN/INT64_MAX and the int64 then wraps to the
 *     target width (uint64 takes [2^63, 2^64) exactly); this matches migc's
 *     reference interpreter. */
#ifndef MG_RT_ELEMENTWISE_H
#define MG_RT_ELEMENTWISE_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- elementwise */

/* Unary ops. a and b are the op's float attributes (unused ones are ignored):
 *   CELU alpha=a; ELU alpha=a; HARDSIGMOID alpha=a beta=b; LEAKY_RELU alpha=a;
 *   SELU alpha=a gamma=b; SHRINK lambd=a bias=b; THRESHOLDED_RELU alpha=a.
 * Integer dtypes support ABS NEG SIGN RELU BITWISE_NOT CEIL FLOOR ROUND IDENTITY
 * (the last four copy); bool supports NOT and IDENTITY. */
typedef enum {
  MG_UN_IDENTITY = 0, MG_UN_ABS, MG_UN_ACOS, MG_UN_ACOSH, MG_UN_ASIN, MG_UN_ASINH,
  MG_UN_ATAN, MG_UN_ATANH, MG_UN_BITWISE_NOT, MG_UN_CEIL, MG_UN_CELU, MG_UN_COS,
  MG_UN_COSH, MG_UN_ELU, MG_UN_ERF, MG_UN_EXP, MG_UN_FLOOR, MG_UN_GELU,
  MG_UN_GELU_TANH, MG_UN_HARDSIGMOID, MG_UN_HARDSWISH, MG_UN_LEAKY_RELU, MG_UN_LOG,
  MG_UN_MISH, MG_UN_NEG, MG_UN_NOT, MG_UN_RECIPROCAL, MG_UN_RELU, MG_UN_ROUND,
  MG_UN_SELU, MG_UN_SHRINK, MG_UN_SIGMOID, MG_UN_SIGN, MG_UN_SIN, MG_UN_SINH,
  MG_UN_SOFTPLUS, MG_UN_SOFTSIGN, MG_UN_SQRT, MG_UN_TAN, MG_UN_TANH,
  MG_UN_THRESHOLDED_RELU
} mg_unop;

/* y[i] = op(x[i]) for i < n, float32; y may equal x. */
void mg_unary_f32(mg_unop op, int64_t n, const float *x, float *y, float a, float b);
/* The same for any dtype t (x and y both of dtype t); y may equal x. Ops a dtype
 * does not support (see mg_unop) write zeros. */
void mg_unary_any(mg_unop op, mg_rt_dtype t, int64_t n, const void *x, void *y,
                  float a, float b);

/* Binary ops (numpy broadcasting). MOD is Python's (result has the divisor's sign)
 * and is for integers only; FMOD is C's fmod/% (sign of the dividend). POW of an
 * integer base by a float exponent truncates the float result toward zero. Shifts
 * by 64 or more give 0. AND OR XOR are logical (bool). Comparisons write bool. */
typedef enum {
  MG_BIN_ADD = 0, MG_BIN_SUB, MG_BIN_MUL, MG_BIN_DIV, MG_BIN_POW, MG_BIN_MOD,
  MG_BIN_FMOD, MG_BIN_SHIFT_LEFT, MG_BIN_SHIFT_RIGHT, MG_BIN_BITWISE_AND,
  MG_BIN_BITWISE_OR, MG_BIN_BITWISE_XOR, MG_BIN_AND, MG_BIN_OR, MG_BIN_XOR,
  MG_BIN_MAX, MG_BIN_MIN, MG_BIN_PRELU, MG_BIN_EQUAL, MG_BIN_GREATER,
  MG_BIN_GREATER_EQUAL, MG_BIN_LESS, MG_BIN_LESS_EQUAL
} mg_binop;

/* y = act(a op b), float32, over the output shape[rank] with element strides
 * a_strides / b_strides (0 = broadcast); y is dense. op is one of ADD SUB MUL DIV
 * POW FMOD MAX MIN PRELU (MAX and MIN propagate NaN). act and its parameters are
 * as for mg_bias_act. The inner loops are specialised for inner strides (1, 1),
 * (1, 0) and (0, 1). Each op is compiled when mg_rt_select.h selects it
 * (MG_RT_USE_BIN_<OP>); another op, or one not compiled, writes NaN. */
void mg_binary_f32(mg_binop op, int rank, const int64_t *shape, const float *a,
                   const int64_t *a_strides, const float *b, const int64_t *b_strides,
                   float *y, mg_act act, float act_a, float act_b);
/* y = a op b for any dtypes: ta and tb are the inputs' dtypes (equal except for
 * POW, whose exponent may have another), ty the output's (bool for comparisons,
 * else ta). Floats compute in double; integers in 64 bits, unsigned when ta is. */
void mg_binary_any(mg_binop op, mg_rt_dtype ta, mg_rt_dtype tb, mg_rt_dtype ty,
                   int rank, const int64_t *shape, const void *a,
                   const int64_t *a_strides, const void *b, const int64_t *b_strides,
                   void *y);

/* out = cond ? x : y (ONNX Where) over shape[rank] with per-input element strides;
 * elements of elem_size bytes (any dtype); cond is bool. */
void mg_where(size_t elem_size, int rank, const int64_t *shape, const uint8_t *cond,
              const int64_t *cond_strides, const void *x, const int64_t *x_strides,
              const void *y, const int64_t *y_strides, void *out);

/* y = min(max(x, *lo), *hi) for i < n, NaN kept; lo or hi NULL means unbounded.
 * lo and hi are read at run time (they may be computed tensors of one element).
 * When *lo > *hi every non-NaN element becomes *hi. */
void mg_clip_f32(int64_t n, const float *x, float *y, const float *lo, const float *hi);
/* The same for any numeric dtype t (x, y, *lo, *hi all of dtype t). */
void mg_clip_any(mg_rt_dtype t, int64_t n, const void *x, void *y, const void *lo,
                 const void *hi);

/* y[i] = x[i] converted from dtype `from` to dtype `to` (ONNX Cast), see the
 * conventions above for floats to integers. */
void mg_cast(mg_rt_dtype from, mg_rt_dtype to, int64_t n, const void *x, void *y);

/* y[i] = isnan(x[i]) (IsNaN) for a float dtype t. */
void mg_isnan(mg_rt_dtype t, int64_t n, const void *x, uint8_t *y);
/* y[i] = x[i] is +inf and detect_positive, or -inf and detect_negative (IsInf). */
void mg_isinf(mg_rt_dtype t, int64_t n, const void *x, uint8_t *y, int detect_negative,
              int detect_positive);

/* Internal to the family (elementwise.c, elementwise_any.c): the broadcasting
 * odometer. mg_rt_next_row advances idx over dims [0, rank-1) (the last dim is the
 * row) and adds each input's step to off[k]; 0 once every row is done.
 * mg_rt_count is the element count of shape. */
int mg_rt_next_row(int rank, const int64_t *shape, int64_t *idx, int n_in, const int64_t *const *strides,
                   int64_t *off);
int64_t mg_rt_count(int rank, const int64_t *shape);

#ifdef __cplusplus
}
#endif
#endif
