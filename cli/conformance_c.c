/* The conformance runner's C backend: every queued test is converted with the
 * CPU code generator into one work folder (prefix tN each), all of them are
 * compiled by one parallel make into one runner, and each test's datasets are run
 * through it and compared. A test whose generated C does not compile fails alone:
 * the runner links the models that did. */
#define _XOPEN_SOURCE 700
#include "cli.h"
#include "codegen.h"
#include "conformance.h"
#include "onnx_import.h"
#include "passes.h"
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char *name;       /* test name */
  int id;           /* prefix t<id> */
  int n_in, n_out;
  char **in_names;  /* run-time inputs (bound ones removed), graph order */
  char **out_names;
  int n_sets;
  mg_array **ins;   /* per set: n_in arrays in in_names order */
  mg_array **exps;  /* per set: expected outputs */
  int *n_exps;
  char *note;       /* a backend's remark on a pass (ascend-emu: the host fallback), or NULL */
  char **objs;      /* further objects the model needs linked (its host fallbacks) */
  int n_objs;
  char *unlinked;   /* why the runner was linked without it, or NULL */
} c_test;

struct conf_c {
  char work[4096];
  int keep, jobs, made_tmp;
  conf_c_backend be; /* be.emit NULL: the C backend's emit_c */
  c_test *tests;
  int n, cap, next_id;
};

const char *conf_c_work(const conf_c *q) { return q->work; }

conf_c *conf_c_new_backend(const char *work_dir, int keep, int jobs, const conf_c_backend *be) {
  conf_c *q = conf_c_new(work_dir, keep, jobs);
  if (q && be) q->be = *be;
  return q;
}

conf_c *conf_c_new(const char *work_dir, int keep, int jobs) {
  conf_c *q = calloc(1, sizeof *q);
  if (!q) return NULL;
  q->keep = keep;
  q->jobs = jobs > 0 ? jobs : (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (q->jobs < 1) q->jobs = 1;
  if (work_dir) {
    snprintf(q->work, sizeof q->work, "%s", work_dir);
    if (mkdir(q->work, 0777) && errno != EEXIST) {
      fprintf(stderr, "migc conformance: cannot create %s: %s\n", q->work, strerror(errno));
      free(q);
      return NULL;
    }
  } else {
    snprintf(q->work, sizeof q->work, "/tmp/migc-conformance-XXXXXX");
    if (!mkdtemp(q->work)) {
      fprintf(stderr, "migc conformance: cannot create a work folder: %s\n", strerror(errno));
      free(q);
      return NULL;
    }
    q->made_tmp = 1;
  }
  return q;
}

static void free_sets(mg_array **ins, int *n_ins, mg_array **exps, int *n_exps, int n_sets) {
  for (int s = 0; s < n_sets; s++) {
    mg_arrays_free(ins[s], n_ins[s]);
    mg_arrays_free(exps[s], n_exps[s]);
  }
}

static int all_static(const mg_graph *g) {
  for (int i = 0; i < g->n_values; i++) {
    const mg_value *v = g->values[i];
    if ((v->kind == MG_V_NODE || v->kind == MG_V_INPUT) && v->vtype == MG_VT_TENSOR &&
        (!mg_shape_is_static(&v->shape) || v->shape_declared))
      return 0;
  }
  return 1;
}

/* Whether input slot k of node n is an operand that decides a shape or plays
 * the part of an attribute (axes, pads, repeats, k, sizes), which generated code
 * needs at conversion time; data operands never qualify. */
static int shape_operand(const mg_node *n, int k) {
  switch (n->op) {
  case MG_OP_Reshape: case MG_OP_Expand: case MG_OP_Tile: case MG_OP_Pad: case MG_OP_TopK: case MG_OP_Squeeze:
  case MG_OP_Unsqueeze: case MG_OP_Split: case MG_OP_OneHot: case MG_OP_CumSum: case MG_OP_Trilu:
  case MG_OP_CenterCropPad: case MG_OP_SplitToSequence: case MG_OP_ReduceL1: case MG_OP_ReduceL2: case MG_OP_ReduceLogSum:
  case MG_OP_ReduceLogSumExp: case MG_OP_ReduceMax: case MG_OP_ReduceMean: case MG_OP_ReduceMin:
  case MG_OP_ReduceProd: case MG_OP_ReduceSum: case MG_OP_ReduceSumSquare:
    return k >= 1;
  case MG_OP_Slice: case MG_OP_Resize:
    return k >= 1;
  case MG_OP_ConstantOfShape: case MG_OP_Range:
    return 1;
  case MG_OP_MaxUnpool: /* output_shape */
    return k == 2;
  default:
    return 0;
  }
}

static int only_shape_uses(const mg_graph *g, const mg_value *v) {
  int uses = 0;
  for (int i = 0; i < g->n_nodes; i++)
    for (int k = 0; k < g->nodes[i]->n_in; k++)
      if (g->nodes[i]->in[k] == v) {
        if (!shape_operand(g->nodes[i], k)) return 0;
        uses++;
      }
  return uses > 0;
}

/* Turns graph inputs that only decide shapes (shape_operand) into
 * constants holding set 0's data; bound[i] marks them (by original input index).
 * 1 when any was bound, 0 when none, -1 on OOM. */
int conf_bind_int_inputs(mg_model *m, const mg_array *in, int n_in, char *bound) {
  mg_graph *g = m->graph;
  int k = 0, any = 0;
  for (int i = 0; i < g->n_inputs; i++) {
    mg_value *v = g->inputs[i];
    const mg_array *a = NULL;
    for (int j = 0; j < n_in; j++)
      if (in[j].name && !strcmp(in[j].name, v->name)) a = &in[j];
    if (!a || a->dtype != v->dtype || !only_shape_uses(g, v)) {
      g->inputs[k++] = v;
      continue;
    }
    void *data = mg_arena_memdup(&m->arena, a->data, a->nbytes ? a->nbytes : 1);
    if (!data) return -1;
    v->kind = MG_V_CONST;
    v->data = data;
    v->nbytes = a->nbytes;
    v->shape.rank = a->rank;
    for (int r = 0; r < a->rank; r++) {
      v->shape.d[r].v = a->dims[r];
      v->shape.d[r].sym = NULL;
    }
    bound[i] = 1;
    any = 1;
  }
  g->n_inputs = k;
  return any;
}

/* Shape overrides, from set 0's data, for the tensor inputs whose declared shape
 * is not static (a test runs one shape, so its C code may be specialised to it).
 * Returns their count (names strdup'ed: free with free_shapes), or -1. */
int conf_data_shapes(const mg_model *m, const mg_array *in, int n_in, mg_shape_override *ov) {
  int n = 0;
  for (int i = 0; i < m->graph->n_inputs && n < 64; i++) {
    const mg_value *v = m->graph->inputs[i];
    if (v->vtype != MG_VT_TENSOR || (v->shape.rank >= 0 && mg_shape_is_static(&v->shape))) continue;
    for (int j = 0; j < n_in; j++)
      if (in[j].name && !strcmp(in[j].name, v->name) && in[j].rank <= MG_MAX_RANK) {
        ov[n].name = strdup(v->name); /* outlives the model */
        if (!ov[n].name) {
          while (n--) free((char *)ov[n].name);
          return -1;
        }
        ov[n].shape.rank = in[j].rank;
        for (int r = 0; r < in[j].rank; r++) {
          ov[n].shape.d[r].v = in[j].dims[r];
          ov[n].shape.d[r].sym = NULL;
        }
        n++;
        break;
      }
  }
  return n;
}

void conf_free_shapes(mg_shape_override *ov, int n) {
  for (int i = 0; i < n; i++) free((char *)ov[i].name);
}

static const char *first_unsupported(const mg_diags *d) {
  for (size_t i = 0; i < d->count; i++)
    if (d->items[i].code == MG_D_UNSUPPORTED) return d->items[i].message;
  return conf_unsupported_reason(d);
}

void conf_c_queue(conf_ctx *cc, conf_c *q, const char *name, const char *model_path, mg_array **ins, int *n_ins,
                  mg_array **exps, int *n_exps, int n_sets) {
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  char why[2048] = "", bound[64] = {0};
  result r = R_PASS;
  mg_shape_override ov[64];
  int n_ov = 0;
  if (!onnx_import(model_path, &d, &m)) m->derive_shapes_only = 1;
  if (!m || mg_prepare(m, NULL, 0, &d)) r = R_FAIL;
  for (int i = 0; r == R_PASS && i < m->graph->n_inputs + m->graph->n_outputs; i++) {
    const mg_value *v = i < m->graph->n_inputs ? m->graph->inputs[i] : m->graph->outputs[i - m->graph->n_inputs];
    if (v->dtype == MG_BF16) {
      r = R_SKIP;
      snprintf(why, sizeof why, "the runner's .npy files cannot hold bfloat16");
    }
  }
  if (r == R_PASS && !all_static(m->graph)) {
    /* integer inputs that decide shapes are bound to the test's values */
    mg_model_free(m);
    m = NULL;
    if (onnx_import(model_path, &d, &m) || (m->derive_shapes_only = 1, m->graph->n_inputs > 64) ||
        conf_bind_int_inputs(m, ins[0], n_ins[0], bound) < 0 || (n_ov = conf_data_shapes(m, ins[0], n_ins[0], ov)) < 0 ||
        mg_prepare(m, ov, n_ov, &d))
      r = R_FAIL;
  }
  if (r == R_FAIL) {
    const char *u = conf_unsupported_reason(&d);
    char line[1024] = "";
    if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
    snprintf(why, sizeof why, "%s", u ? u : line);
    r = u ? R_SKIP : R_FAIL;
  }
  c_test t = {0};
  if (r == R_PASS) {
    mg_graph *g = m->graph;
    t.n_in = g->n_inputs;
    t.n_out = g->n_outputs;
    t.in_names = calloc((size_t)t.n_in + 1, sizeof(char *));
    t.out_names = calloc((size_t)t.n_out + 1, sizeof(char *));
    for (int i = 0; t.in_names && i < t.n_in; i++) t.in_names[i] = strdup(g->inputs[i]->name);
    for (int i = 0; t.out_names && i < t.n_out; i++) t.out_names[i] = strdup(g->outputs[i]->name);
    char prefix[32];
    t.id = q->next_id++;
    snprintf(prefix, sizeof prefix, "t%d", t.id);
    cg_options o = {.prefix = prefix, .no_runner = 1};
    cg_report rep;
    if (q->be.emit) {
      r = q->be.emit(q->be.ctx, m, prefix, q->work, model_path, &d, why, sizeof why, &t.note, &t.objs, &t.n_objs);
    } else if (emit_c(m, &o, q->work, &rep, &d)) {
      char line[1024] = "";
      if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
      snprintf(why, sizeof why, "conversion failed: %s", line);
      r = R_FAIL;
    } else if (rep.n_unsupported) {
      snprintf(why, sizeof why, "%s", first_unsupported(&d));
      r = R_SKIP;
    }
  }
  mg_model_free(m);
  mg_diags_free(&d);
  if (r != R_PASS) {
    conf_report(cc, name, r, why);
    free_sets(ins, n_ins, exps, n_exps, n_sets);
    for (int i = 0; i < t.n_in && t.in_names; i++) free(t.in_names[i]);
    for (int i = 0; i < t.n_out && t.out_names; i++) free(t.out_names[i]);
    free(t.in_names);
    free(t.out_names);
    free(t.note);
    for (int i = 0; i < t.n_objs; i++) free(t.objs[i]);
    free(t.objs);
    conf_free_shapes(ov, n_ov);
    return;
  }
  /* keep the sets whose bound inputs equal set 0's, inputs in run-time order */
  t.name = strdup(name);
  t.ins = calloc((size_t)n_sets, sizeof *t.ins);
  t.exps = calloc((size_t)n_sets, sizeof *t.exps);
  t.n_exps = calloc((size_t)n_sets, sizeof *t.n_exps);
  for (int s = 0; s < n_sets; s++) {
    int same = 1;
    for (int j = 0; j < n_ins[s] && s > 0; j++)
      for (int k = 0; k < n_ins[0]; k++)
        if (!strcmp(ins[s][j].name, ins[0][k].name)) {
          int is_bound = 1;
          for (int r2 = 0; r2 < t.n_in; r2++) is_bound &= strcmp(t.in_names[r2], ins[0][k].name) != 0;
          if (is_bound && (ins[s][j].nbytes != ins[0][k].nbytes || memcmp(ins[s][j].data, ins[0][k].data, ins[0][k].nbytes)))
            same = 0;
        }
    for (int j = 0; j < n_ins[s] && same; j++)
      for (int k = 0; k < n_ov; k++)
        if (ins[s][j].name && !strcmp(ins[s][j].name, ov[k].name)) {
          same = ins[s][j].rank == ov[k].shape.rank;
          for (int r2 = 0; same && r2 < ov[k].shape.rank; r2++) same = ins[s][j].dims[r2] == ov[k].shape.d[r2].v;
        }
    mg_array *ordered = mg_calloc((size_t)t.n_in + 1, sizeof(mg_array));
    int ok = same && ordered;
    for (int i = 0; ok && i < t.n_in; i++) {
      int found = 0;
      for (int j = 0; j < n_ins[s]; j++)
        if (ins[s][j].name && !strcmp(ins[s][j].name, t.in_names[i])) {
          ordered[i] = ins[s][j];
          memset(&ins[s][j], 0, sizeof ins[s][j]);
          found = 1;
          break;
        }
      ok = found;
    }
    mg_arrays_free(ins[s], n_ins[s]);
    if (!ok) {
      mg_arrays_free(ordered, t.n_in);
      mg_arrays_free(exps[s], n_exps[s]);
      continue;
    }
    t.ins[t.n_sets] = ordered;
    t.exps[t.n_sets] = exps[s];
    t.n_exps[t.n_sets] = n_exps[s];
    t.n_sets++;
  }
  if (q->n == q->cap) {
    q->cap = q->cap ? q->cap * 2 : 256;
    q->tests = realloc(q->tests, sizeof *q->tests * (size_t)q->cap);
  }
  q->tests[q->n++] = t;
  conf_free_shapes(ov, n_ov);
}

/* Runs argv with stdout/stderr to log_path; returns the exit status, or -1. */
static int spawn(char *const argv[], const char *log_path) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (!pid) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) < 0) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int file_exists(const char *p) {
  struct stat st;
  return !stat(p, &st);
}

/* The log's first line holding an error or the runner's message; 1 when it is
 * the aclnn emulator's (an "acl-emu: error" line, preferred over any other). */
static int first_line(const char *path, char *out, size_t n) {
  out[0] = 0;
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  char line[1024];
  int emu = 0;
  while (!emu && fgets(line, sizeof line, f)) {
    emu = strstr(line, "acl-emu: error") != NULL;
    if (emu || (!out[0] && (strstr(line, "error") || strstr(line, "runner:")))) {
      line[strcspn(line, "\n")] = 0;
      snprintf(out, n, "%s", line);
    }
  }
  fclose(f);
  return emu;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void free_test(c_test *t) {
  for (int s = 0; s < t->n_sets; s++) {
    mg_arrays_free(t->ins[s], t->n_in);
    mg_arrays_free(t->exps[s], t->n_exps[s]);
  }
  for (int i = 0; i < t->n_in; i++) free(t->in_names[i]);
  for (int i = 0; i < t->n_out; i++) free(t->out_names[i]);
  free(t->in_names);
  free(t->out_names);
  free(t->ins);
  free(t->exps);
  free(t->n_exps);
  free(t->name);
  free(t->note);
  for (int i = 0; i < t->n_objs; i++) free(t->objs[i]);
  free(t->objs);
  free(t->unlinked);
}

/* Writes the work folder's Makefile and compiles every object (make -k). */
static void compile_all(conf_c *q, char *log, size_t n) {
  char path[4200];
  snprintf(path, sizeof path, "%s/Makefile", q->work);
  FILE *f = fopen(path, "w");
  if (!f) return;
  /* -O1: the tests' tensors hold a few values, so compiling ~900 models is the
   * cost, not running them. The -O3 builds of generated projects are what the
   * torchvision, detection and portability suites compile. */
  fprintf(f, "CC ?= cc\nCFLAGS = -std=c99 -Wall -Wextra -pedantic -Werror -O1 -march=native -I. -Iruntime\n");
  fprintf(f, "RT = $(patsubst %%.c,%%.o,$(wildcard runtime/*.c))\nEXTRA =\n");
  if (q->be.makefile) q->be.makefile(q->be.ctx, f);
  fprintf(f, "MODELS =");
  for (int i = 0; i < q->n; i++) {
    fprintf(f, " t%d.o", q->tests[i].id);
    for (int k = 0; k < q->tests[i].n_objs; k++) fprintf(f, " %s", q->tests[i].objs[k]);
  }
  fprintf(f, "\nall: $(RT) $(EXTRA) $(MODELS) main.o\n%%.o: %%.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n");
  fclose(f);
  snprintf(path, sizeof path, "%s/codegen/c/runner/main.c", cg_source_dir());
  char dst[4200];
  snprintf(dst, sizeof dst, "%s/main.c", q->work);
  FILE *in = fopen(path, "rb"), *out = fopen(dst, "wb");
  if (in && out) {
    char buf[8192];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, k, out);
  }
  if (in) fclose(in);
  if (out) fclose(out);
  char jobs[32];
  snprintf(jobs, sizeof jobs, "-j%d", q->jobs);
  snprintf(log, n, "%s/build.log", q->work);
  char *argv[] = {"make", "-k", "-s", jobs, "-C", q->work, "all", NULL};
  fprintf(stderr, "conformance: compiling %d generated models in %s (%s)\n", q->n, q->work, jobs);
  spawn(argv, log);
}

/* Whether t's objects all compiled (the model and what it needs linked) and it
 * was not left out of the link. */
static int built(const conf_c *q, const c_test *t) {
  char obj[4300];
  snprintf(obj, sizeof obj, "%s/t%d.o", q->work, t->id);
  int ok = !t->unlinked && file_exists(obj);
  for (int k = 0; ok && k < t->n_objs; k++) {
    snprintf(obj, sizeof obj, "%s/%s", q->work, t->objs[k]);
    ok = file_exists(obj);
  }
  return ok;
}

/* The test id of the object a linker line names ("ld: t12.o: ...", "t12.c:(.text...",
 * "t12_host_x.o: ..."), or -1. */
static int obj_id(const char *line) {
  const char *p = strstr(line, "ld: ");
  p = p ? p + 4 : line;
  if (*p != 't' || p[1] < '0' || p[1] > '9') return -1;
  char *end;
  long id = strtol(p + 1, &end, 10);
  return *end == '.' || *end == '_' ? (int)id : -1;
}

/* Leaves out of the next link every test whose objects the linker log says have an
 * undefined reference (a function the runner lacks); how many it left out. */
static int leave_out_unlinked(conf_c *q, const char *log) {
  FILE *f = fopen(log, "r");
  if (!f) return 0;
  char line[2048];
  int cur = -1, n = 0;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = 0;
    int id = obj_id(line);
    if (id >= 0) cur = id;
    const char *u = strstr(line, "undefined reference to ");
    if (!u || cur < 0) continue;
    for (int i = 0; i < q->n; i++)
      if (q->tests[i].id == cur && !q->tests[i].unlinked) {
        size_t len = strlen(u) + 64;
        if ((q->tests[i].unlinked = malloc(len)))
          snprintf(q->tests[i].unlinked, len, "the runner does not link it: %s", u), n++;
      }
  }
  fclose(f);
  return n;
}

/* Writes models.c and link.mk for the tests that built. */
static int write_link(conf_c *q) {
  char path[4200];
  snprintf(path, sizeof path, "%s/models.c", q->work);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "#include \"mg_runtime.h\"\n");
  int linked = 0;
  for (int i = 0; i < q->n; i++)
    if (built(q, &q->tests[i])) fprintf(f, "extern const mg_rt_model t%d_desc;\n", q->tests[i].id), linked++;
  fprintf(f, "const mg_rt_model *const mg_rt_models[] = {");
  for (int i = 0; i < q->n; i++)
    if (built(q, &q->tests[i])) fprintf(f, "&t%d_desc, ", q->tests[i].id);
  fprintf(f, "0};\nconst char *const mg_rt_weights_files[] = {");
  for (int i = 0; i < q->n; i++)
    if (built(q, &q->tests[i])) fprintf(f, "\"t%d.weights\", ", q->tests[i].id);
  fprintf(f, "0};\nconst int mg_rt_n_models = %d;\n", linked);
  if (fclose(f)) return -1;
  snprintf(path, sizeof path, "%s/link.mk", q->work);
  if (!(f = fopen(path, "w"))) return -1;
  fprintf(f, "include Makefile\nLINKED =");
  for (int i = 0; i < q->n; i++) {
    if (!built(q, &q->tests[i])) continue;
    fprintf(f, " t%d.o", q->tests[i].id);
    for (int k = 0; k < q->tests[i].n_objs; k++) fprintf(f, " %s", q->tests[i].objs[k]);
  }
  fprintf(f, "\nrunner: models.o main.o $(RT) $(EXTRA) $(LINKED)\n\t$(CC) -o $@ $^ -lm\n");
  return fclose(f) ? -1 : 0;
}

/* Links the runner of the tests that built; a test whose objects do not link (an
 * undefined reference) is left out and the rest linked again. 0 when it linked. */
static int link_runner(conf_c *q, const char *log) {
  char log2[4300];
  snprintf(log2, sizeof log2, "%s.link", log);
  for (int tries = 0; tries < 4; tries++) {
    if (write_link(q)) return -1;
    char *argv[] = {"make", "-s", "-C", q->work, "-f", "link.mk", "runner", NULL};
    if (!spawn(argv, log2)) return 0;
    if (!leave_out_unlinked(q, log2)) return -1;
  }
  return -1;
}

/* Runs t's datasets; its result (a pass counts into *noted when t has a note). */
static result run_one(conf_ctx *cc, conf_c *q, c_test *t) {
  char why[2048] = "";
  result r = R_PASS;
  if (!built(q, t)) {
    conf_report(cc, t->name, R_FAIL,
                t->unlinked ? t->unlinked : "the generated C does not compile (see build.log; --keep keeps it)");
    return R_FAIL;
  }
  for (int s = 0; s < t->n_sets && r == R_PASS; s++) {
    char dir[4300], log[4400], runner[4300], model[32], weights[4300];
    snprintf(dir, sizeof dir, "%s/io/t%d_%d", q->work, t->id, s);
    char io[4300];
    snprintf(io, sizeof io, "%s/io", q->work);
    mkdir(io, 0777);
    mkdir(dir, 0777);
    char **argv = calloc((size_t)(2 * t->n_in + 12), sizeof(char *));
    char **owned = calloc((size_t)t->n_in + 1, sizeof(char *));
    if (!argv || !owned) {
      free(argv);
      free(owned);
      conf_report(cc, t->name, R_FAIL, "out of memory");
      return R_FAIL;
    }
    int a = 0;
    snprintf(runner, sizeof runner, "%s/runner", q->work);
    snprintf(model, sizeof model, "t%d", t->id);
    snprintf(weights, sizeof weights, "%s/t%d.weights", q->work, t->id);
    argv[a++] = runner;
    argv[a++] = "--model";
    argv[a++] = model;
    argv[a++] = "--weights";
    argv[a++] = weights;
    argv[a++] = "--output-dir";
    argv[a++] = dir;
    for (int i = 0; i < t->n_in && r == R_PASS; i++) {
      char path[4400];
      snprintf(path, sizeof path, "%s/in_%d.npy", dir, i);
      mg_diags d;
      mg_diags_init(&d);
      if (npy_write_file(path, &t->ins[s][i], &d)) {
        r = R_SKIP;
        snprintf(why, sizeof why, "input %d cannot be written as .npy", i);
      }
      mg_diags_free(&d);
      size_t len = strlen(t->in_names[i]) + strlen(path) + 2;
      owned[i] = malloc(len);
      if (owned[i]) snprintf(owned[i], len, "%s=%s", t->in_names[i], path);
      argv[a++] = "--input";
      argv[a++] = owned[i] ? owned[i] : "?";
    }
    snprintf(log, sizeof log, "%s/run.log", dir);
    int st = r == R_PASS ? spawn(argv, log) : 0;
    for (int i = 0; i < t->n_in; i++) free(owned[i]);
    free(owned);
    free(argv);
    if (r != R_PASS) break;
    char line[1024];
    int emu = first_line(log, line, sizeof line);
    if (st || emu) { /* the emulator's contract violation is the reason, whatever the exit */
      if (emu) snprintf(why, sizeof why, "%s", line);
      else snprintf(why, sizeof why, "runner exited %d: %s", st, line);
      r = R_FAIL;
      break;
    }
    for (int k = 0; k < t->n_exps[s] && k < t->n_out && r == R_PASS; k++) {
      char fname[1024], path[5500];
      cli_output_file((const char *const *)t->out_names, t->n_out, k, fname, sizeof fname);
      snprintf(path, sizeof path, "%s/%s", dir, fname);
      mg_array got;
      mg_diags d;
      mg_diags_init(&d);
      if (npy_read_file(path, &got, &d)) {
        r = R_FAIL;
        snprintf(why, sizeof why, "output '%s' was not written", t->out_names[k]);
      } else {
        char w[900];
        if (conf_compare(cc, &got, &t->exps[s][k], w, sizeof w)) {
          snprintf(why, sizeof why, "output '%s': %s", t->out_names[k], w);
          r = R_FAIL;
        }
        mg_array_free(&got);
      }
      mg_diags_free(&d);
    }
  }
  conf_report_note(cc, t->name, r, why, t->note);
  return r;
}

void conf_c_finish(conf_ctx *cc, conf_c *q) {
  int plain = 0, noted = 0;
  if (q->n) {
    char log[4200];
    compile_all(q, log, sizeof log);
    if (link_runner(q, log)) {
      for (int i = 0; i < q->n; i++)
        conf_report(cc, q->tests[i].name, R_FAIL, "the runner of the generated models does not link (see build.log)");
    } else {
      for (int i = 0; i < q->n; i++)
        if (run_one(cc, q, &q->tests[i]) == R_PASS) q->tests[i].note ? noted++ : plain++;
    }
  }
  if (q->be.finish) q->be.finish(q->be.ctx, plain, noted);
  for (int i = 0; i < q->n; i++) free_test(&q->tests[i]);
  free(q->tests);
  if (q->made_tmp && !q->keep) nftw(q->work, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  else fprintf(stderr, "conformance: the generated code is in %s\n", q->work);
  free(q);
}
