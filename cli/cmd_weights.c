/* migc weights SRC -o OUT.ckpt [--graph MODEL.onnx] [--rules R.xml] [--dtype D]
 *              [--map-out MAP.json] [--key K] [--crc] [--force] */
#include "bind.h"
#include "cli.h"
#include "onnx_import.h"
#include "passes.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

static void help(FILE *f) {
  fprintf(f,
          "usage: migc weights SRC.pth|SRC.safetensors|MODEL.onnx -o OUT.ckpt [options]\n"
          "\n"
          "Writes a MindSpore checkpoint whose parameters carry MindSpore names (the torch\n"
          "module tree kept; BatchNorm -> gamma/beta/moving_mean/moving_variance, LayerNorm\n"
          "and GroupNorm -> gamma/beta, Embedding -> embedding_table, PReLU -> w, Conv1d\n"
          "weights -> (out, in, 1, k); see rules/torch_mindspore.xml).\n"
          "\n"
          "  --graph MODEL.onnx   bind every graph initializer to a source tensor (by name,\n"
          "                       by value, through folded BatchNorm) and take module types\n"
          "                       from the ops that consume them\n"
          "  --rules R.xml        extra rules: module types, <rename match= replace=>,\n"
          "                       <override torch= ms=> (override the built-in ones)\n"
          "  --dtype D            keep (default), fp32, fp16 or bf16 for floating tensors\n"
          "  --map-out MAP.json   what was done to every tensor\n"
          "  --key K              the dict inside the .pth that holds the tensors\n"
          "  --crc                append MindSpore's CRC trailer (MindSpore >= 2.3)\n"
          "  --force              replace an existing OUT.ckpt\n");
}

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

static int write_json_atomic(const char *path, json_t *o, mg_diags *d) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  if (json_dump_file(o, tmp, JSON_INDENT(2) | JSON_PRESERVE_ORDER) || rename(tmp, path)) {
    unlink(tmp);
    mg_error(d, IO, path, NULL, "cannot write: %s", strerror(errno));
    return -1;
  }
  return 0;
}

int cmd_weights(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  const char *src = NULL, *out = NULL, *graph = NULL, *user_rules = NULL, *map_out = NULL, *key = NULL;
  const char *dtype = "keep";
  int crc = 0, force = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "-o") && more) out = argv[++i];
    else if (!strcmp(a, "--graph") && more) graph = argv[++i];
    else if (!strcmp(a, "--rules") && more) user_rules = argv[++i];
    else if (!strcmp(a, "--dtype") && more) dtype = argv[++i];
    else if (!strcmp(a, "--map-out") && more) map_out = argv[++i];
    else if (!strcmp(a, "--key") && more) key = argv[++i];
    else if (!strcmp(a, "--crc")) crc = 1;
    else if (!strcmp(a, "--force")) force = 1;
    else if (a[0] == '-') {
      fprintf(stderr, "migc weights: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (!src) src = a;
    else {
      fprintf(stderr, "migc weights: one source at a time\n");
      return EXIT_BAD_INPUT;
    }
  }
  mg_dtype to_float = MG_UNDEFINED;
  if (!strcmp(dtype, "fp32")) to_float = MG_F32;
  else if (!strcmp(dtype, "fp16")) to_float = MG_F16;
  else if (!strcmp(dtype, "bf16")) to_float = MG_BF16;
  else if (strcmp(dtype, "keep")) {
    fprintf(stderr, "migc weights: --dtype must be keep, fp32, fp16 or bf16\n");
    return EXIT_BAD_INPUT;
  }
  if (!src || !out) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  char rs[PATH_MAX], ro[PATH_MAX];
  if (realpath(src, rs) && realpath(out, ro) && !strcmp(rs, ro)) {
    fprintf(stderr, "migc weights: refusing to overwrite the input %s\n", src);
    return EXIT_BAD_INPUT;
  }
  mg_diags d;
  mg_diags_init(&d);
  int rc = EXIT_OK;
  wt_rules *rules = wt_rules_new();
  wt_source *s = NULL;
  mg_model *m = NULL;
  wt_binding *binds = NULL;
  wt_type_hint *hints = NULL;
  wt_plan_entry *plan = NULL;
  wt_ckpt_writer *w = NULL;
  int n_binds = 0, n_hints = 0, n_plan = 0;
  json_t *map = NULL;
  char builtin[PATH_MAX];
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (!rules || wt_rules_load(rules, builtin, &d) || (user_rules && wt_rules_load(rules, user_rules, &d)) ||
      weights_open(src, key, &s, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  if (graph) {
    if (onnx_import(graph, &d, &m) || mg_prepare(m, NULL, 0, &d) || wt_bind(s, m, &binds, &n_binds, &d) ||
        wt_graph_types(s, m, binds, n_binds, &hints, &n_hints, &d)) {
      rc = EXIT_BAD_INPUT;
      goto done;
    }
  }
  if (wt_plan(s, rules, hints, n_hints, &plan, &n_plan, &d) || wt_ckpt_begin(out, force, crc, &w, &d)) {
    rc = EXIT_BAD_INPUT;
    goto done;
  }
  map = json_object();
  json_t *tensors = json_array();
  json_object_set_new(map, "source", json_string(src));
  json_object_set_new(map, "checkpoint", json_string(out));
  if (graph) json_object_set_new(map, "graph", json_string(graph));
  json_object_set_new(map, "tensors", tensors);
  int written = 0, renamed = 0, dropped = 0;
  double bytes = 0;
  for (int i = 0; i < n_plan && !rc; i++) {
    const wt_plan_entry *e = &plan[i];
    const wt_tensor *t = e->src;
    mg_dtype to = to_float && mg_dtype_is_float(t->dtype) ? to_float : t->dtype;
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
      if (binds[b].src == t || (binds[b].kind == WT_BN_FOLD_WEIGHT && (binds[b].bn[0] == t || binds[b].bn[1] == t ||
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
    const char *status = !e->ms_name ? "dropped" : graph && !init ? "unbound" : e->renamed ? "renamed" : "kept";
    json_object_set_new(j, "status", json_string(status));
    json_array_append_new(tensors, j);
    if (!e->ms_name) {
      dropped++;
      continue;
    }
    if (!wt_ms_type_name(to)) {
      mg_error(&d, UNSUPPORTED_DTYPE, t->name, NULL, "MindSpore checkpoints have no %s tensors", mg_dtype_name(to));
      rc = EXIT_BAD_INPUT;
      break;
    }
    fill_ctx fc = {s, t, to, &d, NULL, 0, 0};
    if (wt_ckpt_add_view(w, e->ms_name, to, rank, dims, fill, view, &fc)) rc = EXIT_BAD_INPUT;
    mg_free(fc.buf);
    if (!rc && fc.overflow) {
      mg_error(&d, INVALID, t->name, NULL, "%d values overflow to infinity as %s", fc.overflow, mg_dtype_name(to));
      rc = EXIT_BAD_INPUT;
    }
    written++;
    renamed += e->renamed;
    bytes += (double)wt_numel(t) * (double)mg_dtype_size(to);
  }
  if (!rc && graph) { /* initializers nothing bound are reported, never guessed */
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
      if (binds[b].kind == WT_UNBOUND) {
        unbound++;
        mg_warn(&d, GRAPH, binds[b].init->name, NULL, "graph initializer bound to no source tensor");
      } else if (binds[b].kind == WT_CONSTANT) constants++;
      else bound++;
    }
    json_object_set_new(map, "initializers", inits);
    printf("binding: %d of %d graph initializers bound (%d constants, %d unbound)\n", bound,
           n_binds - constants, constants, unbound);
  }
  if (!rc && wt_ckpt_commit(w)) rc = EXIT_BAD_INPUT;
  if (!rc && map_out && write_json_atomic(map_out, map, &d)) rc = EXIT_BAD_INPUT;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!rc) {
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("wrote %s: %d tensors (%d renamed, %d dropped), %.1f MB in %.2f s\n", out, written, renamed,
           dropped, bytes / 1e6, secs);
  }
done:
  if (w) wt_ckpt_abort(w);
  cli_report(&d);
  json_decref(map);
  wt_plan_free(plan, n_plan);
  mg_free(hints);
  mg_free(binds);
  mg_model_free(m);
  wt_close(s);
  wt_rules_free(rules);
  mg_diags_free(&d);
  return rc;
}
