/* torch .pth files: the zip format (torch >= 1.6) and the legacy format, read
 * through the restricted unpickler (unpickle.c); then the tensor dict is chosen
 * and its tensors listed as views (storage, offset, strides) of storages whose
 * bytes stay in the file.
 *
 * Zip format: <root>/data.pkl is the pickle, <root>/data/<key> the raw storages,
 * <root>/byteorder (torch >= 2.1; "little" or absent) and <root>/version. libzip
 * opens and checks the archive and reads the small entries. Stored (uncompressed)
 * storages, which torch always writes, are used in place from a read-only map of
 * the file (see "direct access" below), their CRC checked as they are consumed;
 * where that is not possible (an entry libzip and our reading of the central
 * directory disagree on, or no memory for that reading) they are read on demand
 * with zip_fseek + zip_fread (see zip_read_storage for the caching of small and
 * scattered reads), after one pass to the entry's end for libzip's CRC check.
 * Either way memory stays near the caller's chunks, or one storage for a
 * transposed tensor. A compressed storage (a re-zipped file) cannot be seeked
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
#include "ckpt_internal.h"
#include "source_internal.h"
#include "mapfile.h"
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
/* Largest compressed storage entry inflated past 1024:1 (zip_bind). */
#define PTH_INFLATE_MAX_PLAIN ((zip_uint64_t)256 << 20)

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
  int inflated;              /* the one storage loaded[] holds; -1 none (so memory stays
                              * near one storage, not the archive's inflated total) */
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
  /* Direct access (below). */
  const unsigned char *map;  /* the whole archive: our mmap, or the caller's buffer */
  size_t map_len;
  int mapped;                /* map is ours: unmapped on close, pages dropped */
  uint64_t *cd;              /* per entry: offset of its central directory record */
  uint64_t n_cd, cd_end;     /* entries; where the central directory starts */
  struct zcheck *chk;        /* per storage (cap of them): its CRC check */
  size_t span_lo, span_hi;   /* mapped bytes touched since pages were last dropped */
  size_t touched;
} pth_zip;

/* The CRC check of a storage used in place: the CRC of entry bytes [0, pos),
 * extended as bytes are used and compared once pos reaches the entry's size. */
typedef struct zcheck {
  uint64_t pos, size;
  uint32_t crc, want;
  unsigned char direct;      /* the storage is used in place (else read through libzip) */
  unsigned char state;       /* ZC_CHECKING, ZC_GOOD or ZC_BAD */
} zcheck;
enum { ZC_CHECKING, ZC_GOOD, ZC_BAD };

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
  mg_free(z->cd);
  mg_free(z->chk);
  if (z->mapped) mg_unmap_file((void *)z->map, z->map_len);
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

/* Reads an open entry on to its end: libzip compares the entry's CRC only when a
 * read reaches the end, and a read that stops exactly at the size never does.
 * -1 with a diagnostic on a mismatch. */
static int zread_end(zip_file_t *zf, const char *what, mg_diags *d) {
  unsigned char rest[4096];
  zip_int64_t r;
  while ((r = zip_fread(zf, rest, sizeof rest)) > 0) continue;
  if (r < 0) {
    mg_error(d, MALFORMED, NULL, NULL, "%s: %s", what, zip_file_strerror(zf));
    return -1;
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
    /* Read through once to its end on first use, so that libzip compares the CRC
     * (the reads below stop short of the end). Entries used in place, as torch's
     * are, never come here. */
    if (z->chk[i].state == ZC_CHECKING) {
      z->chk[i].state = zread_end(z->zf, "storage entry", d) ? ZC_BAD : ZC_GOOD;
      if (z->chk[i].state == ZC_BAD) return -1;
    }
  }
  if (z->chk[i].state == ZC_BAD) {
    const char *name = zip_get_name(z->za, (zip_uint64_t)s->storages[i].entry, ZIP_FL_ENC_RAW);
    mg_error(d, MALFORMED, NULL, NULL, "storage entry '%s' is corrupt", name ? name : "?");
    return -1;
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
 *  - a compressed entry is inflated whole on first access and kept until another
 *    one is inflated;
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
      if (z->inflated >= 0) { /* a zip bomb's storages are inflated one at a time */
        mg_free(z->loaded[z->inflated]);
        z->loaded[z->inflated] = NULL;
        z->inflated = -1;
      }
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
      if (!rc) rc = zread_end(zf, "compressed storage entry", d);
      zip_fclose(zf);
      if (rc) {
        mg_free(buf);
        return -1;
      }
      z->loaded[i] = buf;
      z->inflated = i;
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

/* ---- direct access to stored entries ----
 * Every zip_fread of a stored storage costs an lseek, a read into libzip's buffer
 * and a copy, and libzip's CRC pass over those bytes is wasted: it compares only
 * when a read reaches the entry's end, which reads that stop at the size never do.
 * Mapped, a stored entry is a run of the file's bytes that the checkpoint writer
 * can hand to write() as they are (wt_view). Where an entry's bytes lie is not in
 * libzip's API, so the central directory is read here (PKWARE APPNOTE 4.3.12-4.3.16,
 * zip64 4.3.14-4.3.15 and 4.5.3), every field bounds-checked, and an entry is used
 * in place only when its record agrees with libzip's view of it (name, method,
 * sizes, CRC) and its local header with the record; any other entry is read
 * through libzip. The CRC of an entry used in place is computed as its bytes are
 * first used and compared when they have all been (zip_use). */

/* Checked per step, and dropped from the mapping after this many were touched. */
#define CHECK_STEP ((size_t)4 << 20)
#define DROP_AFTER ((size_t)16 << 20)

/* Little-endian fields of zip records (the caller has bounds-checked them). */
static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Indexes the central directory of z->map: z->cd[i] is where entry i's record
 * starts, as libzip numbers entries of an archive it has not modified. 0 when
 * done; -1 (no diagnostic: the entries are then read through libzip) when the
 * directory is not what libzip found or memory is short. */
static int cd_index(pth_zip *z, zip_int64_t n_entries) {
  const unsigned char *m = z->map;
  size_t len = z->map_len;
  if (!m || len < 22 || n_entries < 0) return -1;
  /* The end record is the last "PK\5\6" whose comment runs exactly to the end. */
  size_t lo = len - 22 > 0xffff ? len - 22 - 0xffff : 0, eocd = 0;
  int found = 0;
  for (size_t k = len - 22 + 1; k-- > lo && !found;)
    if (rd32(m + k) == 0x06054b50 && k + 22 + rd16(m + k + 20) == len) eocd = k, found = 1;
  if (!found) return -1;
  uint64_t count = rd16(m + eocd + 10), cd_size = rd32(m + eocd + 12), cd_off = rd32(m + eocd + 16);
  if (count == 0xffff || cd_size == 0xffffffff || cd_off == 0xffffffff) {
    /* zip64: a locator right before the end record gives the zip64 end record. */
    if (eocd < 20 || rd32(m + eocd - 20) != 0x07064b50) return -1;
    uint64_t z64 = rd64(m + eocd - 20 + 8);
    if (z64 > eocd - 20 || eocd - 20 - z64 < 56 || rd32(m + z64) != 0x06064b50) return -1;
    count = rd64(m + z64 + 32), cd_size = rd64(m + z64 + 40), cd_off = rd64(m + z64 + 48);
  }
  /* A record takes at least 46 bytes, which also bounds the table below. */
  if (count != (uint64_t)n_entries || cd_off > len || cd_size > len - cd_off || count > cd_size / 46) return -1;
  z->cd = mg_malloc(count ? (size_t)count * sizeof *z->cd : 1);
  if (!z->cd) return -1;
  uint64_t pos = cd_off, end = cd_off + cd_size;
  for (uint64_t i = 0; i < count; i++) {
    if (end - pos < 46 || rd32(m + pos) != 0x02014b50) goto fail;
    uint64_t rec = 46 + (uint64_t)rd16(m + pos + 28) + rd16(m + pos + 30) + rd16(m + pos + 32);
    if (rec > end - pos) goto fail;
    z->cd[i] = pos;
    pos += rec;
  }
  z->n_cd = count;
  z->cd_end = cd_off;
  return 0;
fail:
  mg_free(z->cd);
  z->cd = NULL;
  return -1;
}

/* Reads a zip64 extra field's 8-byte value into *v when *v overflowed its 32-bit
 * field; -1 when the extra field is too short. */
static int z64_field(uint64_t *v, const unsigned char **f, const unsigned char *fend) {
  if (*v != 0xffffffffu) return 0;
  if (fend - *f < 8) return -1;
  *v = rd64(*f);
  *f += 8;
  return 0;
}

/* Where stored entry ix's bytes start in the map, when its central record names
 * `name` and agrees with libzip's stat zs, and its local header with the record,
 * all within the archive's data area; 0 (never a data offset: a local header comes
 * first) when the entry is to be read through libzip instead. */
static uint64_t direct_offset(const pth_zip *z, zip_uint64_t ix, const zip_stat_t *zs, const char *name) {
  if (!z->cd || ix >= z->n_cd || !(zs->valid & ZIP_STAT_CRC) || !(zs->valid & ZIP_STAT_COMP_METHOD) ||
      zs->comp_method != ZIP_CM_STORE)
    return 0;
  const unsigned char *r = z->map + z->cd[ix]; /* 46 + lengths in bounds (cd_index) */
  size_t nlen = rd16(r + 28), elen = rd16(r + 30);
  if ((rd16(r + 8) & 1) || rd16(r + 10) != 0 || nlen != strlen(name) || memcmp(r + 46, name, nlen)) return 0;
  uint64_t usize = rd32(r + 24), csize = rd32(r + 20), lho = rd32(r + 42);
  /* zip64: the fields that overflowed follow in extra field 1, in this order. */
  const unsigned char *x = r + 46 + nlen, *xend = x + elen;
  while (xend - x >= 4) {
    size_t id = rd16(x), sz = rd16(x + 2);
    if (sz > (size_t)(xend - x - 4)) return 0;
    const unsigned char *f = x + 4, *fend = f + sz;
    if (id == 1 && (z64_field(&usize, &f, fend) || z64_field(&csize, &f, fend) || z64_field(&lho, &f, fend)))
      return 0;
    x += 4 + sz;
  }
  if (usize != zs->size || csize != zs->size || rd32(r + 16) != zs->crc) return 0;
  if (lho > z->cd_end || z->cd_end - lho < 30) return 0;
  const unsigned char *l = z->map + lho;
  uint64_t data = lho + 30 + (uint64_t)rd16(l + 26) + rd16(l + 28);
  if (rd32(l) != 0x04034b50 || rd16(l + 26) != nlen || data > z->cd_end || memcmp(l + 30, name, nlen) ||
      zs->size > z->cd_end - data)
    return 0;
  return data;
}

/* Counts mapped bytes [off, off+n) as touched. First, when the pages touched
 * since the last drop would pass DROP_AFTER, drops them from the mapping: they
 * are clean file pages, so only resident memory shrinks (it would else grow to
 * the file size); a later use faults them back in from the page cache. */
static void touch(pth_zip *z, size_t off, size_t n) {
  if (!z->mapped || !n) return;
  if (z->touched && z->touched + n > DROP_AFTER) {
    size_t lo = z->span_lo & ~((size_t)sysconf(_SC_PAGESIZE) - 1); /* madvise wants a page-aligned start */
    (void)madvise((void *)(z->map + lo), z->span_hi - lo, MADV_DONTNEED);
    z->touched = 0;
  }
  if (!z->touched) z->span_lo = off, z->span_hi = off + n;
  if (off < z->span_lo) z->span_lo = off;
  if (off + n > z->span_hi) z->span_hi = off + n;
  z->touched += n;
}

/* use_storage for zip sources: extends the CRC of a storage used in place over
 * the bytes about to be used (over the whole entry when the read reaches the
 * storage's end) and compares it once complete. Every later use of a storage
 * found corrupt fails too. */
static int zip_use(const wt_source *s, int i, size_t off, size_t len, mg_diags *d) {
  pth_zip *z = s->impl;
  zcheck *c = &z->chk[i];
  if (!c->direct) return 0;
  const wt_storage *st = &s->storages[i];
  size_t at = (size_t)(st->data - z->map);
  uint64_t end = off + len, before = c->pos;
  if (end >= st->nbytes) end = c->size;
  if (c->state == ZC_CHECKING) {
    while (c->pos < end) {
      size_t n = end - c->pos < CHECK_STEP ? (size_t)(end - c->pos) : CHECK_STEP;
      touch(z, at + (size_t)c->pos, n);
      c->crc = wt_crc32(c->crc, st->data + c->pos, n);
      c->pos += n;
    }
    if (c->pos == c->size) c->state = c->crc == c->want ? ZC_GOOD : ZC_BAD;
  }
  if (c->state == ZC_BAD) {
    const char *name = zip_get_name(z->za, (zip_uint64_t)st->entry, ZIP_FL_ENC_RAW), *saved = d->file;
    if (s->path) d->file = s->path; /* the caller may be naming its output */
    mg_error(d, MALFORMED, NULL, NULL, "storage entry '%s' is corrupt: its bytes give CRC-32 %08x, the archive records %08x",
             name ? name : "?", (unsigned)c->crc, (unsigned)c->want);
    d->file = saved;
    return -1;
  }
  if (off < before) touch(z, at + off, (size_t)((off + len < before ? off + len : before) - off));
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
  /* Deflate gives at most about 1032:1; a large entry beyond 1024:1 is a bomb (or
   * bzip2/xz of zeros), and it would be held inflated in memory. torch.save never
   * compresses: such an archive was made by hand. */
  if (comp && (zs.valid & ZIP_STAT_COMP_SIZE) && zs.size > PTH_INFLATE_MAX_PLAIN &&
      zs.size / 1024 > zs.comp_size) {
    mg_error(cl->d, LIMIT, tensor, NULL, "storage entry '%s' inflates %llu bytes to %llu (over 1024:1, more than "
             "256 MiB): refused as a zip bomb; an archive torch.save wrote stores its entries uncompressed", name,
             (unsigned long long)zs.comp_size, (unsigned long long)zs.size);
    return -1;
  }
  if (cl->s->n_storages >= z->cap) {
    int cap = z->cap ? z->cap * 2 : 64;
    unsigned char *c = mg_realloc(z->compressed, (size_t)cap);
    if (c) z->compressed = c;
    unsigned char **l = c ? mg_realloc(z->loaded, (size_t)cap * sizeof *l) : NULL;
    if (l) z->loaded = l;
    zcheck *k = l ? mg_realloc(z->chk, (size_t)cap * sizeof *k) : NULL;
    if (!k) {
      mg_error(cl->d, OOM, tensor, NULL, "out of memory");
      return -1;
    }
    memset(l + z->cap, 0, (size_t)(cap - z->cap) * sizeof *l);
    z->chk = k;
    z->cap = cap;
  }
  /* nbytes is what both the entry and the declaration cover: a longer entry
   * carries nothing a tensor may use. */
  wt_storage w = {.nbytes = (size_t)want, .entry = ix};
  uint64_t data = comp ? 0 : direct_offset(z, (zip_uint64_t)ix, &zs, name);
  if (data) w.data = z->map + data;
  int idx = add_storage(cl, st, &w, tensor);
  if (idx >= 0) {
    z->compressed[idx] = (unsigned char)comp;
    z->chk[idx] = (zcheck){.size = zs.size, .want = zs.crc, .direct = data != 0, .state = ZC_CHECKING};
  }
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
  if (!rc) rc = zread_end(zf, name, d);
  zip_fclose(zf);
  if (rc) {
    mg_free(buf);
    return NULL;
  }
  *len = (size_t)zs.size;
  return buf;
}

/* Builds a source over the archive in map[0, len) (taking ownership of za in
 * every case, and of the map when `mapped`). */
static int zip_build(zip_t *za, const unsigned char *map, size_t len, int mapped, const char *path, const char *key,
                     wt_source **out, mg_diags *d) {
  pth_zip *z = mg_calloc(1, sizeof *z);
  if (!z) {
    zip_discard(za);
    if (mapped) mg_unmap_file((void *)map, len);
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  z->za = za;
  z->archive_len = len;
  z->map = map;
  z->map_len = len;
  z->mapped = mapped;
  z->cur = -1;
  z->win_storage = -1;
  z->miss_storage = -1;
  z->whole_storage = -1;
  z->inflated = -1;
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
    s->use_storage = zip_use;
  }
  if (!s || !c) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    goto done;
  }
  /* The record directory is the one holding data.pkl at the top level, as torch's
   * reader finds it. */
  zip_int64_t n = zip_get_num_entries(za, 0), pkl_ix = -1;
  (void)cd_index(z, n); /* on failure every entry is read through libzip */
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

/* Opens the zip archive in buf[0, len) through libzip, which then reads from
 * that memory too: the names and small entries it serves and the bytes used in
 * place are one and the same. Takes ownership of buf when `mapped`. */
static int zip_open_buffer(const void *buf, size_t len, int mapped, const char *path, const char *key,
                           wt_source **out, mg_diags *d) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(buf, len, 0, &ze);
  zip_t *za = src ? zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze) : NULL;
  if (!za) {
    if (src) zip_source_free(src);
    if (mapped) mg_unmap_file((void *)buf, len);
    mg_error(d, MALFORMED, NULL, NULL, "not a readable zip archive: %s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return -1;
  }
  zip_error_fini(&ze);
  return zip_build(za, buf, len, mapped, path, key, out, d);
}

/* ---- legacy format ---- */

typedef struct {
  void *map;
  size_t len;
} pth_map;

static void map_close(void *p) {
  pth_map *m = p;
  if (!m) return;
  if (m->map) mg_unmap_file(m->map, m->len);
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
    m->map = mg_map_file(fd, m->len, path); /* a truncation is a diagnostic, not SIGBUS */
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
  if (is_zip(b, len)) return zip_open_buffer(buf, len, 0, NULL, key, out, d);
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
      /* The map goes to the zip source, which unmaps it on close. */
      void *map = m->map;
      size_t len = m->len;
      mg_free(m);
      rc = zip_open_buffer(map, len, 1, path, key, out, d);
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
