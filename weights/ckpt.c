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
 * step is link(), which cannot clobber a file that appeared meanwhile. */
#include "ckpt_internal.h"
#include "source_internal.h"
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- CRC-32 (zlib polynomial), dependency-free -------------------------------- */

static const uint32_t crc_table[256] = {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu, 0xe963a535u, 0x9e6495a3u,
    0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u, 0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u,
    0x1db71064u, 0x6ab020f2u, 0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
    0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u, 0xfa0f3d63u, 0x8d080df5u,
    0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u, 0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu,
    0x35b5a8fau, 0x42b2986cu, 0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
    0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u, 0xcfba9599u, 0xb8bda50fu,
    0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u, 0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du,
    0x76dc4190u, 0x01db7106u, 0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
    0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du, 0x91646c97u, 0xe6635c01u,
    0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu, 0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u,
    0x65b0d9c6u, 0x12b7e950u, 0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
    0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u, 0xa4d1c46du, 0xd3d6f4fbu,
    0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u, 0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u,
    0x5005713cu, 0x270241aau, 0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
    0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u, 0xb7bd5c3bu, 0xc0ba6cadu,
    0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au, 0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u,
    0xe3630b12u, 0x94643b84u, 0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
    0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu, 0x196c3671u, 0x6e6b06e7u,
    0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu, 0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u,
    0xd6d6a3e8u, 0xa1d1937eu, 0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
    0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u, 0x316e8eefu, 0x4669be79u,
    0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u, 0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu,
    0xc5ba3bbeu, 0xb2bd0b28u, 0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
    0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu, 0x72076785u, 0x05005713u,
    0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u, 0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u,
    0x86d3d2d4u, 0xf1d4e242u, 0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
    0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u, 0x616bffd3u, 0x166ccf45u,
    0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u, 0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu,
    0xaed16a4au, 0xd9d65adcu, 0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
    0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u, 0x54de5729u, 0x23d967bfu,
    0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u, 0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

/* CRC-32 of buf continuing from crc (0 to start), byte at a time: fast enough for
 * a trailer that is optional and checked once per file. */
uint32_t wt_crc32(uint32_t crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  crc = ~crc;
  while (n--) crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

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

typedef struct write_job_s {
  int fd;
  const unsigned char *p;
  size_t n;
  int err;
} write_job;

struct wt_ckpt_writer {
  char *path, *tmp;      /* mg_malloc'd; tmp is NULL once gone */
  int fd;                /* the temporary file, -1 once closed */
  int force, crc_on;
  int committed, broken; /* broken: a partial Value may be in the file */
  uint32_t crc;          /* of every byte written so far, when crc_on */
  int64_t n_tensors;
  mg_diags *d;
  unsigned char *buf;    /* prefix and content staging, grown on demand */
  size_t buf_cap;
  unsigned char *buf2;   /* the second content buffer, filled while buf is written */
  size_t buf2_cap;
  unsigned char *pfx;    /* a Value's prefix (key, lengths, tag, dims, type) */
  size_t pfx_cap;
  /* The chunk being written by the helper thread, if any. It stays in flight
   * across tensors so that filling the next tensor overlaps it. */
  pthread_t th;
  int running;
  struct write_job_s *job;
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
  struct stat st;
  if (stat(path, &st) == 0) {
    if (!S_ISREG(st.st_mode)) { /* force must not replace /dev/null or a directory */
      mg_error(d, IO, NULL, NULL, "exists and is not a regular file; refusing to replace it");
      goto fail_early;
    }
    if (!force) {
      mg_error(d, IO, NULL, NULL, "exists; refusing to overwrite it without force");
      goto fail_early;
    }
  }
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
  w->job = mg_calloc(1, sizeof *w->job);
  if (!w->path || !w->tmp || !w->job) {
    mg_free(w->tmp);
    w->tmp = NULL; /* names nothing yet: abort must not unlink it */
    wt_ckpt_abort(w);
    goto oom_early;
  }
  memcpy(w->path, path, n + 1);
  /* ".NAME.tmp-PID-N" next to NAME: same directory, so the rename is atomic. */
  const char *slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path + 1) : 0;
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
  d->file = saved;
  *out = w;
  return 0;
oom_early:
  mg_error(d, OOM, NULL, NULL, "out of memory starting the checkpoint");
fail_early:
  d->file = saved;
  return -1;
}

/* Makes w->buf hold at least n bytes. */
static int reserve(wt_ckpt_writer *w, size_t n) {
  if (n <= w->buf_cap) return 0;
  unsigned char *b = mg_realloc(w->buf, n);
  if (!b) return -1;
  w->buf = b;
  w->buf_cap = n;
  return 0;
}

/* Writes all n bytes to fd, retrying short writes and EINTR; on failure sets *err
 * (an errno) and returns -1. Safe to call from the writing thread. */
static int write_plain(int fd, const unsigned char *p, size_t n, int *err) {
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      *err = k < 0 ? errno : EIO;
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}


static void *write_job_run(void *arg) {
  write_job *j = arg;
  write_plain(j->fd, j->p, j->n, &j->err);
  return NULL;
}

/* Grows a buffer to at least n bytes; its old content is not kept. */
static int grow(unsigned char **b, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  unsigned char *nb = mg_malloc(n);
  if (!nb) return -1;
  mg_free(*b);
  *b = nb;
  *cap = n;
  return 0;
}

/* Waits for the chunk in flight; a failed write is recorded and breaks the writer. */
static int join_pending(wt_ckpt_writer *w) {
  if (!w->running) return 0;
  pthread_join(w->th, NULL);
  w->running = 0;
  if (w->job->err) {
    mg_error(w->d, IO, NULL, NULL, "cannot write %s: %s", w->tmp, strerror(w->job->err));
    return -1;
  }
  return 0;
}

/* Folds a chunk into the CRC and hands it to the helper thread (or writes it here
 * when no thread can be started). Precondition: nothing is in flight. */
static int start_write(wt_ckpt_writer *w, const unsigned char *p, size_t n) {
  if (w->crc_on) w->crc = wt_crc32(w->crc, p, n);
  *w->job = (write_job){w->fd, p, n, 0};
  if (!pthread_create(&w->th, NULL, write_job_run, w->job)) {
    w->running = 1;
    return 0;
  }
  if (write_plain(w->fd, p, n, &w->job->err)) {
    mg_error(w->d, IO, NULL, NULL, "cannot write %s: %s", w->tmp, strerror(w->job->err));
    return -1;
  }
  return 0;
}

/* Writes all n bytes (retrying short writes and EINTR) and, when a trailer is
 * wanted, folds them into the CRC. Precondition: nothing is in flight. */
static int write_all(wt_ckpt_writer *w, const unsigned char *p, size_t n) {
  if (w->crc_on) w->crc = wt_crc32(w->crc, p, n);
  while (n) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      mg_error(w->d, IO, NULL, NULL, "cannot write %s: %s", w->tmp, k < 0 ? strerror(errno) : "no progress");
      return -1;
    }
    p += k;
    n -= (size_t)k;
  }
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
                       size_t es, int64_t first, int64_t cnt, wt_fill_fn fill, void *ctx) {
  size_t tag_len = strlen(tag), type_len = strlen(type);
  uint64_t clen = (uint64_t)cnt * es;
  uint64_t tensor_len = 1 + varint_len(type_len) + type_len + 1 + varint_len(clen) + clen;
  for (int i = 0; i < rank; i++) tensor_len += 1 + varint_len((uint64_t)dims[i]);
  uint64_t value_len = 1 + varint_len(tag_len) + tag_len + 1 + varint_len(tensor_len) + tensor_len;
  size_t prefix_max = tag_len + type_len + 11 * (size_t)rank + 64;
  int64_t fill_elems = (int64_t)(g_fill_bytes / es ? g_fill_bytes / es : 1);
  size_t content_max = (size_t)(cnt < fill_elems ? cnt : fill_elems) * es;
  /* Growing a buffer the helper thread may be writing from needs it finished. */
  if (content_max > w->buf_cap || content_max > w->buf2_cap || prefix_max > w->pfx_cap) {
    if (join_pending(w)) return -1;
    if (reserve(w, content_max) || grow(&w->buf2, &w->buf2_cap, content_max) ||
        grow(&w->pfx, &w->pfx_cap, prefix_max)) {
      mg_error(w->d, OOM, tag, NULL, "out of memory writing the checkpoint");
      return -1;
    }
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
  /* Two content buffers: the helper thread writes one chunk (possibly the previous
   * tensor's last) while fill() produces the next into the other buffer. Bytes
   * reach the file, and the CRC, strictly in order: the prefix and each chunk are
   * written only after the chunk before them has been. */
  int prefix_done = 0;
  for (int64_t done = 0; done < cnt || !prefix_done;) {
    int64_t k = cnt - done < fill_elems ? cnt - done : fill_elems;
    unsigned char *cur = w->running && w->job->p == w->buf ? w->buf2 : w->buf;
    if (k > 0 && fill(ctx, first + done, k, cur)) {
      mg_error(w->d, INVALID, tag, NULL, "the content could not be produced (elements %lld..%lld)",
               (long long)(first + done), (long long)(first + done + k - 1));
      join_pending(w);
      return -1;
    }
    if (join_pending(w)) return -1;
    if (!prefix_done) {
      if (write_all(w, p, n)) return -1;
      prefix_done = 1;
    }
    if (k > 0 && start_write(w, cur, (size_t)k * es)) return -1;
    done += k;
  }
  return 0;
}

/* weights.h. A refused argument (bad dtype, rank, dims or tag, a repeated tag)
 * leaves the writer usable; a failed fill or write breaks it: later adds and the
 * commit fail, and only wt_ckpt_abort remains. */
int wt_ckpt_add(wt_ckpt_writer *w, const char *tag, mg_dtype dtype, int rank, const int64_t *dims,
                wt_fill_fn fill, void *ctx) {
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
    if (write_value(w, tag, wt_ms_type_name(dtype), rank, dims, es, first, cnt, fill, ctx)) {
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

/* Moves the finished temporary file to w->path. Without force, link() refuses a
 * file that appeared since begin; filesystems without hard links fall back to a
 * check followed by rename. */
static int install(wt_ckpt_writer *w) {
  if (!w->force) {
    if (link(w->tmp, w->path) == 0) {
      unlink(w->tmp); /* the output is in place; a stray temporary is harmless */
      return 0;
    }
    struct stat st;
    if (errno == EEXIST || lstat(w->path, &st) == 0) {
      mg_error(w->d, IO, NULL, NULL, "appeared while it was being written; refusing to overwrite it");
      return -1;
    }
  }
  if (rename(w->tmp, w->path)) {
    mg_error(w->d, IO, NULL, NULL, "cannot rename %s into place: %s", w->tmp, strerror(errno));
    return -1;
  }
  return 0;
}

/* weights.h. Refuses a checkpoint with no tensors. Does not free w. */
int wt_ckpt_commit(wt_ckpt_writer *w) {
  assert(w);
  mg_diags *d = w->d;
  const char *saved = d->file;
  d->file = w->path;
  int rc = -1;
  if (join_pending(w)) w->broken = 1;
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
    if (write_all(w, t, sizeof t)) goto broken;
  }
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
  if (w->running) pthread_join(w->th, NULL);
  if (w->fd >= 0) close(w->fd);
  if (w->tmp) unlink(w->tmp);
  mg_free(w->tmp);
  mg_free(w->path);
  mg_free(w->buf);
  mg_free(w->buf2);
  mg_free(w->pfx);
  mg_free(w->job);
  wt_tagset_free(&w->seen);
  mg_arena_destroy(&w->tags);
  mg_free(w);
}
