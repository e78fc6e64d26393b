/* migc verify --backend mindspore-emu: the converted MindSpore net (OUTDIR/mindspore/
 * net.py with the checkpoint) run through the MindSpore stand-in by
 * tools/ms_emu_grad.py, its outputs and parameter gradients brought back for the
 * same comparison the other backends get (cmd_verify.c). */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "verify_cli.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MIGC_RULES_DIR
#define MIGC_RULES_DIR "rules"
#endif

/* out = dir/leaf, or "" when it does not fit (an empty path fails to open). */
static void ms_join(char *out, size_t n, const char *dir, const char *leaf) {
  int k = snprintf(out, n, "%s/%s", dir, leaf);
  if (k < 0 || (size_t)k >= n) out[0] = 0;
}

/* Whether p is a regular file. */
static int ms_is_file(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISREG(st.st_mode);
}

/* The source tree migc was built from: the parent of its rules folder (MIGC_RULES_DIR
 * in the environment or at build time), which holds tools/ and tests/. */
static void source_root(char *out, size_t n) {
  const char *rules = getenv("MIGC_RULES_DIR") ? getenv("MIGC_RULES_DIR") : MIGC_RULES_DIR;
  const char *slash = strrchr(rules, '/');
  if (slash) snprintf(out, n, "%.*s", (int)(slash - rules), rules);
  else snprintf(out, n, ".");
}

/* The last non-empty line of a text file into out (empty when none). */
static void last_line(const char *path, char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return;
  char line[2048];
  while (fgets(line, sizeof line, f)) {
    size_t k = strlen(line);
    while (k && (line[k - 1] == '\n' || line[k - 1] == '\r')) line[--k] = 0;
    if (k) snprintf(out, n, "%s", line);
  }
  fclose(f);
}

/* Runs argv (python, or make) with PYTHONPATH=pypath, stdout and stderr into log;
 * the exit status, or -1 when it cannot start or dies from a signal. */
static int run_python(char *const argv[], const char *pypath, const char *log) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2);
    setenv("PYTHONPATH", pypath, 1);
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The converted folder: OUTDIR as given (it must hold mindspore/net.py), or a
 * conversion of the reference folder's ONNX with its model.pth (`migc convert
 * --target mindspore --weights`) into the work folder, whose checkpoint and weight
 * map then stand for --ckpt and --weights-map. 0, or -1 with a diagnostic. */
static int ms_outdir(vctx *v, char *out, size_t n) {
  char net[PATH_MAX];
  if (v->outdir[0]) {
    snprintf(out, n, "%s", v->outdir);
    ms_join(net, sizeof net, out, "mindspore/net.py");
    if (!ms_is_file(net)) {
      mg_error(&v->d, USAGE, NULL, NULL,
               "--backend mindspore-emu: %s has no mindspore/net.py; convert with --target mindspore --weights "
               "MODEL.pth", v->outdir);
      return -1;
    }
    return 0;
  }
  if (!v->pth[0]) {
    mg_error(&v->d, USAGE, NULL, NULL,
             "--backend mindspore-emu converts %s with its weights first: give a reference folder holding model.pth, "
             "or a `migc convert --target mindspore --weights` output folder", v->onnx);
    return -1;
  }
  ms_join(out, n, v->tmpdir, "converted");
  char *argv[] = {"convert", v->onnx, "--weights", v->pth, "--target", "mindspore", "-o", out, "--force", NULL};
  /* convert's summary and diagnostics go to the work folder's convert.log, not into
   * the report; a failure quotes its last line */
  char clog[PATH_MAX], why[1024];
  ms_join(clog, sizeof clog, v->tmpdir, "convert.log");
  fflush(stdout), fflush(stderr);
  int out1 = dup(1), out2 = dup(2), fd = open(clog, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int redirected = out1 >= 0 && out2 >= 0 && fd >= 0;
  if (redirected) dup2(fd, 1), dup2(fd, 2);
  int crc = cmd_convert((int)(sizeof argv / sizeof argv[0]) - 1, argv);
  fflush(stdout), fflush(stderr);
  if (redirected) dup2(out1, 1), dup2(out2, 2);
  if (fd >= 0) close(fd);
  if (out1 >= 0) close(out1);
  if (out2 >= 0) close(out2);
  if (crc) {
    last_line(clog, why, sizeof why);
    mg_error(&v->d, UNSUPPORTED, NULL, NULL, "--backend mindspore-emu: `migc convert %s --weights %s --target "
             "mindspore` failed: %s", v->onnx, v->pth, why);
    return -1;
  }
  ms_join(net, sizeof net, out, "mindspore/net.py");
  if (!ms_is_file(net)) {
    mg_error(&v->d, UNSUPPORTED, NULL, NULL, "--backend mindspore-emu: convert wrote no mindspore/net.py for %s",
             v->onnx);
    return -1;
  }
  if (!v->opt.ckpt) {
    ms_join(v->ckpt_buf, sizeof v->ckpt_buf, out, "model.ckpt");
    ms_join(v->map_buf, sizeof v->map_buf, out, "weight_map.json");
    if (ms_is_file(v->ckpt_buf) && ms_is_file(v->map_buf)) v->opt.ckpt = v->ckpt_buf, v->opt.map = v->map_buf;
  }
  return 0;
}

/* What net.py cannot do, read from the script convert wrote: *n_raise statements
 * that raise NotImplementedError (the first one's message into raise_why), and
 * *n_custom ops.Custom CPU kernels (which have no bprop), each recorded as an
 * unsupported diagnostic when record is set. 0, or -1 when net.py cannot be read. */
static int scan_net(vctx *v, const char *net, int record, int *n_raise, char *raise_why, size_t n, int *n_custom) {
  *n_raise = *n_custom = 0;
  raise_why[0] = 0;
  FILE *f = fopen(net, "r");
  if (!f) {
    mg_error(&v->d, IO, net, NULL, "cannot read %s", net);
    return -1;
  }
  char line[4096];
  const char *mark = ": custom-op (cpu kernel) custom/";
  while (fgets(line, sizeof line, f)) {
    size_t k = strlen(line);
    while (k && (line[k - 1] == '\n' || line[k - 1] == '\r')) line[--k] = 0;
    const char *p = line + strspn(line, " ");
    if (!strncmp(p, "raise NotImplementedError(\"", 27)) {
      if (!(*n_raise)++) snprintf(raise_why, n, "%.*s", (int)(strlen(p + 27) > 2 ? strlen(p + 27) - 2 : 0), p + 27);
    } else if (p[0] == '#' && strstr(p, mark)) {
      (*n_custom)++;
      if (record)
        mg_error(&v->d, UNSUPPORTED, NULL, NULL, "node %s: MindSpore cannot differentiate an ops.Custom kernel "
                 "without a bprop", p + 2);
    }
  }
  fclose(f);
  return 0;
}

/* See verify_cli.h. */
int verify_ms_grad_errors(vctx *v) {
  int n_raise, n_custom;
  char why[8];
  if (!v->ms_net[0] || scan_net(v, v->ms_net, 1, &n_raise, why, sizeof why, &n_custom)) return -1;
  if (v->ms_grad_why[0])
    mg_error(&v->d, UNSUPPORTED, NULL, NULL, "mindspore.value_and_grad under the stand-in failed: %s",
             v->ms_grad_why);
  else if (!n_custom) mg_error(&v->d, UNSUPPORTED, NULL, NULL, "--backend mindspore-emu computed no gradients");
  return 0;
}

/* Builds OUTDIR/mindspore/custom/libmigc_custom.so (the ops.Custom kernels net.py
 * loads) with make when the folder has a Makefile and no library yet. 0, or -1 with
 * a diagnostic quoting make's last line. */
static int build_custom(vctx *v, const char *out) {
  char dir[PATH_MAX], mk[PATH_MAX], so[PATH_MAX], log[PATH_MAX];
  ms_join(dir, sizeof dir, out, "mindspore/custom");
  ms_join(mk, sizeof mk, dir, "Makefile");
  ms_join(so, sizeof so, dir, "libmigc_custom.so");
  if (!ms_is_file(mk) || ms_is_file(so)) return 0;
  ms_join(log, sizeof log, v->tmpdir, "custom_make.log");
  char *argv[] = {"make", "-s", "-C", dir, NULL};
  int rc = run_python(argv, getenv("PYTHONPATH") ? getenv("PYTHONPATH") : "", log);
  if (rc) {
    char why[1024];
    last_line(log, why, sizeof why);
    mg_error(&v->d, IO, dir, NULL, "--backend mindspore-emu: `make -C %s` (the ops.Custom kernels) failed: %s", dir,
             why);
    return -1;
  }
  return 0;
}

/* Writes arrays[i] as members "0", "1", ... of path (data borrowed). 0 or -1. */
static int write_indexed(vctx *v, const char *path, const mg_array *arrays, int n) {
  mg_array *a = calloc((size_t)n + 1, sizeof *a);
  char (*names)[16] = calloc((size_t)n + 1, sizeof *names);
  int rc = -1;
  if (a && names) {
    for (int i = 0; i < n; i++) {
      a[i] = arrays[i];
      snprintf(names[i], sizeof names[i], "%d", i);
      a[i].name = names[i];
    }
    rc = npz_write_file(path, a, n, 0, &v->d);
  }
  free(a);
  free(names);
  return rc;
}

/* The cotangent of every graph output, borrowed from the reference, into cot
 * (graph order). 0, or -1 naming the missing one. */
static int gather_cotangents(vctx *v, mg_array *cot) {
  mg_graph *g = v->m->graph;
  for (int i = 0; i < g->n_outputs; i++) {
    char key[600];
    snprintf(key, sizeof key, "cotangents/%s", g->outputs[i]->name);
    const mg_array *c = verify_ref_get(v, key);
    if (!c) {
      mg_error(&v->d, USAGE, g->outputs[i]->name, NULL, "%s has no member %s", v->reference, key);
      return -1;
    }
    cot[i] = *c;
  }
  return 0;
}

/* Moves res[k] (found by member name) into dst; 0, or -1 when there is none. */
static int take(mg_array *res, int n, const char *name, mg_array *dst) {
  for (int i = 0; i < n; i++)
    if (res[i].name && !strcmp(res[i].name, name)) {
      *dst = res[i];
      memset(&res[i], 0, sizeof res[i]);
      return 0;
    }
  return -1;
}

/* The torch state_dict name of checkpoint tag `tag` through the weight map, and the
 * axis the checkpoint inserted (Conv1d's (out, in, k) -> (out, in, 1, k)) or -1;
 * NULL when the map has no such tag. */
static const char *torch_name(const vctx *v, const char *tag, int *unsqueezed) {
  *unsqueezed = -1;
  json_t *tensors = v->map ? json_object_get(v->map, "tensors") : NULL;
  size_t i;
  json_t *t;
  json_array_foreach(tensors, i, t) {
    const char *ms = json_string_value(json_object_get(t, "mindspore"));
    if (!ms || strcmp(ms, tag)) continue;
    const char *tr = json_string_value(json_object_get(t, "transform"));
    const char *u = tr ? strstr(tr, "unsqueeze:") : NULL;
    if (u) *unsqueezed = atoi(u + 10);
    return json_string_value(json_object_get(t, "source"));
  }
  return NULL;
}

/* Fills v->grads from the driver's grads/ members: inputs by graph position, each
 * parameter under its torch name (its checkpoint tag when the map has none), an
 * inserted unit axis taken out again so the gradient has torch's shape. */
static int fill_grads(vctx *v, mg_array *res, int n) {
  grad_result *gr = &v->grads;
  mg_graph *g = v->m->graph;
  gr->n_inputs = g->n_inputs;
  gr->inputs = mg_calloc((size_t)g->n_inputs + 1, sizeof *gr->inputs);
  gr->params = mg_calloc((size_t)n + 1, sizeof *gr->params);
  if (!gr->inputs || !gr->params) return -1;
  v->have_grads = 1;
  for (int i = 0; i < g->n_inputs; i++) {
    char key[32];
    snprintf(key, sizeof key, "grads/inputs/%d", i);
    take(res, n, key, &gr->inputs[i]); /* none for an integer input */
  }
  for (int i = 0; i < n; i++) {
    if (!res[i].name || strncmp(res[i].name, "grads/params/", 13)) continue;
    mg_array *p = &gr->params[gr->n_params++];
    *p = res[i];
    memset(&res[i], 0, sizeof res[i]);
    int axis;
    const char *tname = torch_name(v, p->name + 13, &axis);
    const char *keep = tname ? tname : p->name + 13;
    size_t len = strlen(keep) + 1;
    char *nm = mg_malloc(len);
    if (!nm) return -1;
    memcpy(nm, keep, len);
    mg_free(p->name);
    p->name = nm;
    if (axis >= 0 && axis < p->rank && p->dims[axis] == 1) {
      for (int k = axis; k + 1 < p->rank; k++) p->dims[k] = p->dims[k + 1];
      p->rank--;
    }
  }
  return 0;
}

/* Loads the weight map the conversion wrote when the command line gave none. */
static int load_map(vctx *v) {
  if (v->map || !v->opt.map) return 0;
  json_error_t e;
  v->map = json_load_file(v->opt.map, 0, &e);
  if (!v->map) {
    mg_error(&v->d, MALFORMED, NULL, NULL, "%s:%d: %s", v->opt.map, e.line, e.text);
    return -1;
  }
  return 0;
}

/* See verify_cli.h: convert (when needed), write the inputs, run the driver under
 * the stand-in, read its outputs and gradients back. */
int verify_ms_run(vctx *v) {
  char out[PATH_MAX], root[PATH_MAX], net[PATH_MAX], ckpt[PATH_MAX], driver[PATH_MAX], standin[PATH_MAX];
  char in_npz[PATH_MAX], cot_npz[PATH_MAX], res_npz[PATH_MAX], log[PATH_MAX];
  if (verify_work_dir(v) || ms_outdir(v, out, sizeof out) || load_map(v)) return -1;
  source_root(root, sizeof root);
  ms_join(net, sizeof net, out, "mindspore/net.py");
  if (v->opt.ckpt) snprintf(ckpt, sizeof ckpt, "%s", v->opt.ckpt);
  else ms_join(ckpt, sizeof ckpt, out, "model.ckpt");
  ms_join(driver, sizeof driver, root, "tools/ms_emu_grad.py");
  if (getenv("MIGC_MINDSPORE_PATH")) snprintf(standin, sizeof standin, "%s", getenv("MIGC_MINDSPORE_PATH"));
  else ms_join(standin, sizeof standin, root, "tests/mindspore_standin");
  ms_join(in_npz, sizeof in_npz, v->tmpdir, "ms_inputs.npz");
  ms_join(cot_npz, sizeof cot_npz, v->tmpdir, "ms_cotangents.npz");
  ms_join(res_npz, sizeof res_npz, v->tmpdir, "ms_result.npz");
  ms_join(log, sizeof log, v->tmpdir, "ms_emu.log");
  if (!ms_is_file(ckpt)) {
    mg_error(&v->d, USAGE, NULL, NULL, "--backend mindspore-emu: no checkpoint %s (a parameter-free model has "
             "none; this backend needs one)", ckpt);
    return -1;
  }
  if (!ms_is_file(driver)) {
    mg_error(&v->d, IO, driver, NULL, "--backend mindspore-emu: the driver %s is missing (set MIGC_RULES_DIR to "
             "the source tree's rules/)", driver);
    return -1;
  }
  /* a statement that raises is a refusal naming the node; ops.Custom kernels run
   * forward, but have no gradient (the forward verdict stands, the gradients are an
   * error row naming them: verify_ms_grad_errors) */
  int n_raise, n_custom, grad = v->opt.grad;
  char why[2048];
  snprintf(v->ms_net, sizeof v->ms_net, "%s", net);
  if (scan_net(v, net, 0, &n_raise, why, sizeof why, &n_custom)) return -1;
  if (n_raise) {
    mg_error(&v->d, UNSUPPORTED, net, NULL, "--backend mindspore-emu: net.py does not compute %d node%s (convert "
             "reported %s): %s", n_raise, n_raise > 1 ? "s" : "", n_raise > 1 ? "them" : "it", why);
    return -1;
  }
  if (n_custom) grad = 0;
  if (build_custom(v, out)) return -1;
  mg_graph *g = v->m->graph;
  if (write_indexed(v, in_npz, v->inputs, v->n_inputs)) return -1;
  if (grad) {
    mg_array *cot = calloc((size_t)g->n_outputs + 1, sizeof *cot);
    int rc = !cot || gather_cotangents(v, cot) || write_indexed(v, cot_npz, cot, g->n_outputs);
    free(cot);
    if (rc) return -1;
  }
  const char *py = getenv("MIGC_PYTHON") ? getenv("MIGC_PYTHON") : "/usr/bin/python3";
  char *argv[16];
  int a = 0;
  argv[a++] = (char *)py, argv[a++] = driver, argv[a++] = "--net", argv[a++] = net, argv[a++] = "--ckpt";
  argv[a++] = ckpt, argv[a++] = "--inputs", argv[a++] = in_npz;
  if (grad) argv[a++] = "--cotangents", argv[a++] = cot_npz;
  argv[a++] = "--out", argv[a++] = res_npz, argv[a] = NULL;
  int rc = run_python(argv, standin, log);
  if (rc) {
    last_line(log, why, sizeof why);
    mg_error(&v->d, UNSUPPORTED, net, NULL, "--backend mindspore-emu: net.py under the MindSpore stand-in failed "
             "(exit %d): %s", rc, why[0] ? why : "(no message)");
    return -1;
  }
  mg_array *res = NULL;
  int n = 0;
  if (npz_read_file(res_npz, &res, &n, &v->d)) return -1;
  v->outs = mg_calloc((size_t)g->n_outputs + 1, sizeof *v->outs);
  int fail = !v->outs;
  for (int i = 0; i < g->n_outputs && !fail; i++) {
    char key[32];
    snprintf(key, sizeof key, "outputs/%d", i);
    if (take(res, n, key, &v->outs[i])) {
      mg_error(&v->d, INVALID, net, NULL, "--backend mindspore-emu: Net() returned fewer than the graph's %d outputs",
               g->n_outputs);
      fail = 1;
    }
  }
  mg_array ge = {0};
  if (!fail && grad && !take(res, n, "grad_error", &ge)) { /* the forward stands */
    if (ge.dtype == MG_STRING && ge.nbytes >= sizeof(char *))
      snprintf(v->ms_grad_why, sizeof v->ms_grad_why, "%s", ((char **)ge.data)[0]);
    else snprintf(v->ms_grad_why, sizeof v->ms_grad_why, "(no message)");
    grad = 0;
  }
  mg_array_free(&ge);
  if (!fail && grad && fill_grads(v, res, n)) fail = 1;
  mg_array t = {0};
  if (!fail && grad && !take(res, n, "time/gradients", &t) && t.dtype == MG_F64 && t.nbytes == sizeof(double))
    memcpy(&v->t_grad, t.data, sizeof(double)); /* the driver's value_and_grad, inside the forward's figure */
  mg_array_free(&t);
  mg_arrays_free(res, n);
  return fail ? -1 : 0;
}
