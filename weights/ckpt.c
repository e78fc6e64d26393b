/* MindSpore checkpoint (.ckpt) writer, and the helpers the reader shares
 * (weights/ckpt_read.c has the reader).
 *
 * checkpoint.proto (proto2, no package), written here by hand from its facts:
 *   Checkpoint  { repeated Value value = 1; }
 *   Value       { required string tag = 1; oneof value { TensorProto tensor = 2;
 *                                                        MapTensorProto maptensor = 3; } }
 *   TensorProto { repeated int64 dims = 1; required string tensor_type = 2;
 *                 required bytes tensor_content = 3; }
 * A file is a concatenation of serialised Checkpoints (so, on the wire, just a run
 * of field-1 Values), optionally followed by the MindSpore >= 2.3 trailer: the 7
 * bytes "crc_num" and the CRC-32 of everything before them as 10 big-endian bytes.
 *
 * Each tensor is its own Checkpoint{value: Value{...}}, so the file streams: every
 * length is known from dims, type and content size before a byte is written, the
 * key/length prefix goes out first and the content follows from the fill callback
 * in chunks of at most WT_CKPT_FILL_BYTES. Dims are written as unpacked varints,
 * as MindSpore's protobuf does for proto2. Content over WT_CKPT_VALUE_BYTES is
 * split into consecutive Values with the same tag and the full dims, each holding
 * WT_CKPT_VALUE_BYTES but the last, as MindSpore's own _write_parameter_bytes_data
 * slices the bytes. Output goes to a temporary file in the target's directory
 * (O_EXCL), which commit fsyncs and renames into place; without force the final
 * step is link(), which cannot clobber a file that appeared meanwhile.
 *
 * Writing is single-threaded and copies as little as it can: content that a view
 * callback finds in memory (a mapped .pth) goes to write() as it is, small pieces
 * (prefixes, small tensors) are gathered in a staging buffer so that a model of
 * hundreds of small tensors costs few system calls, and on Linux the kernel is
 * asked to start writing back every few MB already written (sync_file_range), so
 * the disk works while the rest is produced and the fsync at commit, which keeps
 * the file durable before it is renamed into place, has little left to wait for. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* sync_file_range */
#endif
#include "ckpt_internal.h"
#include "source_internal.h"
#include "mapfile.h"
#include "outfile.h"
#include "tmpfiles.h"
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- shared helpers ------------------------------------------------------------- */

const char wt_ckpt_crc_magic[7] = {'c', 'r', 'c', '_', 'n', 'u', 'm'};

static size_t g_value_bytes = WT_CKPT_VALUE_BYTES, g_fill_bytes = WT_CKPT_FILL_BYTES;

/* Test hook (ckpt_internal.h): the split boundary and fill chunk; 0 = default. */
void wt_ckpt_set_limits(size_t value_bytes, size_t fill_bytes) {
  g_value_bytes = value_bytes && value_bytes <= WT_CKPT_VALUE_BYTES ? value_bytes : WT_CKPT_VALUE_BYTES;
  g_fill_bytes = fill_bytes ? fill_bytes : WT_CKPT_FILL_BYTES;
}

/* Bytes that the varint encoding of v takes (1..10). */
static size_t varint_len(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

/* Writes v as a varint at p; returns the bytes written. */
static size_t put_varint(unsigned char *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) p[n++] = (unsigned char)(v | 0x80), v >>= 7;
  p[n++] = (unsigned char)v;
  return n;
}

/* ckpt_internal.h. */
int wt_ckpt_tag_ok(const char *p, size_t n) {
  if (!n) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f) return 0;
  return 1;
}

/* FNV-1a of a string. */
static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* ckpt_internal.h. Open addressing, linear probing, at most half full. */
int wt_tagset_insert(wt_tagset *ts, const char *key) {
  if ((ts->n + 1) * 2 > ts->cap) {
    size_t cap = ts->cap ? ts->cap * 2 : 64;
    const char **slot = mg_calloc(cap, sizeof *slot);
    if (!slot) return -1;
    for (size_t i = 0; i < ts->cap; i++) {
      if (!ts->slot[i]) continue;
      size_t j = (size_t)hash_str(ts->slot[i]) & (cap - 1);
      while (slot[j]) j = (j + 1) & (cap - 1);
      slot[j] = ts->slot[i];
    }
    mg_free(ts->slot);
    ts->slot = slot;
    ts->cap = cap;
  }
  size_t j = (size_t)hash_str(key) & (ts->cap - 1);
  for (; ts->slot[j]; j = (j + 1) & (ts->cap - 1))
    if (!strcmp(ts->slot[j], key)) return 1;
  ts->slot[j] = key;
  ts->n++;
  return 0;
}

/* ckpt_internal.h. */
void wt_tagset_free(wt_tagset *ts) {
  mg_free(ts->slot);
  memset(ts, 0, sizeof *ts);
}

/* ---- writer --------------------------------------------------------------------- */

/* Pieces smaller than this are gathered before they are written. */
#define STAGE_BYTES ((size_t)1 << 20)
/* Writeback of what is written is started in steps of this many bytes. */
#define KICK_BYTES ((size_t)8 << 20)

struct wt_ckpt_writer {
  char *path, *tmp;      /* mg_malloc'd; tmp is NULL once gone */
  int fd;                /* the temporary file, -1 once closed */
  int force, crc_on;
  int committed, broken; /* broken: a partial Value may be in the file */
  uint32_t crc;          /* of every byte written so far, when crc_on */
  int64_t n_tensors;
  mg_diags *d;
  unsigned char *buf;    /* content from fill, grown on demand */
  size_t buf_cap;
  unsigned char *pfx;    /* a Value's prefix (key, lengths, tag, dims, type) */
  size_t pfx_cap;
  unsigned char *stage;  /* small pieces not yet written, STAGE_BYTES */
  size_t staged;
  uint64_t written;      /* bytes in the file */
  uint64_t kicked;       /* bytes whose writeback has been started */
  mg_arena tags;         /* copies of the tags written, for the duplicate check */
  wt_tagset seen;
};

static _Atomic unsigned tmp_counter; /* distinguishes temporaries of one process */

/* weights.h. The writer keeps `d` for the diagnostics of add and commit, and must
 * be released with wt_ckpt_abort whatever happens (also after a commit). */
int wt_ckpt_begin(const char *path, int force, int crc, wt_ckpt_writer **out, mg_diags *d) {
  assert(path && out && d);
  *out = NULL;
  const char *saved = d->file;
  d->file = path;
  /* the output rule (core/outfile.h): never an input or an earlier output of
   * this run, never /dev/null or a folder, an existing file only with force */
  if (mg_out_check(path, force, d)) goto fail_early;
  wt_ckpt_writer *w = mg_calloc(1, sizeof *w);
  if (!w) goto oom_early;
  w->fd = -1;
  w->force = force;
  w->crc_on = crc;
  w->d = d;
  mg_arena_init(&w->tags, 16 * 1024);
  size_t n = strlen(path);
  w->path = mg_malloc(n + 1);
  w->tmp = mg_malloc(n + 64);
  w->stage = mg_malloc(STAGE_BYTES);
  if (!w->path || !w->tmp || !w->stage) {
    mg_free(w->tmp);
    w->tmp = NULL; /* names nothing yet: abort must not unlink it */
    wt_ckpt_abort(w);
    goto oom_early;
  }
  memcpy(w->path, path, n + 1);
  /* ".NAME.tmp-PID-N" next to NAME: same directory, so the rename is atomic. */
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path + 1) : 0;
  mg_tmp_sweep(path); /* what a killed run left for this output */
  for (int attempt = 0; w->fd < 0; attempt++) {
    snprintf(w->tmp, n + 64, "%.*s.%s.tmp-%ld-%u", dir_len, path, path + dir_len, (long)getpid(),
             tmp_counter++);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0 && (errno != EEXIST || attempt >= 100)) {
      mg_error(d, IO, NULL, NULL, "cannot create the temporary file %s: %s", w->tmp, strerror(errno));
      mg_free(w->tmp);
      w->tmp = NULL; /* not ours: abort must not remove it */
      wt_ckpt_abort(w);
      goto fail_early;
    }
  }
  mg_tmp_register(w->tmp); /* best effort: a full table leaves it to abort and the sweep */
  d->file = saved;
  *out = w;
  return 0;
oom_early:
  mg_error(d, OOM, NULL, NULL, "out of memory starting the checkpoint");
fail_early:
  d->file = saved;
  return -1;
}

/* Starts writeback of what was written since the last call, once that is
 * KICK_BYTES; where the system has no way to ask, the fsync at commit does it
 * all. */
static void kick_writeback(wt_ckpt_writer *w) {
#ifdef SYNC_FILE_RANGE_WRITE
  if (w->written - w->kicked < KICK_BYTES) return;
  /* Only a hint: a failure here leaves the work to fsync, which reports errors. */
  (void)sync_file_range(w->fd, (off_t)w->kicked, (off_t)(w->written - w->kicked), SYNC_FILE_RANGE_WRITE);
  w->kicked = w->written;
#else
  (void)w;
#endif
}

/* Writes the staged bytes and then p[0, n) (NULL, 0 for none), in one system call
 * where the kernel takes it all, retrying short writes and EINTR. */
static int flush(wt_ckpt_writer *w, const unsigned char *p, size_t n) {
  struct iovec iov[2] = {{w->stage, w->staged}, {(void *)p, n}};
  int i = 0;
  while (i < 2) {
    if (!iov[i].iov_len) {
      i++;
      continue;
    }
    ssize_t k = writev(w->fd, iov + i, 2 - i);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      /* EFAULT: the source is a mapped input cut short meanwhile; say so */
      if (k < 0 && errno == EFAULT) mg_map_touch(iov[i].iov_base, iov[i].iov_len);
      if (mg_map_check(w->d)) return -1;
      mg_error(w->d, IO, NULL, NULL, "cannot write %s: %s", w->tmp, k < 0 ? strerror(errno) : "no progress");
      return -1;
    }
    w->written += (uint64_t)k;
    for (size_t left = (size_t)k; left;) {
      size_t take = left < iov[i].iov_len ? left : iov[i].iov_len;
      iov[i].iov_base = (char *)iov[i].iov_base + take;
      iov[i].iov_len -= take;
      left -= take;
      if (!iov[i].iov_len) i++;
    }
  }
  w->staged = 0;
  kick_writeback(w);
  return 0;
}

/* Appends n bytes to the file, in order, folding them into the CRC when a trailer
 * is wanted: small pieces are staged, a large one is written straight from p
 * (together with what was staged). */
static int out(wt_ckpt_writer *w, const unsigned char *p, size_t n) {
  if (w->crc_on) w->crc = wt_crc32(w->crc, p, n);
  if (n >= STAGE_BYTES / 2) return flush(w, p, n);
  if (n > STAGE_BYTES - w->staged && flush(w, NULL, 0)) return -1;
  memcpy(w->stage + w->staged, p, n);
  w->staged += n;
  return 0;
}

/* Makes *b hold at least n bytes; its content is not kept. */
static int reserve(unsigned char **b, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  unsigned char *nb = mg_malloc(n);
  if (!nb) return -1;
  mg_free(*b);
  *b = nb;
  *cap = n;
  return 0;
}

/* Checks what wt_ckpt_add was given; 0 when it can be written. */
static int check_add(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                     int64_t *numel) {
  mg_diags *d = w->d;
  if (w->broken || w->committed) {
    mg_error(d, IO, tag, NULL, "the checkpoint writer cannot take more tensors (%s)",
             w->committed ? "already committed" : "an earlier write failed");
    return -1;
  }
  if (!tag || !wt_ckpt_tag_ok(tag, strlen(tag))) {
    mg_error(d, INVALID, NULL, NULL, "a checkpoint tag must be non-empty and free of control characters");
    return -1;
  }
  if (!wt_ms_type_name(dtype) || !mg_dtype_size(dtype)) {
    mg_error(d, UNSUPPORTED_DTYPE, tag, NULL, "MindSpore checkpoints have no tensor_type for %s",
             mg_dtype_name(dtype));
    return -1;
  }
  if (rank < 0 || rank > WT_MAX_RANK) {
    mg_error(d, LIMIT, tag, NULL, "rank %d is outside 0..%d", rank, WT_MAX_RANK);
    return -1;
  }
  assert(rank == 0 || dims);
  int64_t k = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] < 0) {
      mg_error(d, INVALID, tag, NULL, "dimension %d is negative (%lld)", i, (long long)dims[i]);
      return -1;
    }
    if (!mg_mul_i64(k, dims[i], &k)) {
      mg_error(d, LIMIT, tag, NULL, "element count overflows 64 bits");
      return -1;
    }
  }
  int64_t bytes;
  if (!mg_mul_i64(k, (int64_t)mg_dtype_size(dtype), &bytes)) {
    mg_error(d, LIMIT, tag, NULL, "content size overflows 64 bits");
    return -1;
  }
  *numel = k;
  return 0;
}

/* Writes one Value holding elements [first, first + cnt) of the tensor. Returns -1
 * after recording a diagnostic; the file then holds a partial Value. */
static int write_value(wt_ckpt_writer *w, const char *tag, const char *type, int rank, const int64_t *dims,
                       size_t es, int64_t first, int64_t cnt, wt_fill_fn fill, wt_view_fn view, void *ctx) {
  size_t tag_len = strlen(tag), type_len = strlen(type);
  uint64_t clen = (uint64_t)cnt * es;
  uint64_t tensor_len = 1 + varint_len(type_len) + type_len + 1 + varint_len(clen) + clen;
  for (int i = 0; i < rank; i++) tensor_len += 1 + varint_len((uint64_t)dims[i]);
  uint64_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + varint_len(tensor_len) + tensor_len;
  size_t prefix_max = tag_len + type_len + 11 * (size_t)rank + 64;
  int64_t fill_elems = (int64_t)(g_fill_bytes / es ? g_fill_bytes / es : 1);
  if (reserve(&w->pfx, &w->pfx_cap, prefix_max)) {
    mg_error(w->d, OOM, tag, NULL, "out of memory writing the checkpoint");
    return -1;
  }
  unsigned char *p = w->pfx;
  size_t n = 0;
  p[n++] = 0x0a; /* Checkpoint.value */
  n += put_varint(p + n, value_len);
  p[n++] = 0x0a; /* Value.tag */
  n += put_varint(p + n, tag_len);
  memcpy(p + n, tag, tag_len);
  n += tag_len;
  p[n++] = 0x12; /* Value.tensor */
  n += put_varint(p + n, tensor_len);
  for (int i = 0; i < rank; i++) {
    p[n++] = 0x08; /* TensorProto.dims, unpacked */
    n += put_varint(p + n, (uint64_t)dims[i]);
  }
  p[n++] = 0x12; /* TensorProto.tensor_type */
  n += put_varint(p + n, type_len);
  memcpy(p + n, type, type_len);
  n += type_len;
  p[n++] = 0x1a; /* TensorProto.tensor_content */
  n += put_varint(p + n, clen);
  assert(n <= prefix_max);
  if (out(w, p, n)) return -1;
  /* The content in chunks: straight from the source's memory when view finds it
   * there, else produced by fill into w->buf. */
  for (int64_t done = 0; done < cnt;) {
    int64_t k = cnt - done < fill_elems ? cnt - done : fill_elems;
    const void *src = NULL;
    int bad = view && view(ctx, first + done, k, &src);
    if (!bad && !src) {
      if (reserve(&w->buf, &w->buf_cap, (size_t)k * es)) {
        mg_error(w->d, OOM, tag, NULL, "out of memory writing the checkpoint");
        return -1;
      }
      bad = fill(ctx, first + done, k, w->buf);
      src = w->buf;
    }
    if (bad) {
      mg_error(w->d, INVALID, tag, NULL, "the content could not be produced (elements %lld..%lld)",
               (long long)(first + done), (long long)(first + done + k - 1));
      return -1;
    }
    if (out(w, src, (size_t)k * es)) return -1;
    if (mg_map_check(w->d)) return -1; /* a mapped input was cut short: stop now, not at commit */
    done += k;
  }
  return 0;
}

/* weights.h. A refused argument (bad dtype, rank, dims or tag, a repeated tag)
 * leaves the writer usable; a failed fill or write breaks it: later adds and the
 * commit fail, and only wt_ckpt_abort remains. */
int wt_ckpt_add_view(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                     wt_fill_fn fill, wt_view_fn view, void *ctx) {
  assert(w);
  mg_diags *d = w->d;
  const char *saved = d->file;
  d->file = w->path;
  int64_t numel;
  int rc = -1;
  if (check_add(w, tag, dtype, rank, dims, &numel)) goto done;
  assert(numel == 0 || fill);
  char *copy = mg_arena_strdup(&w->tags, tag);
  int dup = copy ? wt_tagset_insert(&w->seen, copy) : -1;
  if (dup < 0) {
    mg_error(d, OOM, tag, NULL, "out of memory writing the checkpoint");
    goto done;
  }
  if (dup) {
    mg_error(d, INVALID, tag, NULL, "tag written twice; a checkpoint holds each tag once");
    goto done;
  }
  /* Values of per_value elements, the last one shorter (and one empty Value for an
   * empty tensor). */
  size_t es = mg_dtype_size(dtype);
  int64_t per_value = (int64_t)(g_value_bytes / es ? g_value_bytes / es : 1);
  int64_t first = 0;
  do {
    int64_t cnt = numel - first < per_value ? numel - first : per_value;
    if (write_value(w, tag, wt_ms_type_name(dtype), rank, dims, es, first, cnt, fill, view, ctx)) {
      w->broken = 1;
      goto done;
    }
    first += cnt;
  } while (first < numel);
  w->n_tensors++;
  rc = 0;
done:
  d->file = saved;
  return rc;
}

/* weights.h. */
int wt_ckpt_add(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                wt_fill_fn fill, void *ctx) {
  return wt_ckpt_add_view(w, tag, dtype, rank, dims, fill, NULL, ctx);
}

/* Moves the finished temporary file to w->path by the output rule: without
 * force, link() refuses a file that appeared since begin. */
static int install(wt_ckpt_writer *w) {
  if (mg_out_install(w->tmp, w->path, w->force, w->d)) return -1;
  mg_tmp_unregister(w->tmp);
  return 0;
}

/* weights.h. Refuses a checkpoint with no tensors. Does not free w. */
int wt_ckpt_commit(wt_ckpt_writer *w) {
  assert(w);
  mg_diags *d = w->d;
  const char *saved = d->file;
  d->file = w->path;
  int rc = -1;
  if (w->broken || w->committed) {
    mg_error(d, IO, NULL, NULL, "cannot commit: %s", w->committed ? "already committed" : "an earlier write failed");
    goto done;
  }
  if (!w->n_tensors) {
    mg_error(d, INVALID, NULL, NULL, "no tensors to write: MindSpore cannot load an empty checkpoint");
    goto done;
  }
  if (w->crc_on) {
    unsigned char t[WT_CKPT_CRC_TRAILER] = {0};
    memcpy(t, wt_ckpt_crc_magic, sizeof wt_ckpt_crc_magic);
    uint32_t c = w->crc;
    for (int i = 0; i < 4; i++) t[WT_CKPT_CRC_TRAILER - 1 - i] = (unsigned char)(c >> (8 * i));
    if (out(w, t, sizeof t)) goto broken;
  }
  if (flush(w, NULL, 0)) goto broken;
  if (fsync(w->fd)) {
    mg_error(d, IO, NULL, NULL, "cannot sync %s: %s", w->tmp, strerror(errno));
    goto broken;
  }
  int fd = w->fd;
  w->fd = -1;
  if (close(fd)) {
    mg_error(d, IO, NULL, NULL, "cannot close %s: %s", w->tmp, strerror(errno));
    goto broken;
  }
  if (install(w)) goto broken;
  w->committed = 1;
  mg_free(w->tmp);
  w->tmp = NULL;
  /* Make the rename itself durable; a failure here loses nothing already written. */
  const char *slash = strrchr(w->path, '/');
  char dir[4096];
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - w->path + 1) : 1, slash ? w->path : ".");
  int dfd = open(dir, O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  rc = 0;
  goto done;
broken:
  w->broken = 1;
done:
  d->file = saved;
  return rc;
}

/* weights.h. Removes the temporary file unless committed, and frees w (NULL is
 * fine). */
void wt_ckpt_abort(wt_ckpt_writer *w) {
  if (!w) return;
  if (w->fd >= 0) close(w->fd);
  if (w->tmp) {
    unlink(w->tmp);
    mg_tmp_unregister(w->tmp);
  }
  mg_free(w->tmp);
  mg_free(w->path);
  mg_free(w->buf);
  mg_free(w->pfx);
  mg_free(w->stage);
  wt_tagset_free(&w->seen);
  mg_arena_destroy(&w->tags);
  mg_free(w);
}
