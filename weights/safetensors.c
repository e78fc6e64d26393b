/* .safetensors: an 8-byte little-endian header length N, N bytes of JSON
 *   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value"}}
 * then the data; offsets are relative to the byte after the header. The file is
 * mapped and every tensor's storage points into the map: nothing is copied.
 *
 * Checked: header length within the file (and at most 100 MB, the format's own
 * limit), valid JSON object without duplicate keys, known dtype, non-negative
 * shape, offsets inside the data and end - begin == numel * element size, and no
 * two tensors overlapping. Gaps between tensors are tolerated. */
#include "source_internal.h"
#include "mapfile.h"
#include "unpickle.h"
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

static const struct {
  const char *name;
  mg_dtype t;
} st_dtypes[] = {
    {"F64", MG_F64}, {"F32", MG_F32}, {"F16", MG_F16}, {"BF16", MG_BF16}, {"I64", MG_I64},
    {"I32", MG_I32}, {"I16", MG_I16}, {"I8", MG_I8},   {"U8", MG_U8},     {"U16", MG_U16},
    {"U32", MG_U32}, {"U64", MG_U64}, {"BOOL", MG_BOOL}, {"C64", MG_C64},
};

typedef struct {
  uint64_t begin, end;
  const char *name;
} st_span;

static int span_cmp(const void *a, const void *b) {
  const st_span *x = a, *y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* A JSON integer >= 0, or -1. */
static int64_t json_nonneg(const json_t *j) {
  if (!json_is_integer(j)) return -1;
  json_int_t v = json_integer_value(j);
  return v < 0 ? -1 : (int64_t)v;
}

/* Adds one header entry as a tensor whose storage is its byte range. */
static int add_entry(wt_source *s, const char *name, json_t *e, const unsigned char *data, uint64_t data_len,
                     st_span *span, mg_diags *d) {
  if (!json_is_object(e)) {
    mg_error(d, INVALID, name, NULL, "header entry is not an object");
    return -1;
  }
  json_t *jd = json_object_get(e, "dtype"), *js = json_object_get(e, "shape"),
         *jo = json_object_get(e, "data_offsets");
  if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo) || json_array_size(jo) != 2) {
    mg_error(d, INVALID, name, NULL, "header entry needs dtype (string), shape (array) and data_offsets ([begin, end])");
    return -1;
  }
  mg_dtype dt = MG_UNDEFINED;
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (!strcmp(json_string_value(jd), st_dtypes[i].name)) dt = st_dtypes[i].t;
  if (dt == MG_UNDEFINED) {
    mg_error(d, UNSUPPORTED_DTYPE, name, NULL, "safetensors dtype '%.32s' is not supported", json_string_value(jd));
    return -1;
  }
  size_t rank = json_array_size(js);
  if (rank > WT_MAX_RANK) {
    mg_error(d, LIMIT, name, NULL, "tensor of rank %zu (at most %d supported)", rank, WT_MAX_RANK);
    return -1;
  }
  int64_t dims[WT_MAX_RANK], numel = 1, nbytes;
  for (size_t i = 0; i < rank; i++) {
    dims[i] = json_nonneg(json_array_get(js, i));
    if (dims[i] < 0 || !mg_mul_i64(numel, dims[i], &numel)) {
      mg_error(d, INVALID, name, NULL, "shape holds a negative, non-integer or overflowing dimension");
      return -1;
    }
  }
  int64_t b = json_nonneg(json_array_get(jo, 0)), en = json_nonneg(json_array_get(jo, 1));
  if (b < 0 || en < b || (uint64_t)en > data_len) {
    mg_error(d, INVALID, name, NULL, "data_offsets [%lld, %lld] lie outside the %llu data bytes", (long long)b,
             (long long)en, (unsigned long long)data_len);
    return -1;
  }
  if (!mg_mul_i64(numel, (int64_t)mg_dtype_size(dt), &nbytes) || nbytes != en - b) {
    mg_error(d, INVALID, name, NULL, "data_offsets cover %lld bytes; shape and dtype need %lld", (long long)(en - b),
             (long long)nbytes);
    return -1;
  }
  wt_storage w = {.data = data + b, .nbytes = (size_t)(en - b), .entry = -1};
  int idx = wt_add_storage(s, &w);
  wt_tensor *t = idx < 0 ? NULL : wt_add_tensor(s, name, dt, (int)rank, dims, idx, 0);
  if (!t) {
    mg_error(d, OOM, name, NULL, "out of memory");
    return -1;
  }
  *span = (st_span){(uint64_t)b, (uint64_t)en, t->name};
  return 0;
}

/* Parses buf as a safetensors file into s (storages point into buf). */
static int st_parse(const unsigned char *buf, size_t len, wt_source *s, mg_diags *d) {
  if (len < 8) {
    mg_error(d, MALFORMED, NULL, NULL, "safetensors file shorter than its 8-byte header length");
    return -1;
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
  if (n > len - 8 || n > ST_MAX_HEADER) {
    mg_error(d, MALFORMED, NULL, NULL, "safetensors header length %llu exceeds the file (%zu bytes) or 100 MB",
             (unsigned long long)n, len);
    return -1;
  }
  if (n < 2 || buf[8] != '{') {
    mg_error(d, MALFORMED, NULL, NULL, "safetensors header is not a JSON object");
    return -1;
  }
  /* jansson keeps its own malloc: routing it through mg_malloc would let fault
   * injection reach its lexer, which asserts (load.c lex_unget_unsave) when an
   * allocation fails mid-token; and the allocator is process-wide state. */
  json_error_t je;
  json_t *root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
  if (!root || !json_is_object(root)) {
    mg_error(d, MALFORMED, NULL, NULL, "safetensors header: %s", root ? "not a JSON object" : je.text);
    json_decref(root);
    return -1;
  }
  const unsigned char *data = buf + 8 + n;
  uint64_t data_len = len - 8 - n;
  size_t count = json_object_size(root);
  st_span *spans = mg_malloc((count ? count : 1) * sizeof *spans);
  int rc = spans ? 0 : -1;
  if (!spans) mg_error(d, OOM, NULL, NULL, "out of memory");
  size_t ns = 0;
  const char *name;
  json_t *e;
  json_object_foreach(root, name, e) {
    if (rc) break;
    if (!strcmp(name, "__metadata__")) {
      if (!json_is_object(e)) {
        mg_error(d, INVALID, NULL, NULL, "__metadata__ is not an object");
        rc = -1;
      }
      continue;
    }
    rc = add_entry(s, name, e, data, data_len, &spans[ns], d);
    if (!rc) ns++;
  }
  if (!rc && ns > 1) {
    qsort(spans, ns, sizeof *spans, span_cmp);
    size_t last = ns; /* the non-empty span reaching furthest so far */
    for (size_t i = 0; i < ns && !rc; i++) {
      if (spans[i].begin == spans[i].end) continue;
      if (last < ns && spans[i].begin < spans[last].end) {
        mg_error(d, INVALID, spans[i].name, NULL, "data overlaps that of '%s'", spans[last].name);
        rc = -1;
      }
      if (last == ns || spans[i].end > spans[last].end) last = i;
    }
  }
  mg_free(spans);
  json_decref(root);
  return rc;
}

int safetensors_open_buffer(const void *buf, size_t len, wt_source **out, mg_diags *d) {
  *out = NULL;
  wt_source *s = wt_source_new(NULL);
  if (!s) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  if (st_parse(buf, len, s, d)) {
    wt_close(s);
    return -1;
  }
  *out = s;
  return 0;
}

typedef struct {
  void *map;
  size_t len;
} st_map;

static void st_map_close(void *p) {
  st_map *m = p;
  if (m->map) mg_unmap_file(m->map, m->len);
  mg_free(m);
}

int safetensors_open(const char *path, wt_source **out, mg_diags *d) {
  const char *saved = d->file;
  d->file = path;
  *out = NULL;
  int rc = -1, fd = open(path, O_RDONLY);
  struct stat sb;
  wt_source *s = NULL;
  st_map *m = NULL;
  if (fd < 0) {
    mg_error(d, IO, NULL, NULL, "cannot open: %s", strerror(errno));
    goto done;
  }
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    mg_error(d, IO, NULL, NULL, "not a regular file");
    goto done;
  }
  if (sb.st_size < 8) {
    mg_error(d, MALFORMED, NULL, NULL, "safetensors file shorter than its 8-byte header length");
    goto done;
  }
  if (!(s = wt_source_new(path)) || !(m = mg_calloc(1, sizeof *m))) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    goto done;
  }
  m->len = (size_t)sb.st_size;
  m->map = mg_map_file(fd, m->len, path); /* a truncation is a diagnostic, not SIGBUS */
  if (m->map == MAP_FAILED) {
    m->map = NULL;
    mg_error(d, IO, NULL, NULL, "cannot map: %s", strerror(errno));
    goto done;
  }
  s->impl = m;
  s->close_impl = st_map_close;
  m = NULL;
  rc = st_parse(((st_map *)s->impl)->map, (size_t)sb.st_size, s, d);
done:
  if (fd >= 0) close(fd);
  if (m) st_map_close(m);
  if (rc) wt_close(s);
  else *out = s;
  d->file = saved;
  return rc;
}
