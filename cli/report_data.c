/* The batch report: every OUTDIR/<name>/result.json of one or more batch folders
 * (shards of one manifest) merged into one report.json (docs/batch-report.schema.json),
 * from which report.md, report.html (report_html.c) and junit.xml are made. Models
 * are sorted by name and volatile figures stay under "measurements", so that the
 * report of merged shards equals the report of one run, timings aside. */
#include "batch.h"
#include "junit.h"
#include "writer.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* qsort order of result objects: by "name". */
static int by_name(const void *a, const void *b) {
  return strcmp(batch_str(*(json_t *const *)a, "name", ""), batch_str(*(json_t *const *)b, "name", ""));
}

/* Adds DIR/<name>/result.json of every subfolder to models (name -> result). */
static int load_dir(const char *dir, json_t *models, mg_diags *d) {
  DIR *dp = opendir(dir);
  if (!dp) {
    mg_error(d, IO, dir, NULL, "cannot read the batch folder: %s", strerror(errno));
    return -1;
  }
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(dp))) {
    char p[PATH_MAX];
    if (e->d_name[0] == '.' || snprintf(p, sizeof p, "%s/%s/result.json", dir, e->d_name) >= (int)sizeof p) continue;
    struct stat st;
    if (stat(p, &st)) continue;
    json_error_t je;
    json_t *r = json_load_file(p, 0, &je);
    const char *name = batch_str(r, "name", NULL);
    if (!r || !name || !json_is_object(json_object_get(r, "targets"))) {
      mg_error(d, MALFORMED, p, NULL, "not a batch result: %s", r ? "no name or targets" : je.text);
      rc = -1;
    } else if (json_object_get(models, name)) {
      mg_error(d, INVALID, p, NULL, "model '%s' is in two of the folders (shards must not overlap)", name);
      rc = -1;
    }
    if (!rc) json_object_set(models, name, r);
    json_decref(r);
  }
  closedir(dp);
  return rc;
}

/* A model DIR/batch.json lists but that has no result (its shard was killed and not
 * resumed): failed, "missing". */
static void add_missing(const char *dir, json_t *models) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s/batch.json", dir);
  json_t *b = json_load_file(p, 0, NULL), *n;
  size_t i;
  json_array_foreach(json_object_get(b, "models"), i, n) {
    const char *name = json_string_value(n);
    if (name && !json_object_get(models, name))
      json_object_set_new(models, name, json_pack("{s:s,s:s,s:s,s:{}}", "name", name, "status", "fail", "reason",
                                                  "missing: listed in batch.json, no result.json (rerun with --resume)",
                                                  "targets"));
  }
  json_decref(b);
}

/* The per-target summary and blocking ops over the sorted models. */
static void summarise(json_t *rep, json_t *list) {
  json_t *by = json_object(), *blocking = json_object(), *targets = json_array();
  int passed = 0;
  size_t i;
  json_t *m;
  for (int t = 0; t < 3; t++) {
    const char *tn = batch_target_names[t];
    int n = 0, conv = 0, pp = 0, pf = 0, none = 0;
    double rate = 0;
    json_t *ops = json_object(); /* op -> [models] */
    json_array_foreach(list, i, m) {
      json_t *r = json_object_get(json_object_get(m, "targets"), tn), *o;
      if (!r) continue;
      size_t k;
      n++;
      rate += json_number_value(json_object_get(r, "converted_rate"));
      conv += json_array_size(json_object_get(r, "blocking_ops")) == 0 && json_object_get(r, "converted_rate");
      const char *par = batch_str(r, "parity", "none");
      pp += !strcmp(par, "pass"), pf += !strcmp(par, "fail") || !strcmp(par, "error"), none += !strcmp(par, "none");
      json_array_foreach(json_object_get(r, "blocking_ops"), k, o) {
        const char *op = batch_str(o, "op", "?");
        if (!json_object_get(ops, op)) json_object_set_new(ops, op, json_array());
        json_array_append(json_object_get(ops, op), json_object_get(m, "name"));
      }
    }
    if (!n) {
      json_decref(ops);
      continue;
    }
    json_array_append_new(targets, json_string(tn));
    json_object_set_new(by, tn, json_pack("{s:i,s:i,s:f,s:f,s:i,s:i,s:i}", "models", n, "converted", conv,
                                          "converted_rate", (double)conv / n, "mean_node_rate", rate / n,
                                          "parity_pass", pp, "parity_fail", pf, "no_reference", none));
    /* the ops that block the most models first, then by name */
    json_t *bl = json_array(), *v;
    const char *op;
    json_object_foreach(ops, op, v) json_array_append_new(bl, json_pack("{s:s,s:i,s:O}", "op", op, "models_blocked",
                                                                        (int)json_array_size(v), "models", v));
    size_t nb = json_array_size(bl);
    for (size_t a = 0; a < nb; a++)
      for (size_t c = a + 1; c < nb; c++) {
        json_t *x = json_array_get(bl, a), *y = json_array_get(bl, c);
        int dx = (int)json_integer_value(json_object_get(x, "models_blocked"));
        int dy = (int)json_integer_value(json_object_get(y, "models_blocked"));
        if (dy > dx || (dy == dx && strcmp(batch_str(y, "op", ""), batch_str(x, "op", "")) < 0)) {
          json_incref(x), json_incref(y);
          json_array_set_new(bl, a, y), json_array_set_new(bl, c, x);
        }
      }
    json_object_set_new(blocking, tn, bl);
    json_decref(ops);
  }
  json_array_foreach(list, i, m) passed += !strcmp(batch_str(m, "status", ""), "pass");
  json_object_set_new(rep, "targets", targets);
  json_object_set_new(rep, "summary", json_pack("{s:i,s:i,s:i,s:o}", "models", (int)json_array_size(list), "passed",
                                                passed, "failed", (int)json_array_size(list) - passed, "by_target", by));
  json_object_set_new(rep, "blocking_ops", blocking);
}

json_t *report_build(const char *const *dirs, int n, mg_diags *d) {
  json_t *models = json_object(), *src = json_array();
  for (int i = 0; i < n; i++) {
    if (load_dir(dirs[i], models, d)) {
      json_decref(models), json_decref(src);
      return NULL;
    }
    json_array_append_new(src, json_string(dirs[i]));
  }
  for (int i = 0; i < n; i++) add_missing(dirs[i], models);
  size_t count = json_object_size(models), k = 0;
  if (!count) {
    mg_error(d, INVALID, dirs[0], NULL, "no OUTDIR/<name>/result.json in %s%s", n > 1 ? "any of the folders" : "the folder",
             n > 1 ? "" : " (run `migc batch` first)");
    json_decref(models), json_decref(src);
    return NULL;
  }
  json_t **arr = malloc(count * sizeof *arr), *v;
  const char *key;
  if (!arr) {
    json_decref(models), json_decref(src);
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return NULL;
  }
  json_object_foreach(models, key, v) arr[k++] = v;
  qsort(arr, count, sizeof *arr, by_name);
  json_t *list = json_array();
  for (k = 0; k < count; k++) json_array_append(list, arr[k]);
  free(arr);
  json_decref(models);
  json_t *rep = json_pack("{s:s,s:i,s:o}", "tool", "migc report", "version", 1, "sources", src);
  summarise(rep, list);
  json_object_set_new(rep, "models", list);
  return rep;
}

int report_exit_status(json_t *report) {
  return json_integer_value(json_object_get(json_object_get(report, "summary"), "failed")) ? 1 : 0;
}

/* junit.xml: one testcase per model and target, the reason as the failure message. */
static int write_junit(json_t *rep, const char *path, mg_diags *d) {
  json_t *list = json_object_get(rep, "models"), *m;
  size_t n = 0, i;
  json_array_foreach(list, i, m) n += json_object_size(json_object_get(m, "targets")) ? json_object_size(json_object_get(m, "targets")) : 1;
  junit_case *cases = calloc(n + 1, sizeof *cases);
  char (*names)[200] = calloc(n + 1, sizeof *names), (*cls)[32] = calloc(n + 1, sizeof *cls);
  if (!cases || !names || !cls) {
    free(cases), free(names), free(cls);
    mg_error(d, OOM, NULL, NULL, "out of memory for the JUnit report");
    return -1;
  }
  size_t k = 0;
  double total = 0;
  json_array_foreach(list, i, m) {
    json_t *tg = json_object_get(m, "targets"), *r;
    const char *tn;
    double secs = json_number_value(json_object_get(json_object_get(m, "measurements"), "total_s"));
    total += secs;
    if (!json_object_size(tg)) { /* a missing model: one case, failed */
      snprintf(names[k], sizeof names[k], "%s", batch_str(m, "name", "?"));
      cases[k] = (junit_case){names[k], "migc.batch", JUNIT_FAILURE, batch_str(m, "reason", "failed"), "missing", NULL, 0};
      k++;
      continue;
    }
    json_object_foreach(tg, tn, r) {
      int pass = !strcmp(batch_str(r, "status", ""), "pass");
      snprintf(names[k], sizeof names[k], "%s %s", batch_str(m, "name", "?"), tn);
      snprintf(cls[k], sizeof cls[k], "migc.batch.%s", tn);
      const char *par = batch_str(r, "parity", "none");
      cases[k] = (junit_case){names[k], cls[k], pass ? JUNIT_PASS : JUNIT_FAILURE,
                              pass ? NULL : batch_str(r, "reason", "failed"),
                              !strcmp(par, "fail") ? "parity" : json_array_size(json_object_get(r, "blocking_ops")) ? "not-converted" : "failed",
                              NULL, secs / (double)json_object_size(tg)};
      k++;
    }
  }
  int rc = junit_write(path, "migc batch", cases, (int)k, total, d);
  free(cases), free(names), free(cls);
  return rc;
}

int report_write_all(json_t *report, const char *outdir, const char *junit, mg_diags *d) {
  char path[PATH_MAX];
  if (cg_mkdirs(outdir)) {
    mg_error(d, IO, outdir, NULL, "cannot create the folder: %s", strerror(errno));
    return -1;
  }
  char *md = report_markdown(report), *html = report_html(report);
  snprintf(path, sizeof path, "%s/junit.xml", outdir);
  int rc = !md || !html || batch_write_json(outdir, "report.json", report, d) ||
                   cg_write_text(d, outdir, "report.md", md) || cg_write_text(d, outdir, "report.html", html) ||
                   write_junit(report, path, d) || (junit && write_junit(report, junit, d))
               ? -1
               : 0;
  if (!md || !html) mg_error(d, OOM, NULL, NULL, "out of memory for the report");
  free(md), free(html);
  return rc;
}
