/* Mapping: the op-equivalence rules (rules/mindspore.xml, rules/aclnn.xml) and the
 * status of every node for every target, from which the coverage report is built.
 * docs/rules-schema.md describes the rules files. */
#ifndef MG_MAPPING_H
#define MG_MAPPING_H
#include "ir.h"

typedef enum {
  MAP_SUPPORTED,
  MAP_DECOMPOSED,
  MAP_UNSUPPORTED_OP,
  MAP_UNSUPPORTED_ATTR,
  MAP_UNSUPPORTED_DTYPE,
  MAP_DYNAMIC_SHAPE,
  MAP_CUSTOM_OP,  /* no rule, but the emitter calls the CPU target's kernel (MindSpore's ops.Custom):
                     it runs, on the CPU device only; an emitter's verdict, never the rules' */
  MAP_HOST_FALLBACK, /* no aclnn call, but the Ascend program runs the CPU target's kernel on the
                        host between device copies: it runs, slower; an emitter's verdict */
  MAP_STATUS_COUNT
} map_status;

const char *map_status_name(map_status s); /* "supported", "unsupported-attribute", ... */

typedef struct rule_set rule_set;

/* An empty rule set for target `target` ("mindspore", "ascend"); NULL on OOM. */
rule_set *rules_new(const char *target);
/* Loads a rules file into rs. Rules for an op in a later file replace that op's
 * earlier rules (user files override built-in ones). Malformed XML, a rule for an
 * op ops.def does not know, a duplicate (op, opset) key, or a bad element is an
 * error naming file:line and the reason. 0 on success. */
int rules_load(rule_set *rs, const char *path, mg_diags *d);
void rules_free(rule_set *rs);
/* Hides every rule for ONNX op `name` or calling `name` (an aclnn function): nodes
 * they would take have no rule, which map_match says naming `why`; so a target's
 * gap routes can be tested on ops it has (convert --ascend-no-op). The number of
 * rules hidden, or -1 (more than 16 names). */
int rules_hide(rule_set *rs, const char *name, const char *why);
const char *rules_target(const rule_set *rs);
/* Whether id is in the value vocabulary of rules files (mapping/values.def). */
int rules_value_known(const char *id);
/* Checks one value expression of a rule for op: quotes and parentheses balanced,
 * every identifier in the vocabulary (or an aclnn enum name, ACL_..., when
 * acl_enums), every attr(NAME) a canonical attribute of op. 0, or -1 with the
 * reason in why. */
int rules_check_value(const char *v, mg_op op, int acl_enums, char *why, size_t wn);
/* Whether op has a rule (any opset). */
int rules_has_op(const rule_set *rs, mg_op op);

typedef struct {
  map_status status;
  char *detail;     /* the call ("mindspore.nn.Conv2d"), the decomposition, or the
                       reason ("attribute auto_pad=SAME_LOWER; allowed NOTSET SAME_UPPER") */
} node_map;

/* The targets mapped. CPU support comes from ops.def and the runtime kernels. */
enum { MAP_TARGET_CPU, MAP_TARGET_ASCEND, MAP_TARGET_MINDSPORE, MAP_TARGET_COUNT };
const char *map_target_name(int t);
/* MindSpore's spelling of dtype t ("mindspore.float32"), NULL when it has none. */
const char *map_ms_dtype_name(mg_dtype t);
/* The aclDataType name of dtype t ("ACL_FLOAT"), NULL when it has none. */
const char *map_acl_dtype_name(mg_dtype t);

/* Maps one node for a rules target (rs; NULL gives MAP_UNSUPPORTED_OP: the CPU
 * target has no rules, its emitter's check decides, see coverage_cpu). The detail
 * string is mg_malloc'd (NULL only when memory ran out). Precondition: shapes were inferred.
 * This is the match alone, what the coverage report shows: map_node_plan's status
 * is the same except when a matched call's argument cannot be evaluated. */
node_map map_node(const mg_node *n, const rule_set *rs);
void node_map_free(node_map *m);

/* ---------- the typed plan of a node (docs/rules-schema.md, "The plan") ---------- */

/* One <rule> of a rules file; read it through the accessors. */
typedef struct rule rule;
const char *rule_call(const rule *r);     /* api (mindspore) or fn (ascend); NULL: a decomposition */
const char *rule_kind(const rule *r);     /* <call kind>: "cell", "function"; NULL when none given */
const char *rule_file(const rule *r);
int rule_line(const rule *r);
int rule_n_decompose(const rule *r);
mg_op rule_decompose_op(const rule *r, int i);

typedef enum {
  MV_NONE,      /* Python None / a NULL pointer */
  MV_BOOL,      /* b */
  MV_INT,       /* i */
  MV_INTS,      /* ints[0..n) */
  MV_FLOAT,     /* f */
  MV_FLOATS,    /* floats[0..n) */
  MV_STRING,    /* s */
  MV_ENUM,      /* s: an aclnn enum name (ACL_FORMAT_ND) */
  MV_DTYPE,     /* dtype; s: the target's spelling when the expression asked for one */
  MV_TENSOR,    /* ref */
  MV_TENSORS,   /* refs[0..n): every given input, in order */
  MV_TRANSFORM  /* s: a named layout transform of the weights; args[0..n): its arguments */
} map_value_kind;

typedef enum {
  MAP_REF_INPUT,   /* input index of the node */
  MAP_REF_OUTPUT,  /* output index of the node */
  MAP_REF_CONST,   /* input index, a constant: its elements decoded below */
  MAP_REF_DATA,    /* the data pointer of input index (aclCreateTensor's tensorData) */
  MAP_REF_ZEROS,   /* a zero tensor of dtype with the view's dims (Gemm's absent C) */
  MAP_REF_SCRATCH  /* a scratch buffer of scratch_bytes bytes (aclnnDropout's maskOut) */
} map_ref_role;

typedef struct {
  map_ref_role role;
  int index;
  const mg_value *v;        /* the IR value; NULL for ZEROS and SCRATCH */
  mg_dtype dtype;
  /* CONST: n_elems elements (-1: too many to decode), as ints for integer and bool
   * dtypes, as floats otherwise; the other pointer is NULL. */
  int64_t n_elems;
  const int64_t *ints;
  const double *floats;
  /* A view over the tensor when view_rank >= 0: dims and strides in elements,
   * offset in elements from the start of the buffer. */
  int view_rank;
  const int64_t *view_dims, *view_strides;
  int64_t view_offset;
  size_t scratch_bytes;
} map_ref;

typedef struct map_value map_value;
struct map_value {
  map_value_kind kind;
  int b;
  int64_t i;
  double f;
  const char *s;
  mg_dtype dtype;
  int n;                    /* element count of ints, floats, refs or args */
  const int64_t *ints;
  const double *floats;
  map_ref ref;
  const map_ref *refs;
  const map_value *args;
};

/* One <arg> of the matched call, evaluated for the node. */
typedef struct {
  const char *name;         /* the API parameter */
  int pos;                  /* its position (aclnn), -1 when the rule gives none */
  const char *expr;         /* the rule's expression */
  map_value value;
} map_arg;

typedef struct {
  map_status status;        /* as map_node, worse when an argument cannot be evaluated */
  const char *detail;       /* as map_node; for such an argument it names it and why */
  const rule *rule;         /* the rule that matched; NULL when none did */
  map_arg *args;            /* a direct call: every <arg>, in order */
  int n_args;
  int failed_arg;           /* the argument that could not be evaluated, or -1 */
  const mg_op *into;        /* a decomposition: the ops it decomposes into */
  int n_into;
} map_plan;

/* The plan of node n for rs's target: map_node's match, then every argument of a
 * matched call evaluated for n (attribute defaults from ops.def, shapes, constant
 * inputs). Everything is allocated in arena (the caller's, freed with it).
 * NULL only when out of memory. Precondition: shapes were inferred. */
map_plan *map_node_plan(const mg_node *n, const rule_set *rs, mg_arena *arena);

/* Evaluates one value expression (the vocabulary of mapping/values.def) for node n
 * as target ("mindspore", "ascend") would: 0 with *out set, or -1 with the status
 * (MAP_DYNAMIC_SHAPE: something not static; MAP_UNSUPPORTED_ATTR or _DTYPE: the
 * node's values cannot be expressed) and the reason in why. Out of memory is -1
 * with MAP_UNSUPPORTED_OP and "out of memory". */
int map_eval(const mg_node *n, const char *target, const char *expr, mg_arena *arena, map_value *out,
             map_status *status, char *why, size_t wn);
/* Whether identifier id of values.def has an evaluator (all have: the evaluator
 * table is generated from values.def, so a missing one does not compile). */
int map_value_has_evaluator(const char *id);

/* ---------- decompositions ---------- */

/* Rewrites every node of m (its subgraphs included) whose matching rule for rs's
 * target is a <decompose> into the ops it lists (the recipes of
 * docs/rules-notes.md section 4), repeating on the nodes made until none
 * decomposes, then re-runs shape inference. A node no recipe can lower (a shape
 * it needs is not static, or its rule lists ops no recipe produces) is left alone
 * with an unsupported diagnostic. Returns the number of nodes lowered, or -1
 * (out of memory, or shape inference failed; recorded in d). */
int map_lower(mg_model *m, const rule_set *rs, mg_diags *d);
/* Whether map_lower has a recipe for op decomposed into `into` (the <decompose
 * into> text: op names separated by single spaces). */
int map_lower_has_recipe(mg_op op, const char *into);
#endif
