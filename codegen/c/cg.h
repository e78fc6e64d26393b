/* The C code generator's emitter interface: what the driver (emit_c.c) offers the
 * per-op emitters (c_<family>.c), and what each emitter must do.
 *
 * The driver prepares the model (shapes static, constants folded, Conv+BN fused),
 * decides which activations fuse into their producer, plans the arena, and then
 * calls cg_emit_<Op>(c, n) for every node in order. An emitter:
 *   - checks what it needs (dtypes, attributes, constant inputs) and, when the node
 *     is outside what it supports, returns cg_unsupported(c, n, "reason") without
 *     emitting anything further (what it emitted is discarded with the project);
 *   - otherwise writes C statements into model_run's body with cg_line(), using
 *     cg_in()/cg_out() for tensor pointers and cg_i64s()/cg_static() for constant
 *     parameter data, calls cg_need() for each runtime .c file its calls live in,
 *     and returns 0.
 * Every shape an emitter sees is static (the driver rejects others first).
 * Emitters never allocate run-time memory: scratch comes from cg_scratch().
 *
 * Ops whose output is only a re-view of input 0's bytes (Reshape, Flatten,
 * Squeeze, Unsqueeze, Identity, inference Dropout) have no emitter; the driver
 * aliases them. */
#ifndef MG_CG_H
#define MG_CG_H
#include "ir.h"
#include "mg_runtime.h"

typedef struct cg_ctx cg_ctx;

/* kernels.def flags; CG_STRINGS: the emitter takes string tensors (it checks
 * them itself; the driver refuses string values at every other op but views) */
enum { CG_INPLACE = 1, CG_EPILOGUE = 2, CG_STRINGS = 4 };

/* the one emitter of every op with a unary kernel (ops.def's unary column) */
int cg_emit_unary(cg_ctx *c, const mg_node *n);
int cg_has_unary_kernel(mg_op op);
#define KERNEL(name, flags) int cg_emit_##name(cg_ctx *c, const mg_node *n);
#include "kernels.def"
#undef KERNEL

/* ------------------------------------------------------------ emitting */

/* One line of model_run's body (indentation and newline are added). */
void cg_line(cg_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Expressions for a tensor's data, valid inside model_run:
 *   cg_in(c, v)   "((const T *)...)", T = cg_ctype(v->dtype), for any input value
 *                 (graph input, constant/weight, or intermediate);
 *   cg_out(c, v)  "((T *)...)" for an output of the node being emitted;
 *   cg_vin/cg_vout the same as const void * / void *.
 * The strings live until the project is written. With CG_INPLACE, cg_out(out[0])
 * may equal cg_in(in[0]): the kernel must then work in place. */
const char *cg_in(cg_ctx *c, const mg_value *v);
const char *cg_out(cg_ctx *c, const mg_value *v);
const char *cg_vin(cg_ctx *c, const mg_value *v);
const char *cg_vout(cg_ctx *c, const mg_value *v);

/* A file-scope `static const int64_t NAME[] = {...};` (deduplicated) and its NAME.
 * n may be 0 (a one-element array of 0 is emitted). */
const char *cg_i64s(cg_ctx *c, const int64_t *v, int n);
/* A file-scope `static const float NAME[] = {...};` holding v exactly (hex floats). */
const char *cg_f32s(cg_ctx *c, const float *v, int n);
/* A file-scope `static const TYPE NAME = INIT;` and its NAME, for parameter structs:
 * cg_static(c, "mg_conv2d_params", "{%d, %d, ...}", ...). */
const char *cg_static(cg_ctx *c, const char *type, const char *init_fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A file-scope `static const char *const NAME[] = {...};` holding the n strings
 * (C literals, bytes escaped) and its NAME. n may be 0 (one "" is emitted). */
const char *cg_strs(cg_ctx *c, const char *const *v, int n);

/* The expression of the instance's string pool ("&m->strings", an
 * mg_rt_string_pool *) for kernels that make strings at run time; calling it
 * gives the model a pool (cg_options.string_pool_bytes), emptied at each run. */
const char *cg_string_pool(cg_ctx *c);

/* For a value of run-time length (a graph output planned at its maximum shape,
 * read by no node): the expression of the int64_t[rank] array the generated run
 * must fill with its actual dims (the output's data dense in them). NULL for any
 * other value: the emitter must then produce the planned shape exactly. */
const char *cg_bounded_dims(cg_ctx *c, const mg_value *v);

/* Run-time dims (codegen/c/cg_dynamic.c). A value of run-time length is planned at
 * its largest shape, which is what cg_dims() reports; an emitter that its rule
 * lets read one uses these for the actual dims: cg_dim(c, v, k) is the C
 * expression of dim k, and cg_dims_expr(c, v) of a const int64_t * to all of them
 * (for a static value, the literal and a cg_i64s() array). */
const char *cg_dim(cg_ctx *c, const mg_value *v, int k);
const char *cg_dims_expr(cg_ctx *c, const mg_value *v);

/* Scratch: floats_expr is a C expression (it may use cg_static names, e.g.
 * "mg_conv2d_scratch(&cg_s3)") for the floats of scratch this node needs; model_init
 * sizes one shared scratch buffer to the largest. Returns the expression of that
 * buffer ("m->scratch", a float *). */
const char *cg_scratch(cg_ctx *c, const char *floats_expr, ...)
    __attribute__((format(printf, 2, 3)));

/* The runtime source file ("conv.c") the emitted calls need; each file once. */
void cg_need(cg_ctx *c, const char *runtime_file);
/* Selects kernel `macro` (MG_RT_USE_...: runtime/mg_rt_select.h) within a runtime
 * file: a generated project compiles only the selected kernels of the files that
 * select by it. `macro` must outlive the context (a literal or an arena string). */
void cg_select(cg_ctx *c, const char *macro);

/* The activation fused into this node's output (ops with CG_EPILOGUE only): fills
 * the mg_act enumerator name ("MG_ACT_RELU") and its two parameters. With no fused
 * activation it gives "MG_ACT_NONE", 0, 0. */
typedef struct {
  const char *act; /* enumerator name in mg_runtime.h */
  float a, b;
} cg_act;
void cg_fused_act(cg_ctx *c, const mg_node *n, cg_act *out);

/* The most threads the generated code runs on (--threads N; 1 by default). An
 * emitter whose kernel has a threaded form (mg_conv2d_mt) calls it when this is
 * above 1, with m->pool and each thread's scratch scratch_floats() apart. */
int cg_threads(const cg_ctx *c);
/* Emits the statement kernel(args) where args is fmt's expansion, or, when the
 * code runs on threads, kernel_mt(m->pool, args) (mg_rt_pool.h's threaded form,
 * with the same arguments and results) and, when scratch is set, each thread's
 * scratch stride scratch_floats() as a last argument. The one way an emitter
 * splits its kernel across the pool. */
void cg_kernel(cg_ctx *c, int scratch, const char *kernel, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Whether Conv n runs int8 (--precision int8: its weights were prepared int8,
 * cg_quant8.c), and then its input's scale and zero point. */
int cg_q8_conv(cg_ctx *c, const mg_node *n, float *in_scale, int *in_zp);

/* Weights prepared at conversion (cg_prepare.c): for node n (a Conv, or a MatMul
 * or Gemm with a constant B), the C pointer expression of its prepared weights,
 * with *kind the mg_conv_prep (1 for a product's B) and *mr the panel height (B:
 * width) they were made for; NULL (and 0, 0) when n reads its weights as the
 * graph has them. */
const char *cg_prepared(cg_ctx *c, const mg_node *n, int *kind, int *mr);
/* The mg_conv2d_params of Conv n (activation and preparation unset), computed
 * as cg_emit_Conv does: 0; 1 for 3+ spatial dims; -1 when it is not supported
 * (after cg_unsupported, which records nothing while the driver probes). */
int cg_conv_geometry(cg_ctx *c, const mg_node *n, mg_conv2d_params *p);
/* Whether MatMul or Gemm n reads its constant 2-D B prepared (cg_prepare.c,
 * runtime mg_sgemm_prepb): float32, static shapes, A's rows (batch dims folded)
 * M >= 8, Gemm without transA and with alpha 1. Fills the product's M, N, K and
 * whether B is given transposed (Gemm's transB). The emitters of both ops take
 * the prepared path exactly when this holds and the weights were prepared. */
int cg_gemm_prep_shape(cg_ctx *c, const mg_node *n, int64_t *M, int64_t *N, int64_t *K, int *tB);

/* Records an UNSUPPORTED diagnostic naming the node and op, with the reason
 * (printf format: "dtype int8", "attribute mode='cubic'"), and returns -1. */
int cg_unsupported(cg_ctx *c, const mg_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------ helpers */

/* The C type for a dtype: "float", "double", "int64_t", ..., "uint8_t" for bool,
 * "uint16_t" for float16/bfloat16, "const char *" for string (only ops flagged
 * CG_STRINGS see strings); NULL for complex types. */
const char *cg_ctype(mg_dtype t);
/* The mg_rt_dtype enumerator name ("MG_RT_F32") of a numeric dtype; NULL for
 * string and complex types (no numeric kernel takes them). */
const char *cg_rt_dtype(mg_dtype t);
/* Static dims of v into dims[] (MG_MAX_RANK); returns the rank. */
int cg_dims(const mg_value *v, int64_t *dims);
/* Element count of a static value. */
int64_t cg_numel(const mg_value *v);
/* A constant input's data as int64 (any int or float dtype); returns its element
 * count, or -1 if v is NULL, not constant, or holds more than cap elements. */
int64_t cg_const_ints(const mg_value *v, int64_t *out, int64_t cap);
/* A constant input's data as float (any numeric dtype); same returns. */
int64_t cg_const_floats(const mg_value *v, float *out, int64_t cap);
/* Whether v is a constant (weight or folded value) whose data is known. */
int cg_is_const(const mg_value *v);
#endif
