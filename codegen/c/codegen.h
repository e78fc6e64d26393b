/* The C code generator (CPU target): one entry point that turns a prepared model
 * into a self-contained C99 project. The per-op emitters it calls are declared in
 * cg.h; the pipeline, in emit_c():
 *
 *   cg_batch_begin    a symbolic batch: prepared at batch 1, and a copy at batch 7
 *   cg_lower          lowering (codegen/common/lower.h): control flow, gradients,
 *                     sequences; fold what the interpreter can evaluate on
 *                     constants, fold BatchNormalization into the Conv before it
 *   cg_batch_check    the copy's nodes paired with m's: every node keeps batch
 *                     elements apart, or is reported (model_run loops over the batch)
 *   cg_bound_dynamic  values of run-time length planned at their largest shape
 *   check nodes       every value planned and of a supported type
 *   cg_fuse           activations into the producer that can apply them
 *   cg_prepare_weights  weights packed (or Winograd-transformed) for their kernel
 *   cg_plan           arena offsets by liveness, views and in-place reuse
 *   emit nodes        straight-line calls into model_run
 *   cg_write_project  model.h, model.c, model.weights or weights.c, runtime/,
 *                     main.c, Makefile, CMakeLists.txt */
#ifndef MG_CODEGEN_H
#define MG_CODEGEN_H
#include "ir.h"

/* --precision int8 (docs/precision.md): the calibrated activations, and what
 * emit_c did with each quantisable layer. */
typedef struct {
  const char *name;    /* the value (a Conv's input) */
  float scale;         /* x ~ scale * (q - zp), q a u8 */
  int zp;              /* 0 (non-negative tensor) or 128 (symmetric) */
} cg_q8_act;

typedef struct {
  const char *node, *op;   /* the graph's names (they outlive the report) */
  int int8;                /* 1 runs int8, 0 float32 */
  char why[160];           /* float32: the reason */
  float *w_scale;          /* int8: per-output-channel weight scales (mg_malloc'd) */
  int n_w_scale;
} cg_q8_layer;

typedef struct {
  const cg_q8_act *acts;   /* in */
  int n_acts;
  cg_q8_layer *layers;     /* out: every Conv, Gemm and MatMul, in node order */
  int n_layers, cap_layers;
} cg_quant;

/* Frees what emit_c filled in q (not acts). */
void cg_quant_free(cg_quant *q);

typedef struct {
  const char *prefix;  /* C identifier prefix of the generated API; "model" */
  int embed_weights;   /* weights as a const array in weights.c, not model.weights */
  int no_fold_bn;      /* keep BatchNormalization nodes (tests) */
  int no_fuse;         /* no activation fusion (tests) */
  int no_runner;       /* write only the model sources and runtime (batched builds) */
  size_t string_pool_bytes; /* per-instance pool for run-time strings; 0: 1 MiB */
  int pack_mr;         /* prepared weights' panel height: 0 the micro-kernel's of the
                          machine migc runs on, -1 no prepared weights */
  int symbolic_batch;  /* keep a symbolic leading input dim (cg_batch.c) instead of
                          reporting it as a dynamic shape */
  int64_t seq_max;     /* a symbolic sequence: the longest the generated code takes
                          (convert --max-seq N; 0: 64) */
  int seq_symbolic;    /* set by cg_seq.c while it emits one length of a symbolic
                          sequence: kernel choices must not depend on sizes */
  int threads;         /* --threads N: the most threads model_set_threads may ask for,
                          and how many model_init starts (0 or 1: one, no pthreads) */
  cg_quant *quant;     /* --precision int8: Conv layers with calibrated inputs run
                          int8 (NULL: everything float32) */
  int weights16;       /* convert --precision: 0 float32 weights, MG_F16 or MG_BF16:
                          float32 weights of CG_W16_MIN elements or more (prepared
                          panels included) held in that type (cg_half.c) */
} cg_options;

/* Fewest elements of a weight held in 16 bits: below it (biases, per-channel
 * scales) a tensor is under 1 KiB and stays float32. */
#define CG_W16_MIN 256

typedef struct {
  int n_nodes;             /* nodes emitted (after folding and fusion) */
  int n_folded;            /* nodes evaluated at conversion time */
  int n_bn_folded;         /* BatchNormalization nodes folded into convolutions */
  int n_fused;             /* activations fused into their producer */
  int n_inplace;           /* nodes that write over their input */
  int n_unsupported;       /* nodes the project cannot run (model_run fails there) */
  size_t arena_bytes;      /* planned arena for intermediates */
  size_t lower_bound;      /* the most bytes alive at once: no plan can beat it */
  size_t weights_bytes;
  /* with cg_options.weights16: weights held in 16 bits, and those kept float32 for
   * being small, read by a normalisation layer, or beyond float16's range */
  int n_w16, n_w32_small, n_w32_norm, n_w32_range;
} cg_report;

/* Writes the project for m (prepared with mg_prepare; it is rewritten in place by
 * the lowering passes) into dir, creating it. Unsupported nodes are UNSUPPORTED
 * diagnostics (one per node, with its reason) and the project is still written,
 * with model_run returning MG_RT_EUNSUPPORTED at the first of them. Returns 0 when
 * the project was written (check r->n_unsupported), -1 on bad input or I/O
 * failure. Every file is written to a temporary name and renamed into place. */
int emit_c(mg_model *m, const cg_options *o, const char *dir, cg_report *r, mg_diags *d);

/* migc's source tree, where runtime/ and codegen/c/runner/ are copied from: the
 * MIGC_SOURCE_DIR environment variable, else the tree migc was built from. */
const char *cg_source_dir(void);

/* The one-node model of node n of src: its run-time inputs ins[0..n_ins) as graph
 * inputs, its constant inputs as constants (sharing src's data, which must outlive
 * it), its outputs as graph outputs; attributes copied, since the C lowering may
 * rewrite them. For emit_c (an ops.Custom kernel, a host fallback). NULL on OOM. */
mg_model *cg_one_node_model(const mg_model *src, const mg_node *n, const mg_value *const *ins, int n_ins);

/* The same analysis without writing anything: records one diagnostic per node the
 * CPU target cannot take. Returns the number of such nodes, or -1. */
int cg_check_model(mg_model *m, mg_diags *d);
#endif
