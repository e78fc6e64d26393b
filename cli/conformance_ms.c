/* The conformance runner's mindspore-emu backend: every queued test is converted
 * as `migc convert --target mindspore` converts it (the MindSpore emitter of
 * cli/mindspore_step.c writes OUTDIR/mindspore/net.py, the checkpoint writer
 * OUTDIR/model.ckpt, each test in its own folder tN of the work folder), then the
 * nets are run through the strict MindSpore stand-in (tests/mindspore_standin) by
 * tools/ms_emu_run.py, a few Python processes each running many tests, and every
 * output is compared with conf_compare, as the other backends compare. */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "codegen.h"
#include "conformance.h"
#include "export.h"
#include "mapping.h"
#include "mindspore_step.h"
#include "onnx_import.h"
#include "passes.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

enum { MS_MAX_JOBS = 64 };

typedef struct {
  char *name;       /* test name */
  int id;           /* folder t<id> */
  int has_ckpt;     /* t<id>/model.ckpt was written (the model has parameters) */
  int n_in, n_out;
  char **in_names;  /* run-time inputs (bound ones removed), graph order */
  int n_sets;
  mg_array **ins;   /* per set: n_in arrays in in_names order */
  mg_array **exps;  /* per set: expected outputs */
  int *n_exps;
} ms_test;

struct conf_ms {
  char work[4096];
  int keep, jobs, made_tmp;
  rule_set *rs[MAP_TARGET_COUNT];
  wt_rules *names;  /* rules/torch_mindspore.xml: the checkpoint's naming contract */
  ms_test *tests;
  int n, cap, next_id;
};

conf_ms *conf_ms_new(const char *work_dir, int keep, int jobs) {
  conf_ms *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->keep = keep;
  q->jobs = jobs > 0 ? jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (q->jobs < 1) q->jobs = 1;
  if (q->jobs > MS_MAX_JOBS) q->jobs = MS_MAX_JOBS;
  mg_diags d;
  mg_diags_init(&d);
  char builtin[PATH_MAX];
  const char *dir = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  snprintf(builtin, sizeof builtin, "%s/torch_mindspore.xml", dir);
  if (cli_coverage_rules(q->rs, &d) || !(q->names = wt_rules_new()) || wt_rules_load(q->names, builtin, &d)) {
    cli_report(&d);
    mg_diags_free(&d);
    for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(q->rs[t]);
    wt_rules_free(q->names);
    free(q);
    return NULL;
  }
  mg_diags_free(&d);
  if (work_dir) {
    snprintf(q->work, sizeof q->work, "%s", work_dir);
    if (mkdir(q->work, 0777) && errno != EEXIST) {
      fprintf(stderr, "migc conformance: cannot create %s: %s\n", q->work, strerror(errno));
      q->work[0] = 0;
    }
  } else {
    snprintf(q->work, sizeof q->work, "/tmp/migc-conformance-ms-XXXXXX");
    if (!mkdtemp(q->work)) {
      fprintf(stderr, "migc conformance: cannot create a work folder: %s\n", strerror(errno));
      q->work[0] = 0;
    }
    q->made_tmp = 1;
  }
  if (!q->work[0]) {
    for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(q->rs[t]);
    wt_rules_free(q->names);
    free(q);
    return NULL;
  }
  return q;
}

/* The first diagnostic with code `code` and severity sev (any when sev < 0) among
 * d->items[first..], or NULL. */
static const mg_diag *diag_find(const mg_diags *d, size_t first, mg_diag_code code, int sev) {
  for (size_t i = first; i < d->count; i++)
    if (d->items[i].code == code && (sev < 0 || (int)d->items[i].severity == sev)) return &d->items[i];
  return NULL;
}

/* A skip's reason: what, then the op and node of diagnostic g and its message
 * without the "mindspore: " prefix. */
static void skip_reason(char *why, size_t wn, const char *what, const mg_diag *g) {
  const char *m = g && g->message ? g->message : "?";
  if (!strncmp(m, "mindspore: ", 11)) m += 11;
  snprintf(why, wn, "%s: %s '%s': %s", what, g && g->op ? g->op : "?", g && g->node ? g->node : "?", m);
}

/* Imports model_path for the MindSpore target with the shape-deciding integer
 * inputs bound to set 0's values and unknown input dims fixed from set 0 (a test
 * runs one shape), prepared as convert prepares the MindSpore copy (parameter
 * paths kept). The model, or NULL with *r and why set. bound[] as
 * conf_bind_int_inputs; ov and n_ov the overrides used (free with conf_free_shapes). */
static mg_model *import_for_ms(const char *model_path, const mg_array *in0, int n_in0, char *bound,
                               mg_shape_override *ov, int *n_ov, result *r, char *why, size_t wn) {
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  *n_ov = 0;
  int bad = onnx_import(model_path, &d, &m) != 0;
  if (!bad) {
    m->derive_shapes_only = 1;
    m->keep_param_paths = 1;
    bad = m->graph->n_inputs > 64 || conf_bind_int_inputs(m, in0, n_in0, bound) < 0 ||
          (*n_ov = conf_data_shapes(m, in0, n_in0, ov)) < 0 || mg_prepare(m, ov, *n_ov, &d);
    if (*n_ov < 0) *n_ov = 0;
  }
  if (bad) {
    const char *u = conf_unsupported_reason(&d);
    char line[1024] = "";
    if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
    snprintf(why, wn, "%s", u ? u : line[0] ? line : "out of memory");
    *r = u ? R_SKIP : R_FAIL;
    mg_model_free(m);
    m = NULL;
  }
  mg_diags_free(&d);
  return m;
}

/* Writes t<id>/model.ckpt and t<id>/mindspore/ for prepared m, as convert does.
 * R_PASS when the net was written and computes every node itself; else the skip
 * or failure with why. *has_ckpt: a checkpoint was written. */
static result convert_ms(conf_ms *q, mg_model *m, const char *model_path, const char *outdir, int *has_ckpt,
                         char *why, size_t wn) {
  mg_diags d;
  mg_diags_init(&d);
  wt_source *src = NULL;
  wt_binding *b = NULL;
  int nb = 0;
  result r = R_PASS;
  char ckpt[4300], map[4300], msdir[4300];
  snprintf(ckpt, sizeof ckpt, "%s/model.ckpt", outdir);
  snprintf(map, sizeof map, "%s/weight_map.json", outdir);
  snprintf(msdir, sizeof msdir, "%s/mindspore", outdir);
  wt_export_opts eo = {.to_float = MG_UNDEFINED, .force = 1, .source_label = model_path, .graph_label = model_path};
  wt_export_stats st;
  mg_model *copy = NULL;
  ms_report rep;
  int erc = -1;
  *has_ckpt = 0;
  if (onnx_weights_open(m, &src, &d) || wt_bind(src, m, &b, &nb, &d) ||
      (erc = wt_export_ckpt(src, q->names, m, b, nb, ckpt, map, &eo, &st, &d)) < 0 || !(copy = mg_model_clone(m)) ||
      cli_emit_mindspore(copy, m, src, b, nb, q->names, q->rs[MAP_TARGET_MINDSPORE], msdir, MG_F32, &rep, &d)) {
    char line[1024] = "";
    if (d.count) mg_diag_format(&d.items[d.count - 1], line, sizeof line);
    snprintf(why, wn, "conversion failed: %s", line[0] ? line : "out of memory");
    r = R_FAIL;
  } else if (rep.n_unsupported || rep.n_custom) {
    /* the unsupported nodes are errors, the ops.Custom ones warnings */
    const int n = rep.n_unsupported ? rep.n_unsupported : rep.n_custom;
    char what[64];
    snprintf(what, sizeof what, "%d node%s %s, first", n, n == 1 ? "" : "s",
             rep.n_unsupported ? "net.py cannot compute" : "run as ops.Custom CPU kernels");
    skip_reason(why, wn, what,
                diag_find(&d, 0, MG_D_UNSUPPORTED, rep.n_unsupported ? MG_SEV_ERROR : MG_SEV_WARNING));
    r = R_SKIP;
  }
  *has_ckpt = erc == 0;
  mg_model_free(copy); /* before m, whose data it shares */
  mg_free(b);
  wt_close(src);
  mg_diags_free(&d);
  return r;
}

/* Frees every set's inputs and expected outputs (the queue did not take them). */
static void free_sets(mg_array **ins, int *n_ins, mg_array **exps, int *n_exps, int n_sets) {
  for (int s = 0; s < n_sets; s++) {
    mg_arrays_free(ins[s], n_ins[s]);
    mg_arrays_free(exps[s], n_exps[s]);
  }
}

/* Frees what test t owns (not t itself). */
static void free_test(ms_test *t) {
  for (int s = 0; s < t->n_sets; s++) {
    mg_arrays_free(t->ins[s], t->n_in);
    mg_arrays_free(t->exps[s], t->n_exps[s]);
  }
  for (int i = 0; i < t->n_in && t->in_names; i++) free(t->in_names[i]);
  free(t->in_names);
  free(t->ins);
  free(t->exps);
  free(t->n_exps);
  free(t->name);
}

/* Whether set s can run on the net converted for set 0: its bound inputs hold set
 * 0's values and its overridden inputs have set 0's shapes. */
static int set_matches(const ms_test *t, mg_array *const *ins, const int *n_ins, int s, const mg_shape_override *ov,
                       int n_ov) {
  for (int j = 0; j < n_ins[s]; j++) {
    const mg_array *a = &ins[s][j];
    int runtime = 0;
    for (int i = 0; i < t->n_in; i++) runtime |= a->name && !strcmp(t->in_names[i], a->name);
    for (int k = 0; k < n_ins[0] && !runtime; k++)
      if (a->name && ins[0][k].name && !strcmp(a->name, ins[0][k].name) &&
          (a->nbytes != ins[0][k].nbytes || memcmp(a->data, ins[0][k].data, a->nbytes)))
        return 0;
    for (int k = 0; k < n_ov; k++)
      if (a->name && !strcmp(a->name, ov[k].name)) {
        if (a->rank != ov[k].shape.rank) return 0;
        for (int r = 0; r < a->rank; r++)
          if (a->dims[r] != ov[k].shape.d[r].v) return 0;
      }
  }
  return 1;
}

void conf_ms_queue(conf_ctx *cc, conf_ms *q, const char *name, const char *model_path, mg_array **ins, int *n_ins,
                   mg_array **exps, int *n_exps, int n_sets) {
  char why[2048] = "", bound[64] = {0}, outdir[4200];
  result r = R_PASS;
  mg_shape_override ov[64];
  int n_ov = 0, has_ckpt = 0;
  mg_model *m = import_for_ms(model_path, ins[0], n_ins[0], bound, ov, &n_ov, &r, why, sizeof why);
  ms_test t = {0};
  t.id = q->next_id++;
  snprintf(outdir, sizeof outdir, "%s/t%d", q->work, t.id);
  for (int i = 0; m && r == R_PASS && i < m->graph->n_inputs + m->graph->n_outputs; i++) {
    const mg_value *v = i < m->graph->n_inputs ? m->graph->inputs[i] : m->graph->outputs[i - m->graph->n_inputs];
    if (v->dtype == MG_STRING) {
      r = R_SKIP;
      snprintf(why, sizeof why, "string inputs and outputs: a mindspore.Tensor holds numbers only");
    } else if (v->dtype == MG_BF16) {
      r = R_SKIP;
      snprintf(why, sizeof why, "bfloat16 inputs and outputs: the stand-in's Tensor.asnumpy() and .npy files "
                                "cannot hold them");
    }
  }
  if (m && r == R_PASS && mkdir(outdir, 0777) && errno != EEXIST) {
    r = R_FAIL;
    snprintf(why, sizeof why, "cannot create %.1000s: %s", outdir, strerror(errno));
  }
  if (m && r == R_PASS) r = convert_ms(q, m, model_path, outdir, &has_ckpt, why, sizeof why);
  if (m && r == R_PASS) {
    mg_graph *g = m->graph;
    t.n_in = g->n_inputs;
    t.n_out = g->n_outputs;
    t.has_ckpt = has_ckpt;
    t.in_names = calloc((size_t)t.n_in + 1, sizeof(char *));
    for (int i = 0; t.in_names && i < t.n_in; i++) t.in_names[i] = strdup(g->inputs[i]->name);
    if (!t.in_names) r = R_FAIL, snprintf(why, sizeof why, "out of memory");
  }
  mg_model_free(m);
  if (r != R_PASS) {
    conf_report(cc, name, r, why);
    free_sets(ins, n_ins, exps, n_exps, n_sets);
    free_test(&t);
    conf_free_shapes(ov, n_ov);
    return;
  }
  /* the sets this net can run, inputs in run-time order */
  t.name = strdup(name);
  t.ins = calloc((size_t)n_sets, sizeof *t.ins);
  t.exps = calloc((size_t)n_sets, sizeof *t.exps);
  t.n_exps = calloc((size_t)n_sets, sizeof *t.n_exps);
  for (int s = 0; s < n_sets; s++) {
    mg_array *ordered = t.ins && t.exps && t.n_exps && set_matches(&t, ins, n_ins, s, ov, n_ov)
                            ? mg_calloc((size_t)t.n_in + 1, sizeof(mg_array))
                            : NULL;
    int ok = ordered != NULL;
    for (int i = 0; ok && i < t.n_in; i++) {
      int found = 0;
      for (int j = 0; j < n_ins[s] && !found; j++)
        if (ins[s][j].name && !strcmp(ins[s][j].name, t.in_names[i])) {
          ordered[i] = ins[s][j];
          memset(&ins[s][j], 0, sizeof ins[s][j]);
          found = 1;
        }
      ok = found;
    }
    mg_arrays_free(ins[s], n_ins[s]);
    if (!ok) {
      if (ordered) mg_arrays_free(ordered, t.n_in);
      mg_arrays_free(exps[s], n_exps[s]);
      continue;
    }
    t.ins[t.n_sets] = ordered;
    t.exps[t.n_sets] = exps[s];
    t.n_exps[t.n_sets] = n_exps[s];
    t.n_sets++;
  }
  conf_free_shapes(ov, n_ov);
  if (q->n == q->cap) {
    int cap = q->cap ? q->cap * 2 : 256;
    ms_test *p = realloc(q->tests, sizeof *q->tests * (size_t)cap);
    if (!p) {
      conf_report(cc, name, R_FAIL, "out of memory");
      free_test(&t);
      return;
    }
    q->tests = p, q->cap = cap;
  }
  q->tests[q->n++] = t;
}

/* Writes every set's inputs as .npy and the manifests of the Python processes
 * (tools/ms_emu_run.py's format: KEY, net folder, checkpoint or '-', output
 * folder, then the input files, tab-separated), test i to manifest i mod jobs.
 * A set whose inputs cannot be written is reported in `bad` (R_SKIP with why). */
static int write_manifests(conf_ms *q, int jobs, char **bad) {
  FILE *mf[MS_MAX_JOBS];
  char path[4400];
  for (int j = 0; j < jobs; j++) {
    snprintf(path, sizeof path, "%s/manifest.%d", q->work, j);
    if (!(mf[j] = fopen(path, "w"))) {
      while (j--) fclose(mf[j]);
      return -1;
    }
  }
  for (int i = 0; i < q->n; i++) {
    ms_test *t = &q->tests[i];
    for (int s = 0; s < t->n_sets && !bad[i]; s++) {
      char io[4300];
      snprintf(io, sizeof io, "%s/t%d/io%d", q->work, t->id, s);
      mkdir(io, 0777);
      FILE *f = mf[i % jobs];
      fprintf(f, "t%d_%d\t%s/t%d/mindspore\t", t->id, s, q->work, t->id);
      if (t->has_ckpt) fprintf(f, "%s/t%d/model.ckpt\t", q->work, t->id);
      else fprintf(f, "-\t");
      fprintf(f, "%s", io);
      for (int k = 0; k < t->n_in; k++) {
        mg_diags d;
        mg_diags_init(&d);
        snprintf(path, sizeof path, "%s/in_%d.npy", io, k);
        if (npy_write_file(path, &t->ins[s][k], &d)) {
          char w[256];
          snprintf(w, sizeof w, "input '%s' cannot be written as .npy", t->in_names[k]);
          bad[i] = strdup(w);
        }
        mg_diags_free(&d);
        fprintf(f, "\t%s", path);
      }
      fprintf(f, "\n");
    }
  }
  int rc = 0;
  for (int j = 0; j < jobs; j++) rc |= fclose(mf[j]) != 0;
  return rc ? -1 : 0;
}

/* Starts `python tools/ms_emu_run.py MANIFEST RESULTS` with the stand-in on
 * PYTHONPATH, its output to LOG; the child's pid, or -1. */
static pid_t start_python(const char *manifest, const char *results, const char *log) {
  char script[PATH_MAX], standin[PATH_MAX];
  snprintf(script, sizeof script, "%s/tools/ms_emu_run.py", cg_source_dir());
  snprintf(standin, sizeof standin, "%s/tests/mindspore_standin", cg_source_dir());
  const char *py = getenv("MIGC_PYTHON") && *getenv("MIGC_PYTHON") ? getenv("MIGC_PYTHON") : "/usr/bin/python3";
  pid_t pid = fork();
  if (pid) return pid;
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    close(fd);
  }
  setenv("PYTHONPATH", standin, 1);
  setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
  execl(py, py, script, manifest, results, (char *)NULL);
  _exit(127);
}

/* One line of a results file: KEY, then OK or ERR and a message. */
typedef struct {
  char *key, *msg;
  int ok;
} ms_result;

/* Appends the lines of results file path to out[0..n) (grown, cap its size); 0, or
 * -1 when the file cannot be read (the process stopped before writing it). */
static int read_results(const char *path, ms_result **out, int *n, int *cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    char *tab = strchr(line, '\t');
    if (!tab) continue;
    *tab = 0;
    char *st = tab + 1, *msg = strchr(st, '\t');
    if (msg) *msg++ = 0;
    if (*n == *cap) {
      int c2 = *cap ? *cap * 2 : 1024;
      ms_result *p = realloc(*out, sizeof **out * (size_t)c2);
      if (!p) break;
      *out = p, *cap = c2;
    }
    (*out)[*n].key = strdup(line);
    (*out)[*n].msg = strdup(msg ? msg : "");
    (*out)[*n].ok = !strcmp(st, "OK");
    (*n)++;
  }
  fclose(f);
  return 0;
}

/* The result of KEY key, or NULL. */
static const ms_result *find_result(const ms_result *res, int n, const char *key) {
  for (int i = 0; i < n; i++)
    if (!strcmp(res[i].key, key)) return &res[i];
  return NULL;
}

/* Compares test t's outputs (t<id>/io<s>/out_K.npy) with the expected ones. */
static void judge(conf_ctx *cc, conf_ms *q, const ms_test *t, const ms_result *res, int n_res) {
  char why[2048] = "";
  result r = R_PASS;
  for (int s = 0; s < t->n_sets && r == R_PASS; s++) {
    char key[64];
    snprintf(key, sizeof key, "t%d_%d", t->id, s);
    const ms_result *x = find_result(res, n_res, key);
    if (!x) {
      snprintf(why, sizeof why, "the stand-in process stopped before this test (see log.N in the work folder; --keep keeps it)");
      r = R_FAIL;
      break;
    }
    if (!x->ok) {
      snprintf(why, sizeof why, "stand-in: %s", x->msg);
      r = R_FAIL;
      break;
    }
    for (int k = 0; k < t->n_exps[s] && r == R_PASS; k++) {
      char path[4300];
      snprintf(path, sizeof path, "%s/t%d/io%d/out_%d.npy", q->work, t->id, s, k);
      mg_array got;
      mg_diags d;
      mg_diags_init(&d);
      if (npy_read_file(path, &got, &d)) {
        r = R_FAIL;
        snprintf(why, sizeof why, "output %d was not written", k);
      } else {
        char w[900];
        if (conf_compare(cc, &got, &t->exps[s][k], w, sizeof w)) {
          snprintf(why, sizeof why, "output %d: %s", k, w);
          r = R_FAIL;
        }
        mg_array_free(&got);
      }
      mg_diags_free(&d);
    }
  }
  if (r == R_PASS && !t->n_sets) r = R_SKIP, snprintf(why, sizeof why, "no test set fits the converted net");
  conf_report(cc, t->name, r, why);
}

/* nftw callback: removes one entry of the work folder. */
static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

void conf_ms_finish(conf_ctx *cc, conf_ms *q) {
  int jobs = q->n < q->jobs ? (q->n ? q->n : 1) : q->jobs;
  char **bad = calloc((size_t)q->n + 1, sizeof *bad);
  ms_result *res = NULL;
  int n_res = 0, cap_res = 0;
  if (q->n && bad && !write_manifests(q, jobs, bad)) {
    pid_t pids[MS_MAX_JOBS];
    fprintf(stderr, "conformance: running %d MindSpore nets through the stand-in in %s (%d processes)\n", q->n,
            q->work, jobs);
    for (int j = 0; j < jobs; j++) {
      char man[4300], out[4300], log[4300];
      snprintf(man, sizeof man, "%s/manifest.%d", q->work, j);
      snprintf(out, sizeof out, "%s/results.%d", q->work, j);
      snprintf(log, sizeof log, "%s/log.%d", q->work, j);
      pids[j] = start_python(man, out, log);
    }
    for (int j = 0; j < jobs; j++) {
      int st;
      if (pids[j] > 0) waitpid(pids[j], &st, 0);
      char out[4300];
      snprintf(out, sizeof out, "%s/results.%d", q->work, j);
      read_results(out, &res, &n_res, &cap_res);
    }
    for (int i = 0; i < q->n; i++) {
      if (bad[i]) conf_report(cc, q->tests[i].name, R_SKIP, bad[i]);
      else judge(cc, q, &q->tests[i], res, n_res);
    }
  } else {
    for (int i = 0; i < q->n; i++)
      conf_report(cc, q->tests[i].name, R_FAIL, "cannot write the stand-in's manifests in the work folder");
  }
  for (int i = 0; i < n_res; i++) free(res[i].key), free(res[i].msg);
  free(res);
  for (int i = 0; i < q->n; i++) free(bad ? bad[i] : NULL), free_test(&q->tests[i]);
  free(bad);
  free(q->tests);
  for (int t = 0; t < MAP_TARGET_COUNT; t++) rules_free(q->rs[t]);
  wt_rules_free(q->names);
  if (q->made_tmp && !q->keep) nftw(q->work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  else fprintf(stderr, "conformance: the nets are in %s\n", q->work);
  free(q);
}
