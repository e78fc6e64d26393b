/* NumPy .npy/.npz reader and writer. See npy.h for what is accepted and produced.
 *
 * Reading goes through one byte source (memory, stdio file, or a libzip member)
 * so that the .npy decoder exists once. Sizes declared by the file are checked
 * against the bytes actually available before anything is allocated, so a short
 * or hostile file costs a diagnostic, not a huge allocation. */
#include "npy.h"
#include "arena.h"
#include "outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>

enum {
  NPY_PREAMBLE_V1 = 10,     /* magic(6) + version(2) + header length(2) */
  NPY_PREAMBLE_V2 = 12,     /* header length grows to 4 bytes */
  NPY_ALIGN = 64,           /* numpy pads preamble+header to this */
  NPY_HDR_CAP = 512,        /* fits rank 16 with 19-digit dims, padded */
  NPY_MAX_HEADER = 1 << 20, /* real headers are < 1 KiB; more is hostile */
};

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* numpy type letter and byte size for each dtype we handle. */
static const struct {
  char kind;
  unsigned size;
  mg_dtype t;
} npy_kinds[] = {
    {'f', 2, MG_F16}, {'f', 4, MG_F32},  {'f', 8, MG_F64}, {'i', 1, MG_I8},    {'i', 2, MG_I16},
    {'i', 4, MG_I32}, {'i', 8, MG_I64},  {'u', 1, MG_U8},  {'u', 2, MG_U16},   {'u', 4, MG_U32},
    {'u', 8, MG_U64}, {'b', 1, MG_BOOL}, {'c', 8, MG_C64}, {'c', 16, MG_C128},
};
enum { NPY_NKINDS = sizeof npy_kinds / sizeof npy_kinds[0] };

/* Record an error about `what` and return -1, so error paths stay one line. */
__attribute__((format(printf, 4, 5))) static int fail(mg_diags *d, mg_diag_code code,
                                                      const char *what, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  mg_diag_add(d, MG_SEV_ERROR, code, what, NULL, "%s", msg);
  return -1;
}

/* Index into npy_kinds for t, or -1 when numpy has no such dtype (bfloat16...). */
static int kind_of(mg_dtype t) {
  for (int i = 0; i < NPY_NKINDS; i++)
    if (npy_kinds[i].t == t) return i;
  return -1;
}

/* 1 when this machine stores integers most significant byte first. */
static int host_is_big(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 0;
}

/* Reverse the byte order of each `unit`-byte value in p[0..nbytes). */
static void swap_bytes(unsigned char *p, size_t nbytes, size_t unit) {
  for (size_t i = 0; i + unit <= nbytes; i += unit)
    for (size_t a = i, b = i + unit - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* Element count and byte size of a shape. Returns 0, or -1 with a diagnostic
 * for a negative dimension or a size that does not fit. */
static int array_size(mg_dtype t, int rank, const int64_t *dims, size_t *count, size_t *nbytes,
                      const char *what, mg_diags *d) {
  int64_t n = 1;
  for (int k = 0; k < rank; k++) {
    if (dims[k] < 0)
      return fail(d, MG_D_INVALID, what, "dimension %d is negative (%" PRId64 ")", k, dims[k]);
    if (!mg_mul_i64(n, dims[k], &n))
      return fail(d, MG_D_LIMIT, what, "element count of the shape overflows 64 bits");
  }
  if ((uint64_t)n > SIZE_MAX || !mg_mul_size((size_t)n, mg_dtype_size(t), nbytes))
    return fail(d, MG_D_LIMIT, what, "array of %" PRId64 " elements is too large", n);
  *count = (size_t)n;
  return 0;
}

/* ---- header dict parser: the Python-literal subset numpy writes ---------- */

typedef struct {
  mg_dtype dtype;
  int swap;    /* file byte order differs from the host's */
  int fortran; /* data is column-major */
  int rank;
  int64_t dims[MG_ARRAY_MAX_RANK];
  int seen; /* bit per key found, to catch missing and repeated keys */
  unsigned uwidth; /* MG_STRING ('<U<n>'): code points per element */
} npy_header;

typedef struct {
  const char *p, *begin, *end;
  const char *what;
  mg_diags *d;
} hparse;

/* Record a header syntax error at the current position; always returns -1. */
static int syntax(hparse *h, const char *msg) {
  return fail(h->d, MG_D_MALFORMED, h->what, "bad .npy header: %s at offset %ld", msg,
              (long)(h->p - h->begin));
}

/* Skip the whitespace Python allows between tokens (numpy pads with it). */
static void skip_ws(hparse *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

/* Consume character c after optional whitespace; 1 if it was there. */
static int eat(hparse *h, char c) {
  skip_ws(h);
  if (h->p < h->end && *h->p == c) {
    h->p++;
    return 1;
  }
  return 0;
}

/* Parse a quoted string into buf (cap bytes with the NUL). Escapes never appear
 * in keys or dtype descriptors numpy writes, so they are refused. */
static int parse_str(hparse *h, char *buf, size_t cap) {
  skip_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return syntax(h, "expected a string");
  char q = *h->p++;
  size_t n = 0;
  while (h->p < h->end && *h->p != q) {
    unsigned char c = (unsigned char)*h->p;
    if (c == '\\' || c < 0x20 || c >= 0x7f) return syntax(h, "unsupported character in string");
    if (n + 1 >= cap) return syntax(h, "string too long");
    buf[n++] = (char)c;
    h->p++;
  }
  if (h->p >= h->end) return syntax(h, "unterminated string");
  h->p++;
  buf[n] = '\0';
  return 0;
}

/* Parse the Python literal True or False. */
static int parse_bool(hparse *h, int *out) {
  skip_ws(h);
  size_t left = (size_t)(h->end - h->p);
  if (left >= 4 && !memcmp(h->p, "True", 4)) {
    h->p += 4;
    *out = 1;
  } else if (left >= 5 && !memcmp(h->p, "False", 5)) {
    h->p += 5;
    *out = 0;
  } else {
    return syntax(h, "fortran_order must be True or False");
  }
  return 0;
}

/* Parse one non-negative dimension; Python 2 era files may carry an L suffix. */
static int parse_dim(hparse *h, int64_t *out) {
  skip_ws(h);
  if (h->p < h->end && *h->p == '-')
    return fail(h->d, MG_D_INVALID, h->what, "shape has a negative dimension");
  int64_t v = 0;
  const char *start = h->p;
  for (; h->p < h->end && *h->p >= '0' && *h->p <= '9'; h->p++) {
    int digit = *h->p - '0';
    if (v > (INT64_MAX - digit) / 10)
      return fail(h->d, MG_D_LIMIT, h->what, "shape dimension does not fit in 64 bits");
    v = v * 10 + digit;
  }
  if (h->p == start) return syntax(h, "expected an integer in shape");
  if (h->p < h->end && (*h->p == 'L' || *h->p == 'l')) h->p++;
  *out = v;
  return 0;
}

/* Parse a shape tuple: (), (n,), (n, m, ...). A bare (n) is an int in Python,
 * not a tuple, so it is rejected as numpy would. */
static int parse_shape(hparse *h, npy_header *hd) {
  if (!eat(h, '(')) return syntax(h, "shape must be a tuple");
  int n = 0, comma = 0;
  while (!eat(h, ')')) {
    if (n == MG_ARRAY_MAX_RANK)
      return fail(h->d, MG_D_LIMIT, h->what, "rank exceeds the limit of %d", MG_ARRAY_MAX_RANK);
    if (parse_dim(h, &hd->dims[n]) < 0) return -1;
    n++;
    comma = eat(h, ',');
    if (!comma) {
      if (!eat(h, ')')) return syntax(h, "expected ',' or ')' in shape");
      break;
    }
  }
  if (n == 1 && !comma) return syntax(h, "shape (n) is not a tuple");
  hd->rank = n;
  return 0;
}

/* Decode a descriptor such as '<f4' or '|b1' into dtype and byte-swap need. */
static int parse_descr(hparse *h, const char *s, npy_header *hd) {
  char order = s[0], kind = order ? s[1] : '\0';
  unsigned size = 0;
  const char *p = kind ? s + 2 : s;
  for (; *p >= '0' && *p <= '9' && size < 1000; p++) size = size * 10 + (unsigned)(*p - '0');
  int ok = (order == '<' || order == '>' || order == '|' || order == '=') && !*p;
  if (ok && kind == 'U' && size > 0) { /* UTF-32 code units, NUL-padded */
    hd->dtype = MG_STRING;
    hd->uwidth = size;
    hd->swap = (order == '<' && host_is_big()) || (order == '>' && !host_is_big());
    return 0;
  }
  for (int i = 0; ok && i < NPY_NKINDS; i++) {
    if (npy_kinds[i].kind != kind || npy_kinds[i].size != size) continue;
    hd->dtype = npy_kinds[i].t;
    /* '|' (not applicable) and '=' (native) need no swap; one byte never does. */
    hd->swap = size > 1 && ((order == '<' && host_is_big()) || (order == '>' && !host_is_big()));
    return 0;
  }
  mg_error(h->d, UNSUPPORTED_DTYPE, h->what, NULL, "dtype '%s' is not supported", s);
  return -1;
}

/* Parse the value for `key`, recording it in hd. */
static int parse_entry(hparse *h, const char *key, npy_header *hd) {
  static const char *const keys[] = {"descr", "fortran_order", "shape"};
  int k = 0;
  while (k < 3 && strcmp(key, keys[k])) k++;
  if (k == 3 || (hd->seen & (1 << k)))
    return fail(h->d, MG_D_INVALID, h->what, "header has %s key '%s'",
                k == 3 ? "unexpected" : "repeated", key);
  hd->seen |= 1 << k;
  if (k == 1) return parse_bool(h, &hd->fortran);
  if (k == 2) return parse_shape(h, hd);
  skip_ws(h);
  if (h->p < h->end && (*h->p == '[' || *h->p == '{'))
    return fail(h->d, MG_D_UNSUPPORTED_DTYPE, h->what, "structured dtypes are not supported");
  char descr[32];
  if (parse_str(h, descr, sizeof descr) < 0) return -1;
  return parse_descr(h, descr, hd);
}

/* Parse the whole header text: one dict with exactly the three numpy keys,
 * then only padding. */
static int parse_header(const char *text, size_t len, const char *what, npy_header *hd,
                        mg_diags *d) {
  hparse h = {text, text, text + len, what, d};
  memset(hd, 0, sizeof *hd);
  if (!eat(&h, '{')) return syntax(&h, "header is not a dict");
  while (!eat(&h, '}')) {
    char key[32];
    if (parse_str(&h, key, sizeof key) < 0) return -1;
    if (!eat(&h, ':')) return syntax(&h, "expected ':' after key");
    if (parse_entry(&h, key, hd) < 0) return -1;
    if (!eat(&h, ',')) {
      if (!eat(&h, '}')) return syntax(&h, "expected ',' or '}'");
      break;
    }
  }
  skip_ws(&h);
  if (h.p != h.end) return syntax(&h, "unexpected bytes after the header dict");
  if (hd->seen != 7)
    return fail(d, MG_D_INVALID, what, "header lacks one of 'descr', 'fortran_order', 'shape'");
  return 0;
}

/* ---- byte sources --------------------------------------------------------- */

typedef enum { SRC_MEM, SRC_FILE, SRC_ZIP } src_kind;

typedef struct {
  src_kind kind;
  const unsigned char *mem; /* SRC_MEM: next byte */
  size_t left;              /* SRC_MEM: bytes after mem */
  FILE *fp;                 /* SRC_FILE */
  zip_file_t *zf;           /* SRC_ZIP */
  int64_t avail;            /* bytes known to remain, or -1 if unknown */
  const char *what;
  mg_diags *d;
} npy_src;

/* Read up to n bytes; returns how many (0 at the end) or -1 on an error. */
static int64_t src_read(npy_src *s, void *buf, size_t n) {
  if (s->kind == SRC_MEM) {
    size_t k = n < s->left ? n : s->left;
    if (k) memcpy(buf, s->mem, k);
    s->mem += k;
    s->left -= k;
    return (int64_t)k;
  }
  if (s->kind == SRC_FILE) {
    size_t k = fread(buf, 1, n, s->fp);
    return k < n && ferror(s->fp) ? -1 : (int64_t)k;
  }
  return zip_fread(s->zf, buf, n);
}

/* Record why the last src_read failed; always returns -1. */
static int src_error(npy_src *s) {
  const char *why = s->kind == SRC_ZIP ? zip_file_strerror(s->zf) : "read error";
  mg_diag_add(s->d, MG_SEV_ERROR, s->kind == SRC_ZIP ? MG_D_MALFORMED : MG_D_IO, s->what, NULL,
              "%s", why);
  return -1;
}

/* Read exactly n bytes of `part`; running out is a truncated file. */
static int read_exact(npy_src *s, void *buf, size_t n, const char *part) {
  size_t got = 0;
  while (got < n) {
    int64_t k = src_read(s, (char *)buf + got, n - got);
    if (k < 0) return src_error(s);
    if (k == 0)
      return fail(s->d, MG_D_MALFORMED, s->what, "truncated %s: %zu of %zu bytes present", part,
                  got, n);
    got += (size_t)k;
  }
  if (s->avail >= 0) s->avail -= (int64_t)n;
  return 0;
}

/* After the data: a read error (for zip members, a CRC mismatch shows up only
 * here, at end of stream) fails; extra bytes only earn a warning, as numpy
 * ignores them too. */
static int check_end(npy_src *s) {
  unsigned char extra;
  int64_t k = src_read(s, &extra, 1);
  if (k < 0) return src_error(s);
  if (k > 0) mg_warn(s->d, INVALID, s->what, NULL, "bytes after the array data are ignored");
  return 0;
}

/* Read preamble and header and parse them into hd. */
static int read_header(npy_src *s, npy_header *hd) {
  unsigned char pre[NPY_PREAMBLE_V2];
  if (read_exact(s, pre, NPY_PREAMBLE_V1, "preamble") < 0) return -1;
  if (memcmp(pre, npy_magic, sizeof npy_magic))
    return fail(s->d, MG_D_MALFORMED, s->what, "not an .npy file (bad magic)");
  unsigned major = pre[6], minor = pre[7];
  if (major < 1 || major > 3 || minor != 0)
    return fail(s->d, MG_D_MALFORMED, s->what, "unsupported .npy format version %u.%u", major,
                minor);
  size_t hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
  if (major >= 2) {
    if (read_exact(s, pre + NPY_PREAMBLE_V1, 2, "preamble") < 0) return -1;
    hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
  }
  if (hlen > NPY_MAX_HEADER)
    return fail(s->d, MG_D_LIMIT, s->what, "header of %zu bytes exceeds the 1 MiB limit", hlen);
  if (s->avail >= 0 && (uint64_t)s->avail < hlen)
    return fail(s->d, MG_D_MALFORMED, s->what,
                "truncated header: %zu bytes declared, %" PRId64 " present", hlen, s->avail);
  char *text = mg_malloc(hlen);
  if (!text) return fail(s->d, MG_D_OOM, s->what, "out of memory reading the header");
  int rc = read_exact(s, text, hlen, "header");
  if (rc == 0) rc = parse_header(text, hlen, s->what, hd, s->d);
  mg_free(text);
  return rc;
}

/* Return a C-order copy of column-major data, or NULL when allocation fails.
 * Walks the destination in order and moves the source offset incrementally. */
static void *fortran_to_c(const unsigned char *src, int rank, const int64_t *dims, size_t count,
                          size_t esz) {
  unsigned char *dst = mg_malloc(count * esz);
  if (!dst) return NULL;
  size_t stride[MG_ARRAY_MAX_RANK], idx[MG_ARRAY_MAX_RANK] = {0}, off = 0, s = 1;
  for (int k = 0; k < rank; k++) {
    stride[k] = s;
    s *= (size_t)dims[k];
  }
  for (size_t i = 0; i < count; i++) {
    memcpy(dst + i * esz, src + off * esz, esz);
    for (int k = rank - 1; k >= 0; k--) {
      if (++idx[k] < (size_t)dims[k]) {
        off += stride[k];
        break;
      }
      off -= stride[k] * (size_t)(dims[k] - 1);
      idx[k] = 0;
    }
  }
  return dst;
}

/* Bring freshly read data to host byte order, C order and 0/1 bools.
 * May replace *data; returns -1 only when the transpose cannot allocate. */
static int normalise(npy_src *s, const npy_header *hd, void **data, size_t count, size_t nbytes) {
  size_t esz = mg_dtype_size(hd->dtype);
  int complex = hd->dtype == MG_C64 || hd->dtype == MG_C128;
  if (hd->swap) swap_bytes(*data, nbytes, complex ? esz / 2 : esz);
  if (hd->dtype == MG_BOOL) {
    unsigned char *b = *data;
    for (size_t i = 0; i < nbytes; i++) b[i] = b[i] != 0;
  }
  if (!hd->fortran || hd->rank < 2 || count == 0) return 0;
  void *c = fortran_to_c(*data, hd->rank, hd->dims, count, esz);
  if (!c) return fail(s->d, MG_D_OOM, s->what, "out of memory converting fortran order");
  mg_free(*data);
  *data = c;
  return 0;
}

/* Appends code point u to out as UTF-8 (at most 4 bytes). Returns the bytes
 * written, or 0 for a value that is no Unicode scalar (surrogate, > U+10FFFF). */
static size_t utf8_put(uint32_t u, char *out) {
  if (u < 0x80) {
    out[0] = (char)u;
    return 1;
  }
  if (u < 0x800) {
    out[0] = (char)(0xc0 | u >> 6);
    out[1] = (char)(0x80 | (u & 0x3f));
    return 2;
  }
  if ((u >= 0xd800 && u < 0xe000) || u > 0x10ffff) return 0;
  if (u < 0x10000) {
    out[0] = (char)(0xe0 | u >> 12);
    out[1] = (char)(0x80 | (u >> 6 & 0x3f));
    out[2] = (char)(0x80 | (u & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | u >> 18);
  out[1] = (char)(0x80 | (u >> 12 & 0x3f));
  out[2] = (char)(0x80 | (u >> 6 & 0x3f));
  out[3] = (char)(0x80 | (u & 0x3f));
  return 4;
}

/* Decodes the UTF-8 code point at *p, advancing *p; returns it, or UINT32_MAX
 * for a malformed, overlong or out-of-range sequence. */
static uint32_t utf8_get(const unsigned char **p) {
  const unsigned char *q = *p;
  uint32_t u;
  int more;
  if (q[0] < 0x80) u = q[0], more = 0;
  else if ((q[0] & 0xe0) == 0xc0) u = q[0] & 0x1fu, more = 1;
  else if ((q[0] & 0xf0) == 0xe0) u = q[0] & 0x0fu, more = 2;
  else if ((q[0] & 0xf8) == 0xf0) u = q[0] & 0x07u, more = 3;
  else return UINT32_MAX;
  for (int k = 1; k <= more; k++) {
    if ((q[k] & 0xc0) != 0x80) return UINT32_MAX;
    u = u << 6 | (q[k] & 0x3fu);
  }
  static const uint32_t least[4] = {0, 0x80, 0x800, 0x10000};
  if (u < least[more] || u > 0x10ffff || (u >= 0xd800 && u < 0xe000)) return UINT32_MAX;
  *p = q + more + 1;
  return u;
}

/* Reads the string elements of a '<U<n>' array: count elements of uwidth UTF-32
 * code units each, trailing NULs dropped, into owned UTF-8 strings. */
static int read_strings(npy_src *s, const npy_header *hd, size_t count, mg_array *out) {
  size_t unit_bytes, total;
  if (!mg_mul_size(hd->uwidth, 4, &unit_bytes) || !mg_mul_size(count, unit_bytes, &total))
    return fail(s->d, MG_D_LIMIT, s->what, "string array is too large");
  if (s->avail >= 0 && (uint64_t)s->avail < total)
    return fail(s->d, MG_D_MALFORMED, s->what,
                "at most %" PRId64 " data bytes remain; the shape needs %zu", s->avail, total);
  unsigned char *raw = mg_malloc(total ? total : 1);
  char **strs = mg_calloc(count + 1, sizeof(char *));
  int rc = raw && strs ? 0 : fail(s->d, MG_D_OOM, s->what, "out of memory for %zu bytes of strings", total);
  if (!rc && (read_exact(s, raw, total, "data") < 0 || check_end(s) < 0)) rc = -1;
  if (!rc && hd->swap) swap_bytes(raw, total, 4);
  for (size_t i = 0; !rc && i < count; i++) {
    const unsigned char *e = raw + i * unit_bytes;
    size_t len = hd->uwidth;
    uint32_t u;
    while (len && (memcpy(&u, e + (len - 1) * 4, 4), u == 0)) len--;
    strs[i] = mg_malloc(len * 4 + 1);
    if (!strs[i]) {
      rc = fail(s->d, MG_D_OOM, s->what, "out of memory");
      break;
    }
    size_t n = 0;
    for (size_t k = 0; k < len; k++) {
      memcpy(&u, e + k * 4, 4);
      size_t w = u ? utf8_put(u, strs[i] + n) : 0;
      if (!w) {
        rc = fail(s->d, MG_D_MALFORMED, s->what, "string %zu holds code point 0x%x, which UTF-8 cannot carry", i,
                  (unsigned)u);
        break;
      }
      n += w;
    }
    strs[i][n] = 0;
  }
  mg_free(raw);
  if (!rc && hd->fortran && hd->rank >= 2 && count) {
    char **c = fortran_to_c((const unsigned char *)strs, hd->rank, hd->dims, count, sizeof(char *));
    if (!c) rc = fail(s->d, MG_D_OOM, s->what, "out of memory converting fortran order");
    else {
      mg_free(strs);
      strs = c;
    }
  }
  if (rc) {
    for (size_t i = 0; strs && i < count; i++) mg_free(strs[i]);
    mg_free(strs);
    return -1;
  }
  out->dtype = MG_STRING;
  out->rank = hd->rank;
  memcpy(out->dims, hd->dims, sizeof hd->dims);
  out->data = strs;
  out->nbytes = count * sizeof(char *);
  return 0;
}

/* Decode one .npy image from s into out (already zeroed). */
static int read_stream(npy_src *s, mg_array *out) {
  npy_header hd;
  size_t count, nbytes;
  if (read_header(s, &hd) < 0) return -1;
  if (hd.dtype == MG_STRING) {
    if (array_size(MG_U8, hd.rank, hd.dims, &count, &nbytes, s->what, s->d) < 0) return -1;
    return read_strings(s, &hd, count, out);
  }
  if (array_size(hd.dtype, hd.rank, hd.dims, &count, &nbytes, s->what, s->d) < 0) return -1;
  if (s->avail >= 0 && (uint64_t)s->avail < nbytes)
    return fail(s->d, MG_D_MALFORMED, s->what,
                "at most %" PRId64 " data bytes remain; the shape needs %zu", s->avail, nbytes);
  void *data = mg_malloc(nbytes);
  if (!data) return fail(s->d, MG_D_OOM, s->what, "out of memory for %zu bytes of data", nbytes);
  if (read_exact(s, data, nbytes, "data") < 0 || check_end(s) < 0 ||
      normalise(s, &hd, &data, count, nbytes) < 0) {
    mg_free(data);
    return -1;
  }
  out->dtype = hd.dtype;
  out->rank = hd.rank;
  memcpy(out->dims, hd.dims, sizeof hd.dims);
  out->data = data;
  out->nbytes = nbytes;
  return 0;
}

int npy_read_mem(const void *buf, size_t len, const char *what, mg_array *out, mg_diags *d) {
  memset(out, 0, sizeof *out);
  npy_src s = {.kind = SRC_MEM,
               .mem = buf,
               .left = buf ? len : 0,
               .avail = buf && len <= INT64_MAX ? (int64_t)len : 0,
               .what = what ? what : "<memory>",
               .d = d};
  return read_stream(&s, out);
}

int npy_read_file(const char *path, mg_array *out, mg_diags *d) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) return fail(d, MG_D_IO, path, "cannot open: %s", strerror(errno));
  mg_out_note_input_fd(fileno(fp)); /* no output of this run replaces it */
  struct stat st;
  npy_src s = {.kind = SRC_FILE, .fp = fp, .avail = -1, .what = path, .d = d};
  if (fstat(fileno(fp), &st) == 0 && S_ISREG(st.st_mode)) s.avail = (int64_t)st.st_size;
  int rc = read_stream(&s, out);
  fclose(fp);
  return rc;
}

/* ---- writing -------------------------------------------------------------- */

/* Check that a is something numpy can represent and that nbytes matches. */
static int validate_array(const mg_array *a, const char *what, mg_diags *d) {
  size_t count, nbytes;
  if (kind_of(a->dtype) < 0)
    return fail(d, MG_D_UNSUPPORTED_DTYPE, what, "%s has no numpy dtype", mg_dtype_name(a->dtype));
  if (a->rank < 0 || a->rank > MG_ARRAY_MAX_RANK)
    return fail(d, MG_D_INVALID, what, "rank %d is outside 0..%d", a->rank, MG_ARRAY_MAX_RANK);
  if (array_size(a->dtype, a->rank, a->dims, &count, &nbytes, what, d) < 0) return -1;
  if (nbytes != a->nbytes || (nbytes && !a->data))
    return fail(d, MG_D_INVALID, what, "array holds %zu bytes but its shape needs %zu",
                a->data ? a->nbytes : 0, nbytes);
  return 0;
}

/* Format preamble + header for a validated array into buf (cap bytes) the way
 * numpy does: host byte order, padded with spaces and '\n' to 64 bytes, format
 * 2.0 only when the length no longer fits 16 bits. Returns the length, or 0 if
 * cap is too small. */
static size_t build_header_descr(const mg_array *a, char kind, unsigned size, char *buf, size_t cap) {
  char order = size == 1 && kind != 'U' ? '|' : host_is_big() ? '>' : '<';
  char dict[NPY_HDR_CAP];
  int n = snprintf(dict, sizeof dict, "{'descr': '%c%c%u', 'fortran_order': False, 'shape': (",
                   order, kind, size);
  for (int i = 0; i < a->rank && n > 0 && (size_t)n < sizeof dict; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%" PRId64, i ? ", " : "", a->dims[i]);
  if (n > 0 && (size_t)n < sizeof dict)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", a->rank == 1 ? "," : "");
  if (n <= 0 || (size_t)n >= sizeof dict) return 0;
  size_t pre = NPY_PREAMBLE_V1, hlen = (size_t)n + 1;
  hlen += (NPY_ALIGN - (pre + hlen) % NPY_ALIGN) % NPY_ALIGN;
  if (hlen > 0xffff) {
    pre = NPY_PREAMBLE_V2;
    hlen = (size_t)n + 1 + (NPY_ALIGN - (pre + (size_t)n + 1) % NPY_ALIGN) % NPY_ALIGN;
  }
  if (pre + hlen > cap) return 0;
  memcpy(buf, npy_magic, sizeof npy_magic);
  buf[6] = pre == NPY_PREAMBLE_V1 ? 1 : 2;
  buf[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) buf[8 + i] = (char)(hlen >> (8 * i) & 0xff);
  memcpy(buf + pre, dict, (size_t)n);
  memset(buf + pre + n, ' ', hlen - (size_t)n - 1);
  buf[pre + hlen - 1] = '\n';
  return pre + hlen;
}

/* The header of a numeric array (validated). */
static size_t build_header(const mg_array *a, char *buf, size_t cap) {
  const int k = kind_of(a->dtype);
  return build_header_descr(a, npy_kinds[k].kind, npy_kinds[k].size, buf, cap);
}

/* A file being written under a temporary name next to its final path, by the
 * output rule (core/outfile.h). */
typedef mg_out_file atomic_file;

static int atomic_begin(const char *path, atomic_file *f, mg_diags *d) { return mg_out_begin(f, path, d); }

static void atomic_abort(atomic_file *f) { mg_out_abort(f); }

/* Write all n bytes, retrying short writes and interrupts. */
static int write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n > (1u << 30) ? (1u << 30) : n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return -1;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* Makes the temporary file durable and installs it as path (mg_out_commit);
 * a writer that closed its descriptor (libzip wrote the file) gets it reopened
 * for the fsync. */
static int atomic_finish(atomic_file *f, const char *path, mg_diags *d) {
  (void)path; /* f names it */
  if (f->fd < 0) f->fd = open(f->tmp, O_RDONLY | O_CLOEXEC);
  if (f->fd < 0) {
    mg_error(d, IO, path, NULL, "cannot reopen '%s': %s", f->tmp, strerror(errno));
    mg_out_abort(f);
    return -1;
  }
  return mg_out_commit(f, d);
}

/* The '<U<n>' image of a string array: n is the longest element in code points
 * (at least 1, as numpy makes it), each element UTF-32 in host order, NUL-padded.
 * *data is mg_malloc'd; returns 0 or -1 with a diagnostic. */
static int encode_strings(const mg_array *a, const char *path, unsigned *width, uint32_t **data, size_t *nbytes,
                          mg_diags *d) {
  size_t count, unused;
  if (a->rank < 0 || a->rank > MG_ARRAY_MAX_RANK)
    return fail(d, MG_D_INVALID, path, "rank %d is outside 0..%d", a->rank, MG_ARRAY_MAX_RANK);
  if (array_size(MG_U8, a->rank, a->dims, &count, &unused, path, d) < 0) return -1;
  if (a->nbytes != count * sizeof(char *) || (count && !a->data))
    return fail(d, MG_D_INVALID, path, "string array holds %zu bytes but its shape needs %zu", a->nbytes,
                count * sizeof(char *));
  char *const *strs = a->data;
  size_t w = 1;
  for (size_t i = 0; i < count; i++) {
    const unsigned char *p = (const unsigned char *)(strs[i] ? strs[i] : "");
    size_t n = 0;
    while (*p) {
      if (utf8_get(&p) == UINT32_MAX) return fail(d, MG_D_INVALID, path, "string %zu is not valid UTF-8", i);
      n++;
    }
    if (n > w) w = n;
  }
  if (w > 100000) return fail(d, MG_D_LIMIT, path, "a string of %zu code points is too long for .npy", w);
  if (!mg_mul_size(count, w * 4, nbytes)) return fail(d, MG_D_LIMIT, path, "string array is too large");
  *data = mg_calloc(*nbytes ? *nbytes : 1, 1);
  if (!*data) return fail(d, MG_D_OOM, path, "out of memory");
  for (size_t i = 0; i < count; i++) {
    const unsigned char *p = (const unsigned char *)(strs[i] ? strs[i] : "");
    for (size_t k = 0; *p; k++) (*data)[i * w + k] = utf8_get(&p);
  }
  *width = (unsigned)w;
  return 0;
}

int npy_write_file(const char *path, const mg_array *a, mg_diags *d) {
  char hdr[NPY_HDR_CAP];
  if (a->dtype == MG_STRING) {
    uint32_t *u = NULL;
    size_t nb = 0;
    unsigned width = 0;
    if (encode_strings(a, path, &width, &u, &nb, d) < 0) return -1;
    size_t hl = build_header_descr(a, 'U', width, hdr, sizeof hdr);
    atomic_file f = {.fd = -1};
    int rc = hl ? atomic_begin(path, &f, d) : fail(d, MG_D_LIMIT, path, "header does not fit");
    if (!rc && (write_all(f.fd, hdr, hl) < 0 || write_all(f.fd, u, nb) < 0)) {
      mg_error(d, IO, path, NULL, "cannot write '%s': %s", f.tmp, strerror(errno));
      atomic_abort(&f);
      rc = -1;
    } else if (!rc) {
      rc = atomic_finish(&f, path, d);
    }
    mg_free(u);
    return rc;
  }
  if (validate_array(a, path, d) < 0) return -1;
  size_t hl = build_header(a, hdr, sizeof hdr);
  if (!hl) return fail(d, MG_D_LIMIT, path, "header does not fit");
  atomic_file f;
  if (atomic_begin(path, &f, d) < 0) return -1;
  if (write_all(f.fd, hdr, hl) < 0 || write_all(f.fd, a->data, a->nbytes) < 0) {
    mg_error(d, IO, path, NULL, "cannot write '%s': %s", f.tmp, strerror(errno));
    atomic_abort(&f);
    return -1;
  }
  return atomic_finish(&f, path, d);
}

/* ---- .npz ----------------------------------------------------------------- */

/* Report a libzip error code; failures to reach the file are I/O, the rest
 * mean the bytes are not a usable zip archive. */
static void zip_code_error(mg_diags *d, const char *path, int code) {
  zip_error_t ze;
  zip_error_init_with_code(&ze, code);
  if (code == ZIP_ER_NOENT || code == ZIP_ER_OPEN || code == ZIP_ER_READ || code == ZIP_ER_SEEK ||
      code == ZIP_ER_WRITE || code == ZIP_ER_CLOSE)
    mg_error(d, IO, path, NULL, "%s", zip_error_strerror(&ze));
  else if (code == ZIP_ER_MEMORY)
    mg_error(d, OOM, path, NULL, "%s", zip_error_strerror(&ze));
  else
    mg_error(d, MALFORMED, path, NULL, "not a valid .npz archive: %s", zip_error_strerror(&ze));
  zip_error_fini(&ze);
}

/* Copy of a member name without its ".npy" suffix, or NULL when out of memory. */
static char *member_name(const char *zname) {
  size_t n = strlen(zname);
  if (n >= 4 && !strcmp(zname + n - 4, ".npy")) n -= 4;
  char *s = mg_malloc(n + 1);
  if (s) {
    memcpy(s, zname, n);
    s[n] = '\0';
  }
  return s;
}

/* Read member i into out (zeroed). Returns 1 when an array was read, 0 for a
 * directory entry (skipped), -1 on error. */
static int read_member(zip_t *za, zip_uint64_t i, const char *path, mg_array *out, mg_diags *d) {
  zip_stat_t st;
  if (zip_stat_index(za, i, 0, &st) < 0 || !(st.valid & ZIP_STAT_NAME))
    return fail(d, MG_D_MALFORMED, path, "member %" PRIu64 ": %s", (uint64_t)i, zip_strerror(za));
  size_t nl = strlen(st.name);
  if (nl && st.name[nl - 1] == '/') return 0;
  char what[512];
  snprintf(what, sizeof what, "%s/%s", path, st.name);
  zip_file_t *zf = zip_fopen_index(za, i, 0);
  if (!zf) return fail(d, MG_D_MALFORMED, what, "cannot open member: %s", zip_strerror(za));
  npy_src s = {.kind = SRC_ZIP, .zf = zf, .what = what, .d = d, .avail = -1};
  if ((st.valid & ZIP_STAT_SIZE) && st.size <= INT64_MAX) s.avail = (int64_t)st.size;
  /* The declared size is forgeable; deflate expands at most 1032:1, so cap
   * it by what the compressed bytes can really yield before allocating. */
  if ((st.valid & ZIP_STAT_COMP_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD) &&
      st.comp_size < INT64_MAX / 2048 &&
      (st.comp_method == ZIP_CM_STORE || st.comp_method == ZIP_CM_DEFLATE)) {
    uint64_t most = st.comp_method == ZIP_CM_STORE ? st.comp_size : st.comp_size * 1032 + 64;
    if (s.avail < 0 || (uint64_t)s.avail > most) s.avail = (int64_t)most;
  }
  int rc = read_stream(&s, out);
  zip_fclose(zf);
  if (rc < 0) return -1;
  out->name = member_name(st.name);
  if (!out->name) {
    mg_error(d, OOM, what, NULL, "out of memory");
    mg_array_free(out);
    return -1;
  }
  return 1;
}

int npz_read_file(const char *path, mg_array **arrays, int *count, mg_diags *d) {
  *arrays = NULL;
  *count = 0;
  int err = 0;
  zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
  if (!za) {
    zip_code_error(d, path, err);
    return -1;
  }
  mg_out_note_input(path); /* no output of this run replaces it */
  zip_int64_t n = zip_get_num_entries(za, 0);
  mg_array *arr = n >= 0 && n <= INT_MAX ? mg_calloc(n ? (size_t)n : 1, sizeof *arr) : NULL;
  if (!arr) {
    mg_diag_add(d, MG_SEV_ERROR, n >= 0 && n <= INT_MAX ? MG_D_OOM : MG_D_LIMIT, path, NULL,
                "cannot hold %" PRId64 " members", (int64_t)n);
    zip_discard(za);
    return -1;
  }
  int got = 0;
  for (zip_int64_t i = 0; i < n; i++) {
    int rc = read_member(za, (zip_uint64_t)i, path, &arr[got], d);
    if (rc < 0) {
      mg_arrays_free(arr, got);
      zip_discard(za);
      return -1;
    }
    got += rc;
  }
  zip_discard(za); /* read-only: nothing to write back */
  *arrays = arr;
  *count = got;
  return 0;
}

/* The member name (without ".npy") array i gets: its own, or arr_<i>. */
static const char *npz_name(const mg_array *a, int i, char *buf, size_t cap) {
  if (a->name) return a->name;
  snprintf(buf, cap, "arr_%d", i);
  return buf;
}

/* Validate every array and refuse empty or repeated member names, which
 * numpy.load could not tell apart. */
static int validate_npz(const char *path, const mg_array *arrays, int count, mg_diags *d) {
  if (count < 0 || (count && !arrays))
    return fail(d, MG_D_INVALID, path, "invalid array list (%d arrays)", count);
  for (int i = 0; i < count; i++) {
    char bi[32], bj[32];
    const char *ni = npz_name(&arrays[i], i, bi, sizeof bi);
    if (!*ni) return fail(d, MG_D_INVALID, path, "array %d has an empty name", i);
    if (validate_array(&arrays[i], ni, d) < 0) return -1;
    for (int j = 0; j < i; j++)
      if (!strcmp(ni, npz_name(&arrays[j], j, bj, sizeof bj)))
        return fail(d, MG_D_INVALID, path, "two arrays are named '%s'", ni);
  }
  return 0;
}

/* Add array i as "<name>.npy" with its header in hdr, which (like the array
 * data) libzip reads only at zip_close, so both must outlive the archive. */
static int add_member(zip_t *za, const mg_array *a, int i, char *hdr, int compress,
                      const char *path, mg_diags *d) {
  char buf[32];
  const char *name = npz_name(a, i, buf, sizeof buf);
  size_t hl = build_header(a, hdr, NPY_HDR_CAP), nl = strlen(name);
  char *member = hl ? mg_malloc(nl + 5) : NULL;
  if (!member) {
    mg_diag_add(d, MG_SEV_ERROR, hl ? MG_D_OOM : MG_D_LIMIT, name, NULL, "%s",
                hl ? "out of memory" : "header too long");
    return -1;
  }
  memcpy(member, name, nl);
  memcpy(member + nl, ".npy", 5);
  zip_buffer_fragment_t frag[2] = {{(zip_uint8_t *)hdr, hl}, {a->data, a->nbytes}};
  zip_source_t *src = zip_source_buffer_fragment(za, frag, a->nbytes ? 2 : 1, 0);
  zip_int64_t idx = src ? zip_file_add(za, member, src, 0) : -1;
  mg_free(member);
  if (idx < 0 && src) zip_source_free(src);
  if (idx < 0 || zip_set_file_compression(za, (zip_uint64_t)idx,
                                          compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) < 0)
    return fail(d, MG_D_IO, path, "cannot add '%s': %s", name, zip_strerror(za));
  return 0;
}

/* Build the archive at tmp with libzip. libzip itself writes through its own
 * temporary and renames onto tmp at zip_close, which is when it reads data. */
static int write_zip(const char *tmp, const char *path, const mg_array *arrays, int count,
                     int compress, mg_diags *d) {
  size_t hbytes;
  if (!mg_mul_size((size_t)count, NPY_HDR_CAP, &hbytes))
    return fail(d, MG_D_LIMIT, path, "too many arrays");
  char *hdrs = mg_malloc(hbytes);
  if (!hdrs) return fail(d, MG_D_OOM, path, "out of memory");
  int err = 0, rc = 0;
  zip_t *za = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (!za) {
    zip_code_error(d, path, err);
    mg_free(hdrs);
    return -1;
  }
  for (int i = 0; i < count && rc == 0; i++)
    rc = add_member(za, &arrays[i], i, hdrs + (size_t)i * NPY_HDR_CAP, compress, path, d);
  if (rc == 0 && zip_close(za) < 0) {
    mg_error(d, IO, path, NULL, "cannot write archive: %s", zip_strerror(za));
    rc = -1;
  }
  if (rc < 0) zip_discard(za);
  mg_free(hdrs);
  return rc;
}

int npz_write_file(const char *path, const mg_array *arrays, int count, int compress, mg_diags *d) {
  /* An empty archive is just the end-of-central-directory record; libzip
   * deletes the file instead of writing one, numpy writes this. */
  static const unsigned char empty_zip[22] = {'P', 'K', 5, 6};
  if (validate_npz(path, arrays, count, d) < 0) return -1;
  atomic_file f;
  if (atomic_begin(path, &f, d) < 0) return -1;
  if (count == 0) {
    if (write_all(f.fd, empty_zip, sizeof empty_zip) < 0) {
      mg_error(d, IO, path, NULL, "cannot write '%s': %s", f.tmp, strerror(errno));
      atomic_abort(&f);
      return -1;
    }
    return atomic_finish(&f, path, d);
  }
  close(f.fd);
  f.fd = -1;
  if (write_zip(f.tmp, path, arrays, count, compress, d) < 0) {
    atomic_abort(&f);
    return -1;
  }
  return atomic_finish(&f, path, d);
}

void mg_array_free(mg_array *a) {
  if (!a) return;
  /* A STRING array holds nbytes / sizeof(char *) owned, NUL-terminated strings. */
  if (a->dtype == MG_STRING && a->data)
    for (size_t i = 0; i < a->nbytes / sizeof(char *); i++) mg_free(((char **)a->data)[i]);
  mg_free(a->data);
  mg_free(a->name);
  memset(a, 0, sizeof *a);
}

void mg_arrays_free(mg_array *a, int n) {
  if (!a) return;
  for (int i = 0; i < n; i++) mg_array_free(&a[i]);
  mg_free(a);
}
