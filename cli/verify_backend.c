/* migc verify: the C backend (build, run, trace) and the checkpoint check. */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "verify_cli.h"
#include "wcheck.h"
#include "weights.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f) {
  (void)st, (void)flag, (void)f;
  return remove(path);
}

void verify_rmtree(const char *dir) { nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

/* Runs argv (stdout discarded, stderr kept, or both discarded when quiet); the exit
 * status, or -1 when it cannot start or dies from a signal. */
static int run_child(char *const argv[], int quiet) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, 1);
      if (quiet) dup2(null, 2);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* out[n] = dir/leaf; paths too long for PATH_MAX are cut (and then fail to open). */
static void path_join(char *out, size_t n, const char *dir, const char *leaf) {
  int k = snprintf(out, n, "%s/%s", dir, leaf);
  if (k < 0 || (size_t)k >= n) out[0] = 0; /* an empty path fails to open, never a wrong one */
}

int verify_work_dir(vctx *v) {
  if (v->tmpdir[0]) return 0;
  const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(v->tmpdir, sizeof v->tmpdir, "%s/migc-verify-XXXXXX", base);
  if (!mkdtemp(v->tmpdir)) {
    mg_error(&v->d, IO, v->tmpdir, NULL, "cannot create a work folder: %s", strerror(errno));
    v->tmpdir[0] = 0;
    return -1;
  }
  return 0;
}

/* The generated project's folder, OUTDIR/<sub> (cpu, or ascend), or a fresh
 * conversion of the ONNX (the ascend one with the reference folder's model.pth). */
static int project_dir(vctx *v, const char *sub, char *dir, size_t n) {
  if (v->outdir[0]) {
    path_join(dir, n, v->outdir, sub);
    return 0;
  }
  char out[PATH_MAX];
  path_join(out, sizeof out, v->tmpdir, "converted");
  /* generated code has static shapes: the reference's inputs fix them */
  char *argv[12 + 2 * 64], shapes[64][600];
  int a = 0, ascend = !strcmp(sub, "ascend");
  /* its own scratch folder, converted once per backend: --force */
  argv[a++] = "convert", argv[a++] = v->onnx, argv[a++] = "-o", argv[a++] = out, argv[a++] = "--force";
  if (!ascend) argv[a++] = "--cpu-only";
  if (v->opt.precision) argv[a++] = "--precision", argv[a++] = (char *)v->opt.precision;
  else {
    argv[a++] = "--target", argv[a++] = "ascend";
    if (v->pth[0]) argv[a++] = "--weights", argv[a++] = v->pth;
  }
  for (int i = 0; i < v->n_inputs && i < 64; i++) {
    int k = snprintf(shapes[i], sizeof shapes[i], "%s=", v->inputs[i].name);
    for (int r = 0; r < v->inputs[i].rank && k > 0 && (size_t)k < sizeof shapes[i]; r++)
      k += snprintf(shapes[i] + k, sizeof shapes[i] - (size_t)k, "%s%lld", r ? "x" : "", (long long)v->inputs[i].dims[r]);
    argv[a++] = "--input-shape", argv[a++] = shapes[i];
  }
  argv[a] = NULL;
  if (cmd_convert(a, argv)) {
    mg_error(&v->d, UNSUPPORTED, NULL, NULL, "--backend %s: `migc convert %s` failed", v->opt.backend, v->onnx);
    return -1;
  }
  path_join(dir, n, out, sub);
  return 0;
}

/* Writes the inputs as .npy files and runs the runner; extra is an optional pair
 * of arguments ("--trace", DIR). Returns the runner's exit status or -1. */
static int run_runner(vctx *v, const char *runner, const char *outdir, const char *extra1, const char *extra2) {
  char *argv[2 * 64 + 8];
  char specs[64][PATH_MAX + 600];
  int a = 0;
  argv[a++] = (char *)runner;
  for (int i = 0; i < v->n_inputs && i < 64; i++) {
    char path[PATH_MAX];
    char leaf[32];
    snprintf(leaf, sizeof leaf, "input_%d.npy", i);
    path_join(path, sizeof path, v->tmpdir, leaf);
    if (access(path, R_OK) && npy_write_file(path, &v->inputs[i], &v->d)) return -1;
    snprintf(specs[i], sizeof specs[i], "%s=%s", v->inputs[i].name, path);
    argv[a++] = "--input";
    argv[a++] = specs[i];
  }
  argv[a++] = "--output-dir";
  argv[a++] = (char *)outdir;
  if (extra1) argv[a++] = (char *)extra1, argv[a++] = (char *)extra2;
  argv[a] = NULL;
  return run_child(argv, extra1 != NULL);
}

int verify_runner_forward(vctx *v, int ascend) {
  char dir[PATH_MAX], runner[PATH_MAX], outdir[PATH_MAX];
  const char *sub = ascend ? "ascend" : "cpu";
  if (verify_work_dir(v) || project_dir(v, sub, dir, sizeof dir)) return -1;
  path_join(runner, sizeof runner, dir, "runner");
  if (access(runner, X_OK)) {
    /* ascend: `make emu`, the aclnn emulator in place of a device */
    char *argv[] = {"make", "-s", "-C", dir, ascend ? "emu" : NULL, NULL};
    if (run_child(argv, 0)) {
      mg_error(&v->d, IO, dir, NULL, "--backend %s: `make -C %s%s` failed", v->opt.backend, dir, ascend ? " emu" : "");
      return -1;
    }
  }
  path_join(outdir, sizeof outdir, v->tmpdir, "out");
  int rc = run_runner(v, runner, outdir, NULL, NULL);
  if (rc) {
    mg_error(&v->d, IO, runner, NULL, "--backend %s: the runner failed (exit %d)%s", v->opt.backend, rc,
             ascend ? "; the aclnn emulator's report is above" : "");
    return -1;
  }
  mg_graph *g = v->m->graph;
  v->outs = calloc((size_t)g->n_outputs + 1, sizeof *v->outs);
  if (!v->outs) return -1;
  const char **names = calloc((size_t)g->n_outputs + 1, sizeof *names);
  if (!names) return -1;
  for (int i = 0; i < g->n_outputs; i++) names[i] = g->outputs[i]->name;
  for (int i = 0; i < g->n_outputs; i++) {
    char safe[600], path[PATH_MAX];
    cli_output_file(names, g->n_outputs, i, safe, sizeof safe);
    path_join(path, sizeof path, outdir, safe);
    if (npy_read_file(path, &v->outs[i], &v->d)) {
      free(names);
      return -1;
    }
  }
  free(names);
  return 0;
}

int verify_c_trace(vctx *v) {
  char cpu[PATH_MAX], runner[PATH_MAX], outdir[PATH_MAX];
  if (verify_work_dir(v)) return -1;
  if (v->outdir[0]) path_join(cpu, sizeof cpu, v->outdir, "cpu");
  else path_join(cpu, sizeof cpu, v->tmpdir, "converted/cpu");
  path_join(runner, sizeof runner, cpu, "runner");
  path_join(outdir, sizeof outdir, v->tmpdir, "trace_out");
  path_join(v->trace_dir, sizeof v->trace_dir, v->tmpdir, "trace");
  int rc = run_runner(v, runner, outdir, "--trace", v->trace_dir);
  if (rc) {
    snprintf(v->loc_note, sizeof v->loc_note,
             "the runner failed with --trace (exit %d): no node-by-node check; regenerate the project with a migc "
             "whose runners write traces", rc);
    return -1;
  }
  return 0;
}

/* Fills pairs from the weight map's "tensors": every checkpoint tensor bound to an
 * initializer by name, by value or transposed, or (left unbound, e.g. when the
 * initializer only fed a folded Transpose) whose torch name is still a graph
 * initializer: the naming contract of PRESERVE exports. The rest are listed in
 * unmapped (names borrowed from map), counted in *skipped. */
static int map_pairs(const json_t *map, const mg_model *m, wcheck_pair **out, int *n_out, const char **unmapped,
                     int cap_unmapped, int *skipped) {
  json_t *tensors = json_object_get(map, "tensors");
  size_t count = json_array_size(tensors), i;
  wcheck_pair *p = calloc(count + 1, sizeof *p);
  if (!p) return -1;
  int n = 0;
  json_t *t;
  *skipped = 0;
  json_array_foreach(tensors, i, t) {
    const char *ms = json_string_value(json_object_get(t, "mindspore"));
    const char *init = json_string_value(json_object_get(t, "initializer"));
    const char *how = json_string_value(json_object_get(t, "binding"));
    const char *transform = json_string_value(json_object_get(t, "transform"));
    const char *src = json_string_value(json_object_get(t, "source"));
    if (!ms) continue; /* dropped from the checkpoint (num_batches_tracked) */
    if (!init && src) {
      const mg_value *iv = mg_graph_find(m->graph, src);
      if (iv && iv->kind == MG_V_INIT && iv->data) init = src, how = "name";
    }
    if (!init || !how || (strcmp(how, "name") && strcmp(how, "value") && strcmp(how, "transpose"))) {
      if (*skipped < cap_unmapped) unmapped[*skipped] = ms;
      (*skipped)++;
      continue;
    }
    wcheck_pair *q = &p[n++];
    q->tag = ms;
    q->init = init;
    q->transposed = !strcmp(how, "transpose");
    q->cast = transform && strstr(transform, "cast:");
    json_t *shape = json_object_get(t, "shape");
    q->rank = (int)json_array_size(shape);
    if (q->rank > 16) q->rank = 16;
    for (int k = 0; k < q->rank; k++) q->dims[k] = json_integer_value(json_array_get(shape, (size_t)k));
  }
  *out = p;
  *n_out = n;
  return 0;
}

int verify_weights(vctx *v) {
  wt_source *ck = NULL;
  wcheck_pair *pairs = NULL;
  wcheck_item *items = NULL;
  int n = 0, skipped = 0, rc = -1;
  if (ckpt_open(v->opt.ckpt, &ck, &v->d)) return -1;
  if (map_pairs(v->map, v->m, &pairs, &n, v->wunmapped_names, 64, &skipped)) goto done;
  items = calloc((size_t)n + 1, sizeof *items);
  v->wres = calloc((size_t)n + 1, sizeof *v->wres);
  if (!items || !v->wres || wcheck_run(v->m, ck, pairs, n, items, &v->d)) goto done;
  for (int i = 0; i < n; i++) {
    vresult *r = &v->wres[v->n_wres++];
    memset(r, 0, sizeof *r);
    r->kind = V_WEIGHT;
    r->status = items[i].status == WC_OK ? V_PASS : V_FAIL;
    snprintf(r->name, sizeof r->name, "%s", pairs[i].tag);
    snprintf(r->init, sizeof r->init, "%s", pairs[i].init);
    for (int k = 0, o = 0; k < pairs[i].rank && o >= 0 && o < (int)sizeof r->shape; k++)
      o += snprintf(r->shape + o, sizeof r->shape - (size_t)o, "%s%lld", k ? "x" : "", (long long)pairs[i].dims[k]);
    r->m = items[i].m;
    r->compared = items[i].compared;
    r->tol = (parity_tol){0, 0, -1, -1, 0, 0};
    if (items[i].status != WC_OK &&
        snprintf(r->why, sizeof r->why, "%s%s%s", items[i].why, items[i].node[0] ? "; read by node " : "",
                 items[i].node) >= (int)sizeof r->why)
      memcpy(r->why + sizeof r->why - 4, "...", 4); /* a cut reason says it was cut */
  }
  v->wchecked = n;
  v->wunmapped = skipped;
  rc = 0;
done:
  free(items);
  free(pairs);
  wt_close(ck);
  return rc;
}
