/* migc conformance DIR... [--backend interp|c|mindspore-emu|ascend-emu] [--xfail FILE] [--rtol R] [--atol A]
 *
 * Runs ONNX backend test folders (model.onnx + test_data_set_N/{input,output}_K.pb)
 * and the light/ whole-model tests, one line per test, ending with
 * "N passed, N failed, N skipped". */
#include "cli.h"
#include "outfile.h"
#include "conformance.h"
#include "interp.h"
#include "onnx_import.h"
#include "passes.h"
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc conformance DIR... [--backend interp|c|mindspore-emu|ascend-emu] [--xfail FILE] [--rtol R] [--atol A]\n"
          "\n"
          "Runs every ONNX backend test under each DIR: a folder holding model.onnx and\n"
          "test_data_set_N/{input,output}_K.pb, a folder of such folders, or a folder of\n"
          "light_X.onnx models with light_X_output_0.pb. Prints one line per test (pass,\n"
          "FAIL with its largest error, skip with a reason, xfail) and ends with\n"
          "\"N passed, N failed, N skipped\". Exits 1 on a failure not listed in the xfail\n"
          "file (lines: TEST-NAME REASON).\n"
          "\n"
          "  --backend B   interp (the reference interpreter; default) or c (migc convert\n"
          "                --target cpu: every test is converted, all are compiled into one\n"
          "                runner, then each is run; integer inputs that decide shapes are\n"
          "                bound at conversion, since generated code has static shapes)\n"
          "                or mindspore-emu (migc convert --target mindspore: every test's\n"
          "                net.py and model.ckpt, run through the MindSpore stand-in\n"
          "                tests/mindspore_standin by tools/ms_emu_run.py under\n"
          "                /usr/bin/python3, or $MIGC_PYTHON; a net with an ops.Custom\n"
          "                kernel or a node it cannot compute is a skip) or ascend-emu\n"
          "                (migc convert --target ascend: tests prepared as for c, every\n"
          "                aclnn host program compiled with the aclnn emulator ascend_emu/\n"
          "                into one runner; an \"acl-emu: error\" fails the test, a pass\n"
          "                through a host fallback says so, a node neither an aclnn call\n"
          "                nor a host fallback takes is a skip)\n"
          "  --only GLOB   run only the tests whose name matches GLOB (e.g. 'test_conv*')\n"
          "  --work DIR    the C, ascend-emu or mindspore-emu backend's folder (default: a new one under /tmp,\n"
          "                removed afterwards unless --keep)\n"
          "  -j N          compile jobs for the C and ascend-emu backends, Python processes for mindspore-emu\n"
          "                (default: the number of CPUs)\n"
          "  --rtol R      relative tolerance (default 1e-3, ONNX's backend default)\n"
          "  --atol A      absolute tolerance (default 1e-7)\n");
}

static const char *xfail_reason(const xfail_list *x, const char *name) {
  for (int i = 0; i < x->n; i++)
    if (!strcmp(x->names[i], name)) return x->reasons[i];
  return NULL;
}

static int load_xfail(const char *path, xfail_list *x) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "migc conformance: cannot open xfail file %s\n", path);
    return -1;
  }
  char line[2048];
  int lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    line[strcspn(line, "\r\n")] = 0;
    char *p = line + strspn(line, " \t");
    if (!*p || *p == '#') continue;
    char *sp = p + strcspn(p, " \t");
    char *reason = *sp ? sp + strspn(sp, " \t") : sp;
    if (!*sp || !*reason) {
      fprintf(stderr, "%s:%d: an xfail entry needs a test name and a reason\n", path, lineno);
      fclose(f);
      return -1;
    }
    *sp = 0;
    x->names = realloc(x->names, sizeof(char *) * (size_t)(x->n + 1));
    x->reasons = realloc(x->reasons, sizeof(char *) * (size_t)(x->n + 1));
    if (!x->names || !x->reasons) {
      fclose(f);
      return -1;
    }
    x->names[x->n] = strdup(p);
    x->reasons[x->n] = strdup(reason);
    x->n++;
  }
  fclose(f);
  return 0;
}

static int is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISREG(st.st_mode);
}

static int value_to_array(const mg_value *v, mg_array *a) {
  memset(a, 0, sizeof *a);
  if (v->dtype == MG_STRING) { /* deep copy: mg_array owns each string */
    int64_t k = (int64_t)(v->nbytes / sizeof(char *));
    a->dtype = MG_STRING;
    a->rank = v->shape.rank;
    for (int i = 0; i < v->shape.rank; i++) a->dims[i] = v->shape.d[i].v;
    a->data = calloc((size_t)k + 1, sizeof(char *));
    if (!a->data) return -1;
    a->nbytes = (size_t)k * sizeof(char *);
    for (int64_t i = 0; i < k; i++)
      if (!(((char **)a->data)[i] = strdup(((char *const *)v->data)[i]))) return -1;
    return 0;
  }
  a->dtype = v->dtype;
  a->rank = v->shape.rank;
  for (int i = 0; i < v->shape.rank; i++) a->dims[i] = v->shape.d[i].v;
  a->nbytes = v->nbytes;
  a->data = malloc(v->nbytes ? v->nbytes : 1);
  if (!a->data) return -1;
  if (v->nbytes) memcpy(a->data, v->data, v->nbytes);
  return 0;
}

/* Is this diagnostic list a "not supported" (skip) rather than a failure? */
const char *conf_unsupported_reason(const mg_diags *d) {
  for (size_t i = 0; i < d->count; i++) {
    mg_diag_code c = d->items[i].code;
    if (c == MG_D_UNKNOWN_OP || c == MG_D_UNSUPPORTED_ATTR || c == MG_D_UNSUPPORTED_DTYPE ||
        c == MG_D_LIMIT)
      return d->items[i].message;
  }
  return NULL;
}

static double elem(const mg_array *a, int64_t k) {
  return mg_load_f64(a->dtype, (const unsigned char *)a->data + (size_t)k * mg_dtype_size(a->dtype));
}

/* Compares got against want; on mismatch writes a reason and returns 1. */
int conf_compare(const conf_ctx *cc, const mg_array *got, const mg_array *want, char *why, size_t n) {
  if ((got->dtype == MG_C64 || got->dtype == MG_C128) && got->rank < MG_ARRAY_MAX_RANK &&
      want->rank < MG_ARRAY_MAX_RANK) {
    /* compare complex tensors as pairs of reals */
    mg_array g = *got, w = *want;
    g.dtype = w.dtype = got->dtype == MG_C64 ? MG_F32 : MG_F64;
    g.dims[g.rank++] = 2;
    w.dims[w.rank++] = 2;
    if (got->dtype == want->dtype) return conf_compare(cc, &g, &w, why, n);
  }
  if (got->dtype != want->dtype) {
    snprintf(why, n, "dtype %s, expected %s", mg_dtype_name(got->dtype), mg_dtype_name(want->dtype));
    return 1;
  }
  int same = got->rank == want->rank;
  for (int i = 0; same && i < got->rank; i++) same = got->dims[i] == want->dims[i];
  if (!same) {
    char a[128] = "", b[128] = "";
    for (int i = 0; i < got->rank; i++) snprintf(a + strlen(a), sizeof a - strlen(a), "%s%lld", i ? "x" : "", (long long)got->dims[i]);
    for (int i = 0; i < want->rank; i++) snprintf(b + strlen(b), sizeof b - strlen(b), "%s%lld", i ? "x" : "", (long long)want->dims[i]);
    snprintf(why, n, "shape %s, expected %s", got->rank ? a : "scalar", want->rank ? b : "scalar");
    return 1;
  }
  if (got->dtype == MG_STRING) {
    int64_t cnt = (int64_t)(got->nbytes / sizeof(char *));
    for (int64_t i = 0; i < cnt; i++) {
      const char *g = ((char *const *)got->data)[i], *w = ((char *const *)want->data)[i];
      if (strcmp(g ? g : "", w ? w : "")) {
        snprintf(why, n, "string %lld is \"%s\", expected \"%s\"", (long long)i, g ? g : "", w ? w : "");
        return 1;
      }
    }
    return 0;
  }
  int64_t k = 1, worst = -1, bad = 0;
  for (int i = 0; i < got->rank; i++) k *= got->dims[i];
  double max_err = 0;
  int exact = !mg_dtype_is_float(got->dtype);
  for (int64_t i = 0; i < k; i++) {
    double g = elem(got, i), w = elem(want, i);
    if (exact && got->dtype == MG_I64) {
      int64_t gi, wi;
      memcpy(&gi, (const char *)got->data + 8 * i, 8);
      memcpy(&wi, (const char *)want->data + 8 * i, 8);
      if (gi != wi) { bad++; if (worst < 0) worst = i; max_err = fmax(max_err, fabs(g - w)); }
      continue;
    }
    if (isnan(w) && isnan(g)) continue;
    if (isinf(w) && g == w) continue;
    double err = fabs(g - w);
    if (isnan(err)) err = INFINITY;
    if (exact ? g != w : !(err <= cc->atol + cc->rtol * fabs(w))) {
      bad++;
      if (err >= max_err) worst = i;
    }
    if (err > max_err) max_err = err;
  }
  if (!bad) return 0;
  snprintf(why, n, "max abs error %.3g; %lld of %lld elements out of tolerance (first worst at %lld: got %.9g, expected %.9g)",
           max_err, (long long)bad, (long long)k, (long long)worst, elem(got, worst), elem(want, worst));
  return 1;
}


static result run_case(conf_ctx *cc, mg_model *m, mg_array *inputs, int n_in, mg_array *expected,
                       int n_exp, char *why, size_t wn) {
  mg_diags d;
  mg_diags_init(&d);
  mg_array *outs = NULL;
  result r = R_PASS;
  if (interp_run(m, inputs, n_in, NULL, &outs, &d)) {
    const char *u = conf_unsupported_reason(&d);
    char line[1024] = "";
    if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
    snprintf(why, wn, "%s", u ? u : line);
    r = u ? R_SKIP : R_FAIL;
  } else {
    for (int i = 0; i < n_exp && i < m->graph->n_outputs && r == R_PASS; i++) {
      char w[900];
      if (conf_compare(cc, &outs[i], &expected[i], w, sizeof w)) {
        snprintf(why, wn, "output '%s': %s", m->graph->outputs[i]->name, w);
        r = R_FAIL;
      }
    }
    mg_arrays_free(outs, m->graph->n_outputs);
  }
  mg_diags_free(&d);
  return r;
}

void conf_report(conf_ctx *cc, const char *name, result r, const char *why) {
  conf_report_note(cc, name, r, why, NULL);
}

void conf_report_note(conf_ctx *cc, const char *name, result r, const char *why, const char *note) {
  const char *xr = xfail_reason(&cc->xfail, name);
  if (r == R_PASS) {
    cc->passed++;
    printf("pass  %s%s%s%s%s\n", name, note ? "  (" : "", note ? note : "", note ? ")" : "",
           xr ? "  (listed as xfail: remove the entry)" : "");
  } else if (r == R_SKIP) {
    cc->skipped++;
    printf("skip  %s: %s\n", name, why);
  } else if (xr) {
    cc->xfailed++;
    cc->failed++;
    printf("xfail %s: %s  [%s]\n", name, why, xr);
  } else {
    cc->failed++;
    printf("FAIL  %s: %s\n", name, why);
  }
  fflush(stdout);
}

static mg_model *load(const char *path, char *why, size_t wn, result *r) {
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  if (onnx_import(path, &d, &m) || mg_prepare(m, NULL, 0, &d)) {
    const char *u = conf_unsupported_reason(&d);
    char line[1024] = "";
    if (d.count) mg_diag_format(&d.items[0], line, sizeof line);
    snprintf(why, wn, "%s", u ? u : line);
    *r = u ? R_SKIP : R_FAIL;
    mg_model_free(m);
    m = NULL;
  }
  mg_diags_free(&d);
  return m;
}

int conf_read_pb(const char *path, mg_model *m, mg_array *a) {
  mg_diags d;
  mg_diags_init(&d);
  mg_value *v;
  int rc = onnx_read_tensor(path, m, &v, &d) ? -1 : value_to_array(v, a);
  mg_diags_free(&d);
  return rc;
}

/* Hands one test to the queue of the backend that batches (C or mindspore-emu). */
static void queue_test(conf_ctx *cc, const char *name, const char *model_path, mg_array **ins, int *n_ins,
                       mg_array **exps, int *n_exps, int n_sets) {
  if (cc->mq) conf_ms_queue(cc, cc->mq, name, model_path, ins, n_ins, exps, n_exps, n_sets);
  else conf_c_queue(cc, cc->cq, name, model_path, ins, n_ins, exps, n_exps, n_sets);
}

/* Reads test_data_set_* of dir for a batching backend's queue; unreadable data is a skip. */
static void queue_test_dir(conf_ctx *cc, const char *dir, const char *name, mg_model *m) {
  mg_graph *g = m->graph;
  mg_array *ins[16], *exps[16];
  int n_ins[16], n_exps[16], sets = 0;
  char path[4200];
  for (int s = 0; s < 16; s++) {
    char set[3000];
    snprintf(set, sizeof set, "%s/test_data_set_%d", dir, s);
    if (!is_dir(set)) break;
    ins[sets] = mg_calloc(64, sizeof(mg_array));
    exps[sets] = mg_calloc(64, sizeof(mg_array));
    n_ins[sets] = n_exps[sets] = 0;
    int bad = !ins[sets] || !exps[sets];
    for (int k = 0; k < 64 && !bad; k++) {
      snprintf(path, sizeof path, "%s/input_%d.pb", set, k);
      if (!is_file(path)) break;
      mg_array *a = &ins[sets][n_ins[sets]];
      if (k >= g->n_inputs || conf_read_pb(path, m, a)) { bad = 1; break; }
      a->name = strdup(g->inputs[k]->name);
      if (a->dtype == MG_U16 && g->inputs[k]->dtype == MG_BF16) a->dtype = MG_BF16;
      n_ins[sets]++;
    }
    for (int k = 0; k < 64 && !bad; k++) {
      snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
      if (!is_file(path)) break;
      mg_array *a = &exps[sets][n_exps[sets]];
      if (conf_read_pb(path, m, a)) { bad = 1; break; }
      if (a->dtype == MG_U16 && k < g->n_outputs && g->outputs[k]->dtype == MG_BF16) a->dtype = MG_BF16;
      n_exps[sets]++;
    }
    sets++;
    if (bad) {
      for (int i = 0; i < sets; i++) {
        if (ins[i]) mg_arrays_free(ins[i], n_ins[i]);
        if (exps[i]) mg_arrays_free(exps[i], n_exps[i]);
      }
      conf_report(cc, name, R_SKIP, "test data could not be read as tensors (sequence/optional/string data)");
      return;
    }
  }
  if (!sets) {
    conf_report(cc, name, R_SKIP, "no test_data_set");
    return;
  }
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  queue_test(cc, name, path, ins, n_ins, exps, n_exps, sets);
}

/* One backend test folder. */
static void run_test_dir(conf_ctx *cc, const char *dir, const char *name) {
  char path[4200], why[2048] = "";
  result r = R_PASS;
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  mg_model *m = load(path, why, sizeof why, &r);
  if (!m) {
    conf_report(cc, name, r, why);
    return;
  }
  mg_graph *g = m->graph;
  for (int i = 0; i < g->n_inputs; i++)
    if (g->inputs[i]->vtype != MG_VT_TENSOR) {
      conf_report(cc, name, R_SKIP, "sequence or optional inputs are not supported by the runner");
      mg_model_free(m);
      return;
    }
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i]->vtype != MG_VT_TENSOR) {
      conf_report(cc, name, R_SKIP, "sequence or optional outputs are not supported by the runner");
      mg_model_free(m);
      return;
    }
  if (cc->cq || cc->mq) {
    queue_test_dir(cc, dir, name, m);
    mg_model_free(m);
    return;
  }
  int sets = 0;
  for (int s = 0; r == R_PASS; s++) {
    char set[3000];
    snprintf(set, sizeof set, "%s/test_data_set_%d", dir, s);
    if (!is_dir(set)) break;
    sets++;
    mg_array in[64], exp[64];
    int n_in = 0, n_exp = 0, bad = 0;
    for (int k = 0; k < 64; k++) {
      snprintf(path, sizeof path, "%s/input_%d.pb", set, k);
      if (!is_file(path)) break;
      if (k >= g->n_inputs || conf_read_pb(path, m, &in[n_in])) { bad = 1; break; }
      in[n_in].name = strdup(g->inputs[k]->name);
      /* onnx 1.12's generator stores bfloat16 test data as uint16 bit patterns */
      if (in[n_in].dtype == MG_U16 && g->inputs[k]->dtype == MG_BF16) in[n_in].dtype = MG_BF16;
      n_in++;
    }
    for (int k = 0; k < 64 && !bad; k++) {
      snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
      if (!is_file(path)) break;
      if (conf_read_pb(path, m, &exp[n_exp])) { bad = 1; break; }
      if (exp[n_exp].dtype == MG_U16 && k < g->n_outputs && g->outputs[k]->dtype == MG_BF16)
        exp[n_exp].dtype = MG_BF16;
      n_exp++;
    }
    if (bad) {
      r = R_SKIP;
      snprintf(why, sizeof why, "test data could not be read as tensors (sequence/optional/string data)");
    } else {
      r = run_case(cc, m, in, n_in, exp, n_exp, why, sizeof why);
    }
    for (int k = 0; k < n_in; k++) mg_array_free(&in[k]);
    for (int k = 0; k < n_exp; k++) mg_array_free(&exp[k]);
  }
  if (!sets && r == R_PASS) {
    r = R_SKIP;
    snprintf(why, sizeof why, "no test_data_set");
  }
  conf_report(cc, name, r, why);
  mg_model_free(m);
}

/* A light_X.onnx model: inputs are arange(n)/n, expected output light_X_output_0.pb. */
static void run_light(conf_ctx *cc, const char *model_path, const char *name) {
  char why[2048] = "", exp_path[4096];
  result r = R_PASS;
  mg_model *m = load(model_path, why, sizeof why, &r);
  if (!m) {
    conf_report(cc, name, r, why);
    return;
  }
  snprintf(exp_path, sizeof exp_path, "%.*s_output_0.pb", (int)(strlen(model_path) - 5), model_path);
  mg_array exp, in[16];
  int n_in = 0;
  if (conf_read_pb(exp_path, m, &exp)) {
    conf_report(cc, name, R_FAIL, "cannot read the expected output");
    mg_model_free(m);
    return;
  }
  for (int i = 0; i < m->graph->n_inputs && n_in < 16; i++) {
    const mg_value *v = m->graph->inputs[i];
    mg_array *a = &in[n_in++];
    memset(a, 0, sizeof *a);
    a->dtype = MG_F32;
    a->rank = v->shape.rank;
    int64_t k = 1;
    for (int d = 0; d < v->shape.rank; d++) {
      a->dims[d] = v->shape.d[d].v >= 0 ? v->shape.d[d].v : 1;
      k *= a->dims[d];
    }
    a->nbytes = (size_t)k * 4;
    a->data = malloc(a->nbytes);
    a->name = strdup(v->name);
    for (int64_t e = 0; e < k; e++) {
      float x = (float)e / (float)k;
      memcpy((char *)a->data + 4 * e, &x, 4);
    }
  }
  if (cc->cq || cc->mq) {
    mg_array *qin = mg_calloc((size_t)n_in + 1, sizeof *qin), *qexp = mg_calloc(1, sizeof *qexp);
    if (!qin || !qexp) {
      mg_free(qin);
      mg_free(qexp);
      conf_report(cc, name, R_FAIL, "out of memory");
    } else {
      memcpy(qin, in, sizeof *in * (size_t)n_in);
      *qexp = exp;
      int nq = n_in, ne = 1;
      queue_test(cc, name, model_path, &qin, &nq, &qexp, &ne, 1);
    }
    mg_model_free(m);
    return;
  }
  r = run_case(cc, m, in, n_in, &exp, 1, why, sizeof why);
  conf_report(cc, name, r, why);
  for (int i = 0; i < n_in; i++) mg_array_free(&in[i]);
  mg_array_free(&exp);
  mg_model_free(m);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A test folder, a folder of test folders, or a folder of light models. */
static void run_path(conf_ctx *cc, const char *dir) {
  char path[3000];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  const char *base = strrchr(dir, '/');
  base = base && base[1] ? base + 1 : dir;
  if (is_file(path)) {
    if (!cc->only || !fnmatch(cc->only, base, 0)) run_test_dir(cc, dir, base);
    return;
  }
  DIR *dp = opendir(dir);
  if (!dp) {
    fprintf(stderr, "migc conformance: cannot open %s\n", dir);
    cc->failed++;
    return;
  }
  char **names = NULL;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    if (e->d_name[0] == '.') continue;
    names = realloc(names, sizeof(char *) * (size_t)(n + 1));
    names[n++] = strdup(e->d_name);
  }
  closedir(dp);
  qsort(names, (size_t)n, sizeof(char *), cmp_str);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    size_t len = strlen(names[i]);
    char model[4200];
    snprintf(model, sizeof model, "%s/model.onnx", path);
    if (cc->only && fnmatch(cc->only, names[i], 0)) {
      /* not selected */
    } else if (is_dir(path) && is_file(model)) {
      run_test_dir(cc, path, names[i]);
    } else if (len > 5 && !strcmp(names[i] + len - 5, ".onnx") && !strncmp(names[i], "light_", 6)) {
      char name[512];
      snprintf(name, sizeof name, "%.*s", (int)(len - 5), names[i]);
      run_light(cc, path, name);
    }
    free(names[i]);
  }
  free(names);
}

int cmd_conformance(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  /* every file goes to a work folder of conformance's own, test by test (the
   * runtime copied again for each): the scratch policy of the output rule */
  mg_out_scratch();
  conf_ctx cc = {.rtol = 1e-3, .atol = 1e-7};
  const char *dirs[256], *backend = "interp", *work = NULL;
  int n_dirs = 0, rc = EXIT_OK, keep = 0, jobs = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
      backend = argv[++i];
      if (strcmp(backend, "interp") && strcmp(backend, "c") && strcmp(backend, "mindspore-emu") &&
          strcmp(backend, "ascend-emu")) {
        fprintf(stderr,
                "migc conformance: backend '%s' is not available (interp, c, mindspore-emu and ascend-emu are)\n",
                backend);
        return EXIT_BAD_INPUT;
      }
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      cc.only = argv[++i];
    } else if (!strcmp(argv[i], "--work") && i + 1 < argc) {
      work = argv[++i];
    } else if (!strcmp(argv[i], "--keep")) {
      keep = 1;
    } else if (!strcmp(argv[i], "-j") && i + 1 < argc) {
      jobs = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--xfail") && i + 1 < argc) {
      if (load_xfail(argv[++i], &cc.xfail)) return EXIT_BAD_INPUT;
    } else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) {
      cc.rtol = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--atol") && i + 1 < argc) {
      cc.atol = atof(argv[++i]);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "migc conformance: unknown option '%s'\n", argv[i]);
      help(stderr);
      return EXIT_BAD_INPUT;
    } else if (n_dirs < 256) {
      dirs[n_dirs++] = argv[i];
    }
  }
  if (!n_dirs) {
    help(stderr);
    return EXIT_BAD_INPUT;
  }
  if (!strcmp(backend, "c")) {
    cc.cq = conf_c_new(work, keep, jobs);
    if (!cc.cq) return EXIT_BAD_INPUT;
  } else if (!strcmp(backend, "mindspore-emu")) {
    cc.mq = conf_ms_new(work, keep, jobs);
    if (!cc.mq) return EXIT_BAD_INPUT;
  } else if (!strcmp(backend, "ascend-emu")) { /* the C backend's queue with emit_ascend */
    cc.cq = conf_asc_new(work, keep, jobs);
    if (!cc.cq) return EXIT_BAD_INPUT;
  }
  for (int i = 0; i < n_dirs; i++) {
    if (!is_dir(dirs[i])) {
      fprintf(stderr, "migc conformance: %s is not a directory\n", dirs[i]);
      rc = EXIT_BAD_INPUT;
      continue;
    }
    run_path(&cc, dirs[i]);
  }
  if (cc.cq) conf_c_finish(&cc, cc.cq);
  if (cc.mq) conf_ms_finish(&cc, cc.mq);
  if (cc.xfailed) printf("(%d of the failures are listed as expected in the xfail file)\n", cc.xfailed);
  printf("%d passed, %d failed, %d skipped\n", cc.passed, cc.failed, cc.skipped);
  for (int i = 0; i < cc.xfail.n; i++) {
    free(cc.xfail.names[i]);
    free(cc.xfail.reasons[i]);
  }
  free(cc.xfail.names);
  free(cc.xfail.reasons);
  if (rc) return rc;
  return cc.failed > cc.xfailed ? EXIT_PARITY : EXIT_OK;
}
