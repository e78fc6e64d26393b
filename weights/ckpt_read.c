/* MindSpore checkpoint (.ckpt) reader (the format is described in ckpt.c).
 *
 * The file is mmap'd and walked with every length checked against what is left.
 * Tensors point into the mapping: no copy. Adjacent Values with one tag are chunks
 * of one tensor; such a tensor cannot be one storage slice, so its storage has no
 * data pointer and the source's read_storage gathers byte ranges across its chunks
 * (the chunks of a split tensor are the big ones, over 512 MiB, which is exactly
 * where copying them into an owned buffer would hurt).
 *
 * Strictness: a repeated singular field, a non-adjacent repeated tag, an unknown
 * tensor_type, content that does not match dims, a MapTensor, and anything that is
 * not a Value at the top level are errors; unknown fields inside a Value or a
 * TensorProto are skipped, as protobuf does. Like MindSpore's own loader, the
 * RNG-state Value ("random_op") and string Values ("str") are skipped (with a
 * warning), and dims [0] holding one element is a scalar. */
#include "ckpt_internal.h"
#include "source_internal.h"
#include "mapfile.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  size_t off, len; /* the content bytes of one Value, in the buffer */
  size_t start;    /* where they go in the tensor */
} ck_chunk;

typedef struct {
  int first, count; /* a tensor's chunks: impl->chunks[first .. first + count) */
} ck_run;

typedef struct {
  void *map; /* mmap'd file (ckpt_open), unmapped on close; NULL when borrowed */
  size_t map_len;
  const unsigned char *base;
  ck_chunk *chunks;
  int n_chunks, cap_chunks;
  ck_run *runs; /* one per tensor, and so per storage */
  int n_runs, cap_runs;
  int has_crc;
  int64_t n_values;
} ck_impl;

/* close_impl: unmaps the file (if mapped here) and frees the chunk tables. */
static void ck_close(void *p) {
  ck_impl *im = p;
  if (!im) return;
  if (im->map) mg_unmap_file(im->map, im->map_len);
  mg_free(im->chunks);
  mg_free(im->runs);
  mg_free(im);
}

/* ckpt_internal.h; a ckpt source is recognised by its close_impl. */
int ckpt_source_info(const wt_source *s, ckpt_info *out) {
  memset(out, 0, sizeof *out);
  if (!s || s->close_impl != ck_close || !s->impl) return -1;
  const ck_impl *im = s->impl;
  out->has_crc = im->has_crc;
  out->n_values = im->n_values;
  return 0;
}

/* read_storage for a tensor split over several Values: copies bytes [off, off+len)
 * of the joined content (source.c has checked the range against nbytes). */
static int ck_gather(const wt_source *s, int i, size_t off, size_t len, void *dst, mg_diags *d) {
  const ck_impl *im = s->impl;
  const ck_run *r = &im->runs[s->storages[i].entry];
  const ck_chunk *c = im->chunks + r->first;
  int lo = 0, hi = r->count - 1;
  while (lo < hi) { /* the last chunk that starts at or before off */
    int mid = (lo + hi + 1) / 2;
    if (c[mid].start <= off) lo = mid;
    else hi = mid - 1;
  }
  unsigned char *out = dst;
  for (int k = lo; len && k < r->count; k++) {
    if (off >= c[k].start + c[k].len) continue; /* empty chunks */
    size_t in = off - c[k].start, take = c[k].len - in < len ? c[k].len - in : len;
    memcpy(out, im->base + c[k].off + in, take);
    out += take, off += take, len -= take;
  }
  if (len) {
    mg_error(d, INVALID, s->tensors[i].name, NULL, "joined chunks are shorter than the tensor");
    return -1;
  }
  return 0;
}

/* A protobuf field as read from the wire. */
typedef struct {
  uint32_t num;
  int wt;
  uint64_t v;      /* wire type 0 */
  size_t off, len; /* wire types 1, 2, 5: the bytes */
} ck_field;

/* Reads a varint at *pos (< end); NULL on success, else what is wrong. */
static const char *get_varint(const unsigned char *p, size_t end, size_t *pos, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 70; shift += 7) {
    if (*pos >= end) return "truncated varint";
    unsigned char b = p[(*pos)++];
    if (shift == 63 && b > 1) return "varint overflows 64 bits";
    r |= (uint64_t)(b & 0x7f) << shift;
    if (b < 0x80) {
      *v = r;
      return NULL;
    }
  }
  return "varint longer than 10 bytes";
}

/* Reads the field at *pos within [*pos, end); NULL on success, else what is wrong. */
static const char *next_field(const unsigned char *p, size_t end, size_t *pos, ck_field *f) {
  uint64_t key;
  const char *e = get_varint(p, end, pos, &key);
  if (e) return e;
  if (key >> 3 == 0 || key >> 3 > 0x1fffffff) return "invalid field number";
  f->num = (uint32_t)(key >> 3);
  f->wt = (int)(key & 7);
  size_t left;
  switch (f->wt) {
    case 0: return get_varint(p, end, pos, &f->v);
    case 1: f->len = 8; break;
    case 5: f->len = 4; break;
    case 2:
      if ((e = get_varint(p, end, pos, &f->v))) return e;
      if (f->v > end - *pos) return "length runs past the end of its message";
      f->len = (size_t)f->v;
      break;
    default: return "unsupported wire type (groups are not part of checkpoint.proto)";
  }
  left = end - *pos;
  if (f->len > left) return "field runs past the end of its message";
  f->off = *pos;
  *pos += f->len;
  return NULL;
}

/* One Value as parsed; offsets are into the buffer. */
typedef struct {
  size_t tag_off, tag_len, type_off, type_len, content_off, content_len;
  int has_tag, has_tensor, has_type, has_content;
  int rank;
  int64_t dims[WT_MAX_RANK];
} ck_value;

typedef struct {
  const unsigned char *p;
  mg_diags *d;
} ck_ctx;

/* Appends a dimension; 0 or -1 after a diagnostic. */
static int add_dim(ck_ctx *c, ck_value *v, uint64_t dim, size_t at) {
  if (dim > (uint64_t)INT64_MAX) {
    mg_error(c->d, INVALID, NULL, NULL, "byte %zu: negative dimension in a TensorProto", at);
    return -1;
  }
  if (v->rank == WT_MAX_RANK) {
    mg_error(c->d, LIMIT, NULL, NULL, "byte %zu: TensorProto has more than %d dims", at, WT_MAX_RANK);
    return -1;
  }
  v->dims[v->rank++] = (int64_t)dim;
  return 0;
}

/* Parses TensorProto bytes [off, end) into v. Unknown fields are skipped, as
 * protobuf does; a repeated singular field is refused (no writer makes one). */
static int parse_tensor(ck_ctx *c, size_t off, size_t end, ck_value *v) {
  size_t pos = off;
  while (pos < end) {
    ck_field f;
    size_t at = pos;
    const char *e = next_field(c->p, end, &pos, &f);
    if (e) {
      mg_error(c->d, MALFORMED, NULL, NULL, "byte %zu: %s in a TensorProto", at, e);
      return -1;
    }
    if (f.num > 3) continue;
    if (f.num == 1 && f.wt == 0) {
      if (add_dim(c, v, f.v, at)) return -1;
    } else if (f.num == 1 && f.wt == 2) { /* packed dims */
      for (size_t q = f.off; q < f.off + f.len;) {
        uint64_t dim;
        if ((e = get_varint(c->p, f.off + f.len, &q, &dim))) {
          mg_error(c->d, MALFORMED, NULL, NULL, "byte %zu: %s in packed dims", at, e);
          return -1;
        }
        if (add_dim(c, v, dim, at)) return -1;
      }
    } else if (f.wt != 2) {
      mg_error(c->d, MALFORMED, NULL, NULL, "byte %zu: TensorProto field %u has wire type %d", at, f.num, f.wt);
      return -1;
    } else {
      int *has = f.num == 2 ? &v->has_type : &v->has_content;
      if (*has) {
        mg_error(c->d, INVALID, NULL, NULL, "byte %zu: TensorProto.%s appears twice", at,
                 f.num == 2 ? "tensor_type" : "tensor_content");
        return -1;
      }
      *has = 1;
      *(f.num == 2 ? &v->type_off : &v->content_off) = f.off;
      *(f.num == 2 ? &v->type_len : &v->content_len) = f.len;
    }
  }
  if (!v->has_type || !v->has_content) {
    mg_error(c->d, INVALID, NULL, NULL, "byte %zu: TensorProto lacks its required %s", off,
             v->has_type ? "tensor_content" : "tensor_type");
    return -1;
  }
  return 0;
}

/* Parses Value bytes [off, end) into v. */
static int parse_value(ck_ctx *c, size_t off, size_t end, ck_value *v) {
  memset(v, 0, sizeof *v);
  size_t pos = off;
  while (pos < end) {
    ck_field f;
    size_t at = pos;
    const char *e = next_field(c->p, end, &pos, &f);
    if (e) {
      mg_error(c->d, MALFORMED, NULL, NULL, "byte %zu: %s in a Value", at, e);
      return -1;
    }
    if (f.num > 3) continue;
    if (f.wt != 2) {
      mg_error(c->d, MALFORMED, NULL, NULL, "byte %zu: Value field %u has wire type %d", at, f.num, f.wt);
      return -1;
    }
    if (f.num == 3) {
      mg_error(c->d, LIMIT, NULL, NULL, "byte %zu: a MapTensor Value, which migc does not read", at);
      return -1;
    }
    int *has = f.num == 1 ? &v->has_tag : &v->has_tensor;
    if (*has) {
      mg_error(c->d, INVALID, NULL, NULL, "byte %zu: Value.%s appears twice", at, f.num == 1 ? "tag" : "tensor");
      return -1;
    }
    *has = 1;
    if (f.num == 1) {
      v->tag_off = f.off;
      v->tag_len = f.len;
    } else if (parse_tensor(c, f.off, f.off + f.len, v)) {
      return -1;
    }
  }
  if (!v->has_tag || !v->has_tensor) {
    mg_error(c->d, INVALID, NULL, NULL, "byte %zu: Value lacks its %s", off, v->has_tag ? "tensor" : "tag");
    return -1;
  }
  if (!wt_ckpt_tag_ok((const char *)c->p + v->tag_off, v->tag_len)) {
    mg_error(c->d, INVALID, NULL, NULL, "byte %zu: empty tag, or one with control characters", v->tag_off);
    return -1;
  }
  return 0;
}

/* tensor_type as a dtype; MG_UNDEFINED (after a diagnostic) when unknown. */
static mg_dtype parse_type(ck_ctx *c, const ck_value *v, const char *tag) {
  char name[32];
  size_t n = v->type_len < sizeof name - 1 ? v->type_len : sizeof name - 1;
  for (size_t i = 0; i < n; i++) { /* printable for the diagnostic; no valid name changes */
    unsigned char ch = c->p[v->type_off + i];
    name[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
  }
  name[n] = 0;
  mg_dtype t = v->type_len == n ? wt_ms_type_parse(name) : MG_UNDEFINED;
  if (t == MG_UNDEFINED)
    mg_error(c->d, UNSUPPORTED_DTYPE, tag, NULL, "tensor_type '%s%s' is not one migc reads", name,
             v->type_len > n ? "..." : "");
  return t;
}

/* Appends one Value's content bytes [off, off+len) of the buffer, which land at
 * byte `start` of their tensor. -1 on allocation failure. */
static int push_chunk(ck_impl *im, size_t off, size_t len, size_t start) {
  if (im->n_chunks == im->cap_chunks) {
    int cap = im->cap_chunks ? im->cap_chunks * 2 : 64;
    ck_chunk *n = mg_realloc(im->chunks, sizeof *n * (size_t)cap);
    if (!n) return -1;
    im->chunks = n;
    im->cap_chunks = cap;
  }
  im->chunks[im->n_chunks++] = (ck_chunk){off, len, start};
  return 0;
}

/* Starts a new tensor's run of chunks at the next chunk. -1 on allocation failure. */
static int push_run(ck_impl *im) {
  if (im->n_runs == im->cap_runs) {
    int cap = im->cap_runs ? im->cap_runs * 2 : 64;
    ck_run *n = mg_realloc(im->runs, sizeof *n * (size_t)cap);
    if (!n) return -1;
    im->runs = n;
    im->cap_runs = cap;
  }
  im->runs[im->n_runs++] = (ck_run){im->n_chunks, 0};
  return 0;
}

/* MindSpore stores more than tensors: a "random_op" Value (the RNG state) and
 * strings from save_checkpoint's append_dict (tensor_type "str"). Its loader
 * keeps them aside, and so does this one: skipped, with a warning, so that a
 * checkpoint saved during training still reads. True when v is one of them. */
static int skip_metadata(ck_ctx *c, const ck_value *v, size_t at) {
  const char *tag = (const char *)c->p + v->tag_off, *type = (const char *)c->p + v->type_off;
  int rng = v->tag_len == 9 && !memcmp(tag, "random_op", 9);
  int str = v->type_len == 3 && !memcmp(type, "str", 3);
  if (!rng && !str) return 0;
  mg_warn(c->d, UNSUPPORTED_DTYPE, NULL, NULL, "byte %zu: '%.*s' skipped: %s, not a tensor", at,
          (int)(v->tag_len < 200 ? v->tag_len : 200), tag, rng ? "the saved RNG state" : "a string");
  return 1;
}

/* True when the product of v's dims (zeros counted as ones, as the contiguous
 * strides multiply them) times t's element size overflows int64: such dims would
 * overflow in wt_numel and wt_contiguous_strides, so they are refused first. */
static int dims_overflow(const ck_value *v, mg_dtype t) {
  int64_t k = (int64_t)mg_dtype_size(t);
  for (int i = 0; i < v->rank; i++)
    if (!mg_mul_i64(k, v->dims[i] ? v->dims[i] : 1, &k)) return 1;
  return 0;
}

/* Walks the Values in p[0, len) into s's tensors and im's chunks. */
static int parse_values(ck_ctx *c, size_t len, wt_source *s, ck_impl *im) {
  mg_diags *d = c->d;
  wt_tagset seen = {0};
  int rc = -1, joinable = 0; /* joinable: the last Value was a tensor's */
  for (size_t pos = 0; pos < len;) {
    ck_field f;
    size_t at = pos;
    const char *e = next_field(c->p, len, &pos, &f);
    if (e) {
      mg_error(d, MALFORMED, NULL, NULL, "byte %zu: %s", at, e);
      goto done;
    }
    if (f.num != 1 || f.wt != 2) {
      mg_error(d, MALFORMED, NULL, NULL, "byte %zu: field %u (wire type %d) where a Checkpoint.value belongs", at,
               f.num, f.wt);
      goto done;
    }
    ck_value v;
    if (parse_value(c, f.off, f.off + f.len, &v)) goto done;
    im->n_values++;
    const char *tp = (const char *)c->p + v.tag_off;
    if (skip_metadata(c, &v, at)) {
      joinable = 0;
      continue;
    }
    wt_tensor *prev = joinable ? &s->tensors[s->n_tensors - 1] : NULL;
    if (prev && strlen(prev->name) == v.tag_len && !memcmp(prev->name, tp, v.tag_len)) {
      /* a further chunk of the previous tensor: same type and full dims */
      mg_dtype t = parse_type(c, &v, prev->name);
      if (t == MG_UNDEFINED) goto done;
      if (t != prev->dtype || v.rank != prev->rank ||
          (v.rank && memcmp(v.dims, prev->dims, sizeof(int64_t) * (size_t)v.rank))) {
        mg_error(d, INVALID, prev->name, NULL, "byte %zu: a chunk whose type or dims differ from the previous chunk's", at);
        goto done;
      }
      const ck_chunk *last = &im->chunks[im->n_chunks - 1];
      if (push_chunk(im, v.content_off, v.content_len, last->start + last->len)) goto oom;
      im->runs[im->n_runs - 1].count++;
      continue;
    }
    char *tag = mg_arena_strndup(&s->arena, tp, v.tag_len);
    if (!tag) goto oom;
    mg_dtype t = parse_type(c, &v, tag);
    if (t == MG_UNDEFINED) goto done;
    int dup = wt_tagset_insert(&seen, tag);
    if (dup < 0) goto oom;
    if (dup) {
      mg_error(d, INVALID, tag, NULL, "byte %zu: tag appears twice, in Values that are not adjacent", at);
      goto done;
    }
    if (v.rank == 1 && v.dims[0] == 0 && v.content_len == mg_dtype_size(t))
      v.rank = 0; /* MindSpore's loader reads dims [0] with content as a scalar */
    if (dims_overflow(&v, t)) {
      mg_error(d, INVALID, tag, NULL, "byte %zu: dims too large for a 64-bit byte count", at);
      goto done;
    }
    if (!wt_add_tensor(s, tag, t, v.rank, v.dims, s->n_tensors, 0) || push_run(im)) goto oom;
    if (push_chunk(im, v.content_off, v.content_len, 0)) goto oom;
    im->runs[im->n_runs - 1].count = 1;
    joinable = 1;
  }
  if (!s->n_tensors) {
    mg_error(d, INVALID, NULL, NULL, "no tensors: MindSpore refuses an empty checkpoint");
    goto done;
  }
  rc = 0;
  goto done;
oom:
  mg_error(d, OOM, NULL, NULL, "out of memory reading the checkpoint");
done:
  wt_tagset_free(&seen);
  return rc;
}

/* Checks each tensor's joined content against its dims and type, and gives it its
 * storage: a slice of the buffer, or a gathered run of chunks. */
static int make_storages(ck_ctx *c, wt_source *s, ck_impl *im) {
  for (int i = 0; i < s->n_tensors; i++) {
    const wt_tensor *t = &s->tensors[i];
    const ck_run *r = &im->runs[i];
    const ck_chunk *last = &im->chunks[r->first + r->count - 1];
    size_t total = last->start + last->len; /* <= the buffer size: chunks do not overlap */
    int64_t want = wt_numel(t) * (int64_t)mg_dtype_size(t->dtype); /* dims_overflow has ruled out overflow */
    if ((uint64_t)want != total) {
      mg_error(c->d, INVALID, t->name, NULL, "content is %zu bytes, but its dims and %s need %lld", total,
               wt_ms_type_name(t->dtype), (long long)want);
      return -1;
    }
    wt_storage st = {0};
    st.nbytes = total;
    if (r->count == 1) st.data = c->p + last->off;
    else st.entry = i;
    int k = wt_add_storage(s, &st);
    if (k < 0) {
      mg_error(c->d, OOM, NULL, NULL, "out of memory reading the checkpoint");
      return -1;
    }
    assert(k == i);
  }
  return 0;
}

/* The reader proper over p[0, len). Takes ownership of `map` (unmapped on failure
 * too) when it is not NULL. */
static int ck_parse(const unsigned char *p, size_t len, const char *name, void *map, wt_source **out,
                    mg_diags *d) {
  *out = NULL;
  wt_source *s = wt_source_new(name);
  ck_impl *im = s ? mg_calloc(1, sizeof *im) : NULL;
  if (!im) {
    if (map) mg_unmap_file(map, len);
    wt_close(s);
    mg_error(d, OOM, NULL, NULL, "out of memory reading the checkpoint");
    return -1;
  }
  im->map = map;
  im->map_len = len;
  im->base = p;
  s->impl = im;
  s->close_impl = ck_close;
  s->read_storage = ck_gather;
  ck_ctx c = {p, d};
  size_t payload = len;
  if (len >= WT_CKPT_CRC_TRAILER && !memcmp(p + len - WT_CKPT_CRC_TRAILER, wt_ckpt_crc_magic, sizeof wt_ckpt_crc_magic)) {
    const unsigned char *t = p + len - 10;
    uint64_t want = 0;
    for (int i = 0; i < 10; i++) want = want << 8 | t[i];
    payload = len - WT_CKPT_CRC_TRAILER;
    uint32_t got = 0;
    /* In steps, dropping each step's pages from a mapping once summed: they are
     * clean file pages, so this only keeps resident memory from growing to the
     * file size; later reads fault them back in from the page cache. */
    const size_t step = (size_t)64 << 20; /* a multiple of any page size */
    for (size_t k = 0; k < payload; k += step) {
      size_t n = payload - k < step ? payload - k : step;
      got = wt_crc32(got, p + k, n);
      if (map && n == step) (void)madvise((void *)(p + k), n, MADV_DONTNEED);
    }
    if (want != got) {
      mg_error(d, INVALID, NULL, NULL, "CRC mismatch: the trailer says %llx, the content gives %08x",
               (unsigned long long)want, got);
      goto fail;
    }
    im->has_crc = 1;
  }
  if (parse_values(&c, payload, s, im) || make_storages(&c, s, im)) goto fail;
  *out = s;
  return 0;
fail:
  wt_close(s);
  return -1;
}

/* ckpt_internal.h: the buffer is borrowed, never mapped or freed here. */
int ckpt_open_buffer(const void *data, size_t len, const char *name, wt_source **out, mg_diags *d) {
  assert((data || !len) && out && d);
  static const unsigned char empty[1];
  const char *saved = d->file;
  d->file = name;
  int rc = ck_parse(len ? data : empty, len, name, NULL, out, d);
  d->file = saved;
  return rc;
}

/* weights.h. The source owns the mapping: tensors read from it until wt_close.
 * (A file truncated by someone else meanwhile reads as zeros past its new end,
 * and the run ends with a diagnostic: core/mapfile.h.) */
int ckpt_open(const char *path, wt_source **out, mg_diags *d) {
  assert(path && out && d);
  *out = NULL;
  const char *saved = d->file;
  d->file = path;
  int rc = -1;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    mg_error(d, IO, NULL, NULL, "cannot open: %s", strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    mg_error(d, IO, NULL, NULL, "not a regular file");
  } else if (st.st_size == 0) {
    mg_error(d, INVALID, NULL, NULL, "empty file: no tensors");
  } else if ((uint64_t)st.st_size > SIZE_MAX) {
    mg_error(d, LIMIT, NULL, NULL, "too large to map");
  } else {
    size_t n = (size_t)st.st_size;
    void *map = mg_map_file(fd, n, path); /* a truncation is a diagnostic, not SIGBUS */
    if (map == MAP_FAILED) mg_error(d, IO, NULL, NULL, "cannot map: %s", strerror(errno));
    else rc = ck_parse(map, n, path, map, out, d);
  }
  if (fd >= 0) close(fd);
  d->file = saved;
  return rc;
}
