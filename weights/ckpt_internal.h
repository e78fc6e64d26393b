/* Internals of the MindSpore .ckpt writer and reader (weights/ckpt.c,
 * weights/ckpt_read.c) that they share, and that tests,
 * the fuzz target and `migc ckpt` need but the public API does not. */
#ifndef MG_WEIGHTS_CKPT_INTERNAL_H
#define MG_WEIGHTS_CKPT_INTERNAL_H
#include "weights.h"
#include <stddef.h>
#include <stdint.h>

/* MindSpore splits a tensor whose content exceeds this many bytes into several
 * Values (its SLICE_SIZE). */
#define WT_CKPT_VALUE_BYTES ((size_t)512 << 20)
/* The writer asks its fill callback for at most this many bytes at a time, so its
 * memory stays bounded whatever the tensor size. */
#define WT_CKPT_FILL_BYTES ((size_t)4 << 20)

/* Reads a checkpoint held in memory, exactly like ckpt_open() but without a file:
 * `name` (may be NULL) is only used in diagnostics and as the source's path. The
 * buffer is borrowed: the returned source points into it, so it must outlive the
 * source. */
int ckpt_open_buffer(const void *data, size_t len, const char *name, wt_source **out, mg_diags *d);

/* What a checkpoint source knows beyond its tensors. */
typedef struct {
  int has_crc;      /* a "crc_num" trailer was present (and matched) */
  int64_t n_values; /* Values in the file; more than tensors when some were split */
} ckpt_info;
/* Fills *out for a source opened by ckpt_open/ckpt_open_buffer; -1 (and *out
 * zeroed) for any other source. */
int ckpt_source_info(const wt_source *s, ckpt_info *out);

/* Test hooks: the writer's split boundary (bytes of content per Value, at most
 * the default) and fill chunk (bytes per fill call). 0 restores the defaults
 * above. Process-wide, not thread-safe: tests set them before writing. */
void wt_ckpt_set_limits(size_t value_bytes, size_t fill_bytes);

/* The CRC trailer: these 7 bytes, then the CRC-32 as 10 big-endian bytes. */
extern const char wt_ckpt_crc_magic[7];
enum { WT_CKPT_CRC_TRAILER = 17 };

/* A tag MindSpore could have written and a diagnostic can show: non-empty, with
 * no control characters (a NUL could not even be a C string). */
int wt_ckpt_tag_ok(const char *p, size_t n);

/* A set of NUL-terminated strings that the caller keeps alive, to refuse a tag
 * seen before in O(1) (checkpoints may hold many thousands). Zero-initialise. */
typedef struct {
  const char **slot;
  size_t cap, n;
} wt_tagset;
/* Inserts key: 0 when new, 1 when already present, -1 on allocation failure. */
int wt_tagset_insert(wt_tagset *ts, const char *key);
/* Frees the table, not the strings. */
void wt_tagset_free(wt_tagset *ts);

/* CRC-32 as zlib and Python's binascii.crc32 compute it (reflected polynomial
 * 0xEDB88320): pass 0 to start, the previous result to continue. */
uint32_t wt_crc32(uint32_t crc, const void *buf, size_t n);
/* The same by tables only (weights/crc32.c), for tests of the vector path. */
uint32_t wt_crc32_portable(uint32_t crc, const void *buf, size_t n);
#endif
