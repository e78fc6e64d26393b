/* Vector-Jacobian products, one per differentiable op: the table that both
 * grad_run (autodiff.c) and the Gradient op (interp_grad.c) apply, so each VJP has
 * one implementation.
 *
 * A VJP reads the node's forward inputs and outputs and the cotangents of its
 * outputs, and ADDS the cotangents of the inputs it is asked for into their
 * accumulators (two inputs may share one accumulator: Mul(x, x)). Everything is
 * computed in double. An attribute value or input a VJP does not handle is a
 * diagnostic naming the node: never a silent zero. */
#ifndef MG_VJP_H
#define MG_VJP_H
#include "interp_internal.h"

typedef struct {
  mg_model *m;
  const mg_node *n;
  const mg_array *const *x; /* n->n_in forward inputs; NULL when omitted */
  const mg_array *const *y; /* n->n_out forward outputs; NULL when omitted */
  const double *const *gy;  /* per output: numel(y) cotangents, or NULL (zero) */
  double *const *gx;        /* per input: accumulator of numel(x) doubles, or NULL (not wanted) */
  mg_diags *d;
} vjp_args;

typedef int vjp_fn(const vjp_args *a);

/* The VJP of op, or NULL when there is none (vjp_families.def is the list). */
vjp_fn *vjp_for(mg_op op);

/* Families, one file each; each handles exactly the ops vjp_families.def sends it. */
vjp_fn vjp_elementwise; /* vjp_elementwise.c: unary, binary, variadic, Clip, PRelu, Cast, Dropout */
vjp_fn vjp_tensor;      /* vjp_tensor.c: data movement (Reshape ... Pad, Where), reductions, softmaxes */
vjp_fn vjp_nn;          /* vjp_nn.c: Conv, pools, Batch/Layer/Group/Instance normalisation */
vjp_fn vjp_linalg;      /* vjp_linalg.c: MatMul, Gemm */
vjp_fn vjp_rnn;         /* vjp_rnn.c: LSTM */
vjp_fn vjp_sample;      /* vjp_sample.c: Resize, RoiAlign */

/* ---- helpers (vjp_util.c) ---- */

/* Records an error about a's node (code INVALID, or UNSUPPORTED_ATTR through
 * vjp_unsupported) and returns -1. */
int vjp_fail(const vjp_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int vjp_unsupported(const vjp_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Tensor t as a new mg_malloc'd array of doubles; NULL after a diagnostic. */
double *vjp_f64(const vjp_args *a, const mg_array *t);
/* A zeroed array of k doubles; NULL after a diagnostic. */
double *vjp_zeros(const vjp_args *a, int64_t k);
/* acc (shape of `to`) += g (shape of `from`, a numpy broadcast of `to`), summing
 * over the broadcast dims. */
void vjp_unbroadcast_add(double *acc, const mg_array *to, const double *g, const mg_array *from);
/* Whether any of the node's outputs carries a cotangent / any input wants one. */
int vjp_any_gy(const vjp_args *a);
#endif
