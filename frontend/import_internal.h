/* Shared between the importer's files; not part of the frontend's interface. */
#ifndef MG_IMPORT_INTERNAL_H
#define MG_IMPORT_INTERNAL_H
#include "ir.h"
#include "onnx.pb-c.h"
#include "onnx_wire.h"

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

/* Records out of memory on c; returns -1. */
#define OOM(c) ((c)->oom = 1, -1)

/* protobuf-c's allocations through mg_malloc (onnx_import.c). */
extern ProtobufCAllocator import_pb_allocator;

/* onnx_tensor.c: a TensorShapeProto into *s (what names the value in messages);
 * a declared type (dtype, shape, sequence/optional) into v's declaration; a
 * TensorProto's dtype, dims and data into v (raw, if non-NULL, is the
 * initializer's raw_data that onnx_wire_slim() left in the mapped file). Each
 * returns 0, or -1 after a diagnostic (or with c->oom set). */
int import_shape(import_ctx *c, const Onnx__TensorShapeProto *sp, mg_shape *s, const char *what);
int import_type(import_ctx *c, const Onnx__TypeProto *tp, mg_value *v);
int import_tensor(import_ctx *c, const Onnx__TensorProto *t, mg_value *v, const onnx_raw_ref *raw);

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
