/* The canonical IR: a model owns one arena and one top-level graph; subgraphs
 * (If/Loop/Scan bodies) are graphs whose parent is the graph of their node.
 *
 * Invariants that ir_verify() checks between passes:
 *  - every node input is NULL (an omitted optional input) or a value visible from the
 *    node's graph (own scope or an ancestor's);
 *  - every value has at most one producer, and node outputs name that node;
 *  - nodes are stored in a topological order;
 *  - op arity matches ops.def, and attributes are the canonical ones. */
#ifndef MG_IR_H
#define MG_IR_H
#include "arena.h"
#include "diag.h"
#include "dtype.h"
#include <stdint.h>

typedef enum {
  MG_OP_UNKNOWN = 0, /* an op migc does not know; op_type/domain keep the original */
#define OP(name, ...) MG_OP_##name,
#include "ops.def"
#undef OP
  MG_OP_COUNT
} mg_op;

typedef enum {
  MG_SH_UNARY,       /* output = input 0, shape and dtype */
  MG_SH_PREDICATE,   /* output = input 0's shape, bool */
  MG_SH_BINARY,      /* numpy broadcast of all inputs, dtype of input 0 */
  MG_SH_COMPARE,     /* numpy broadcast, bool */
  MG_SH_REDUCE,      /* axes input, keepdims, noop_with_empty_axes */
  MG_SH_GLOBAL_POOL, /* N C 1 1 ... */
  MG_SH_OWN          /* a case of its own in infer.c */
} mg_shape_rule;

typedef enum {
  MG_ATTR_INT, MG_ATTR_FLOAT, MG_ATTR_STRING, MG_ATTR_INTS, MG_ATTR_FLOATS,
  MG_ATTR_STRINGS, MG_ATTR_TENSOR, MG_ATTR_GRAPH, MG_ATTR_TYPE
} mg_attr_kind;

/* Properties of an op that every stage asks about (the flags column of ops.def). */
enum {
  MG_OPF_VIEW = 1,       /* output 0 is input 0's elements in order under a new shape */
  MG_OPF_INFER_VIEW = 2, /* a view at inference only (Dropout: its mask is unused) */
  MG_OPF_RANDOM = 4      /* draws random numbers: never folded, never compared exactly */
};

typedef struct {
  const char *name;
  int min_in, max_in, min_out, max_out; /* max -1: variadic */
  mg_shape_rule shape_rule;
  int flags;         /* MG_OPF_* */
  const char *attrs; /* canonical attribute spec, see ops.def */
} mg_op_info;

const mg_op_info *mg_op_get(mg_op op);
mg_op mg_op_lookup(const char *name); /* MG_OP_UNKNOWN when not in ops.def */
const char *mg_op_name(mg_op op);
static inline int mg_op_is_view(mg_op op) { return (mg_op_get(op)->flags & MG_OPF_VIEW) != 0; }
static inline int mg_op_is_random(mg_op op) { return (mg_op_get(op)->flags & MG_OPF_RANDOM) != 0; }
/* The kind and default of attribute `name` of `op`; returns 0 if op has no such
 * attribute. *has_default is set when the spec gives one. */
int mg_op_attr_spec(mg_op op, const char *name, mg_attr_kind *kind, int *has_default,
                    const char **default_text);

enum { MG_MAX_RANK = 16 };
/* The largest dimension migc accepts (2^40). Bounding dims keeps every shape
 * computation far from int64 overflow; a model with a larger one is rejected. */
#define MG_DIM_MAX ((int64_t)1 << 40)
/* Most elements one tensor may have (the product of its known dims): 2^59, so that
 * its size in bytes (at most 16 per element) and the byte offsets into it fit int64
 * and size_t. Shape inference refuses a larger shape as a LIMIT error. */
#define MG_NUMEL_MAX ((int64_t)1 << 59)

/* One dimension: v >= 0 is known; v < 0 is unknown, with sym naming it if the model
 * or inference gave it a name ("batch", "seq"). */
typedef struct {
  int64_t v;
  const char *sym;
} mg_dim;

typedef struct {
  int rank; /* -1: unknown rank */
  mg_dim d[MG_MAX_RANK];
} mg_shape;

typedef enum {
  MG_VT_TENSOR, MG_VT_SEQUENCE, MG_VT_OPTIONAL_TENSOR, MG_VT_OPTIONAL_SEQUENCE
} mg_value_type;

typedef enum {
  MG_V_NODE,   /* produced by a node */
  MG_V_INPUT,  /* a graph input fed at run time */
  MG_V_INIT,   /* an initializer: a named parameter */
  MG_V_CONST,  /* a constant: from a Constant node, an attribute, or folding */
} mg_value_kind;

typedef struct mg_node mg_node;
typedef struct mg_graph mg_graph;

typedef struct mg_value {
  const char *name;
  mg_value_kind kind;
  mg_value_type vtype;
  mg_dtype dtype;       /* element dtype (of the tensors, for sequences) */
  mg_shape shape;
  mg_node *producer;    /* NULL for inputs and constants */
  int producer_slot;
  int n_uses;           /* node inputs and graph outputs that read it */
  /* Constant data, little-endian C order; for STRING an array of char*. Points into
   * the arena (16-byte aligned) or into a mapped file (possibly unaligned: read it
   * with memcpy); NULL for run-time values. */
  const void *data;
  size_t nbytes;
  /* Partial value of a small int tensor (rank <= 1, at most MG_SMALL elements)
   * known during shape inference. An element is known (any int64, negatives
   * included) unless its v is MG_UNKNOWN_ELEM; an unknown one may carry a sym. */
  mg_dim *elems;
  int n_elems;
  int id;               /* dense index within its graph; -1 if detached */
  int has_decl;         /* the model declared a type (graph input/output, value_info) */
  int shape_declared;   /* some dims were taken from the declaration: inference could not
                           derive them (they depend on run-time values) */
  mg_dtype decl_dtype;  /* the declared type, kept to check inference against */
  mg_shape decl_shape;
} mg_value;
enum { MG_SMALL = 64 };
#define MG_UNKNOWN_ELEM INT64_MIN

typedef struct mg_attr {
  const char *name;
  mg_attr_kind kind;
  int64_t i;
  float f;
  const char *s;
  size_t n;               /* element count of ints/floats/strings */
  int64_t *ints;
  float *floats;
  const char **strings;
  mg_value *t;            /* TENSOR: a constant value not registered in any graph */
  mg_graph *g;            /* GRAPH */
  mg_value_type tp;       /* TYPE */
  mg_dtype tp_dtype;
} mg_attr;

struct mg_node {
  mg_op op;
  const char *name;
  const char *op_type;  /* as in the model, for messages and unknown ops */
  const char *domain;   /* "" for the default domain */
  int n_in, n_out, n_attr;
  mg_value **in;        /* NULL entries are omitted optional inputs */
  mg_value **out;       /* NULL entries are omitted optional outputs */
  mg_attr *attr;
  mg_graph *graph;      /* owning graph */
  int64_t opset;        /* version of the node's domain that the model imports */
  int synthetic;        /* added by import normalisation, not in the model file */
  int id;               /* position in graph->nodes */
};

struct mg_graph {
  struct mg_model *model;
  mg_graph *parent;     /* NULL for the top-level graph */
  const char *name;
  mg_node **nodes;
  int n_nodes, cap_nodes;
  mg_value **values;    /* every value in this scope, by id */
  int n_values, cap_values;
  mg_value **inputs;    /* run-time inputs, in order */
  int n_inputs;
  mg_value **outputs;
  int n_outputs;
  mg_value **inits;     /* initializers, in file order */
  int n_inits;
  /* name -> value hash, open addressing; capacity is a power of two */
  mg_value **table;
  int table_cap;
};

typedef struct {
  const char *domain;
  int64_t version;
} mg_opset;

typedef struct mg_mapping mg_mapping;

typedef struct mg_model {
  mg_arena arena;
  const char *path;
  int64_t ir_version;
  const char *producer_name, *producer_version;
  mg_opset *opsets;
  int n_opsets;
  int64_t opset;        /* version of the default domain */
  mg_graph *graph;
  mg_mapping *mappings; /* files mapped for initializer data; unmapped on free */
  /* Set before mg_prepare when gradients with respect to the initializers are
   * wanted (verify --grad): floating-point values computed from an initializer are
   * then not folded into constants, so the path from each parameter survives. */
  int keep_param_paths;
  /* Never adopt a declared shape that inference could not derive (see
   * mg_value.shape_declared): code generation must not rely on a promise. */
  int derive_shapes_only;
} mg_model;

/* Construction. All return NULL on allocation failure (recorded by the caller). */
mg_model *mg_model_new(void);
void mg_model_free(mg_model *m);
/* A deep copy of src's graphs, nodes, values and attributes (core/ir_clone.c), for
 * a target whose lowering rewrites the model. Constant data, names and attribute
 * arrays are shared, not copied: src must outlive the copy and stay unchanged
 * where they are concerned. NULL on OOM. */
mg_model *mg_model_clone(const mg_model *src);
/* Hand a mapped region to the model, which unmaps it when freed. 0 on success. */
int mg_model_add_mapping(mg_model *m, void *addr, size_t len);
mg_graph *mg_graph_new(mg_model *m, mg_graph *parent);
/* A new value named `name` in g's scope; NULL on allocation failure. If a value of
 * that name already exists in g, it is returned through *existing and NULL returned. */
mg_value *mg_value_new(mg_graph *g, const char *name, mg_value **existing);
/* A value that lives in no scope's table (attribute tensors, anonymous constants). */
mg_value *mg_value_detached(mg_model *m, const char *name);
/* Look up a value visible from g: its own scope first, then its ancestors. */
mg_value *mg_graph_find(const mg_graph *g, const char *name);
mg_value *mg_graph_find_local(const mg_graph *g, const char *name);
mg_node *mg_node_new(mg_graph *g, mg_op op, const char *name, int n_in, int n_out);
int mg_graph_push_node(mg_graph *g, mg_node *n);
/* Push a value pointer onto a graph list (inputs, outputs, inits); 0 on success. */
int mg_graph_push_list(mg_graph *g, mg_value ***list, int *count, mg_value *v);

/* Attributes. */
const mg_attr *mg_node_attr(const mg_node *n, const char *name);

/* The newest default-domain opset whose op forms migc knows (ONNX 1.16); a model
 * importing a newer one is refused, never read with older semantics. */
#define MG_MAX_OPSET 21

/* The torch module path of a node from the scope name torch's exporter gives it,
 * "/layer2/layer2.0/downsample/downsample.0/Conv" -> "layer2.0.downsample.0": the
 * last component is the op; a component that extends the previous one ("layer1"
 * then "layer1.0": a container's child) replaces it, any other is a child. Writes
 * "" for a node without scope; returns the length, or -1 (and "") when the path
 * does not fit in out[n]. */
int mg_scope_module(const char *node_name, char *out, size_t n);

/* The node upstream of v (v's producer included) whose output length depends on
 * the values it reads rather than on shapes: NonZero, Unique, NonMaxSuppression,
 * Compress, or control flow (If, Loop, Scan). NULL when there is none in v's
 * graph: then an unknown dim of v is one --input-shape can fix. */
const mg_node *mg_data_dependent_origin(const mg_value *v);
int64_t mg_attr_int(const mg_node *n, const char *name, int64_t dflt);
float mg_attr_float(const mg_node *n, const char *name, float dflt);
const char *mg_attr_str(const mg_node *n, const char *name, const char *dflt);
/* ints list: returns count (0 if absent) and sets *out. */
size_t mg_attr_ints(const mg_node *n, const char *name, const int64_t **out);

/* Shapes. */
int64_t mg_shape_numel(const mg_shape *s); /* -1 if any dim unknown or overflow */
int mg_shape_is_static(const mg_shape *s);
/* "1x3x224x224", "batchx3x?x?", "?" (unknown rank); returns buf. */
char *mg_shape_str(const mg_shape *s, char *buf, size_t n);
/* Parse "1x3x224x224" (also comma separated). 0 on success. */
int mg_shape_parse(const char *text, mg_shape *out);

/* Data of a constant value as int64 (converting from any integer or float dtype);
 * returns element count, or -1 when v has no data or too many elements (> cap). */
int64_t mg_value_ints(const mg_value *v, int64_t *out, int64_t cap);

/* Walk a graph and all its subgraphs; fn returns nonzero to stop. */
int mg_graph_walk(mg_graph *g, int (*fn)(mg_graph *g, void *ctx), void *ctx);
#endif
