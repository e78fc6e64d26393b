/* One model of a batch, in its own process (cmd_batch.c forks it): `migc convert`
 * for its targets, then per target the build (cpu: make; ascend: make emu) and,
 * with a reference, `migc verify --backend c|ascend-emu|mindspore-emu`. Each step
 * is a child process (migc itself, or make), its output kept in
 * OUTDIR/<name>/logs/, so that a crash or a failed step becomes a reason in
 * result.json and the batch goes on. result.json is written last, atomically: a
 * model whose result exists is finished. */
#include "batch.h"
#include "cli.h"
#include "verify_cli.h"
#include "writer.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Monotonic seconds, for step times. */
static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

const char *batch_str(json_t *o, const char *key, const char *def) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : def;
}

int batch_write_json(const char *dir, const char *name, json_t *j, mg_diags *d) {
  char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (!text) {
    mg_error(d, OOM, NULL, NULL, "out of memory writing %s/%s", dir, name);
    return -1;
  }
  size_t n = strlen(text);
  char *withnl = realloc(text, n + 2);
  if (withnl) withnl[n] = '\n', withnl[n + 1] = 0, text = withnl;
  int rc = cg_write_text(d, dir, name, text);
  free(text);
  return rc;
}

/* {path, sha256, bytes} of one input file, or {path, error}. */
static json_t *file_json(const char *path) {
  char hex[65];
  struct stat st;
  if (batch_sha256_file(path, hex) || stat(path, &st))
    return json_pack("{s:s,s:s}", "path", path, "error", strerror(errno));
  return json_pack("{s:s,s:s,s:I}", "path", path, "sha256", hex, "bytes", (json_int_t)st.st_size);
}

/* The reference verify reads: a folder's ref.npz, or the .npz itself. */
static void reference_npz(const batch_model *m, char *out, size_t n) {
  int dir = cli_is_dir(m->reference);
  if (snprintf(out, n, dir ? "%s/ref.npz" : "%s", m->reference) >= (int)n) out[0] = 0; /* too long: unreadable */
}

json_t *batch_inputs_json(const batch_model *m) {
  json_t *in = json_object(), *settings = json_object(), *tg = json_array(), *shapes = json_array();
  json_object_set_new(in, "onnx", file_json(m->onnx));
  if (m->weights[0]) json_object_set_new(in, "weights", file_json(m->weights));
  if (m->reference[0]) {
    char npz[PATH_MAX];
    reference_npz(m, npz, sizeof npz);
    json_object_set_new(in, "reference", file_json(npz));
  }
  if (m->policy[0]) json_object_set_new(in, "policy", file_json(m->policy));
  for (int t = 0; t < 3; t++)
    if (m->targets & (1 << t)) json_array_append_new(tg, json_string(batch_target_names[t]));
  for (int i = 0; i < m->n_shapes; i++) json_array_append_new(shapes, json_string(m->shapes[i]));
  json_object_set_new(settings, "migc", json_string(BATCH_VERSION));
  json_object_set_new(settings, "targets", tg);
  json_object_set_new(settings, "input_shape", shapes);
  json_object_set_new(settings, "key", json_string(m->key));
  json_object_set_new(settings, "grad", json_boolean(m->grad));
  json_object_set_new(settings, "rtol", json_real(m->rtol));
  json_object_set_new(settings, "atol", json_real(m->atol));
  json_object_set_new(in, "settings", settings);
  const char *k;
  json_t *v;
  json_object_foreach(in, k, v)
    if (json_object_get(v, "error")) json_object_set_new(in, "error", json_sprintf("%s: %s: %s", k,
        json_string_value(json_object_get(v, "path")), json_string_value(json_object_get(v, "error"))));
  return in;
}

/* OUTDIR/<name>/result.json, or NULL when absent or unreadable. */
static json_t *load_result(const batch_env *e, const batch_model *m) {
  char path[PATH_MAX + 200];
  snprintf(path, sizeof path, "%s/%s/result.json", e->outdir, m->name);
  return json_load_file(path, 0, NULL);
}

int batch_result_current(const batch_env *e, const batch_model *m) {
  json_t *r = load_result(e, m);
  if (!r) return 0;
  json_t *in = batch_inputs_json(m);
  int same = !json_object_get(in, "error") && json_equal(in, json_object_get(r, "inputs"));
  json_decref(in);
  json_decref(r);
  return same;
}

int batch_result_passed(const batch_env *e, const batch_model *m) {
  json_t *r = load_result(e, m);
  const char *s = r ? json_string_value(json_object_get(r, "status")) : NULL;
  int rc = !s ? -1 : !strcmp(s, "pass");
  json_decref(r);
  return rc;
}

/* One step's outcome. */
typedef struct {
  int status;     /* exit status, or -1 */
  int signal;     /* the signal that ended it, or 0 */
  double seconds;
  long peak_kb;   /* ru_maxrss of the step (its largest process) */
} step;

/* Runs argv with stdout and stderr to `log`, in the worker's process group (a
 * timeout kills them all), dying with the worker (PR_SET_PDEATHSIG): a batch that
 * is killed leaves no step running. */
static step run_step(char *const argv[], const char *log) {
  step s = {-1, 0, 0, 0};
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) return s;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int null = open("/dev/null", O_RDONLY);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    if (null >= 0) dup2(null, 0);
    execvp(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int st;
  struct rusage ru;
  while (wait4(pid, &st, 0, &ru) < 0)
    if (errno != EINTR) return s;
  s.seconds = now() - t0;
  s.peak_kb = ru.ru_maxrss;
  if (WIFEXITED(st)) s.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st)) s.signal = WTERMSIG(st);
  return s;
}

/* The line of a log that says why a step failed: the first one with "error" in it
 * (compilers, migc's diagnostics), else the last non-empty one; the model's folder
 * written as <out>, so that reasons do not depend on where the batch wrote. */
static void log_reason(const char *log, const char *dir, char *out, size_t n) {
  FILE *f = fopen(log, "r");
  char line[1024], last[1024] = "", first[1024] = "";
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    if (!line[0]) continue;
    snprintf(last, sizeof last, "%s", line);
    if (!first[0] && strstr(line, "error")) snprintf(first, sizeof first, "%s", line);
  }
  if (f) fclose(f);
  const char *src = first[0] ? first : last[0] ? last : "no output";
  size_t k = 0, dl = strlen(dir);
  while (*src && k + 6 < n) {
    if (dl && !strncmp(src, dir, dl)) {
      k += (size_t)snprintf(out + k, n - k, "<out>");
      src += dl;
    } else out[k++] = *src++;
  }
  out[k] = 0;
}

/* The step's failure as one line: "convert: exit 2: <the log's line>", "convert:
 * crashed (signal 11, Segmentation fault)"; "" when it succeeded. */
static void step_reason(const step *s, const char *what, const char *log, const char *dir, char *out, size_t n) {
  char why[900];
  if (s->signal) snprintf(out, n, "%s: crashed (signal %d, %s)", what, s->signal, strsignal(s->signal));
  else if (s->status < 0) snprintf(out, n, "%s: could not be started", what);
  else if (s->status) {
    log_reason(log, dir, why, sizeof why);
    snprintf(out, n, "%s: exit %d: %s", what, s->status, why);
  } else out[0] = 0;
}

/* A step's measurements, added into the model's. */
static void measure(json_t *meas, const char *key, const step *s, long *peak) {
  json_object_set_new(meas, key, json_real(round(s->seconds * 1000) / 1000));
  if (s->peak_kb > *peak) *peak = s->peak_kb;
}

/* The ops that keep the model from converting on target t, from the coverage report
 * convert wrote (custom ops and host fallbacks run, so they do not block). */
static json_t *blocking_ops(json_t *cov, const char *t, int *n_nodes) {
  json_t *ops = json_object_get(json_array_get(json_object_get(cov, "models"), 0), "ops"), *o, *out = json_array();
  size_t i;
  *n_nodes = 0;
  json_array_foreach(ops, i, o) {
    const char *st = json_string_value(json_object_get(json_object_get(o, "status"), t));
    if (!st || !strcmp(st, "supported") || !strcmp(st, "decomposed") || !strcmp(st, "custom-op") ||
        !strcmp(st, "host-fallback"))
      continue;
    json_t *nodes = json_object_get(o, "nodes");
    *n_nodes += (int)json_array_size(nodes);
    json_array_append_new(out, json_pack("{s:O,s:s,s:O,s:O}", "op", json_object_get(o, "op"), "status", st, "reason",
                                         json_object_get(json_object_get(o, "reason"), t), "nodes", nodes));
  }
  return out;
}


/* The first failing check of a verify --json report, as one line. */
static void verify_reason(const char *json_path, char *out, size_t n) {
  json_t *v = json_load_file(json_path, 0, NULL), *o;
  size_t i;
  snprintf(out, n, "parity failed");
  const char *lists[] = {"outputs", NULL};
  for (int k = 0; lists[k] && v; k++)
    json_array_foreach(json_object_get(v, lists[k]), i, o) {
      if (!strcmp(batch_str(o, "status", ""), "PASS")) continue;
      snprintf(out, n, "parity: %s '%s': %s", lists[k], batch_str(o, "name", "?"), batch_str(o, "reason", "failed"));
      json_decref(v);
      return;
    }
  json_t *l = v ? json_object_get(v, "layers") : NULL;
  if (l && strcmp(batch_str(l, "status", ""), "PASS")) snprintf(out, n, "parity: layers: %s", batch_str(l, "reason", "failed"));
  json_decref(v);
}

/* The size of dir/leaf, or -1 when it is not there. */
static long file_bytes(const char *dir, const char *leaf) {
  char p[PATH_MAX + 64];
  struct stat st;
  snprintf(p, sizeof p, "%s/%s", dir, leaf);
  return stat(p, &st) ? -1 : (long)st.st_size;
}

/* Everything a worker's run needs. */
typedef struct {
  const batch_env *e;
  const batch_model *m;
  char dir[PATH_MAX], out[PATH_MAX], logs[PATH_MAX];
  json_t *meas;
  long peak;
} worker;

/* Target t of the converted model: blocked ops, build, parity. */
static json_t *one_target(worker *w, int t, json_t *cov) {
  const char *tn = batch_target_names[t];
  json_t *r = json_object(), *tm = json_object();
  char reason[1200] = "", log[PATH_MAX + 64], jobs[16], sub[PATH_MAX + 16];
  int n_blocked;
  json_t *mt = json_object_get(json_object_get(json_array_get(json_object_get(cov, "models"), 0), "targets"), tn);
  json_t *blocked = blocking_ops(cov, tn, &n_blocked);
  json_object_set_new(r, "converted_rate", json_real(json_number_value(json_object_get(mt, "converted_rate"))));
  json_object_set_new(r, "blocking_ops", blocked);
  const char *build = "skipped", *parity = "none";
  if (n_blocked) {
    snprintf(reason, sizeof reason, "not converted: %d node%s (%s", n_blocked, n_blocked == 1 ? "" : "s",
             json_string_value(json_object_get(json_array_get(blocked, 0), "op")));
    for (size_t k = 1; k < json_array_size(blocked) && k < 4; k++) {
      size_t len = strlen(reason);
      snprintf(reason + len, sizeof reason - len, ", %s", json_string_value(json_object_get(json_array_get(blocked, k), "op")));
    }
    strncat(reason, json_array_size(blocked) > 4 ? ", ...)" : ")", sizeof reason - strlen(reason) - 1);
  } else if (t != 2) { /* cpu: make; ascend: make emu (MindSpore's net.py needs no build) */
    snprintf(sub, sizeof sub, "%s/%s", w->out, t ? "ascend" : "cpu");
    snprintf(jobs, sizeof jobs, "-j%d", w->e->make_jobs);
    snprintf(log, sizeof log, "%s/build-%s.log", w->logs, tn);
    char *argv[] = {"make", "-s", jobs, "-C", sub, t ? "emu" : "runner", NULL};
    step s = run_step(argv, log);
    measure(tm, "build_s", &s, &w->peak);
    step_reason(&s, "build", log, w->dir, reason, sizeof reason);
    build = reason[0] ? "failed" : "ok";
  }
  if (!reason[0] && w->m->reference[0]) {
    static const char *const backend[] = {"c", "ascend-emu", "mindspore-emu"};
    char npz[PATH_MAX], vjson[PATH_MAX + 64], rt[32], at[32];
    reference_npz(w->m, npz, sizeof npz);
    snprintf(vjson, sizeof vjson, "%s/verify-%s.json", w->logs, tn);
    snprintf(log, sizeof log, "%s/verify-%s.log", w->logs, tn);
    char *argv[20] = {(char *)w->e->self, "verify", w->out, "--reference", npz, "--backend", (char *)backend[t],
                      "--json", vjson};
    int k = 9;
    if (w->m->grad && t != 1) argv[k++] = "--grad"; /* the aclnn emulator runs forward only */
    if (w->m->policy[0]) argv[k++] = "--policy", argv[k++] = (char *)w->m->policy;
    if (w->m->rtol >= 0) snprintf(rt, sizeof rt, "%g", w->m->rtol), argv[k++] = "--rtol", argv[k++] = rt;
    if (w->m->atol >= 0) snprintf(at, sizeof at, "%g", w->m->atol), argv[k++] = "--atol", argv[k++] = at;
    argv[k] = NULL;
    step s = run_step(argv, log);
    measure(tm, "verify_s", &s, &w->peak);
    if (s.status == 1) {
      parity = "fail";
      verify_reason(vjson, reason, sizeof reason);
    } else {
      step_reason(&s, "verify", log, w->dir, reason, sizeof reason);
      parity = reason[0] ? "error" : "pass";
    }
  }
  json_object_set_new(r, "status", json_string(reason[0] ? "fail" : "pass"));
  if (reason[0]) json_object_set_new(r, "reason", json_string(reason));
  json_object_set_new(r, "build", json_string(build));
  json_object_set_new(r, "parity", json_string(parity));
  json_object_set_new(r, "measurements", tm);
  return r;
}

/* The sizes of what was made, into the measurements (they depend on the compiler). */
static void sizes(worker *w) {
  static const char *const leaf[][2] = {{"ckpt_bytes", "model.ckpt"}, {"cpu_weights_bytes", "cpu/model.weights"},
                                        {"runner_bytes", "cpu/runner"}, {"ascend_runner_bytes", "ascend/runner"}};
  for (size_t i = 0; i < sizeof leaf / sizeof leaf[0]; i++) {
    long b = file_bytes(w->out, leaf[i][1]);
    if (b >= 0) json_object_set_new(w->meas, leaf[i][0], json_integer(b));
  }
}

/* The model's result object: convert, then every target. */
static json_t *work(worker *w, json_t *inputs) {
  const batch_model *m = w->m;
  json_t *res = json_object(), *tg = json_object();
  char reason[1200] = "", log[PATH_MAX + 64], tlist[64] = "";
  json_object_set_new(res, "name", json_string(m->name));
  for (int t = 0; t < 3; t++)
    if (m->targets & (1 << t)) snprintf(tlist + strlen(tlist), sizeof tlist - strlen(tlist), "%s%s", tlist[0] ? "," : "", batch_target_names[t]);
  const char *err = json_string_value(json_object_get(inputs, "error"));
  json_t *cov = NULL;
  if (err) snprintf(reason, sizeof reason, "cannot read %s", err);
  else {
    char *argv[16 + 2 * BATCH_MAX_SHAPES] = {(char *)w->e->self, "convert", (char *)m->onnx, "-o", w->out, "--target", tlist};
    int k = 7;
    if (m->weights[0]) argv[k++] = "--weights", argv[k++] = (char *)m->weights;
    if (m->key[0]) argv[k++] = "--key", argv[k++] = (char *)m->key;
    for (int i = 0; i < m->n_shapes; i++) argv[k++] = "--input-shape", argv[k++] = m->shapes[i];
    argv[k] = NULL;
    snprintf(log, sizeof log, "%s/convert.log", w->logs);
    step s = run_step(argv, log);
    measure(w->meas, "convert_s", &s, &w->peak);
    step_reason(&s, "convert", log, w->dir, reason, sizeof reason);
    char cov_path[PATH_MAX + 32];
    snprintf(cov_path, sizeof cov_path, "%s/coverage.json", w->out);
    if (!reason[0] && !(cov = json_load_file(cov_path, 0, NULL)))
      snprintf(reason, sizeof reason, "convert: wrote no readable coverage.json");
  }
  for (int t = 0; t < 3; t++) {
    if (!(m->targets & (1 << t))) continue;
    json_t *r = reason[0] ? json_pack("{s:s,s:s,s:s,s:s}", "status", "fail", "reason", reason, "build", "skipped",
                                      "parity", "none")
                          : one_target(w, t, cov);
    json_object_set_new(tg, batch_target_names[t], r);
  }
  json_decref(cov);
  const char *first = NULL, *k;
  json_t *v;
  json_object_foreach(tg, k, v)
    if (!first && strcmp(json_string_value(json_object_get(v, "status")), "pass")) first = k;
  json_object_set_new(res, "status", json_string(first ? "fail" : "pass"));
  if (first && reason[0]) json_object_set_new(res, "reason", json_string(reason)); /* the same for every target */
  else if (first) json_object_set_new(res, "reason", json_sprintf("%s: %s", first, batch_str(json_object_get(tg, first), "reason", "failed")));
  json_object_set_new(res, "targets", tg);
  sizes(w);
  return res;
}

int batch_model_run(const batch_env *e, const batch_model *m) {
  worker w = {e, m, "", "", "", json_object(), 0};
  double t0 = now();
  if (snprintf(w.dir, sizeof w.dir, "%s/%s", e->outdir, m->name) >= (int)sizeof w.dir - 8) return 1; /* too long */
  if (snprintf(w.out, sizeof w.out, "%s/out", w.dir) < 0 || snprintf(w.logs, sizeof w.logs, "%s/logs", w.dir) < 0) return 1;
  /* what a killed run left is redone from scratch */
  verify_rmtree(w.out);
  verify_rmtree(w.logs);
  char old[PATH_MAX + 16]; /* an earlier run's verdict is not this one's: until it ends, none */
  if (snprintf(old, sizeof old, "%s/result.json", w.dir) < (int)sizeof old) unlink(old);
  if (cg_mkdirs(w.logs)) return 1;
  json_t *inputs = batch_inputs_json(m);
  json_t *res = work(&w, inputs);
  json_object_set_new(res, "inputs", inputs);
  json_object_set_new(w.meas, "total_s", json_real(round((now() - t0) * 1000) / 1000));
  json_object_set_new(w.meas, "peak_rss_kb", json_integer(w.peak));
  json_object_set_new(res, "measurements", w.meas);
  mg_diags d;
  mg_diags_init(&d);
  int rc = batch_write_json(w.dir, "result.json", res, &d) ? 1 : 0;
  mg_diags_free(&d);
  json_decref(res);
  return rc;
}

int batch_write_failed(const batch_env *e, const batch_model *m, const char *reason, double seconds) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/%s", e->outdir, m->name);
  json_t *res = json_pack("{s:s,s:s,s:s,s:{}}", "name", m->name, "status", "fail", "reason", reason, "targets");
  json_t *tg = json_object_get(res, "targets");
  for (int t = 0; t < 3; t++)
    if (m->targets & (1 << t))
      json_object_set_new(tg, batch_target_names[t], json_pack("{s:s,s:s,s:s,s:s}", "status", "fail", "reason", reason,
                                                              "build", "skipped", "parity", "none"));
  json_object_set_new(res, "inputs", batch_inputs_json(m));
  json_object_set_new(res, "measurements", json_pack("{s:f}", "total_s", round(seconds * 1000) / 1000));
  mg_diags d;
  mg_diags_init(&d);
  int rc = cg_mkdirs(dir) || batch_write_json(dir, "result.json", res, &d) ? -1 : 0;
  mg_diags_free(&d);
  json_decref(res);
  return rc;
}
