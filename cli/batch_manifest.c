/* The batch manifest (docs/batch-manifest.schema.json) or a folder of *.onnx, read
 * into batch_model rows. Every check the schema states is made here too, so that a
 * bad manifest stops the batch before any work, with one line naming the file, the
 * model and the problem. */
#include "batch.h"
#include "cli.h"
#include "ir.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const batch_target_names[3] = {"cpu", "ascend", "mindspore"};

int batch_parse_targets(const char *list) {
  int bits = 0;
  char buf[256];
  if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf) return 0;
  for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int k = -1;
    for (int i = 0; i < 3; i++)
      if (!strcmp(t, batch_target_names[i])) k = i;
    if (k < 0) return 0;
    bits |= 1 << k;
  }
  return bits;
}

/* A model name is a folder name under OUTDIR: letters, digits, '.', '_', '-', not
 * starting with '.', at most 100 characters, none of the report's file names. */
static int valid_name(const char *s) {
  static const char *const taken[] = {"batch.json", "report.json", "report.md", "report.html", "junit.xml"};
  size_t n = strlen(s);
  if (!n || n > 100 || s[0] == '.') return 0;
  for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
    if (!strcmp(s, taken[i])) return 0; /* files of OUTDIR itself */
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '.' ||
          *s == '_' || *s == '-'))
      return 0;
  return 1;
}

/* out := base/rel, or rel itself when absolute; -1 when too long. */
static int resolve(const char *base, const char *rel, char *out, size_t n) {
  int k = rel[0] == '/' ? snprintf(out, n, "%s", rel) : snprintf(out, n, "%s/%s", base, rel);
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* Where in the manifest a problem is: "models[3] 'resnet18'" or "models[3]". */
static void where(char *out, size_t n, int i, const char *name) {
  if (name) snprintf(out, n, "models[%d] '%s'", i, name);
  else snprintf(out, n, "models[%d]", i);
}

/* A string member `key` of o into out (resolved against base when base is set); 1
 * when present, 0 when absent, -1 with a diagnostic when of the wrong kind. */
static int get_path(json_t *o, const char *key, const char *base, char *out, size_t n, const char *at, mg_diags *d) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (!json_is_string(v) || !json_string_length(v)) {
    mg_error(d, INVALID, NULL, NULL, "%s: \"%s\" must be a non-empty string", at, key);
    return -1;
  }
  if (base ? resolve(base, json_string_value(v), out, n) : snprintf(out, n, "%s", json_string_value(v)) >= (int)n) {
    mg_error(d, LIMIT, NULL, NULL, "%s: \"%s\" is too long", at, key);
    return -1;
  }
  return 1;
}

/* "targets": a non-empty array of distinct target names, into *bits. */
static int get_targets(json_t *v, int *bits, const char *at, mg_diags *d) {
  size_t i;
  json_t *t;
  *bits = 0;
  if (!json_is_array(v) || !json_array_size(v)) {
    mg_error(d, INVALID, NULL, NULL, "%s: \"targets\" must be a non-empty array of cpu, ascend, mindspore", at);
    return -1;
  }
  json_array_foreach(v, i, t) {
    int b = json_is_string(t) ? batch_parse_targets(json_string_value(t)) : 0;
    if (!b || strchr(json_string_value(t), ',') || (*bits & b)) {
      mg_error(d, INVALID, NULL, NULL, "%s: targets[%zu] must be one of cpu, ascend, mindspore, each once", at, i);
      return -1;
    }
    *bits |= b;
  }
  return 0;
}

/* Fails on a member of o not in allowed[] (a misspelt key would be silently ignored
 * otherwise). */
static int only_keys(json_t *o, const char *const *allowed, const char *at, mg_diags *d) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    int ok = 0;
    for (int i = 0; allowed[i]; i++) ok |= !strcmp(k, allowed[i]);
    if (!ok) {
      mg_error(d, INVALID, NULL, NULL, "%s: unknown key \"%s\"", at, k);
      return -1;
    }
  }
  return 0;
}

/* "tolerance": {rtol, atol, policy}, verify's --rtol/--atol/--policy. */
static int get_tolerance(json_t *v, const char *base, batch_model *m, const char *at, mg_diags *d) {
  static const char *const keys[] = {"rtol", "atol", "policy", NULL};
  if (!json_is_object(v)) {
    mg_error(d, INVALID, NULL, NULL, "%s: \"tolerance\" must be an object {rtol, atol, policy}", at);
    return -1;
  }
  if (only_keys(v, keys, at, d)) return -1;
  for (int k = 0; k < 2; k++) {
    json_t *x = json_object_get(v, keys[k]);
    if (!x) continue;
    if (!json_is_number(x) || json_number_value(x) < 0) {
      mg_error(d, INVALID, NULL, NULL, "%s: tolerance.%s must be a number >= 0", at, keys[k]);
      return -1;
    }
    *(k ? &m->atol : &m->rtol) = json_number_value(x);
  }
  return get_path(v, "policy", base, m->policy, sizeof m->policy, at, d) < 0 ? -1 : 0;
}

/* "input_shape": {NAME: "1x3x224x224" or [1, 3, 224, 224]}, into m->shapes. */
static int get_shapes(json_t *v, batch_model *m, const char *at, mg_diags *d) {
  const char *name;
  json_t *s;
  if (!json_is_object(v)) {
    mg_error(d, INVALID, NULL, NULL, "%s: \"input_shape\" must be an object {INPUT: \"1x3x224x224\"}", at);
    return -1;
  }
  json_object_foreach(v, name, s) {
    char dims[256] = "";
    size_t k = 0, i;
    json_t *x;
    if (json_is_string(s)) snprintf(dims, sizeof dims, "%s", json_string_value(s));
    else if (json_is_array(s))
      json_array_foreach(s, i, x) {
        if (!json_is_integer(x) || k + 24 > sizeof dims) { dims[0] = '!'; break; }
        k += (size_t)snprintf(dims + k, sizeof dims - k, "%s%lld", i ? "x" : "", (long long)json_integer_value(x));
      }
    mg_shape shp;
    if (!*name || strchr(name, '=') || !dims[0] || mg_shape_parse(dims, &shp)) {
      mg_error(d, INVALID, NULL, NULL, "%s: input_shape \"%s\" must be dims like \"1x3x224x224\" or [1,3,224,224]",
               at, name);
      return -1;
    }
    if (m->n_shapes == BATCH_MAX_SHAPES) {
      mg_error(d, LIMIT, NULL, NULL, "%s: more than %d input shapes", at, BATCH_MAX_SHAPES);
      return -1;
    }
    size_t len = strlen(name) + strlen(dims) + 2;
    if (!(m->shapes[m->n_shapes] = malloc(len))) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      return -1;
    }
    snprintf(m->shapes[m->n_shapes++], len, "%s=%s", name, dims);
  }
  return 0;
}

/* A file the manifest names must be there (--check). */
static int need_file(const char *path, const char *key, const char *at, int folder_ok, mg_diags *d) {
  if (!path[0] || cli_is_file(path) || (folder_ok && cli_is_dir(path))) return 0;
  mg_error(d, IO, NULL, NULL, "%s: %s %s: %s", at, key, path, errno ? strerror(errno) : "not a regular file");
  return -1;
}

/* One entry of "models". */
static int read_model(json_t *o, int i, const char *base, int def_targets, int check, batch_model *m, mg_diags *d) {
  static const char *const keys[] = {"name", "onnx", "weights", "key", "input_shape", "reference", "targets",
                                     "tolerance", "grad", "timeout", NULL};
  char at[200];
  json_t *v;
  where(at, sizeof at, i, NULL);
  m->rtol = m->atol = -1;
  m->targets = def_targets;
  if (!json_is_object(o)) {
    mg_error(d, INVALID, NULL, NULL, "%s must be an object", at);
    return -1;
  }
  v = json_object_get(o, "name");
  if (!json_is_string(v) || !valid_name(json_string_value(v))) {
    mg_error(d, INVALID, NULL, NULL, "%s: \"name\" must be 1 to 100 of [A-Za-z0-9._-], not starting with '.', not a report file's name", at);
    return -1;
  }
  snprintf(m->name, sizeof m->name, "%s", json_string_value(v));
  where(at, sizeof at, i, m->name);
  if (only_keys(o, keys, at, d)) return -1;
  int r = get_path(o, "onnx", base, m->onnx, sizeof m->onnx, at, d);
  if (r == 0) mg_error(d, INVALID, NULL, NULL, "%s: \"onnx\" is required", at);
  if (r <= 0 || get_path(o, "weights", base, m->weights, sizeof m->weights, at, d) < 0 ||
      get_path(o, "key", NULL, m->key, sizeof m->key, at, d) < 0 ||
      get_path(o, "reference", base, m->reference, sizeof m->reference, at, d) < 0)
    return -1;
  if ((v = json_object_get(o, "input_shape")) && get_shapes(v, m, at, d)) return -1;
  if ((v = json_object_get(o, "targets")) && get_targets(v, &m->targets, at, d)) return -1;
  if ((v = json_object_get(o, "tolerance")) && get_tolerance(v, base, m, at, d)) return -1;
  if ((v = json_object_get(o, "grad"))) {
    if (!json_is_boolean(v)) {
      mg_error(d, INVALID, NULL, NULL, "%s: \"grad\" must be true or false", at);
      return -1;
    }
    m->grad = json_is_true(v);
  }
  if ((v = json_object_get(o, "timeout"))) {
    if (!json_is_number(v) || json_number_value(v) <= 0) {
      mg_error(d, INVALID, NULL, NULL, "%s: \"timeout\" must be a number of seconds > 0", at);
      return -1;
    }
    m->timeout = json_number_value(v);
  }
  if (m->reference[0] && !cli_is_dir(m->reference) && strlen(m->reference) > 4 &&
      strcmp(m->reference + strlen(m->reference) - 4, ".npz") && check) {
    mg_error(d, INVALID, NULL, NULL, "%s: reference %s is neither a torch_reference.py folder nor a .npz", at,
             m->reference);
    return -1;
  }
  errno = 0;
  if (check && (need_file(m->onnx, "onnx", at, 0, d) || need_file(m->weights, "weights", at, 0, d) ||
                need_file(m->reference, "reference", at, 1, d) || need_file(m->policy, "tolerance.policy", at, 0, d)))
    return -1;
  if (check && m->reference[0] && cli_is_dir(m->reference)) {
    char npz[PATH_MAX + 16];
    snprintf(npz, sizeof npz, "%s/ref.npz", m->reference);
    if (need_file(npz, "reference folder's", at, 0, d)) return -1;
  }
  return 0;
}

/* A new zeroed row at the end of out->models; 0, or -1 with an oom diagnostic. */
static int add_model(batch_manifest *out, int *cap, mg_diags *d) {
  if (out->n == *cap) {
    int nc = *cap ? 2 * *cap : 16;
    batch_model *nm = realloc(out->models, (size_t)nc * sizeof *nm);
    if (!nm) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      return -1;
    }
    out->models = nm, *cap = nc;
  }
  memset(&out->models[out->n++], 0, sizeof out->models[0]);
  return 0;
}

/* The manifest's "models", each checked, names distinct. */
static int read_manifest(json_t *root, const char *base, int def_targets, int check, batch_manifest *out, mg_diags *d) {
  static const char *const keys[] = {"version", "defaults", "models", NULL};
  static const char *const dkeys[] = {"targets", NULL};
  json_t *v, *models = json_object_get(root, "models");
  int cap = 0;
  if (!json_is_object(root) || only_keys(root, keys, "the manifest", d)) {
    if (!json_is_object(root)) mg_error(d, INVALID, NULL, NULL, "the manifest must be an object {\"models\": [...]}");
    return -1;
  }
  if ((v = json_object_get(root, "version")) && (!json_is_integer(v) || json_integer_value(v) != 1)) {
    mg_error(d, INVALID, NULL, NULL, "\"version\" must be 1");
    return -1;
  }
  if ((v = json_object_get(root, "defaults"))) {
    if (!json_is_object(v) || only_keys(v, dkeys, "defaults", d)) {
      if (!json_is_object(v)) mg_error(d, INVALID, NULL, NULL, "\"defaults\" must be an object {targets}");
      return -1;
    }
    int from_file = 0; /* checked either way; --targets (def_targets set) wins */
    if (json_object_get(v, "targets") && get_targets(json_object_get(v, "targets"), &from_file, "defaults", d))
      return -1;
    if (!def_targets) def_targets = from_file;
  }
  if (!json_is_array(models) || !json_array_size(models)) {
    mg_error(d, INVALID, NULL, NULL, "\"models\" must be a non-empty array");
    return -1;
  }
  size_t i;
  json_array_foreach(models, i, v) {
    if (add_model(out, &cap, d) || read_model(v, (int)i, base, def_targets, check, &out->models[out->n - 1], d))
      return -1;
    for (int k = 0; k < out->n - 1; k++)
      if (!strcmp(out->models[k].name, out->models[out->n - 1].name)) {
        mg_error(d, INVALID, NULL, NULL, "models[%zu]: name '%s' is also models[%d]'s (names are folder names)", i,
                 out->models[k].name, k);
        return -1;
      }
  }
  return 0;
}

/* The model name of a file found under the folder: its path below the folder without
 * ".onnx", '/' as '-', characters a name cannot have as '_'. */
static void name_of(const char *rel, char *out, size_t n) {
  size_t k = 0, len = strlen(rel) - 5;
  for (size_t i = 0; i < len && k + 1 < n; i++) {
    char c = rel[i];
    out[k++] = c == '/' ? '-' : valid_name((char[]){c, 0}) || c == '.' ? c : '_';
  }
  out[k] = 0;
  if (out[0] == '.') out[0] = '_';
}

/* qsort order of models: by name. */
static int cmp_model(const void *a, const void *b) {
  return strcmp(((const batch_model *)a)->name, ((const batch_model *)b)->name);
}

/* Every *.onnx below root/rel (depth-first), with a .pth or .safetensors of the same
 * stem beside it. */
static int scan(const char *root, const char *rel, int targets, batch_manifest *out, int *cap, int depth,
                mg_diags *d) {
  char dir[PATH_MAX];
  if (depth > 16 || resolve(root, rel, dir, sizeof dir)) return 0;
  DIR *dp = opendir(dir);
  if (!dp) {
    mg_error(d, IO, NULL, NULL, "cannot read folder %s: %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(dp))) {
    char sub[PATH_MAX], full[PATH_MAX];
    if (e->d_name[0] == '.') continue;
    if (snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name) >= (int)sizeof sub ||
        resolve(root, sub, full, sizeof full))
      continue;
    size_t len = strlen(sub);
    if (cli_is_dir(full)) rc = scan(root, sub, targets, out, cap, depth + 1, d);
    else if (len > 5 && !strcmp(sub + len - 5, ".onnx") && !(rc = add_model(out, cap, d))) {
      batch_model *m = &out->models[out->n - 1];
      m->rtol = m->atol = -1;
      m->targets = targets;
      name_of(sub, m->name, sizeof m->name);
      snprintf(m->onnx, sizeof m->onnx, "%s", full);
      static const char *const ext[] = {".pth", ".safetensors"};
      for (int k = 0; k < 2 && !m->weights[0]; k++) {
        snprintf(m->weights, sizeof m->weights, "%.*s%s", (int)(strlen(full) - 5), full, ext[k]);
        if (!cli_is_file(m->weights)) m->weights[0] = 0;
      }
    }
  }
  closedir(dp);
  return rc;
}

int batch_manifest_load(const char *path, int default_targets, int check_files, batch_manifest *out, mg_diags *d) {
  memset(out, 0, sizeof *out);
  snprintf(out->path, sizeof out->path, "%s", path);
  d->file = out->path;
  if (cli_is_dir(path)) {
    int cap = 0;
    if (scan(path, "", default_targets ? default_targets : BT_CPU, out, &cap, 0, d)) return -1;
    qsort(out->models, (size_t)out->n, sizeof *out->models, cmp_model);
    for (int i = 1; i < out->n; i++)
      if (!strcmp(out->models[i].name, out->models[i - 1].name)) {
        mg_error(d, INVALID, NULL, NULL, "two models take the name '%s'", out->models[i].name);
        return -1;
      }
    if (!out->n) mg_error(d, INVALID, NULL, NULL, "no *.onnx file under the folder");
    return out->n ? 0 : -1;
  }
  json_error_t e;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
  if (!root) {
    if (e.line > 0) mg_error(d, MALFORMED, NULL, NULL, "line %d, column %d: %s", e.line, e.column, e.text);
    else mg_error(d, IO, NULL, NULL, "%s", e.text);
    return -1;
  }
  char base[PATH_MAX];
  const char *slash = strrchr(path, '/');
  snprintf(base, sizeof base, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
  if (!base[0]) snprintf(base, sizeof base, "/");
  int rc = read_manifest(root, base, default_targets, check_files, out, d);
  for (int i = 0; i < out->n; i++) /* neither --targets, nor defaults, nor the model's own */
    if (!out->models[i].targets) out->models[i].targets = BT_CPU;
  json_decref(root);
  return rc;
}

void batch_manifest_free(batch_manifest *m) {
  for (int i = 0; i < m->n; i++)
    for (int k = 0; k < m->models[i].n_shapes; k++) free(m->models[i].shapes[k]);
  free(m->models);
  m->models = NULL;
  m->n = 0;
}
