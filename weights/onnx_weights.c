/* ONNX initializers as a weights source, and weights_open(), which picks the
 * reader by the file's first bytes rather than its name. */
#include "onnx_import.h"
#include "source_internal.h"
#include "unpickle.h"
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* Lists m's top-level initializers; each tensor's storage borrows the value's
 * data (the model must outlive the source). String initializers hold no weights
 * and are skipped with a warning. */
int onnx_weights_open(const mg_model *m, wt_source **out, mg_diags *d) {
  *out = NULL;
  wt_source *s = wt_source_new(m->path);
  if (!s) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  const mg_graph *g = m->graph;
  for (int i = 0; g && i < g->n_inits; i++) {
    const mg_value *v = g->inits[i];
    size_t es = mg_dtype_size(v->dtype);
    if (!es) {
      mg_warn(d, UNSUPPORTED_DTYPE, v->name, NULL, "initializer of dtype %s skipped", mg_dtype_name(v->dtype));
      continue;
    }
    if (v->shape.rank < 0 || v->shape.rank > WT_MAX_RANK) {
      mg_error(d, LIMIT, v->name, NULL, "initializer of unknown rank or rank over %d", WT_MAX_RANK);
      goto fail;
    }
    int64_t dims[WT_MAX_RANK], numel = 1, nbytes;
    for (int k = 0; k < v->shape.rank; k++) {
      dims[k] = v->shape.d[k].v;
      if (dims[k] < 0 || !mg_mul_i64(numel, dims[k], &numel)) {
        mg_error(d, INVALID, v->name, NULL, "initializer has an unknown or overflowing dimension");
        goto fail;
      }
    }
    if (!mg_mul_i64(numel, (int64_t)es, &nbytes) || (numel && !v->data) || (uint64_t)nbytes > v->nbytes) {
      mg_error(d, INVALID, v->name, NULL, "initializer holds %zu bytes; its shape needs %lld", v->data ? v->nbytes : 0,
               (long long)nbytes);
      goto fail;
    }
    wt_storage w = {.data = v->data, .nbytes = v->nbytes, .entry = -1};
    int idx = wt_add_storage(s, &w);
    if (idx < 0 || !wt_add_tensor(s, v->name, v->dtype, v->shape.rank, dims, idx, 0)) {
      mg_error(d, OOM, v->name, NULL, "out of memory");
      goto fail;
    }
  }
  *out = s;
  return 0;
fail:
  wt_close(s);
  return -1;
}

static void model_close(void *p) { mg_model_free(p); }

/* The format of the first bytes: 'z' zip, 'l' legacy pickle, 's' safetensors,
 * 't' tar (torch < 0.4), 'o' anything else (ONNX is tried). */
static char sniff(const unsigned char *b, size_t n, uint64_t file_len) {
  if (n >= 4 && b[0] == 'P' && b[1] == 'K' && ((b[2] == 3 && b[3] == 4) || (b[2] == 5 && b[3] == 6))) return 'z';
  if (n >= 1 && b[0] == 0x80) return 'l';
  if (n >= 9 && b[8] == '{') {
    /* a header length past the end (a truncated file) is still safetensors, which
     * safetensors_open then says; an ONNX protobuf's first 8 bytes read as a length
     * of 2^56 or more */
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = h << 8 | b[i];
    if (h <= file_len - 8 || h < ((uint64_t)1 << 32)) return 's';
  }
  if (n >= 262 && !memcmp(b + 257, "ustar", 5)) return 't';
  return 'o';
}

int weights_open(const char *path, const char *key, wt_source **out, mg_diags *d) {
  *out = NULL;
  unsigned char head[512];
  ssize_t n = -1;
  off_t len = 0;
  int fd = open(path, O_RDONLY);
  if (fd >= 0) {
    n = read(fd, head, sizeof head);
    len = lseek(fd, 0, SEEK_END);
    close(fd);
  }
  if (n < 0 || len < 0) {
    const char *saved = d->file;
    d->file = path;
    mg_error(d, IO, NULL, NULL, "cannot read: %s", strerror(errno));
    d->file = saved;
    return -1;
  }
  char kind = sniff(head, (size_t)n, (uint64_t)len);
  if (kind == 'z' || kind == 'l') return pth_open(path, key, out, d);
  if (key && *key) {
    const char *saved = d->file;
    d->file = path;
    mg_warn(d, USAGE, NULL, NULL, "key '%s' applies to .pth files only; ignored", key);
    d->file = saved;
  }
  if (kind == 's') return safetensors_open(path, out, d);
  if (kind == 't') {
    const char *saved = d->file;
    d->file = path;
    mg_error(d, UNSUPPORTED_ATTR, NULL, NULL, "tar-format .pth (torch < 0.4) is not supported; re-save it with a newer torch");
    d->file = saved;
    return -1;
  }
  mg_model *m = NULL;
  if (onnx_import(path, d, &m)) return -1;
  wt_source *s = NULL;
  if (onnx_weights_open(m, &s, d)) {
    mg_model_free(m);
    return -1;
  }
  /* The source owns the model now: its initializer data lives in the model. */
  s->impl = m;
  s->close_impl = model_close;
  *out = s;
  return 0;
}
