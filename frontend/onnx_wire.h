/* A minimal protobuf wire-format walker used before protobuf-c sees the file.
 *
 * protobuf-c copies every bytes field it decodes. For a model with gigabytes of
 * initializers that would double the memory, so onnx_wire_slim() rewrites the
 * ModelProto without the raw_data of the top-level graph's initializers and records
 * where each one lies in the original (mapped) file. Everything else is left to
 * protobuf-c. */
#ifndef MG_ONNX_WIRE_H
#define MG_ONNX_WIRE_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  size_t offset, length; /* raw_data bytes of initializer #index, in the source buffer */
  int index;             /* position among GraphProto.initializer */
} onnx_raw_ref;

typedef struct {
  unsigned char *slim;  /* rewritten ModelProto (mg_malloc'd) */
  size_t slim_len;
  onnx_raw_ref *refs;   /* mg_malloc'd, sorted by index */
  int n_refs;
} onnx_slim;

/* Rewrites `buf`. Returns 0 on success, -1 when the bytes are not a well-formed
 * protobuf at the levels it walks, or nests its graphs, nodes, attributes and types
 * more than 200 messages deep (protobuf-c would recurse that deep; *why says
 * which), -2 on allocation failure.
 * raw_data fields shorter than min_raw stay in place. */
int onnx_wire_slim(const unsigned char *buf, size_t len, size_t min_raw, onnx_slim *out,
                   const char **why);
void onnx_slim_free(onnx_slim *s);
#endif
