/* The shared source representation: tensor tables and strided, streamed reads. */
#include "source_internal.h"
#include "mapfile.h"
#include <string.h>
#include <sys/mman.h>

wt_source *wt_source_new(const char *path) {
  wt_source *s = mg_calloc(1, sizeof *s);
  if (!s) return NULL;
  mg_arena_init(&s->arena, 64 * 1024);
  s->path = path ? mg_arena_strdup(&s->arena, path) : NULL;
  if (path && !s->path) {
    mg_free(s);
    return NULL;
  }
  return s;
}

void wt_contiguous_strides(int rank, const int64_t *dims, int64_t *strides) {
  int64_t st = 1;
  for (int i = rank - 1; i >= 0; i--) {
    strides[i] = st;
    st *= dims[i] > 0 ? dims[i] : 1;
  }
}

wt_tensor *wt_add_tensor(wt_source *s, const char *name, mg_dtype dt, int rank, const int64_t *dims,
                         int storage, int64_t offset) {
  if (rank < 0 || rank > WT_MAX_RANK) return NULL;
  if (s->n_tensors == s->cap_tensors) {
    int cap = s->cap_tensors ? s->cap_tensors * 2 : 64;
    wt_tensor *t = mg_realloc(s->tensors, sizeof(wt_tensor) * (size_t)cap);
    if (!t) return NULL;
    s->tensors = t;
    s->cap_tensors = cap;
  }
  wt_tensor *t = &s->tensors[s->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = mg_arena_strdup(&s->arena, name);
  if (!t->name) return NULL;
  t->dtype = dt;
  t->rank = rank;
  if (rank) memcpy(t->dims, dims, sizeof(int64_t) * (size_t)rank);
  wt_contiguous_strides(rank, t->dims, t->strides);
  t->storage = storage;
  t->offset = offset;
  s->n_tensors++;
  return t;
}

int wt_add_storage(wt_source *s, const wt_storage *st) {
  if (s->n_storages == s->cap_storages) {
    int cap = s->cap_storages ? s->cap_storages * 2 : 64;
    wt_storage *n = mg_realloc(s->storages, sizeof(wt_storage) * (size_t)cap);
    if (!n) return -1;
    s->storages = n;
    s->cap_storages = cap;
  }
  s->storages[s->n_storages] = *st;
  return s->n_storages++;
}

void wt_close(wt_source *s) {
  if (!s) return;
  for (int i = 0; i < s->n_storages; i++) {
    if (s->storages[i].owned) mg_free(s->storages[i].owned);
    if (s->storages[i].map) mg_unmap_file(s->storages[i].map, s->storages[i].map_len);
  }
  if (s->close_impl) s->close_impl(s->impl);
  mg_free(s->tensors);
  mg_free(s->storages);
  mg_arena_destroy(&s->arena);
  mg_free(s);
}

int wt_count(const wt_source *s) { return s->n_tensors; }
const wt_tensor *wt_get(const wt_source *s, int i) {
  return i >= 0 && i < s->n_tensors ? &s->tensors[i] : NULL;
}
const wt_tensor *wt_find(const wt_source *s, const char *name) {
  for (int i = 0; i < s->n_tensors; i++)
    if (!strcmp(s->tensors[i].name, name)) return &s->tensors[i];
  return NULL;
}

int64_t wt_numel(const wt_tensor *t) {
  int64_t k = 1;
  for (int i = 0; i < t->rank; i++) k *= t->dims[i];
  return k;
}

/* Reads `len` bytes at byte offset `off` of storage i, bounds-checked. */
static int storage_bytes(const wt_source *s, int i, int64_t off, size_t len, void *dst, mg_diags *d,
                         const wt_tensor *t) {
  const wt_storage *st = &s->storages[i];
  if (off < 0 || (uint64_t)off > st->nbytes || len > st->nbytes - (size_t)off) {
    mg_error(d, INVALID, t->name, NULL, "storage of %zu bytes is shorter than the tensor needs", st->nbytes);
    return -1;
  }
  if (st->data) {
    if (s->use_storage && s->use_storage(s, i, (size_t)off, len, d)) return -1;
    memcpy(dst, st->data + off, len);
    return 0;
  }
  if (!s->read_storage) {
    mg_error(d, INVALID, t->name, NULL, "storage has no data");
    return -1;
  }
  return s->read_storage(s, i, (size_t)off, len, dst, d);
}

/* Whether t's elements lie in C order without gaps (size-1 axes may have any
 * stride). */
static int is_contiguous(const wt_tensor *t) {
  int64_t expect = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    if (t->dims[i] != 1 && t->strides[i] != expect) return 0;
    expect *= t->dims[i];
  }
  return 1;
}

/* Before the read that finishes t (`last`): has the reader complete the check of
 * t's storage, so that a tensor read to its end has been checked whole, whatever
 * part of the storage it views. */
static int finish_check(const wt_source *s, const wt_tensor *t, int last, mg_diags *d) {
  const wt_storage *st = &s->storages[t->storage];
  if (!last || !st->data || !s->use_storage) return 0;
  return s->use_storage(s, t->storage, st->nbytes, 0, d);
}

int wt_read(const wt_source *s, const wt_tensor *t, int64_t first, int64_t count, void *dst,
            mg_diags *d) {
  if (t->storage < 0 || t->storage >= s->n_storages) {
    mg_error(d, INVALID, t->name, NULL, "tensor names a storage that does not exist");
    return -1;
  }
  size_t es = mg_dtype_size(t->dtype);
  int64_t total = wt_numel(t);
  if (first < 0 || count < 0 || first + count > total) {
    mg_error(d, INVALID, t->name, NULL, "read past the tensor's end");
    return -1;
  }
  if (!count) return 0;
  if (finish_check(s, t, first + count == total, d)) return -1;
  /* Runs of contiguous elements along the last axis are copied in one go. */
  int r = t->rank;
  int64_t inner = r ? t->dims[r - 1] : 1, inner_stride = r ? t->strides[r - 1] : 1;
  unsigned char *out = dst;
  if (is_contiguous(t))
    return storage_bytes(s, t->storage, (t->offset + first) * (int64_t)es, (size_t)count * es, out, d, t);
  int64_t k = first;
  while (k < first + count) {
    int64_t rem = k, off = t->offset;
    for (int i = r - 1; i >= 0; i--) {
      off += (rem % t->dims[i]) * t->strides[i];
      rem /= t->dims[i];
    }
    int64_t in_row = r ? k % inner : 0;
    int64_t run = inner_stride == 1 ? inner - in_row : 1;
    if (run > first + count - k) run = first + count - k;
    if (run < 1) run = 1;
    if (storage_bytes(s, t->storage, off * (int64_t)es, (size_t)run * es, out, d, t)) return -1;
    out += (size_t)run * es;
    k += run;
  }
  return 0;
}

/* weights.h. */
int wt_view(const wt_source *s, const wt_tensor *t, int64_t first, int64_t count, const void **p,
            mg_diags *d) {
  *p = NULL;
  if (t->storage < 0 || t->storage >= s->n_storages) {
    mg_error(d, INVALID, t->name, NULL, "tensor names a storage that does not exist");
    return -1;
  }
  const wt_storage *st = &s->storages[t->storage];
  int64_t total = wt_numel(t);
  if (first < 0 || count < 0 || first + count > total) {
    mg_error(d, INVALID, t->name, NULL, "read past the tensor's end");
    return -1;
  }
  if (!st->data || !count || !is_contiguous(t)) return 0; /* the caller reads instead */
  size_t es = mg_dtype_size(t->dtype);
  int64_t off = (t->offset + first) * (int64_t)es;
  size_t len = (size_t)count * es;
  if (off < 0 || (uint64_t)off > st->nbytes || len > st->nbytes - (size_t)off) {
    mg_error(d, INVALID, t->name, NULL, "storage of %zu bytes is shorter than the tensor needs", st->nbytes);
    return -1;
  }
  if (finish_check(s, t, first + count == total, d)) return -1;
  if (s->use_storage && s->use_storage(s, t->storage, (size_t)off, len, d)) return -1;
  *p = st->data + off;
  return 0;
}

static const struct {
  mg_dtype t;
  const char *name;
} ms_types[] = {
    {MG_F32, "Float32"}, {MG_F16, "Float16"}, {MG_BF16, "BFloat16"}, {MG_F64, "Float64"},
    {MG_I8, "Int8"},     {MG_I16, "Int16"},   {MG_I32, "Int32"},     {MG_I64, "Int64"},
    {MG_U8, "UInt8"},    {MG_U16, "UInt16"},  {MG_U32, "UInt32"},    {MG_U64, "UInt64"},
    {MG_BOOL, "Bool"},
};

const char *wt_ms_type_name(mg_dtype t) {
  for (size_t i = 0; i < sizeof ms_types / sizeof ms_types[0]; i++)
    if (ms_types[i].t == t) return ms_types[i].name;
  return NULL;
}

mg_dtype wt_ms_type_parse(const char *name) {
  for (size_t i = 0; i < sizeof ms_types / sizeof ms_types[0]; i++)
    if (!strcmp(ms_types[i].name, name)) return ms_types[i].t;
  return MG_UNDEFINED;
}
