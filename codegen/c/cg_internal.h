/* Shared by the C generator's driver files (emit_c.c, cg_plan.c, cg_dynamic.c,
 * cg_project.c); emitters see only cg.h. */
#ifndef MG_CG_INTERNAL_H
#define MG_CG_INTERNAL_H
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
} cg_place;


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
  const mg_node *cur;     /* node being emitted */
  int cur_failed;
};

/* Fusion decisions (act, silu_mul, absorbed, redirect) and the plan (place,
 * buffers, arena_bytes, lower_bound, weights_bytes). */
int cg_fuse(cg_ctx *c, cg_report *r);
int cg_plan(cg_ctx *c, cg_report *r);
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
#endif
