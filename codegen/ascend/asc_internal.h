/* Shared by the Ascend emitter's files (emit_ascend.c: the nodes; asc_buffers.c:
 * device buffers; asc_project.c: the files written). */
#ifndef MG_ASC_INTERNAL_H
#define MG_ASC_INTERNAL_H
#include "ascend.h"
#include "text.h"

/* One row of the fact table's C declarations (tools/gen_acl_facts): a typedef, an
 * enum, a prototype, or (NONCONTIG) a phase-1 function whose note documents
 * non-contiguous inputs as accepted, text holding the note's words. */
typedef enum { ASC_FACT_TYPE, ASC_FACT_ENUM, ASC_FACT_FN, ASC_FACT_NONCONTIG } asc_fact_kind;
typedef struct {
  asc_fact_kind kind;
  const char *name, *text;
} asc_fact;
extern const asc_fact asc_facts[];
extern const int asc_n_facts;
/* The row of that kind and name, or NULL. */
const asc_fact *asc_fact_find(asc_fact_kind kind, const char *name);

/* The status a generated model reports for a create call that returned NULL. */
enum { ACL_EMIT_NULL = -1 };

typedef enum { LOC_NONE, LOC_ARENA, LOC_WEIGHTS, LOC_INPUT } asc_loc_kind;
typedef struct {
  asc_loc_kind kind;
  size_t offset;  /* ARENA, WEIGHTS: bytes from the buffer's start */
  int index;      /* INPUT: the graph input */
} asc_loc;

/* Where a strided view's elements lie in its root's buffer (aclCreateTensor's
 * viewDims, stride and offset, in elements). */
typedef struct {
  int rank;
  int64_t dims[MG_MAX_RANK], strides[MG_MAX_RANK], offset;
} asc_layout;

typedef struct {
  mg_model *m;
  const rule_set *rs;
  mg_diags *d;
  asc_report *r;
  const char *model_path;
  mg_arena a;
  cg_buf init, run;            /* model_init's node section, model_run's calls */
  /* by value id: the graph's values, then the zero tensors and scratch buffers
   * the plan asks for (vals[id]) */
  const mg_value **vals;
  int n_vals, cap_vals;
  int *root;                   /* the value whose buffer it is (a view's input's) */
  asc_loc *loc;                /* by root */
  asc_layout **layout;         /* by graph value: a Transpose's or Slice's output read in
                                  place (a strided view of its root); NULL: dense */
  int n_layout;
  size_t arena_bytes, weights_bytes;
  struct asc_scratch *scratch; /* scratch buffers placed after the planned arena */
  int n_strided_views;         /* Transposes and Slices that are views, not copies */
  int n_tensors, n_arrays, n_scalars, n_lists, n_execs;
  int *in_list;                /* by tensor: 1 + the tensor list it is a member of (destroyed
                                  with it), or 0 */
  int cap_in_list;
  const char **fns;            /* aclnn functions called, for acl_decls.h */
  int n_fns, cap_fns;
  const char *first_unsupported; /* "node 'X' (Op): why", which model_init refuses with */
  const char *dir;             /* the project folder; NULL when checking */
  const asc_options *o;
  const char *fallback_idents[256]; /* the host fallbacks' C prefixes (host_<node>) */
  int n_fallbacks;
  size_t host_stage_bytes;     /* host staging for the largest fallback's inputs and outputs */
  const char *skeletons[64];   /* the custom-op skeletons written (<Op>Custom) */
  int n_skeletons;
  int failed;                  /* out of memory */
} asc_ctx;

/* The type text of parameter pos of fact-table function fn ("const aclTensor*"): 0,
 * or -1 when fn or the position is unknown. */
int asc_fn_param_type(const char *fn, int pos, char *type, size_t n);

/* Places every value: graph inputs (a device buffer each), constants (the weights
 * buffer), node outputs (the arena, planned by liveness), views (their input's
 * buffer). 0, or -1 (recorded). */
int asc_plan_buffers(asc_ctx *c);
/* The layout of value id when it is a strided view of its root's buffer, or NULL. */
const asc_layout *asc_strided_layout(const asc_ctx *c, int id);
/* A zero tensor of the ref's dtype and view dims, in the weights buffer; its id. */
int asc_zeros_value(asc_ctx *c, const map_ref *r);
/* A scratch buffer for node n, in the arena past the planned part: a tensor of
 * r->dtype and the view's dims when the ref has a view, else r->scratch_bytes of
 * UINT8; its id. */
int asc_scratch_value(asc_ctx *c, const mg_node *n, const map_ref *r);
/* Records that node n cannot be emitted: an unsupported diagnostic. */
void asc_unsupported(asc_ctx *c, const mg_node *n, const char *why);
/* Notes that the program calls fact-table function fn. */
void asc_use_fn(asc_ctx *c, const char *fn);
/* Node n, which aclnn cannot take (why), on the host through the CPU target's
 * kernel: its run-time text appended to c->run, its C model written into c->dir,
 * and custom_ops/<Op>/ once per op type. 1 when taken (a warning diagnostic
 * "ascend: host-fallback (cpu kernel): ..."), 0 when refused (*refusal says why),
 * -1 on OOM or I/O failure (recorded). */
int asc_host_fallback(asc_ctx *c, const mg_node *n, const char *why, const char **refusal);
/* Writes the project into dir. 0, or -1 (recorded). */
int asc_write_project(asc_ctx *c, const char *dir);
#endif
