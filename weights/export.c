#include "export.h"
#include "outfile.h"
#include "arena.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

typedef struct {
  const wt_source *s;
  const wt_tensor *t;
  mg_dtype to;
  mg_diags *d;
  unsigned char *buf;
  size_t cap;
  int overflow;
} fill_ctx;

/* view for the checkpoint writer: the source's own bytes when no conversion is
 * needed and they lie in memory (a mapped file), so they are written uncopied. */
static int view(void *ctx, int64_t first, int64_t count, const void **p) {
  fill_ctx *f = ctx;
  *p = NULL;
  return f->t->dtype == f->to ? wt_view(f->s, f->t, first, count, p, f->d) : 0;
}

/* Streams a range of a source tensor converted to the checkpoint dtype. */
static int fill(void *ctx, int64_t first, int64_t count, void *dst) {
  fill_ctx *f = ctx;
  mg_dtype from = f->t->dtype;
  if (from == f->to) return wt_read(f->s, f->t, first, count, dst, f->d);
  size_t need = (size_t)count * mg_dtype_size(from);
  if (need > f->cap) {
    unsigned char *b = mg_realloc(f->buf, need);
    if (!b) return -1;
    f->buf = b;
    f->cap = need;
  }
  if (wt_read(f->s, f->t, first, count, f->buf, f->d)) return -1;
  unsigned char *out = dst;
  for (int64_t i = 0; i < count; i++) {
    double v = mg_load_f64(from, f->buf + (size_t)i * mg_dtype_size(from));
    if (f->to == MG_F32) {
      float x = (float)v;
      if (isinf(x) && isfinite(v)) f->overflow++;
      memcpy(out + 4 * i, &x, 4);
    } else {
      uint16_t h = f->to == MG_F16 ? mg_f32_to_f16((float)v) : mg_f32_to_bf16((float)v);
      float back = f->to == MG_F16 ? mg_f16_to_f32(h) : mg_bf16_to_f32(h);
      if (isinf(back) && isfinite(v)) f->overflow++;
      memcpy(out + 2 * i, &h, 2);
    }
  }
  return 0;
}

static json_t *dims_json(int rank, const int64_t *dims) {
  json_t *a = json_array();
  for (int i = 0; i < rank; i++) json_array_append_new(a, json_integer(dims[i]));
  return a;
}

int wt_write_json(const char *path, struct json_t *o, size_t flags, mg_diags *d) {
  mg_out_file f;
  if (!o) {
    mg_error(d, OOM, path, NULL, "out of memory building the JSON");
    return -1;
  }
  if (mg_out_fopen(&f, path, d)) return -1;
  if (json_dumpf(o, f.f, flags) || fputc('\n', f.f) == EOF) {
    mg_out_abort(&f);
    mg_error(d, IO, path, NULL, "cannot write: %s", strerror(errno ? errno : EIO));
    return -1;
  }
  return mg_out_commit(&f, d);
}

double wt_default_output_limit(const char *source_path) {
  struct stat st;
  double limit = 64.0 * (1 << 30);
  if (source_path && !stat(source_path, &st)) {
    double scaled = 64.0 * (double)st.st_size;
    limit = scaled < 256.0 * (1 << 20) ? 256.0 * (1 << 20) : scaled < limit ? scaled : limit;
  }
  return limit;
}

/* Elements of t's storage its view can reach: the product of the dims whose stride
 * is not 0 (an expanded view repeats the rest). */
static double stored_elems(const wt_tensor *t) {
  double n = 1;
  for (int k = 0; k < t->rank; k++)
    if (t->strides[k] != 0) n *= (double)t->dims[k];
  return n;
}

mg_dtype wt_export_dtype(const wt_export_opts *o, const wt_plan_entry *e) {
  const wt_tensor *t = e->src;
  if (!o->to_float || !mg_dtype_is_float(t->dtype)) return t->dtype;
  /* AMP O2 keeps these cells float32 (mindspore-api.json mindspore.amp.auto_mixed_precision):
   * their parameters stay as precise as the cells compute */
  const char *mt = e->module_type;
  if (o->keep_norm_fp32 && mt && (!strncmp(mt, "BatchNorm", 9) || !strcmp(mt, "LayerNorm"))) return t->dtype;
  return o->to_float;
}

/* The checks before anything is written: the payload of the plan's tensors within
 * the limit and the free space, each expanded view warned about. */
static int check_output_size(const wt_plan_entry *plan, int n_plan, const char *out, const wt_export_opts *o,
                             mg_diags *d) {
  double total = 0, limit = o->max_output_bytes > 0 ? o->max_output_bytes : wt_default_output_limit(o->source_label);
  const char *saved = d->file; /* the views and the size are the source's */
  int rc = 0;
  d->file = o->source_label;
  const char *biggest = NULL;
  double biggest_bytes = 0;
  for (int i = 0; i < n_plan; i++) {
    const wt_tensor *t = plan[i].src;
    if (!plan[i].ms_name) continue;
    mg_dtype to = wt_export_dtype(o, &plan[i]);
    double n = (double)wt_numel(t), bytes = n * (double)mg_dtype_size(to), stored = stored_elems(t);
    total += bytes;
    if (bytes > biggest_bytes) biggest = t->name, biggest_bytes = bytes;
    if (stored < n)
      mg_warn(d, GRAPH, t->name, NULL, "an expanded view: %.0f elements over %.0f stored (stride 0); the "
              "checkpoint holds every element (%.1f MB)", n, stored, bytes / 1e6);
  }
  if (total > limit) {
    mg_error(d, LIMIT, biggest, NULL, "the checkpoint would hold %.3g bytes, over the %.3g-byte limit (%s); the "
             "largest tensor is '%s' (%.3g bytes)", total, limit,
             o->max_output_bytes > 0 ? "--max-output-bytes"
                                     : "64x the source, at least 256 MiB, at most 64 GiB; --max-output-bytes sets it",
             biggest ? biggest : "?", biggest_bytes);
    rc = -1;
  }
  d->file = saved;
  if (rc) return rc;
  char dir[4096];
  const char *slash = strrchr(out, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash == out ? 1 : slash - out), out);
  struct statvfs fs;
  if (!statvfs(dir, &fs) && (double)fs.f_bavail * (double)fs.f_frsize < total + (1 << 20)) {
    mg_error(d, IO, out, NULL, "the checkpoint needs %.3g bytes; %s has %.3g free", total, dir,
             (double)fs.f_bavail * (double)fs.f_frsize);
    return -1;
  }
  return 0;
}

int wt_export_ckpt(const wt_source *s, const wt_rules *rules, const mg_model *m, const wt_binding *binds,
                   int n_binds, const char *out, const char *map_out, const wt_export_opts *o, wt_export_stats *st,
                   mg_diags *d) {
  wt_type_hint *hints = NULL;
  wt_plan_entry *plan = NULL;
  wt_ckpt_writer *w = NULL;
  int n_hints = 0, n_plan = 0, rc = 0, to_write = 0;
  json_t *map = NULL;
  *st = (wt_export_stats){0};
  if ((m && wt_graph_types(s, m, binds, n_binds, &hints, &n_hints, d)) ||
      wt_plan(s, rules, hints, n_hints, &plan, &n_plan, d)) {
    rc = -1;
    goto done;
  }
  for (int i = 0; i < n_plan; i++) to_write += plan[i].ms_name != NULL;
  if (!to_write) {
    rc = 1;
    goto done;
  }
  if (check_output_size(plan, n_plan, out, o, d) || wt_ckpt_begin(out, o->force, o->crc, &w, d)) {
    rc = -1;
    goto done;
  }
  map = json_object();
  json_t *tensors = json_array();
  json_object_set_new(map, "source", json_string(o->source_label));
  json_object_set_new(map, "checkpoint", json_string(out));
  if (o->graph_label) json_object_set_new(map, "graph", json_string(o->graph_label));
  json_object_set_new(map, "tensors", tensors);
  for (int i = 0; i < n_plan && !rc; i++) {
    const wt_plan_entry *e = &plan[i];
    const wt_tensor *t = e->src;
    mg_dtype to = wt_export_dtype(o, e);
    int64_t dims[WT_MAX_RANK + 1];
    int rank = 0;
    for (int k = 0; k < t->rank; k++) {
      if (k == e->unsqueeze_axis) dims[rank++] = 1;
      dims[rank++] = t->dims[k];
    }
    if (e->unsqueeze_axis == t->rank) dims[rank++] = 1;
    json_t *j = json_object();
    json_object_set_new(j, "source", json_string(t->name));
    json_object_set_new(j, "mindspore", e->ms_name ? json_string(e->ms_name) : json_null());
    const char *init = NULL, *how = NULL;
    for (int b = 0; b < n_binds; b++)
      if (binds[b].src == t || binds[b].src2 == t || (binds[b].kind == WT_BN_FOLD_WEIGHT && (binds[b].bn[0] == t || binds[b].bn[1] == t ||
                                                                        binds[b].bn[2] == t || binds[b].bn[3] == t))) {
        init = binds[b].init->name;
        how = wt_bind_kind_name(binds[b].kind);
        break;
      }
    json_object_set_new(j, "initializer", init ? json_string(init) : json_null());
    if (how) json_object_set_new(j, "binding", json_string(how));
    json_object_set_new(j, "shape", dims_json(rank, dims));
    json_object_set_new(j, "dtype", json_string(mg_dtype_name(to)));
    json_object_set_new(j, "source_dtype", json_string(mg_dtype_name(t->dtype)));
    char transform[64] = "none";
    if (e->unsqueeze_axis >= 0) snprintf(transform, sizeof transform, "unsqueeze:%d", e->unsqueeze_axis);
    if (to != t->dtype) snprintf(transform + (strcmp(transform, "none") ? strlen(transform) : 0),
                                 sizeof transform - strlen(transform), "%scast:%s",
                                 strcmp(transform, "none") ? "," : "", mg_dtype_name(to));
    json_object_set_new(j, "transform", json_string(transform));
    if (e->module_type) json_object_set_new(j, "module_type", json_string(e->module_type));
    json_object_set_new(j, "module_type_from", json_string(e->type_from == WT_TYPE_GRAPH ? "graph"
                                                           : e->type_from == WT_TYPE_PATTERN ? "pattern" : "none"));
    const char *status = !e->ms_name ? "dropped" : m && !init ? "unbound" : e->renamed ? "renamed" : "kept";
    json_object_set_new(j, "status", json_string(status));
    json_array_append_new(tensors, j);
    if (!e->ms_name) {
      st->dropped++;
      continue;
    }
    if (!wt_ms_type_name(to)) {
      mg_error(d, UNSUPPORTED_DTYPE, t->name, NULL, "MindSpore checkpoints have no %s tensors", mg_dtype_name(to));
      rc = -1;
      break;
    }
    fill_ctx fc = {s, t, to, d, NULL, 0, 0};
    if (wt_ckpt_add_view(w, e->ms_name, to, rank, dims, fill, view, &fc)) rc = -1;
    mg_free(fc.buf);
    if (!rc && fc.overflow) {
      mg_error(d, INVALID, t->name, NULL, "%d values overflow to infinity as %s", fc.overflow, mg_dtype_name(to));
      rc = -1;
    }
    st->written++;
    st->renamed += e->renamed;
    st->bytes += (double)wt_numel(t) * (double)mg_dtype_size(to);
  }
  if (!rc && m) { /* initializers nothing bound are reported, never guessed */
    json_t *inits = json_array();
    int bound = 0, unbound = 0, constants = 0;
    for (int b = 0; b < n_binds; b++) {
      json_t *j = json_object();
      json_object_set_new(j, "initializer", json_string(binds[b].init->name));
      json_object_set_new(j, "binding", json_string(wt_bind_kind_name(binds[b].kind)));
      json_object_set_new(j, "source", binds[b].src ? json_string(binds[b].src->name) : json_null());
      if (binds[b].kind == WT_BN_FOLD_WEIGHT || binds[b].kind == WT_BN_FOLD_BIAS) {
        json_t *bn = json_array();
        for (int k = 0; k < 4; k++) json_array_append_new(bn, json_string(binds[b].bn[k]->name));
        json_object_set_new(j, "batchnorm", bn);
        json_object_set_new(j, "eps", json_real(binds[b].eps));
      }
      json_object_set_new(j, "max_abs_error", json_real(binds[b].max_err));
      json_array_append_new(inits, j);
      if (binds[b].by_structure) json_object_set_new(j, "by_structure", json_true());
      if (binds[b].eps_assumed) json_object_set_new(j, "eps_assumed", json_true());
      st->by_structure += binds[b].by_structure;
      if (binds[b].kind == WT_UNBOUND) {
        unbound++;

      } else if (binds[b].kind == WT_CONSTANT) constants++;
      else bound++;
    }
    json_object_set_new(map, "initializers", inits);
    if (!o->quiet_unbound)
      wt_warn_unbound(binds, n_binds, "nothing in the checkpoint stands for it (a constant the exporter computed "
                                      "from parameters, or a tensor the source lacks)", d);
    st->bound = bound, st->unbound = unbound, st->constants = constants;
  }
  if (!rc && wt_ckpt_commit(w)) rc = -1;
  if (!rc && map_out && wt_write_json(map_out, map, JSON_INDENT(2) | JSON_PRESERVE_ORDER, d)) rc = -1;
done:
  if (w) wt_ckpt_abort(w);
  json_decref(map);
  wt_plan_free(plan, n_plan);
  mg_free(hints);
  return rc;
}
