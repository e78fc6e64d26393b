/* Shared by the C generator's driver files (emit_c.c, cg_plan.c, cg_dynamic.c,
 * cg_dynamic_emit.c, cg_dynamic_bounds.c, cg_project.c); emitters see only cg.h. */
#ifndef MG_CG_INTERNAL_H
#define MG_CG_INTERNAL_H
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "cg.h"
#include "codegen.h"
#include "lower.h"
#include "plan.h"
#include "text.h"
#include "writer.h"
#include <stdio.h>


/* Where a value's bytes live at run time. */
typedef enum {
  CG_AT_NONE,    /* not materialised (an absorbed activation's input) */
  CG_AT_INPUT,   /* in[index] */
  CG_AT_OUTPUT,  /* out[index] */
  CG_AT_WEIGHT,  /* W + offset */
  CG_AT_ARENA    /* A + offset */
} cg_at;

typedef struct {
  cg_at at;
  int index;       /* INPUT/OUTPUT */
  size_t offset;   /* WEIGHT/ARENA */
  int root;        /* ARENA: value id of the buffer's owner (views and in-place share it) */
  int w16;         /* WEIGHT: held in cg_options.weights16, expanded per step (cg_half.c) */
} cg_place;


/* One node's weights as prepared at conversion (cg_prepare.c). */
typedef struct {
  float *data;     /* mg_malloc'd; NULL: the node has none */
  size_t nbytes;   /* in the payload: floats * 2 when w16 */
  size_t floats;
  int w16;         /* held in cg_options.weights16 */
  size_t offset;   /* in the weights payload, set by cg_plan */
  int kind, mr;    /* mg_conv_prep (or CG_PREP_Q8), panel height */
  float q_scale;   /* CG_PREP_Q8: the input's quantisation (mg_q8_conv_params) */
  int q_zp;
} cg_prep;

/* cg_prep.kind of a Conv whose weights are int8 (runtime/mg_rt_int8.h's layout):
 * outside mg_conv_prep's range, so no float32 kernel ever takes them. */
#define CG_PREP_Q8 100

/* Whether Conv node n can have prepared weights: a constant float32 W of the
 * right size, not of run-time length, and a 2-D geometry the emitter takes. On
 * success fills p (preparation unset). cg_prepare.c. */
int cg_conv_candidate(cg_ctx *c, const mg_node *n, mg_conv2d_params *p);

/* With --precision int8 (c->o->quant): records Conv, Gemm or MatMul node i in
 * the quantisation report and, when it can run int8, prepares its int8 weights
 * in c->prep[i]. 1 prepared, 0 it stays float32 (the report says why), -1 OOM.
 * cg_quant8.c. */
int cg_q8_prepare(cg_ctx *c, int i, const mg_node *n);

/* A symbolic batch (cg_batch.c): the model is emitted for one batch element and
 * model_run loops over the caller's batch. */
typedef struct {
  const char *sym;        /* the symbol ("batch"); NULL: no symbolic batch */
  int n_inputs;
  char *in_batch;         /* by graph input: its leading axis is the batch */
  char *out_batch;        /* by graph output: the same */
  mg_model *probe;        /* until cg_batch_check: the model at another batch size */
  const char *whole_why;  /* the probe could not be made: why */
  const char *fail_node;  /* and at which node, if the diagnostic said */
} cg_batch;

struct cg_ctx {
  mg_model *m;
  mg_graph *g;
  const cg_options *o;
  mg_diags *d;
  mg_arena strings;       /* expressions and names, freed with the context */
  cg_buf body, statics;
  int n_statics;
  char **static_texts;    /* for deduplication of cg_i64s/cg_f32s: "type|values" */
  char **static_names;
  int statics_cap;
  char **scratch;         /* distinct scratch expressions */
  int n_scratch, scratch_cap;
  const char *needed[64]; /* runtime .c files */
  int n_needed;
  const char *selected[64]; /* mg_rt_select.h macros: the kernels within files the model calls */
  int n_selected;
  cg_place *place;        /* by value id */
  int *redirect;          /* by value id: the value whose storage it is written to, or -1 */
  const mg_node **act;    /* by node id: the fused activation node (NULL: none) */
  const mg_node **silu_mul; /* by node id: for a fused SiLU, the Mul absorbed with it */
  char *absorbed;         /* by node id: emitted as part of its producer */
  char *inplace;          /* by node id */
  cg_buffer *buffers;
  int n_buffers;
  size_t arena_bytes, lower_bound, weights_bytes;
  char *bounded;          /* by value id: a graph output of run-time length (max shape planned) */
  /* Values of run-time length (cg_dynamic.c): planned at their maximum shape. */
  int *rd_off;            /* by value id: index of its dim 0 in model_run's rd[], or -1 */
  unsigned *rd_mask;      /* by value id: bit k set when dim k varies at run time */
  const char ***rd_expr;  /* by value id: each dim's C expression (NULL: its emitter sets it) */
  char *dyn_node;         /* by node id: a cg_dyn_kind (it reads or writes a value of run-time length) */
  const char **dyn_guard; /* by node id: a C condition under which the node cannot run */
  int64_t (*vbound)[8];   /* by value id: upper bounds of a small int tensor's elements */
  char *n_vbound;         /* by value id: how many of them are known (0: none) */
  unsigned char *vexact;  /* by value id: a bit per element whose bound is its value */
  int n_rd;
  int uses_string_pool;   /* an emitter called cg_string_pool */
  cg_prep *prep;          /* by node id: weights prepared at conversion */
  int n_prep;             /* nodes that have them */
  int probing;            /* cg_unsupported records nothing (cg_prepare asks emitters' checks) */
  cg_batch batch;         /* a symbolic batch, if the model has one */
  const char **batch_why; /* by node id: why it does not keep batch elements apart (NULL: it does) */
  /* A symbolic sequence (cg_seq.c): this context emits one length of it. */
  const char *seq_sym;    /* NULL: none */
  int64_t seq_now, seq_lo, seq_hi; /* this length; the range the merged code takes */
  const signed char *io_seq; /* by graph input, then output: the sequence's axis, -1 none */
  size_t w16_base;        /* arena offset of the 16-bit weights' expansion area */
  struct { size_t woff, aoff; } w16_slot[16]; /* the current step's expanded weights */
  int n_w16_slot;
  const mg_node *cur;     /* node being emitted */
  int cur_failed;
};

/* Before lowering: when every unknown dim of m's inputs is a leading one named
 * by one symbol, records it in bt, prepares a copy of m at another batch size
 * (lowered like m, with fold_bn) and prepares m at batch 1. bt zeroed and m
 * untouched otherwise. 0, or -1 on OOM or when m cannot be prepared at batch 1. */
int cg_batch_begin(cg_batch *bt, mg_model *m, int fold_bn, mg_diags *d);
/* After lowering m: pairs its nodes with the copy's and fills c->batch_why and
 * c->batch.out_batch (cg_batch.c's rules); frees the copy. 0, or -1 on OOM. */
int cg_batch_check(cg_ctx *c);
/* After cg_bound_dynamic: a batch-carrying graph output of run-time length (its
 * elements would not lie one after another) fails its producer. */
void cg_batch_check_lengths(cg_ctx *c);
void cg_batch_free(cg_batch *bt);
/* With a symbolic batch (nothing otherwise): model.h's dims API (cg_batch_emit.c),
 * model.c's batch loop, init_dims, run_dims_v and run_trace (after run_one, the
 * code of one batch element), and the dims fields of the mg_rt_model initializer. */
void cg_batch_header(cg_ctx *c, cg_buf *h, const char *p, const char *P);
void cg_batch_source(cg_ctx *c, cg_buf *b, const char *p);
const char *cg_batch_desc_tail(cg_ctx *c, const char *p);
/* A symbolic sequence (cg_seq.c): whether g's inputs have one (*sym its name). */
int cg_seq_find(const mg_graph *g, const char **sym);
/* Writes m's project with its sequence symbolic (dir NULL: only checks, r filled):
 * 1 when m has none or it cannot be made symbolic (the caller emits as usual; a
 * warning says why), else emit_c's result. m itself is not changed. */
int cg_seq_emit(mg_model *m, const cg_options *o, const char *dir, cg_report *r, mg_diags *d);
/* emit_c's steps (emit_c.c), for cg_seq.c's emissions at each length: lowers m and
 * fills c up to the plan (c must be freed with cg_ctx_free either way); emits
 * every node, returning the count not converted. */
int cg_prepare_ctx(cg_ctx *c, mg_model *m, const cg_options *o, cg_report *r, mg_diags *d);
int cg_emit_body(cg_ctx *c);
void cg_ctx_free(cg_ctx *c);
/* Whether op computes each output element from the input elements at the same
 * (broadcast) coordinates. */
int cg_elementwise_op(mg_op op);

/* Fusion decisions (act, silu_mul, absorbed, redirect) and the plan (place,
 * buffers, arena_bytes, lower_bound, weights_bytes). */
int cg_fuse(cg_ctx *c, cg_report *r);
int cg_plan(cg_ctx *c, cg_report *r);
/* The node whose step computes n: n, or the producer n was fused into. */
int cg_step_of(const cg_ctx *c, const mg_node *n);
/* 16-bit weights (cg_half.c). Whether float32 constant x is held in 16 bits;
 * counts the kept-float32 reasons in r. norm_read: x is read by a normalisation. */
int cg_w16_choose(cg_ctx *c, const mg_value *x, int norm_read, cg_report *r);
/* Bytes of float32 the step of node n widens its 16-bit weights into (0: none). */
size_t cg_w16_step_bytes(cg_ctx *c, const mg_node *n);
/* Before node n's code: widens each 16-bit weight its step reads into the area at
 * w16_base and records where (w16_slot), so cg_in and cg_prepared point there. */
void cg_w16_emit(cg_ctx *c, const mg_node *n);
/* The float32 expansion of the 16-bit weight at payload offset woff in the current
 * step, as C; "0" and a failed node when the step did not expand it. */
const char *cg_w16_at(cg_ctx *c, size_t woff, const char *type);
/* Payload writer's view: calls emit over n floats of src (any alignment) as the
 * 16-bit type t, in chunks. */
void cg_w16_payload(mg_dtype t, const void *src, size_t n, void (*emit)(void *, const unsigned char *, size_t),
                    void *ctx);
/* Prepares, before the plan, the weights of the layers whose kernels read them in
 * a layout of their own (Conv: runtime mg_conv2d_prepare), so no call repacks
 * them; the plan then places the prepared bytes instead of the graph's. 0, or -1
 * on OOM. */
int cg_prepare_weights(cg_ctx *c);
/* The plan's invariants: buffers live at the same step never share a byte, all
 * fit the arena, offsets are aligned, and the arena is not under the lower bound.
 * Records an internal-error diagnostic and returns -1 when one breaks. */
int cg_plan_verify(const cg_ctx *c, mg_diags *d);
/* How cg_dynamic.c emits a node: not at all (DYN_NONE), the op's own kernel over
 * the largest shapes (POSITIONWISE), a kernel of its own that reads the actual
 * dims (OWN), or reported (FAILED: dyn_guard holds why). */
typedef enum { DYN_NONE = 0, DYN_POSITIONWISE = 1, DYN_OWN = 2, DYN_FAILED = 3 } cg_dyn_kind;
/* Gives every value of run-time length its maximum shape, its rd[] slots and the
 * expressions of its dims (cg_dynamic.c); values it has no rule for keep their
 * open shapes, and the driver reports their nodes. 0, or -1 on OOM. */
int cg_bound_dynamic(cg_ctx *c);
/* Emits a node marked in dyn_node: 0, or -1 after cg_unsupported. */
int cg_emit_dynamic(cg_ctx *c, const mg_node *n, int (*emit)(cg_ctx *, const mg_node *));
/* Whether v's max layout is its dense layout at any run-time dims: at most one
 * axis varies, and every axis before it has length 1. */
int cg_dyn_dense(const cg_ctx *c, const mg_value *v);
/* The actual element count of a dense value (dynamic or static), as C. */
const char *cg_dyn_numel(cg_ctx *c, const mg_value *v);
/* The weights payload's checksum, as the generated model_init checks it, and the
 * payload itself (mg_malloc'd, *n bytes; NULL on OOM). */
uint64_t cg_weights_hash(cg_ctx *c);
unsigned char *cg_weights_payload(cg_ctx *c, size_t *n);
/* Writes every file of the project; model_c is the finished model.c text. */
int cg_write_project(cg_ctx *c, const char *dir, const char *model_c, const char *model_h);
/* The text of model.c (returned) and of model.h (*model_h), both mg_malloc'd;
 * NULL on allocation failure. */
char *cg_model_sources(cg_ctx *c, char **model_h);
/* Bytes per element in generated code: mg_dtype_size, and 8 for a string
 * (a const char *, 64-bit targets). */
size_t cg_elem_bytes(mg_dtype t);
/* Offset of graph output j's dims in the instance's out_dims[] (the sum of the
 * ranks before it). */
int cg_out_dims_offset(const mg_graph *g, int j);
/* Flags of op from kernels.def; -1 when the op has no emitter. */
int cg_kernel_flags(mg_op op);
/* View ops: output = input 0's bytes, relabelled. */
int cg_is_view(const mg_node *n);
/* ---- shared by cg_dynamic.c and cg_dynamic_emit.c ---- */

/* A value's dims in cg_dynamic.c and cg_dynamic_emit.c: largest sizes, C
 * expressions, which vary. */
typedef struct {
  int rank;
  int64_t max[MG_MAX_RANK];
  const char *expr[MG_MAX_RANK]; /* NULL: the node's emitter sets it */
  unsigned mask;                 /* dims that vary at run time */
} dshape;

/* A formatted string in c's string arena ("0", with the body marked failed, when
 * out of memory). */
static inline const char *str(cg_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline const char *str(cg_ctx *c, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  const char *s = mg_arena_strdup(&c->strings, buf);
  if (!s) c->body.failed = 1;
  return s ? s : "0";
}

/* Whether v is a value of c's graph (not of a subgraph or detached). */
static inline int in_graph(const cg_ctx *c, const mg_value *v) {
  return v && v->id >= 0 && v->id < c->g->n_values && c->g->values[v->id] == v;
}

/* Whether v is a tensor whose shape inference derived static dims. */
static inline int is_static(const mg_value *v) {
  return v && v->vtype == MG_VT_TENSOR && v->shape.rank >= 0 && mg_shape_is_static(&v->shape) &&
         !v->shape_declared;
}

/* Whether v has run-time dims (slots in rd[]). */
static inline int is_dyn(const cg_ctx *c, const mg_value *v) { return in_graph(c, v) && c->rd_off[v->id] >= 0; }

/* v's dims as a dshape (v static or dynamic). */
static inline void din(cg_ctx *c, const mg_value *v, dshape *s) {
  memset(s, 0, sizeof *s);
  s->rank = v->shape.rank;
  s->mask = is_dyn(c, v) ? c->rd_mask[v->id] : 0;
  for (int k = 0; k < s->rank; k++) {
    s->max[k] = v->shape.d[k].v;
    s->expr[k] = s->mask >> k & 1 ? str(c, "rd[%d]", c->rd_off[v->id] + k) : str(c, "%lld", (long long)s->max[k]);
  }
}

/* The only varying axis of a dense dshape, or -1 when none varies. */
static inline int varying_axis(const dshape *s) {
  for (int k = 0; k < s->rank; k++)
    if (s->mask >> k & 1) return k;
  return -1;
}

/* "(e0 * e1 * ...)" over dims [from, to) of s. */
static inline const char *prod_expr(cg_ctx *c, const dshape *s, int from, int to) {
  char buf[1024];
  size_t at = 0;
  buf[0] = 0;
  for (int k = from; k < to && at < sizeof buf - 64; k++)
    at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", k > from ? " * " : "", s->expr[k]);
  return from >= to ? "1" : str(c, "(%s)", buf);
}

enum { MAX_OUTS = 64 }; /* outputs of a node cg_dynamic.c takes */

/* A rule's work on one node: the outputs' dshapes, a guard, or why it has none. */
typedef struct {
  cg_ctx *c;
  const mg_node *n;
  dshape out[MAX_OUTS];
  const char *guard;  /* C condition under which the node cannot run, or NULL */
  const char *why;    /* why there is no rule */
} rule_ctx;

typedef struct {
  int axis;
  int64_t start, end, step;
  int start_rt, end_rt; /* read at run time (one-element starts / ends) */
} slice_spec;

/* Slice's constant (or one-element run-time) starts, ends, axes and steps as one
 * spec per sliced axis; DYN_FAILED (with r->why) when they are not usable. */
int cg_dyn_slice_params(rule_ctx *r, const dshape *x, slice_spec *sp, int *n_sp);
/* Upper bounds of v's elements (a small int tensor): its data when constant;
 * *exact gets a bit per element known exactly (a constant, or a static dim).
 * Returns the element count (at most 8), 0 when nothing is known. */
int cg_dyn_vbound(cg_ctx *c, const mg_value *v, int64_t *hi, unsigned *exact);
/* Records the bounds of n's output from its inputs' (cg_dynamic_bounds.c). */
void cg_dyn_track_vbounds(cg_ctx *c, const mg_node *n);
/* v's elements when each is known here (a constant, or exact bounds); -1 if not. */
int64_t cg_dyn_known_ints(cg_ctx *c, const mg_value *v, int64_t *out, int64_t cap);

#endif
