/* torch .pth files: the zip format (torch >= 1.6) and the legacy format, read
 * through the restricted unpickler (unpickle.c); then the tensor dict is chosen
 * and its tensors listed as views (storage, offset, strides) of storages whose
 * bytes stay in the file.
 *
 * Zip format: <root>/data.pkl is the pickle, <root>/data/<key> the raw storages,
 * <root>/byteorder (torch >= 2.1; "little" or absent) and <root>/version. Stored
 * (uncompressed) storages, which torch always writes, are read on demand with
 * zip_fseek + zip_fread (see zip_read_storage for the caching of small and
 * scattered reads), so memory stays near the caller's chunks, or one storage for
 * a transposed tensor. A compressed storage (a re-zipped file) cannot be seeked
 * into: it is inflated whole into memory on first access and kept until close.
 *
 * Legacy format (torch < 1.6, or _use_new_zipfile_serialization=False): pickles
 * of the magic number, the protocol version (1001), sys_info, the object, and the
 * sorted list of storage keys; then for each key in that order an 8-byte
 * little-endian element count and the raw bytes. The file is mapped and tensors
 * point into the map.
 *
 * Which tensors are listed (a key, or the one dict of tensors) is pth_select.c's
 * business. */
#include "source_internal.h"
#include "unpickle.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

#define PTH_MAX_PICKLE ((zip_uint64_t)1 << 30)

/* Bytes a storage declares: numel * element size; -1 on overflow. */
static int64_t declared_bytes(const pk_storage *st) {
  int64_t n;
  return mg_mul_i64(st->numel, (int64_t)mg_dtype_size(st->dtype), &n) ? n : -1;
}

/* Appends w to the source as st's storage; its index, or -1 with a diagnostic. */
static int add_storage(pth_collect_ctx *cl, pk_storage *st, const wt_storage *w, const char *tensor) {
  int idx = wt_add_storage(cl->s, w);
  if (idx < 0) {
    mg_error(cl->d, OOM, tensor, NULL, "out of memory");
    return -1;
  }
  st->index = idx;
  return idx;
}

/* ---- zip format ---- */

typedef struct {
  zip_t *za;
  uint64_t archive_len;      /* bounds what any entry may claim */
  unsigned char *compressed; /* per storage: 1 when the entry is compressed */
  unsigned char **loaded;    /* per storage: inflated bytes of compressed entries */
  int cap;
  int cur;                   /* storage whose entry zf has open; -1 none */
  zip_file_t *zf;
  unsigned char *win;        /* window cache of stored entries */
  int win_storage;
  size_t win_off, win_len, win_size;
  size_t win_served;         /* bytes the current window has served */
  int miss_storage;          /* storage whose window misses are being counted */
  long misses;
  unsigned char *whole;      /* one stored storage read whole (scattered access) */
  int whole_storage;
} pth_zip;

enum { WIN_MAX = 64 * 1024, WIN_MIN = 512 };
#define ZIP_WHOLE_MAX ((size_t)256 << 20)

static void zip_impl_close(void *p) {
  pth_zip *z = p;
  if (!z) return;
  if (z->zf) zip_fclose(z->zf);
  for (int i = 0; i < z->cap; i++) mg_free(z->loaded ? z->loaded[i] : NULL);
  mg_free(z->loaded);
  mg_free(z->compressed);
  mg_free(z->win);
  mg_free(z->whole);
  if (z->za) zip_discard(z->za);
  mg_free(z);
}

/* Reads exactly n bytes from an open entry; -1 with a diagnostic otherwise. */
static int zread_all(zip_file_t *zf, void *dst, size_t n, const char *what, mg_diags *d) {
  size_t got = 0;
  while (got < n) {
    zip_int64_t r = zip_fread(zf, (unsigned char *)dst + got, n - got);
    if (r <= 0) {
      mg_error(d, MALFORMED, NULL, NULL, "%s: %s", what, r < 0 ? zip_file_strerror(zf) : "entry is shorter than its size");
      return -1;
    }
    got += (size_t)r;
  }
  return 0;
}

/* Reads [off, off+len) of stored entry i with a seek: the entry is kept open
 * between calls so that chunked reads of one storage cost one seek each. */
static int zip_direct(const wt_source *s, pth_zip *z, int i, size_t off, size_t len, void *dst, mg_diags *d) {
  if (z->cur != i) {
    if (z->zf) zip_fclose(z->zf);
    z->cur = -1;
    z->zf = zip_fopen_index(z->za, (zip_uint64_t)s->storages[i].entry, 0);
    if (!z->zf) {
      mg_error(d, MALFORMED, NULL, NULL, "cannot open storage entry: %s", zip_strerror(z->za));
      return -1;
    }
    z->cur = i;
  }
  if (zip_fseek(z->zf, (zip_int64_t)off, SEEK_SET) != 0) {
    mg_error(d, MALFORMED, NULL, NULL, "cannot seek in storage entry: %s", zip_file_strerror(z->zf));
    return -1;
  }
  return zread_all(z->zf, dst, len, "storage entry", d);
}

/* Makes storage i (stored, at most ZIP_WHOLE_MAX bytes) the one held whole in
 * memory, replacing the previous one. */
static int zip_load_whole(const wt_source *s, pth_zip *z, int i, mg_diags *d) {
  size_t n = s->storages[i].nbytes;
  mg_free(z->whole);
  z->whole = NULL;
  z->whole_storage = -1;
  if (!(z->whole = mg_malloc(n ? n : 1))) {
    mg_error(d, OOM, NULL, NULL, "out of memory caching a %zu-byte storage", n);
    return -1;
  }
  if (zip_direct(s, z, i, 0, n, z->whole, d)) {
    mg_free(z->whole);
    z->whole = NULL;
    return -1;
  }
  z->whole_storage = i;
  return 0;
}

/* read_storage for zip sources. Not safe for concurrent reads (it caches).
 *  - compressed entries are inflated whole on first access and kept;
 *  - large reads (contiguous tensors, chunks of them) seek and read directly;
 *  - small reads (a strided tensor is read one run at a time) go through a
 *    window, whose size adapts: it grows while reads use most of it and
 *    shrinks when they use little of it;
 *  - when small reads of one storage keep missing the window (a transposed
 *    tensor walks its storage with a large stride), a storage of at most
 *    ZIP_WHOLE_MAX bytes is read whole once and served from memory, replacing
 *    the previous such storage, so memory stays near one tensor. */
static int zip_read_storage(const wt_source *s, int i, size_t off, size_t len, void *dst, mg_diags *d) {
  pth_zip *z = s->impl;
  const wt_storage *st = &s->storages[i];
  if (z->compressed[i]) {
    if (!z->loaded[i]) {
      unsigned char *buf = mg_malloc(st->nbytes ? st->nbytes : 1);
      if (!buf) {
        mg_error(d, OOM, NULL, NULL, "out of memory inflating a %zu-byte storage", st->nbytes);
        return -1;
      }
      zip_file_t *zf = zip_fopen_index(z->za, (zip_uint64_t)st->entry, 0);
      if (!zf) {
        mg_free(buf);
        mg_error(d, MALFORMED, NULL, NULL, "cannot open storage entry: %s", zip_strerror(z->za));
        return -1;
      }
      int rc = zread_all(zf, buf, st->nbytes, "compressed storage entry", d);
      zip_fclose(zf);
      if (rc) {
        mg_free(buf);
        return -1;
      }
      z->loaded[i] = buf;
    }
    memcpy(dst, z->loaded[i] + off, len);
    return 0;
  }
  if (z->whole_storage == i) {
    memcpy(dst, z->whole + off, len);
    return 0;
  }
  if (len >= WIN_MAX) return zip_direct(s, z, i, off, len, dst, d);
  if (z->win_storage == i && off >= z->win_off && off + len <= z->win_off + z->win_len) {
    memcpy(dst, z->win + (off - z->win_off), len);
    z->win_served += len;
    return 0;
  }
  /* A miss after a window of which little was used means the reads jump through
   * the storage (sequential small reads use the whole window before missing). */
  int sparse = z->win_storage >= 0 && z->win_served < z->win_len / 4;
  if (z->miss_storage != i) z->miss_storage = i, z->misses = 0;
  if (z->win_storage == i && sparse) z->misses++;
  if (z->misses > 2 && st->nbytes <= ZIP_WHOLE_MAX) {
    if (zip_load_whole(s, z, i, d)) return -1;
    memcpy(dst, z->whole + off, len);
    return 0;
  }
  if (z->win_storage >= 0) { /* adapt to how useful the last window was */
    if (sparse && z->win_size > WIN_MIN) z->win_size /= 2;
    else if (!sparse && z->win_size < WIN_MAX) z->win_size *= 2;
  }
  if (len >= z->win_size) return zip_direct(s, z, i, off, len, dst, d);
  if (!z->win && !(z->win = mg_malloc(WIN_MAX))) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  size_t fill = st->nbytes - off < z->win_size ? st->nbytes - off : z->win_size;
  z->win_storage = -1;
  if (zip_direct(s, z, i, off, fill, z->win, d)) return -1;
  z->win_storage = i;
  z->win_off = off;
  z->win_len = fill;
  z->win_served = len;
  memcpy(dst, z->win, len);
  return 0;
}

typedef struct {
  pth_zip *z;
  const char *root;
} zip_bind_ctx;

/* Whether an entry's sizes are believable before anything is allocated for it:
 * its compressed bytes lie within the archive, a stored entry's two sizes agree,
 * and a compressed one expands no more than deflate can (1032:1). Without this a
 * few bytes of central directory could make the reader allocate gigabytes. */
static int entry_plausible(const zip_stat_t *zs, uint64_t archive_len, const char *name, mg_diags *d) {
  if (!(zs->valid & ZIP_STAT_SIZE) || !(zs->valid & ZIP_STAT_COMP_SIZE) || zs->comp_size > archive_len) {
    mg_error(d, MALFORMED, NULL, NULL, "zip entry '%s' claims more bytes than the archive holds", name);
    return -1;
  }
  int stored = !(zs->valid & ZIP_STAT_COMP_METHOD) || zs->comp_method == ZIP_CM_STORE;
  if (stored && zs->size != zs->comp_size) {
    mg_error(d, MALFORMED, NULL, NULL, "stored zip entry '%s' has inconsistent sizes", name);
    return -1;
  }
  if (!stored && zs->size / 1032 > zs->comp_size + 64) {
    mg_error(d, LIMIT, NULL, NULL, "zip entry '%s' claims an implausible compression ratio", name);
    return -1;
  }
  return 0;
}

/* bind for zip sources: <root>/data/<key> must exist and hold the storage. */
static int zip_bind(pth_collect_ctx *cl, pk_storage *st, const char *tensor) {
  if (st->index >= 0) return st->index;
  zip_bind_ctx *bc = cl->bind_ctx;
  pth_zip *z = bc->z;
  char name[1024];
  if ((size_t)snprintf(name, sizeof name, "%s/data/%s", bc->root, st->key) >= sizeof name) {
    mg_error(cl->d, LIMIT, tensor, NULL, "storage key too long");
    return -1;
  }
  zip_int64_t ix = zip_name_locate(z->za, name, ZIP_FL_ENC_RAW);
  zip_stat_t zs;
  if (ix < 0 || zip_stat_index(z->za, (zip_uint64_t)ix, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE)) {
    mg_error(cl->d, INVALID, tensor, NULL, "storage entry '%s' is missing from the archive", name);
    return -1;
  }
  if (entry_plausible(&zs, z->archive_len, name, cl->d)) return -1;
  int64_t want = declared_bytes(st);
  if (want < 0 || zs.size < (zip_uint64_t)want) {
    mg_error(cl->d, INVALID, tensor, NULL, "storage entry '%s' holds %llu bytes; the pickle declares %lld (%s of %lld)",
             name, (unsigned long long)zs.size, (long long)want, st->type_name, (long long)st->numel);
    return -1;
  }
  int comp = (zs.valid & ZIP_STAT_COMP_METHOD) && zs.comp_method != ZIP_CM_STORE;
  if (cl->s->n_storages >= z->cap) {
    int cap = z->cap ? z->cap * 2 : 64;
    unsigned char *c = mg_realloc(z->compressed, (size_t)cap);
    if (c) z->compressed = c;
    unsigned char **l = c ? mg_realloc(z->loaded, (size_t)cap * sizeof *l) : NULL;
    if (!l) {
      mg_error(cl->d, OOM, tensor, NULL, "out of memory");
      return -1;
    }
    memset(l + z->cap, 0, (size_t)(cap - z->cap) * sizeof *l);
    z->loaded = l;
    z->cap = cap;
  }
  /* nbytes is what both the entry and the declaration cover: a longer entry
   * carries nothing a tensor may use. */
  wt_storage w = {.nbytes = (size_t)want, .entry = ix};
  int idx = add_storage(cl, st, &w, tensor);
  if (idx >= 0) z->compressed[idx] = (unsigned char)comp;
  return idx;
}

/* Reads a small or pickle entry whole (at most `limit` bytes) into mg_malloc'd memory. */
static unsigned char *zip_slurp(const pth_zip *z, zip_int64_t ix, zip_uint64_t limit, size_t *len,
                                const char *name, mg_diags *d) {
  zip_t *za = z->za;
  zip_stat_t zs;
  if (zip_stat_index(za, (zip_uint64_t)ix, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_SIZE)) {
    mg_error(d, MALFORMED, NULL, NULL, "%s: cannot stat: %s", name, zip_strerror(za));
    return NULL;
  }
  if (entry_plausible(&zs, z->archive_len, name, d)) return NULL;
  if (zs.size > limit) {
    mg_error(d, LIMIT, NULL, NULL, "%s: %llu bytes (at most %llu supported)", name, (unsigned long long)zs.size,
             (unsigned long long)limit);
    return NULL;
  }
  unsigned char *buf = mg_malloc(zs.size ? (size_t)zs.size : 1);
  if (!buf) {
    mg_error(d, OOM, NULL, NULL, "out of memory reading %s", name);
    return NULL;
  }
  zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)ix, 0);
  if (!zf) {
    mg_error(d, MALFORMED, NULL, NULL, "%s: cannot open: %s", name, zip_strerror(za));
    mg_free(buf);
    return NULL;
  }
  int rc = zread_all(zf, buf, (size_t)zs.size, name, d);
  zip_fclose(zf);
  if (rc) {
    mg_free(buf);
    return NULL;
  }
  *len = (size_t)zs.size;
  return buf;
}

/* Builds a source over an open archive (taking ownership of za in every case). */
static int zip_build(zip_t *za, uint64_t archive_len, const char *path, const char *key, wt_source **out,
                     mg_diags *d) {
  pth_zip *z = mg_calloc(1, sizeof *z);
  if (!z) {
    zip_discard(za);
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  z->za = za;
  z->archive_len = archive_len;
  z->cur = -1;
  z->win_storage = -1;
  z->miss_storage = -1;
  z->whole_storage = -1;
  z->win_size = WIN_MAX / 4;
  wt_source *s = wt_source_new(path);
  pk_ctx *c = pk_new();
  unsigned char *pkl = NULL;
  char root[512], name[600];
  int rc = -1;
  if (s) { /* from here on the source owns the archive */
    s->impl = z;
    s->close_impl = zip_impl_close;
    s->read_storage = zip_read_storage;
  }
  if (!s || !c) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    goto done;
  }
  /* The record directory is the one holding data.pkl at the top level, as torch's
   * reader finds it. */
  zip_int64_t n = zip_get_num_entries(za, 0), pkl_ix = -1;
  for (zip_int64_t i = 0; i < n && pkl_ix < 0; i++) {
    const char *nm = zip_get_name(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
    const char *slash = nm ? strchr(nm, '/') : NULL;
    if (slash && !strcmp(slash, "/data.pkl") && (size_t)(slash - nm) < sizeof root) {
      memcpy(root, nm, (size_t)(slash - nm));
      root[slash - nm] = 0;
      pkl_ix = i;
    }
  }
  if (pkl_ix < 0) {
    mg_error(d, INVALID, NULL, NULL, "zip archive has no <name>/data.pkl: not a torch .pth file");
    goto done;
  }
  snprintf(name, sizeof name, "%s/byteorder", root);
  zip_int64_t bo = zip_name_locate(za, name, ZIP_FL_ENC_RAW);
  if (bo >= 0) {
    size_t bl;
    unsigned char *b = zip_slurp(z, bo, 64, &bl, "byteorder", d);
    if (!b) goto done;
    int little = bl == 6 && !memcmp(b, "little", 6);
    mg_free(b);
    if (!little) {
      mg_error(d, UNSUPPORTED_ATTR, NULL, NULL, "the .pth was written big-endian; only little-endian files are supported");
      goto done;
    }
  }
  size_t plen, used;
  if (!(pkl = zip_slurp(z, pkl_ix, PTH_MAX_PICKLE, &plen, "data.pkl", d))) goto done;
  pk_obj *obj;
  if (pk_load(c, pkl, plen, "data.pkl", &used, &obj, d)) goto done;
  zip_bind_ctx bc = {z, root};
  pth_collect_ctx cl = {.s = s, .d = d, .bind = zip_bind, .bind_ctx = &bc, .max_visits = pth_visit_budget(plen)};
  rc = pth_collect(&cl, obj, key);
done:
  mg_free(pkl);
  pk_free(c);
  if (rc) {
    if (s) wt_close(s);
    else zip_impl_close(z);
    s = NULL;
  }
  *out = s;
  return rc;
}

static int zip_open_path(const char *path, uint64_t len, const char *key, wt_source **out, mg_diags *d) {
  int err = 0;
  zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!za) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    mg_error(d, MALFORMED, NULL, NULL, "not a readable zip archive: %s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return -1;
  }
  return zip_build(za, len, path, key, out, d);
}

static int zip_open_buffer(const void *buf, size_t len, const char *key, wt_source **out, mg_diags *d) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(buf, len, 0, &ze);
  zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
  if (!za) {
    if (src) zip_source_free(src);
    mg_error(d, MALFORMED, NULL, NULL, "not a readable zip archive: %s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return -1;
  }
  zip_error_fini(&ze);
  return zip_build(za, len, NULL, key, out, d);
}

/* ---- legacy format ---- */

typedef struct {
  void *map;
  size_t len;
} pth_map;

static void map_close(void *p) {
  pth_map *m = p;
  if (!m) return;
  if (m->map) munmap(m->map, m->len);
  mg_free(m);
}

typedef struct {
  const unsigned char *base;
} legacy_bind_ctx;

static int legacy_bind(pth_collect_ctx *cl, pk_storage *st, const char *tensor) {
  if (st->index >= 0) return st->index;
  legacy_bind_ctx *bc = cl->bind_ctx;
  if (st->data_offset < 0) {
    mg_error(cl->d, INVALID, tensor, NULL, "storage '%s' is not among the file's storages", st->key);
    return -1;
  }
  wt_storage w = {.data = bc->base + st->data_offset, .nbytes = (size_t)declared_bytes(st)};
  return add_storage(cl, st, &w, tensor);
}

/* Parses the legacy format in buf; the storages point into buf. */
static int legacy_parse(const unsigned char *buf, size_t len, const char *key, wt_source *s, mg_diags *d) {
  static const unsigned char magic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  pk_ctx *c = pk_new();
  if (!c) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  int rc = -1;
  size_t pos = 0, used;
  pk_obj *o, *obj, *keys;
  if (pk_load(c, buf, len, "legacy header", &used, &o, d)) goto done;
  pos += used;
  if (o->kind != PK_BIGINT || o->u.str.n != sizeof magic || memcmp(o->u.str.s, magic, sizeof magic)) {
    mg_error(d, INVALID, NULL, NULL, "bad magic number: not a legacy torch .pth file");
    goto done;
  }
  if (pk_load(c, buf + pos, len - pos, "legacy header", &used, &o, d)) goto done;
  pos += used;
  if (o->kind != PK_INT || o->u.i != 1001) {
    mg_error(d, UNSUPPORTED_ATTR, NULL, NULL, "legacy .pth protocol version is not 1001");
    goto done;
  }
  if (pk_load(c, buf + pos, len - pos, "legacy sys_info", &used, &o, d)) goto done;
  pos += used;
  pk_obj *le = pk_dict_get(o, "little_endian");
  if (o->kind != PK_DICT) {
    mg_error(d, MALFORMED, NULL, NULL, "legacy sys_info is a %s, not a dict", pk_kind_name(o->kind));
    goto done;
  }
  if (le && (le->kind != PK_BOOL || !le->u.b)) {
    mg_error(d, UNSUPPORTED_ATTR, NULL, NULL, "the .pth was written big-endian; only little-endian files are supported");
    goto done;
  }
  if (pk_load(c, buf + pos, len - pos, "pickle", &used, &obj, d)) goto done;
  pos += used;
  if (pk_load(c, buf + pos, len - pos, "storage key list", &used, &keys, d)) goto done;
  pos += used;
  if (keys->kind != PK_LIST && keys->kind != PK_TUPLE) {
    mg_error(d, MALFORMED, NULL, NULL, "storage key list is a %s", pk_kind_name(keys->kind));
    goto done;
  }
  /* Storages follow in key-list order: 8-byte element count, then the bytes. */
  for (size_t i = 0; i < keys->u.seq.n; i++) {
    const pk_obj *k = keys->u.seq.items[i];
    pk_storage *st = k->kind == PK_STR ? pk_storage_find(c, k->u.str.s) : NULL;
    if (!st) {
      mg_error(d, INVALID, NULL, NULL, "storage key list names a storage the pickle does not use");
      goto done;
    }
    if (st->data_offset >= 0) {
      mg_error(d, INVALID, NULL, NULL, "storage '%s' listed twice", st->key);
      goto done;
    }
    if (len - pos < 8) {
      mg_error(d, MALFORMED, NULL, NULL, "file truncated in storage '%s'", st->key);
      goto done;
    }
    uint64_t count = 0;
    for (int b = 7; b >= 0; b--) count = count << 8 | buf[pos + (size_t)b];
    int64_t nb = declared_bytes(st);
    if (count != (uint64_t)st->numel || nb < 0) {
      mg_error(d, INVALID, NULL, NULL, "storage '%s' holds %llu elements; the pickle declares %lld", st->key,
               (unsigned long long)count, (long long)st->numel);
      goto done;
    }
    if ((uint64_t)nb > len - pos - 8) {
      mg_error(d, MALFORMED, NULL, NULL, "file truncated in storage '%s'", st->key);
      goto done;
    }
    st->data_offset = (int64_t)(pos + 8);
    pos += 8 + (size_t)nb;
  }
  legacy_bind_ctx bc = {buf};
  pth_collect_ctx cl = {.s = s, .d = d, .bind = legacy_bind, .bind_ctx = &bc, .max_visits = pth_visit_budget(len)};
  rc = pth_collect(&cl, obj, key);
done:
  pk_free(c);
  return rc;
}

/* Maps path read-only; NULL with a diagnostic on failure. */
static pth_map *map_file(const char *path, mg_diags *d) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    mg_error(d, IO, NULL, NULL, "cannot open: %s", strerror(errno));
    return NULL;
  }
  struct stat sb;
  pth_map *m = NULL;
  if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
    mg_error(d, IO, NULL, NULL, "cannot read (empty or not a regular file)");
  } else if (!(m = mg_calloc(1, sizeof *m))) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
  } else {
    m->len = (size_t)sb.st_size;
    m->map = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->map == MAP_FAILED) {
      mg_error(d, IO, NULL, NULL, "cannot map: %s", strerror(errno));
      mg_free(m);
      m = NULL;
    }
  }
  close(fd);
  return m;
}

/* ---- entry points ---- */

static int is_zip(const unsigned char *b, size_t n) {
  return n >= 4 && b[0] == 'P' && b[1] == 'K' && ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6));
}

int pth_open_buffer(const void *buf, size_t len, const char *key, wt_source **out, mg_diags *d) {
  const unsigned char *b = buf;
  *out = NULL;
  if (is_zip(b, len)) return zip_open_buffer(buf, len, key, out, d);
  if (len < 1 || b[0] != 0x80) {
    mg_error(d, INVALID, NULL, NULL, "not a torch .pth file (neither a zip archive nor a legacy pickle)");
    return -1;
  }
  wt_source *s = wt_source_new(NULL);
  if (!s) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  if (legacy_parse(b, len, key, s, d)) {
    wt_close(s);
    return -1;
  }
  *out = s;
  return 0;
}

int pth_open(const char *path, const char *key, wt_source **out, mg_diags *d) {
  const char *saved = d->file;
  d->file = path;
  *out = NULL;
  int rc = -1;
  pth_map *m = map_file(path, d);
  if (m) {
    if (is_zip(m->map, m->len)) {
      /* libzip reads the file itself; the map was only for the magic. */
      uint64_t len = m->len;
      map_close(m);
      rc = zip_open_path(path, len, key, out, d);
    } else if (((const unsigned char *)m->map)[0] != 0x80) {
      mg_error(d, INVALID, NULL, NULL, "not a torch .pth file (neither a zip archive nor a legacy pickle)");
      map_close(m);
    } else {
      wt_source *s = wt_source_new(path);
      if (!s) {
        mg_error(d, OOM, NULL, NULL, "out of memory");
        map_close(m);
      } else {
        s->impl = m;
        s->close_impl = map_close;
        if (legacy_parse(m->map, m->len, key, s, d)) wt_close(s);
        else *out = s, rc = 0;
      }
    }
  }
  d->file = saved;
  return rc;
}

/* ---- a bare pickle (fuzzing) ---- */

static int zero_read_storage(const wt_source *s, int i, size_t off, size_t len, void *dst, mg_diags *d) {
  (void)s, (void)i, (void)off, (void)d;
  memset(dst, 0, len);
  return 0;
}

static int bare_bind(pth_collect_ctx *cl, pk_storage *st, const char *tensor) {
  if (st->index >= 0) return st->index;
  int64_t nb = declared_bytes(st);
  if (nb < 0) {
    mg_error(cl->d, INVALID, tensor, NULL, "storage size overflows");
    return -1;
  }
  wt_storage w = {.nbytes = (size_t)nb, .entry = -1};
  return add_storage(cl, st, &w, tensor);
}

int pth_open_pickle_buffer(const void *buf, size_t len, const char *key, wt_source **out, mg_diags *d) {
  *out = NULL;
  wt_source *s = wt_source_new(NULL);
  pk_ctx *c = pk_new();
  int rc = -1;
  pk_obj *obj;
  size_t used;
  if (!s || !c) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
  } else if (!pk_load(c, buf, len, "pickle", &used, &obj, d)) {
    s->read_storage = zero_read_storage;
    pth_collect_ctx cl = {.s = s, .d = d, .bind = bare_bind, .max_visits = pth_visit_budget(len)};
    rc = pth_collect(&cl, obj, key);
  }
  pk_free(c);
  if (rc) wt_close(s);
  else *out = s;
  return rc;
}
