/* ONNX import: a .onnx file (protobuf, opsets 1-18+) into the canonical IR.
 *
 * Import maps the file (initializer data is not copied), decodes it with protobuf-c
 * code generated from the system's onnx.proto, inlines model-local functions, folds
 * Constant nodes into constant values, normalises old-opset forms (normalize.c),
 * fills attribute defaults from ops.def, and checks the graph: every input defined,
 * no cycles. Nodes come out in topological order. */
#ifndef MG_ONNX_IMPORT_H
#define MG_ONNX_IMPORT_H
#include "ir.h"

/* Returns 0 and sets *out on success. On bad input, records diagnostics on d,
 * returns -1 and sets *out to NULL. Ops migc does not know are not errors: they are
 * kept as MG_OP_UNKNOWN nodes (inspect and coverage report them). */
int onnx_import(const char *path, mg_diags *d, mg_model **out);
/* The same from a buffer that outlives the model (the fuzzer's entry point).
 * External data is resolved relative to base_dir (NULL: external data is an error). */
int onnx_import_buffer(const void *buf, size_t len, const char *base_dir, mg_diags *d,
                       mg_model **out);
/* Reads a serialised onnx.TensorProto (a conformance test's input_0.pb) into a new
 * detached constant value whose data lives in m's arena. 0 on success. */
int onnx_read_tensor(const char *path, mg_model *m, mg_value **out, mg_diags *d);
#endif
