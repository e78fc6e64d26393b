/* The reference interpreter: runs the canonical IR directly.
 *
 * It is the yardstick every backend is compared against, so it is simple rather
 * than fast, and independent of runtime/: floating-point ops compute in double and
 * round once to the output dtype (float16 and bfloat16 too, round-to-nearest-even);
 * integer ops compute in int64 and wrap to the output width; reductions,
 * convolutions and matrix products accumulate in double. Broadcasting follows
 * ONNX's (numpy's) rules. An intermediate is freed as soon as its last consumer
 * has run. */
#ifndef MG_INTERP_H
#define MG_INTERP_H
#include "ir.h"
#include "npy.h"

/* A run-time value: a tensor, a sequence of tensors, or an empty optional. */
typedef enum { MG_RV_TENSOR, MG_RV_SEQUENCE, MG_RV_NONE } mg_rv_kind;
typedef struct {
  mg_rv_kind kind;
  mg_array t;         /* TENSOR; t.name unused */
  mg_array *items;    /* SEQUENCE: n_items tensors (owned) */
  int n_items;
  int borrowed;       /* t.data belongs to the IR (a constant): never freed */
} mg_rvalue;

void mg_rvalue_free(mg_rvalue *v);

/* Called after each node with its outputs; return nonzero to stop the run. Used
 * for layer-by-layer comparison. */
typedef int (*interp_observer)(void *ctx, const mg_node *n, mg_rvalue *const *outs);

typedef struct {
  interp_observer observe;
  void *observe_ctx;
  uint64_t seed;      /* for the random ops */
} interp_options;

/* Runs m's top graph. inputs[i] feeds the graph input named inputs[i].name (every
 * run-time input must be fed, with its declared dtype and a shape that matches
 * its known dims). On success *outputs is an array of m->graph->n_outputs arrays
 * (named after the outputs; free with mg_arrays_free) and 0 is returned. Bad
 * inputs, unsupported ops and run-time faults are diagnostics and return -1.
 * Precondition: mg_prepare(m) succeeded. */
int interp_run(mg_model *m, const mg_array *inputs, int n_inputs, const interp_options *opt,
               mg_array **outputs, mg_diags *d);

/* Evaluates one node whose inputs are all constants (no subgraph attributes):
 * outs[i] (n->n_out arrays, filled; free each with mg_array_free) receives output
 * i, empty for omitted outputs. Returns 0, or -1 when the node cannot be evaluated
 * this way or fails (diagnostics may be recorded in d). Used by code generators to
 * fold what the shape-level folding in core/ leaves. */
int interp_eval_node(mg_model *m, const mg_node *n, mg_array *outs, mg_diags *d);

#endif
