/* Shared by the interpreter's files: the kernel interface and tensor helpers.
 *
 * A kernel computes one node: in[i] is NULL for an omitted optional input, and
 * out[i] (NULL for an omitted optional output) is a zeroed mg_rvalue to fill. It
 * derives output shapes from the actual inputs, never from the IR's inferred
 * shapes. It returns 0, or -1 after recording a diagnostic (it_fail). Kernels read
 * tensor data only through the helpers below (data may be unaligned when it
 * points into a mapped model file). */
#ifndef MG_INTERP_INTERNAL_H
#define MG_INTERP_INTERNAL_H
#include "interp.h"
#include <string.h>

typedef struct interp_frame interp_frame;

typedef struct interp_ctx {
  mg_model *m;
  mg_diags *d;
  const interp_options *opt;
  uint64_t rng; /* xorshift state for the random ops */
  int depth;    /* subgraph nesting */
} interp_ctx;

typedef int interp_kernel(interp_ctx *c, const mg_node *n, mg_rvalue **in, mg_rvalue **out,
                          interp_frame *frame);

/* Op families, one file each; each handles exactly the ops the dispatch switch in
 * interp.c sends it. */
interp_kernel interp_elementwise; /* interp_elementwise.c: unary, binary, compare, variadic, activations */
interp_kernel interp_reduce;      /* interp_reduce.c: Reduce*, ArgMax/Min, CumSum, softmaxes, Lp/MVN/LRN norms */
interp_kernel interp_tensor;      /* interp_tensor.c: shape and data movement, gather/scatter, topk, unique... */
interp_kernel interp_nn;          /* interp_nn.c: conv, pools, norms, resize, roi, grid sample, col2im */
interp_kernel interp_linalg;      /* interp_linalg.c: MatMul, Gemm, Einsum, Det, quantised matmul/conv */
interp_kernel interp_rnn;         /* interp_rnn.c: RNN, GRU, LSTM */
interp_kernel interp_control;     /* interp_control.c: If, Loop, Scan, sequences, optionals */
interp_kernel interp_misc;        /* interp_misc.c: random, quantisation, DFT/STFT/windows, losses, strings */
interp_kernel interp_grad;        /* interp_grad.c: Gradient (reverse mode over the forward slice) */

/* The kernel of op, or NULL when the interpreter has none. */
interp_kernel *interp_kernel_for(mg_op op);
/* The current value of v as seen from frame f (constants are materialised), or
 * NULL when v has no value (yet). */
mg_rvalue *interp_lookup(interp_ctx *c, interp_frame *f, const mg_value *v);

/* Runs subgraph g (a body of node n) in a child frame of `parent`, with body
 * inputs bound to `inputs` (borrowed), and moves its outputs into `outputs`
 * (g->n_outputs zeroed values). Returns 0 or -1. */
int interp_run_body(interp_ctx *c, interp_frame *parent, const mg_node *n, mg_graph *g,
                    mg_rvalue **inputs, int n_inputs, mg_rvalue *outputs);

/* ---- tensor helpers (interp_util.c) ---- */

/* Records an error about node n and returns -1. */
int it_fail(interp_ctx *c, const mg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The tensor of input i, or NULL when omitted or not a tensor. */
const mg_array *it_in(mg_rvalue **in, const mg_node *n, int i);
/* Allocates t's data zeroed for the given dtype and dims; rank 0 is a scalar. */
int it_alloc(interp_ctx *c, const mg_node *n, mg_array *t, mg_dtype dt, int rank,
             const int64_t *dims);
/* Makes out[i] a tensor and allocates it; returns the tensor or NULL. */
mg_array *it_out(interp_ctx *c, const mg_node *n, mg_rvalue **out, int i, mg_dtype dt, int rank,
                 const int64_t *dims);
int64_t it_numel(const mg_array *t);
/* Element k as double / int64 (any dtype; bool as 0/1). */
double it_get_f64(const mg_array *t, int64_t k);
int64_t it_get_i64(const mg_array *t, int64_t k);
/* Stores v into element k, converting to t's dtype (float: round to nearest
 * even; integers: wrap to width as C conversions of int64 do; bool: v != 0). */
void it_set_f64(mg_array *t, int64_t k, double v);
void it_set_i64(mg_array *t, int64_t k, int64_t v);
/* The whole tensor as a new mg_malloc'd array of doubles / int64s. */
double *it_f64(interp_ctx *c, const mg_node *n, const mg_array *t);
int64_t *it_i64(interp_ctx *c, const mg_node *n, const mg_array *t);
/* Fills t (already allocated) from doubles / int64s. */
void it_store_f64(mg_array *t, const double *v);
void it_store_i64(mg_array *t, const int64_t *v);
/* numpy broadcasting of n shapes; -1 if they do not broadcast. */
int it_broadcast(const mg_array *const *ts, int n, int *rank, int64_t *dims);
/* Element strides of t viewed at the broadcast shape (0 along broadcast dims). */
void it_bcast_strides(const mg_array *t, int rank, const int64_t *dims, int64_t *strides);
/* Reads a small integer vector (or scalar) input; returns its length or -1. */
int it_ints(const mg_array *t, int64_t *out, int cap);
/* Row-major strides of dims. */
void it_strides(int rank, const int64_t *dims, int64_t *strides);
/* Copies a tensor (deep). */
int it_copy(interp_ctx *c, const mg_node *n, mg_array *dst, const mg_array *src);
/* Stores a copy of string s as element k of STRING tensor t (allocated by it_alloc,
 * which makes every element NULL until set). */
int it_set_str(interp_ctx *c, const mg_node *n, mg_array *t, int64_t k, const char *s);
/* Whether dt is computed as floating point. */
int it_is_float(mg_dtype dt);
/* The tensor family's kernels of indexing (interp_index.c): Gather*, Scatter*,
 * Compress, NonZero, TopK, Unique. */
int interp_tensor_index(interp_ctx *c, const mg_node *n, const mg_array *x, mg_rvalue **in, mg_rvalue **out);

/* ---- element and argument helpers (interp_tensor.c, interp_index.c, interp_reduce.c) ---- */

/* Address of element k (data may be unaligned: only memcpy through it). */
static inline unsigned char *it_elem_ptr(const mg_array *t, int64_t k) {
  return (unsigned char *)t->data + (size_t)k * mg_dtype_size(t->dtype);
}

/* Copies cnt elements from src element si to dst element di (same dtype). */
static inline void it_copy_elems(mg_array *dst, int64_t di, const mg_array *src, int64_t si, int64_t cnt) {
  if (cnt > 0) memcpy(it_elem_ptr(dst, di), it_elem_ptr(src, si), (size_t)cnt * mg_dtype_size(src->dtype));
}

/* Normalises axis against rank into *out; -1 after a diagnostic if out of range. */
static inline int it_norm_axis(interp_ctx *c, const mg_node *n, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return it_fail(c, n, "axis %lld is out of range for rank %d", (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return 0;
}

/* Reads a one-element integer input into *v; -1 after a diagnostic otherwise. */
static inline int it_scalar_int(interp_ctx *c, const mg_node *n, const mg_array *t, const char *what, int64_t *v) {
  if (!t || it_numel(t) != 1) return it_fail(c, n, "%s must hold exactly one value", what);
  *v = it_get_i64(t, 0);
  return 0;
}

/* Reads a 1-D int vector input of at most MG_ARRAY_MAX_RANK values. */
static inline int it_int_list(interp_ctx *c, const mg_node *n, const mg_array *t, const char *what, int64_t *v) {
  int k = it_ints(t, v, MG_ARRAY_MAX_RANK);
  if (k < 0) return it_fail(c, n, "%s must be a 1-D tensor of at most %d values", what, MG_ARRAY_MAX_RANK);
  return k;
}

/* x's dims around axis (a scalar: all 1): the product before it, its length, the product
 * after it; element (o, j, i) is at (o * len + j) * inner + i. */
static inline void it_split_dims(const mg_array *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = 1, *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
  *len = x->rank ? x->dims[axis] : 1;
}

#endif
