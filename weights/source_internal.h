/* The representation every weights source shares; readers fill it in. */
#ifndef MG_WEIGHTS_SOURCE_INTERNAL_H
#define MG_WEIGHTS_SOURCE_INTERNAL_H
#include "arena.h"
#include "weights.h"

typedef struct {
  const unsigned char *data; /* the bytes when in memory (mapped, owned or borrowed) */
  size_t nbytes;             /* storage size in bytes */
  void *owned;               /* mg_malloc'd block freed on close (may equal data) */
  void *map;                 /* mmap'd region unmapped on close */
  size_t map_len;
  int64_t entry;             /* reader-specific locator when data is NULL (a zip index) */
} wt_storage;

struct wt_source {
  mg_arena arena;            /* names and small tables */
  wt_tensor *tensors;
  int n_tensors, cap_tensors;
  wt_storage *storages;
  int n_storages, cap_storages;
  /* For storages not held in memory: copies bytes [off, off+len) of storage i.
   * 0 on success; records a diagnostic otherwise. */
  int (*read_storage)(const wt_source *s, int i, size_t off, size_t len, void *dst, mg_diags *d);
  /* Optional, for storages in memory whose bytes must be checked before they are
   * used (a zip entry's CRC): called before bytes [off, off+len) of storage i are
   * read through `data`, and with off == nbytes, len == 0 before the read that
   * finishes a tensor, which must complete the storage's check. 0, or -1 with a
   * diagnostic (the storage is corrupt). */
  int (*use_storage)(const wt_source *s, int i, size_t off, size_t len, mg_diags *d);
  void *impl;                /* reader state (an open zip archive) */
  void (*close_impl)(void *impl);
  const char *path;
};

/* An empty source; NULL on allocation failure. */
wt_source *wt_source_new(const char *path);
/* Appends a tensor (name copied); returns it or NULL on allocation failure. Its
 * strides default to contiguous for dims. */
wt_tensor *wt_add_tensor(wt_source *s, const char *name, mg_dtype dt, int rank, const int64_t *dims,
                         int storage, int64_t offset);
/* Appends a storage; returns its index or -1 on allocation failure. */
int wt_add_storage(wt_source *s, const wt_storage *st);
/* Row-major strides of dims. */
void wt_contiguous_strides(int rank, const int64_t *dims, int64_t *strides);
#endif
