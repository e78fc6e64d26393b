/* Weights sources: .pth (zip and legacy), .safetensors and ONNX initializers, read
 * as named tensors without copying data that need not be copied; and the MindSpore
 * .ckpt writer and reader.
 *
 * A source lists tensors (name, dtype, shape, and where the bytes are: a storage,
 * an element offset and element strides, since several torch tensors may view one
 * storage and some are not contiguous). wt_read() streams a tensor's elements in
 * C order into a caller buffer, so writers can work in bounded chunks: peak memory
 * stays near the largest tensor, never the whole file. */
#ifndef MG_WEIGHTS_H
#define MG_WEIGHTS_H
#include "diag.h"
#include "dtype.h"
#include "ir.h"
#include <stddef.h>
#include <stdint.h>

enum { WT_MAX_RANK = 16 };

typedef struct wt_source wt_source;

typedef struct {
  char *name;                 /* key in the state_dict (or initializer name) */
  mg_dtype dtype;
  int rank;
  int64_t dims[WT_MAX_RANK];
  int64_t strides[WT_MAX_RANK]; /* in elements */
  int64_t offset;             /* in elements, into the storage */
  int storage;                /* index into the source's storages */
} wt_tensor;

/* Opens a torch .pth (zip format, torch >= 1.6, or the legacy format) with a
 * restricted unpickler that executes nothing: only the globals that
 * torch.load(weights_only=True) allows are accepted; any other global is an error
 * naming it. `key` selects a nested dict (e.g. "state_dict"); NULL finds the tensor
 * dict automatically when there is exactly one. */
int pth_open(const char *path, const char *key, wt_source **out, mg_diags *d);
/* Opens a .safetensors file (8-byte header length, JSON header, raw data). */
int safetensors_open(const char *path, wt_source **out, mg_diags *d);
/* A source over the initializers of an imported model (borrowing m's data). */
int onnx_weights_open(const mg_model *m, wt_source **out, mg_diags *d);
/* Chooses by content (zip / legacy pickle / safetensors / onnx protobuf). */
int weights_open(const char *path, const char *key, wt_source **out, mg_diags *d);
void wt_close(wt_source *s);

int wt_count(const wt_source *s);
const wt_tensor *wt_get(const wt_source *s, int i);
const wt_tensor *wt_find(const wt_source *s, const char *name);
int64_t wt_numel(const wt_tensor *t);

/* Copies elements [first, first + count) of t, in C order, as raw little-endian
 * bytes of t's own dtype into dst (count * element size bytes). Handles offsets and
 * strides. 0 on success; a storage shorter than the tensor is an error. */
int wt_read(const wt_source *s, const wt_tensor *t, int64_t first, int64_t count, void *dst,
            mg_diags *d);
/* Like wt_read, but without a copy when it can: when elements [first, first +
 * count) of t lie contiguously in memory (a mapped file), sets *p to them, valid
 * until the source is closed; otherwise sets *p = NULL (use wt_read). The bytes
 * are checked as wt_read checks them. 0, or -1 with a diagnostic. */
int wt_view(const wt_source *s, const wt_tensor *t, int64_t first, int64_t count, const void **p,
            mg_diags *d);

/* ---- MindSpore checkpoint (checkpoint.proto, written by hand from its facts) ---- */

typedef struct wt_ckpt_writer wt_ckpt_writer;

/* Starts writing `path` through a temporary file in the same directory; nothing
 * appears at `path` until wt_ckpt_commit. An existing path is refused unless force. */
int wt_ckpt_begin(const char *path, int force, int crc, wt_ckpt_writer **out, mg_diags *d);
/* Streams one tensor: tag, MindSpore tensor_type of `dtype`, dims; the content
 * comes from `fill(ctx, first, count, dst)` called for consecutive element ranges
 * (each at most a few MB), converted to `dtype` by the callee. Tensors over 512 MiB
 * are split into consecutive Values with the same tag and the full dims. */
typedef int (*wt_fill_fn)(void *ctx, int64_t first, int64_t count, void *dst);
int wt_ckpt_add(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                wt_fill_fn fill, void *ctx);
/* Optional companion to fill: when elements [first, first + count) already lie in
 * memory in the checkpoint dtype, sets *p to them (valid until the next call), and
 * the writer writes them without a copy; *p = NULL has fill called instead. 0, or
 * -1 when the content cannot be produced. */
typedef int (*wt_view_fn)(void *ctx, int64_t first, int64_t count, const void **p);
/* wt_ckpt_add, asking `view` (may be NULL) before `fill` for each range. */
int wt_ckpt_add_view(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                     wt_fill_fn fill, wt_view_fn view, void *ctx);
/* Writes the optional CRC trailer, fsyncs and renames into place. */
int wt_ckpt_commit(wt_ckpt_writer *w);
/* Discards the temporary file (if not committed) and frees the writer: call it
 * exactly once after a successful wt_ckpt_begin, also after wt_ckpt_commit. */
void wt_ckpt_abort(wt_ckpt_writer *w);

/* Reads a .ckpt as a source: adjacent chunks of one tag are joined, a CRC trailer
 * is verified, and corrupt or truncated files are errors. */
int ckpt_open(const char *path, wt_source **out, mg_diags *d);
/* "Float32" for MG_F32 ...; NULL when MindSpore has no such tensor_type. */
const char *wt_ms_type_name(mg_dtype t);
mg_dtype wt_ms_type_parse(const char *name);
#endif
