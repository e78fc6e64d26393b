/* Shared between the importer's files; not part of the frontend's interface. */
#ifndef MG_IMPORT_INTERNAL_H
#define MG_IMPORT_INTERNAL_H
#include "ir.h"
#include "onnx.pb-c.h"

typedef struct import_ctx {
  mg_model *m;
  mg_diags *d;
  const char *base_dir;      /* for external data; NULL forbids it */
  const unsigned char *file; /* the mapped file, for raw_data refs */
  int oom;
  int anon;                  /* counter for generated value names */
  Onnx__ModelProto *proto;
  int inline_depth;
} import_ctx;

/* Rewrites a node imported as written into its canonical form: attributes that
 * later opsets turned into inputs become constant inputs, renamed or removed
 * attributes are translated, and Upsample becomes Resize. May add nodes before n
 * (pushed on g). Returns 0, or -1 after recording a diagnostic. */
int normalize_node(import_ctx *c, mg_graph *g, mg_node *n, int64_t opset);

/* Checks n's attributes against ops.def and appends the defaults it gives.
 * Returns 0, or -1 after recording a diagnostic. */
int canonicalise_attrs(import_ctx *c, mg_node *n);

/* A new constant value in g holding a copy of data (dims given). NULL on OOM. */
mg_value *import_const(import_ctx *c, mg_graph *g, const char *hint, mg_dtype dt, int rank,
                       const int64_t *dims, const void *data);
/* Remove attribute `name` from n, returning it (copy) in *out if out non-NULL.
 * Returns 1 if it was present. */
int import_take_attr(mg_node *n, const char *name, mg_attr *out);
/* Widen n's input list to `count`, filling new slots with NULL. 0 on success. */
int import_widen_inputs(import_ctx *c, mg_node *n, int count);
#endif
