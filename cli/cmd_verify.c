/* migc verify DIR [--grad]
 * migc verify OUTDIR|MODEL.onnx --reference REF.npz [--backend interp|c|mindspore-emu|ascend-emu] [--grad] ...
 *
 * The parity gate: runs the migrated model on the reference inputs, compares its
 * outputs (and, with --grad, its input and parameter gradients) with what PyTorch
 * computed, localises the first diverging node on failure, and reports as a table,
 * JSON and JUnit. Exit 0 pass, 1 parity failure, 2 bad input. */
#include "autodiff.h"
#include "cli.h"
#include "junit.h"
#include "outfile.h"
#include "localize.h"
#include "onnx_import.h"
#include "parity.h"
#include "passes.h"
#include "policy.h"
#include "verify_cli.h"
#include "weights.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void help(FILE *f) {
  fprintf(f,
          "usage: migc verify DIR [--grad] [options]\n"
          "       migc verify OUTDIR|MODEL.onnx --reference REF.npz [options]\n"
          "\n"
          "Compares the migrated model with PyTorch. DIR is a folder written by\n"
          "tools/torch_reference.py (model_preserve.onnx or model.onnx, model.pth, ref.npz);\n"
          "OUTDIR is a `migc convert` output folder (its convert.json names the model).\n"
          "Per output and per gradient: max abs and rel error, cosine, relative norm error,\n"
          "float32 ULP distances (median, p99, max) and the fraction over tolerance. On\n"
          "failure, the first diverging node is named (with its torch module and the\n"
          "agreement of its inputs). Defaults and the policy schema: docs/parity.md.\n"
          "\n"
          "  --reference REF.npz    the reference (default DIR/ref.npz)\n"
          "  --backend interp|c     reference interpreter (default) or the generated C code\n"
          "                         (OUTDIR/cpu, built with make when the runner is missing)\n"
          "  --backend ascend-emu   OUTDIR/ascend/runner, the aclnn program built with `make\n"
          "                         emu` against the aclnn emulator (forward only; a\n"
          "                         reference folder is converted with --target ascend\n"
          "                         --weights DIR/model.pth first)\n"
          "  --backend mindspore-emu  OUTDIR/mindspore/net.py and the checkpoint under the\n"
          "                         MindSpore stand-in (tests/mindspore_standin, through\n"
          "                         tools/ms_emu_grad.py; a reference folder is converted\n"
          "                         with --target mindspore --weights DIR/model.pth first)\n"
          "  --grad                 also compare input and parameter gradients (autodiff;\n"
          "                         mindspore-emu: mindspore.value_and_grad, parameters\n"
          "                         matched to torch's through the weight map)\n"
          "  --rtol R --atol A      forward elementwise tolerance (default 1e-3, 1e-5)\n"
          "  --policy P.xml         per-model, per-op, per-output, per-parameter tolerances\n"
          "  --model-name NAME      the name policy <model match=> rules see (default: the\n"
          "                         reference's factory, else the model file name)\n"
          "  --weights-map MAP.json --ckpt CKPT   check that the checkpoint holds the\n"
          "                         graph's parameters (shapes after layout changes, values)\n"
          "  --junit F --json F     reports (written atomically)\n"
          "  --force                replace existing report files\n"
          "  --no-layers            do not gate on torch's per-module outputs (interp) or\n"
          "                         on the generated code's traced node outputs (c)\n"
          "  --no-localize          skip localisation on failure\n"
          "  --precision fp16|bf16  (--backend c) the C code converted at that precision\n"
          "                         (a reference folder is converted with it; an OUTDIR must\n"
          "                         have been): per output also top-1 and top-5 agreement\n"
          "                         over its rows; the verdict from the policy's rules for\n"
          "                         the precision, by default cosine >= 0.999 and top-1\n"
          "                         >= 99%% (docs/precision.md); no layer gate\n"
          "\n"
          "Exit status: 0 pass, 1 parity failure, 2 bad input.\n");
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int is_dir(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISDIR(st.st_mode);
}

static int is_file(const char *p) {
  struct stat st;
  return !stat(p, &st) && S_ISREG(st.st_mode);
}

const mg_array *verify_ref_get(const vctx *v, const char *name) {
  for (int i = 0; i < v->n_ref; i++)
    if (v->ref[i].name && !strcmp(v->ref[i].name, name)) return &v->ref[i];
  return NULL;
}

/* The reference's own float32 noise for output `name`: max |outputs - outputs_f64|
 * over the elements, 0 when the reference has no float64 outputs. */
static double output_noise(const vctx *v, const char *name) {
  char key[600];
  snprintf(key, sizeof key, "outputs/%s", name);
  const mg_array *r32 = verify_ref_get(v, key);
  snprintf(key, sizeof key, "outputs_f64/%s", name);
  const mg_array *r64 = verify_ref_get(v, key);
  if (!r32 || !r64 || r32->nbytes / mg_dtype_size(r32->dtype) != r64->nbytes / mg_dtype_size(r64->dtype)) return 0;
  int64_t n = (int64_t)(r32->nbytes / mg_dtype_size(r32->dtype));
  double noise = 0;
  for (int64_t i = 0; i < n; i++) {
    double a = mg_load_f64(r32->dtype, (const char *)r32->data + (size_t)i * mg_dtype_size(r32->dtype));
    double b = mg_load_f64(r64->dtype, (const char *)r64->data + (size_t)i * mg_dtype_size(r64->dtype));
    if (isfinite(a) && isfinite(b)) noise = fmax(noise, fabs(a - b));
  }
  return noise;
}

/* The reference's float32 gradient noise (ref.json grad_stability: ||g32 - g64|| /
 * ||g64||) of input or parameter `name`; a parameter the folder lists no figure
 * for gets the worst tensor's. 0 when unknown. */
static double grad_noise(const vctx *v, int param, const char *name) {
  json_t *st = v->refjson ? json_object_get(v->refjson, "grad_stability") : NULL;
  if (!json_is_object(st)) return 0;
  json_t *x = json_object_get(json_object_get(st, param ? "params" : "inputs"), name);
  if (json_is_number(x)) return json_number_value(x);
  return param ? json_number_value(json_object_get(st, "params_max")) : 0;
}

/* Appends a result row; NULL when out of memory. */
static vresult *add_result(vctx *v, vkind kind, const char *name, const char *group) {
  if (v->n_res == v->cap_res) {
    int cap = v->cap_res ? 2 * v->cap_res : 64;
    vresult *r = realloc(v->res, (size_t)cap * sizeof *r);
    if (!r) return NULL;
    v->res = r;
    v->cap_res = cap;
  }
  vresult *r = &v->res[v->n_res++];
  memset(r, 0, sizeof *r);
  r->kind = kind;
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->group, sizeof r->group, "%s", group ? group : "");
  return r;
}

static int same_dims(const mg_array *a, const mg_array *b) {
  if (a->rank != b->rank) return 0;
  for (int i = 0; i < a->rank; i++)
    if (a->dims[i] != b->dims[i]) return 0;
  return 1;
}

static void dims_str(const mg_array *a, char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < a->rank && k + 24 < n; i++) k += (size_t)snprintf(out + k, n - k, "%s%lld", i ? "x" : "", (long long)a->dims[i]);
  if (!a->rank) snprintf(out, n, "scalar");
}

/* Whether the MindSpore stand-in is the backend. */
static int is_ms(const vctx *v) { return !strcmp(v->opt.backend, "mindspore-emu"); }
/* Whether the aclnn emulator runs the Ascend program. */
static int is_asc(const vctx *v) { return !strcmp(v->opt.backend, "ascend-emu"); }

/* Compares got with ref into r: shape first (a mismatch fails the row), then the
 * metrics and the verdict. */
static void judge(vctx *v, vresult *r, const mg_array *got, const mg_array *ref, int grad) {
  char gs[128], rs[128];
  dims_str(got, gs, sizeof gs);
  dims_str(ref, rs, sizeof rs);
  snprintf(r->shape, sizeof r->shape, "%s", rs);
  if (!same_dims(got, ref)) {
    r->status = V_FAIL;
    snprintf(r->why, sizeof r->why, "shape %s, reference %s", gs, rs);
    return;
  }
  if (parity_compare(got, ref, &r->tol, &r->m, r->name, &v->d)) {
    r->status = V_ERROR;
    snprintf(r->why, sizeof r->why, "cannot compare (%s vs %s)", mg_dtype_name(got->dtype), mg_dtype_name(ref->dtype));
    return;
  }
  r->compared = 1;
  r->status = parity_passes(&r->m, &r->tol, grad, r->why, sizeof r->why) ? V_PASS : V_FAIL;
}

/* Forward tolerance of an output: policy, then --rtol/--atol on top. */
static parity_tol forward_tol(const vctx *v, const char *op, const char *output) {
  parity_tol t = policy_forward_at(v->policy, v->opt.precision, v->model_name, op, output);
  if (v->opt.rtol >= 0) t.rtol = v->opt.rtol;
  if (v->opt.atol >= 0) t.atol = v->opt.atol;
  return t;
}

/* Element i of a float32 or float64 array. */
static double elem(const mg_array *a, int64_t i) {
  return a->dtype == MG_F64 ? ((const double *)a->data)[i] : (double)((const float *)a->data)[i];
}

/* --precision: the mean relative error of got, and its top-1 and top-5 agreement
 * with ref over the rows of a float [samples, classes] output, into r, with the
 * verdict's top-1 floor. Other outputs have no rows to agree on (topk_rows 0). */
static void judge_topk(vresult *r, const mg_array *got, const mg_array *ref) {
  r->mean_rel = -1;
  if (r->compared && (got->dtype == MG_F32 || got->dtype == MG_F64) && (ref->dtype == MG_F32 || ref->dtype == MG_F64)) {
    double err = 0, mag = 0;
    for (int64_t i = 0; i < r->m.n; i++) err += fabs(elem(got, i) - elem(ref, i)), mag += fabs(elem(ref, i));
    r->mean_rel = mag > 0 ? err / mag : err;
  }
  if (!r->compared || got->rank != 2 || (got->dtype != MG_F32 && got->dtype != MG_F64) ||
      (ref->dtype != MG_F32 && ref->dtype != MG_F64) || got->dims[0] < 1)
    return;
  int64_t rows = got->dims[0], cols = 1;
  for (int k = 1; k < got->rank; k++) cols *= got->dims[k];
  if (cols < 2) return;
  int64_t agree1 = 0, agree5 = 0;
  for (int64_t i = 0; i < rows; i++) {
    int64_t best_g = 0, best_r = 0, above = 0;
    for (int64_t j = 1; j < cols; j++) {
      if (elem(got, i * cols + j) > elem(got, i * cols + best_g)) best_g = j;
      if (elem(ref, i * cols + j) > elem(ref, i * cols + best_r)) best_r = j;
    }
    /* the reference's top-1 is in got's top 5 when fewer than 5 classes score above it */
    for (int64_t j = 0; j < cols; j++) above += elem(got, i * cols + j) > elem(got, i * cols + best_r);
    agree1 += best_g == best_r;
    agree5 += above < 5;
  }
  r->topk_rows = rows;
  r->top1 = (double)agree1 / (double)rows;
  r->top5 = (double)agree5 / (double)rows;
  if (r->status == V_PASS && r->tol.min_top1 > 0 && r->top1 < r->tol.min_top1) {
    r->status = V_FAIL;
    snprintf(r->why, sizeof r->why, "top-1 agreement %.4f < %g over %lld rows", r->top1, r->tol.min_top1,
             (long long)rows);
  }
}

/* Finds the inputs of the model in the reference (inputs/<name>); 0 or -1. */
static int gather_inputs(vctx *v) {
  mg_graph *g = v->m->graph;
  v->inputs = calloc((size_t)g->n_inputs + 1, sizeof *v->inputs);
  if (!v->inputs) return -1;
  for (int i = 0; i < g->n_inputs; i++) {
    char key[600];
    snprintf(key, sizeof key, "inputs/%s", g->inputs[i]->name);
    const mg_array *a = verify_ref_get(v, key);
    if (!a) {
      mg_error(&v->d, USAGE, g->inputs[i]->name, NULL, "%s has no member %s", v->reference, key);
      return -1;
    }
    v->inputs[i] = *a; /* borrowed data; the name is the graph input's */
    v->inputs[i].name = (char *)g->inputs[i]->name;
    v->n_inputs++;
  }
  return 0;
}

static void compare_outputs(vctx *v, mg_array *outs) {
  mg_graph *g = v->m->graph;
  for (int i = 0; i < g->n_outputs; i++) {
    const mg_value *o = g->outputs[i];
    char key[600];
    snprintf(key, sizeof key, "outputs/%s", o->name);
    vresult *r = add_result(v, V_OUTPUT, o->name, NULL);
    if (!r) return;
    r->tol = forward_tol(v, o->producer ? o->producer->op_type : NULL, o->name);
    r->tol.noise = output_noise(v, o->name);
    const mg_array *ref = verify_ref_get(v, key);
    if (!ref) {
      r->status = V_ERROR;
      snprintf(r->why, sizeof r->why, "the reference has no %s", key);
      continue;
    }
    judge(v, r, &outs[i], ref, 0);
    if (v->opt.precision) r->precision = v->opt.precision, judge_topk(r, &outs[i], ref);
  }
}

/* The module prefix of a torch parameter name ("layer1.0.conv1.weight" ->
 * "layer1.0.conv1"; "" for a top-level parameter). */
static void module_prefix(const char *param, char *out, size_t n) {
  const char *dot = strrchr(param, '.');
  snprintf(out, n, "%.*s", dot ? (int)(dot - param) : 0, param);
}

/* Groups the parameter-gradient rows by module: one V_GROUP row each. */
static void group_gradients(vctx *v) {
  int n = v->n_res;
  for (int i = 0; i < n; i++) {
    if (v->res[i].kind != V_PARAM_GRAD) continue;
    int seen = 0;
    for (int k = 0; k < i; k++) seen |= v->res[k].kind == V_PARAM_GRAD && !strcmp(v->res[k].group, v->res[i].group);
    if (seen) continue;
    char gname[600], prefix[512]; /* copies: add_result may move v->res */
    snprintf(prefix, sizeof prefix, "%s", v->res[i].group);
    snprintf(gname, sizeof gname, "%s", prefix[0] ? prefix : "(root)");
    vresult *grp = add_result(v, V_GROUP, gname, prefix);
    if (!grp) return;
    parity_group acc;
    parity_group_init(&acc);
    int failed = 0, errors = 0, members = 0;
    char why[512] = "";
    grp->tol = v->res[i].tol;
    for (int k = i; k < n; k++) {
      vresult *p = &v->res[k];
      if (p->kind != V_PARAM_GRAD || strcmp(p->group, v->res[i].group)) continue;
      members++;
      if (p->status != V_PASS && !why[0]) snprintf(why, sizeof why, "%.200s: %.300s", p->name, p->why);
      failed += p->status == V_FAIL;
      errors += p->status == V_ERROR;
      if (p->compared) parity_group_add(&acc, p->own.data ? &p->own : p->got, p->ref, &p->m);
      if (p->tol.noise > grp->tol.noise) grp->tol.noise = p->tol.noise;
    }
    parity_group_finish(&acc, &grp->m);
    grp->compared = acc.members > 0;
    grp->members = members;
    snprintf(grp->shape, sizeof grp->shape, "%d params", members);
    grp->status = errors ? V_ERROR : failed ? V_FAIL : V_PASS;
    snprintf(grp->why, sizeof grp->why, "%s", why);
  }
}

/* The torch parameter a graph initializer gradient belongs to: directly by name
 * (PRESERVE exports), else through the weight map (bindings by name, by value, or
 * transposed). Returns the gradient index in gr->params or -1; *transposed is set
 * for a transposed binding. */
static int find_param_grad(const vctx *v, const grad_result *gr, const char *torch_name, int *transposed,
                           const char **folded_into) {
  *transposed = 0;
  *folded_into = NULL;
  for (int k = 0; k < gr->n_params; k++)
    if (gr->params[k].name && !strcmp(gr->params[k].name, torch_name)) return k;
  const char *init = NULL;
  json_t *tensors = v->map ? json_object_get(v->map, "tensors") : NULL;
  size_t i;
  json_t *t;
  json_array_foreach(tensors, i, t) {
    const char *src = json_string_value(json_object_get(t, "source"));
    const char *how = json_string_value(json_object_get(t, "binding"));
    if (!src || strcmp(src, torch_name) || !how) continue;
    if (!strcmp(how, "name") || !strcmp(how, "value")) init = json_string_value(json_object_get(t, "initializer"));
    else if (!strcmp(how, "transpose")) init = json_string_value(json_object_get(t, "initializer")), *transposed = 1;
    else *folded_into = json_string_value(json_object_get(t, "initializer"));
  }
  if (!init) return -1;
  for (int k = 0; k < gr->n_params; k++)
    if (gr->params[k].name && !strcmp(gr->params[k].name, init)) return k;
  return -1;
}

/* A transposed copy of the 2-D array a in *out (owned); 0 or -1. */
static int transpose_copy(const mg_array *a, mg_array *out) {
  memset(out, 0, sizeof *out);
  if (a->rank != 2) return -1;
  size_t es = mg_dtype_size(a->dtype);
  unsigned char *t = malloc(a->nbytes ? a->nbytes : 1);
  if (!t) return -1;
  int64_t r = a->dims[0], c = a->dims[1];
  for (int64_t i = 0; i < r; i++)
    for (int64_t j = 0; j < c; j++) memcpy(t + (size_t)(j * r + i) * es, (char *)a->data + (size_t)(i * c + j) * es, es);
  *out = *a;
  out->name = NULL;
  out->data = t;
  out->dims[0] = c, out->dims[1] = r;
  return 0;
}

/* Runs the autodiff and compares gradients. 0, or -1 when grad_run fails (an op
 * without a VJP is reported by name through the diagnostics). */
static int compare_gradients(vctx *v) {
  mg_graph *g = v->m->graph;
  mg_array *cot = calloc((size_t)g->n_outputs + 1, sizeof *cot);
  if (!cot) return -1;
  int n_cot = 0;
  for (int i = 0; i < g->n_outputs; i++) {
    char key[600];
    snprintf(key, sizeof key, "cotangents/%s", g->outputs[i]->name);
    const mg_array *c = verify_ref_get(v, key);
    if (!c) {
      mg_error(&v->d, USAGE, g->outputs[i]->name, NULL, "%s has no member %s", v->reference, key);
      free(cot);
      return -1;
    }
    cot[n_cot] = *c;
    cot[n_cot++].name = (char *)g->outputs[i]->name;
  }
  double t0 = now();
  /* mindspore-emu: the stand-in's gradients came with the forward run */
  int rc = is_ms(v) ? (!v->have_grads && (verify_ms_grad_errors(v), 1)) : grad_run(v->m, v->inputs, v->n_inputs, cot, n_cot, &v->grads, &v->d);
  free(cot);
  if (!is_ms(v)) v->t_grad = now() - t0;
  if (rc) return -1;
  v->have_grads = 1;
  for (int i = 0; i < g->n_inputs && i < v->grads.n_inputs; i++) {
    char key[600];
    snprintf(key, sizeof key, "grads/inputs/%s", g->inputs[i]->name);
    const mg_array *ref = verify_ref_get(v, key);
    if (!ref) continue; /* an integer input has no gradient */
    vresult *r = add_result(v, V_INPUT_GRAD, g->inputs[i]->name, NULL);
    if (!r) return -1;
    r->tol = policy_grad(v->policy, v->model_name, g->inputs[i]->name);
    r->tol.noise = grad_noise(v, 0, g->inputs[i]->name);
    if (!v->grads.inputs[i].data) {
      r->status = V_ERROR;
      snprintf(r->why, sizeof r->why, "no gradient computed for this input");
      continue;
    }
    judge(v, r, &v->grads.inputs[i], ref, 1);
  }
  for (int i = 0; i < v->n_ref; i++) {
    const mg_array *ref = &v->ref[i];
    if (!ref->name || strncmp(ref->name, "grads/params/", 13)) continue;
    const char *tname = ref->name + 13;
    char prefix[512];
    module_prefix(tname, prefix, sizeof prefix);
    vresult *r = add_result(v, V_PARAM_GRAD, tname, prefix);
    if (!r) return -1;
    r->tol = policy_grad(v->policy, v->model_name, tname);
    r->tol.noise = grad_noise(v, 1, tname);
    int transposed;
    const char *folded;
    int k = find_param_grad(v, &v->grads, tname, &transposed, &folded);
    if (k < 0) {
      r->status = V_ERROR;
      if (folded)
        snprintf(r->why, sizeof r->why, "folded into '%.200s' by the export (a BatchNorm fold): no gradient of its own; "
                 "verify the TrainingMode.PRESERVE export", folded);
      else
        snprintf(r->why, sizeof r->why, "no graph parameter maps to this torch parameter%s",
                 v->map ? " (not by name, nor through the weight map)" : " (by name; give --weights-map)");
      continue;
    }
    snprintf(r->init, sizeof r->init, "%s", v->grads.params[k].name);
    r->got = &v->grads.params[k];
    if (transposed) { /* the graph holds W^T: compare in torch's layout */
      if (transpose_copy(r->got, &r->own)) {
        r->status = V_ERROR;
        snprintf(r->why, sizeof r->why, "cannot transpose the gradient of %s", r->init);
        continue;
      }
    }
    r->ref = ref;
    judge(v, r, r->own.data ? &r->own : r->got, ref, 1);
  }
  group_gradients(v);
  return 0;
}

/* Reads OUTDIR/convert.json: the model it was converted from. */
static int read_convert_json(vctx *v, const char *outdir) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/convert.json", outdir);
  json_error_t e;
  json_t *j = json_load_file(path, 0, &e);
  const char *model = j ? json_string_value(json_object_get(j, "model")) : NULL;
  if (!model) {
    mg_error(&v->d, USAGE, NULL, NULL, "%s: %s", path, j ? "no \"model\"" : e.text);
    json_decref(j);
    return -1;
  }
  const char *prec = json_string_value(json_object_get(json_object_get(j, "options"), "precision"));
  const char *want = v->opt.precision ? v->opt.precision : "fp32";
  if (strcmp(prec ? prec : "fp32", want)) {
    mg_error(&v->d, USAGE, NULL, NULL, "%s was converted with --precision %s, not %s: convert it again or give "
             "--precision %s", outdir, prec ? prec : "fp32", want, prec ? prec : "fp32");
    json_decref(j);
    return -1;
  }
  snprintf(v->onnx, sizeof v->onnx, "%s", model);
  json_decref(j);
  snprintf(v->outdir, sizeof v->outdir, "%s", outdir);
  return 0;
}

/* Works out what to compare from the positional argument (see help()). */
static int resolve_target(vctx *v, const char *target) {
  char p[PATH_MAX];
  if (is_dir(target)) {
    snprintf(p, sizeof p, "%s/convert.json", target);
    if (is_file(p)) {
      if (read_convert_json(v, target)) return -1;
      if (!v->opt.ckpt) {
        snprintf(v->ckpt_buf, sizeof v->ckpt_buf, "%s/model.ckpt", target);
        snprintf(v->map_buf, sizeof v->map_buf, "%s/weight_map.json", target);
        if (is_file(v->ckpt_buf) && is_file(v->map_buf)) v->opt.ckpt = v->ckpt_buf, v->opt.map = v->map_buf;
      }
    } else {
      snprintf(p, sizeof p, "%s/model_preserve.onnx", target);
      if (!is_file(p)) snprintf(p, sizeof p, "%s/model.onnx", target);
      if (!is_file(p)) {
        mg_error(&v->d, USAGE, NULL, NULL,
                 "%s holds neither a reference folder (model_preserve.onnx or model.onnx) nor convert.json", target);
        return -1;
      }
      snprintf(v->onnx, sizeof v->onnx, "%s", p);
      snprintf(v->pth, sizeof v->pth, "%s/model.pth", target);
      if (!is_file(v->pth)) v->pth[0] = 0;
      if (!v->reference[0]) snprintf(v->reference, sizeof v->reference, "%s/ref.npz", target);
      snprintf(p, sizeof p, "%s/ref.json", target);
      json_t *j = json_load_file(p, 0, NULL);
      const char *f = j ? json_string_value(json_object_get(j, "factory")) : NULL;
      if (f && !v->model_name_buf[0]) snprintf(v->model_name_buf, sizeof v->model_name_buf, "%s", f);
      v->refjson = j;
    }
  } else {
    snprintf(v->onnx, sizeof v->onnx, "%s", target);
  }
  if (!v->reference[0]) {
    mg_error(&v->d, USAGE, NULL, NULL, "--reference REF.npz is required for %s", target);
    return -1;
  }
  if (!v->refjson) { /* a reference folder's ref.json beside REF.npz: its noise figures */
    const char *slash = strrchr(v->reference, '/');
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%.*s/ref.json", slash ? (int)(slash - v->reference) : 1, slash ? v->reference : ".");
    if (is_file(p)) v->refjson = json_load_file(p, 0, NULL);
  }
  if (!v->pth[0]) { /* a reference folder's state_dict, to compare parameters when localising */
    const char *slash = strrchr(v->reference, '/');
    int k = snprintf(v->pth, sizeof v->pth, "%.*s/model.pth", slash ? (int)(slash - v->reference) : 1,
                     slash ? v->reference : ".");
    if (k < 0 || (size_t)k >= sizeof v->pth || !is_file(v->pth)) v->pth[0] = 0;
  }
  if (!v->model_name_buf[0]) {
    const char *slash = strrchr(v->onnx, '/');
    snprintf(v->model_name_buf, sizeof v->model_name_buf, "%.500s", slash ? slash + 1 : v->onnx);
  }
  if (!v->model_name) v->model_name = v->model_name_buf;
  return 0;
}

/* Parses the command line into v->opt; returns -1 on a usage error (printed). */
static int parse_args(vctx *v, int argc, char **argv) {
  v->opt.rtol = v->opt.atol = -1;
  v->opt.backend = "interp";
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int more = i + 1 < argc;
    if (!strcmp(a, "--reference") && more) snprintf(v->reference, sizeof v->reference, "%s", argv[++i]);
    else if (!strcmp(a, "--backend") && more) v->opt.backend = argv[++i];
    else if (!strcmp(a, "--grad")) v->opt.grad = 1;
    else if (!strcmp(a, "--no-localize")) v->opt.no_localize = 1;
    else if (!strcmp(a, "--no-layers")) v->opt.no_layers = 1;
    else if (!strcmp(a, "--precision") && more) v->opt.precision = argv[++i];
    else if ((!strcmp(a, "--rtol") || !strcmp(a, "--atol")) && more) {
      char *end;
      double x = strtod(argv[++i], &end);
      if (*end || !(x >= 0)) {
        fprintf(stderr, "migc verify: %s wants a non-negative number, got '%s'\n", a, argv[i]);
        return -1;
      }
      *(a[2] == 'r' ? &v->opt.rtol : &v->opt.atol) = x;
    } else if (!strcmp(a, "--policy") && more) v->opt.policy = argv[++i];
    else if (!strcmp(a, "--model-name") && more) v->model_name = argv[++i];
    else if (!strcmp(a, "--junit") && more) v->opt.junit = argv[++i];
    else if (!strcmp(a, "--json") && more) v->opt.json = argv[++i];
    else if (!strcmp(a, "--force")) v->opt.force = 1;
    else if (!strcmp(a, "--weights-map") && more) v->opt.map = argv[++i];
    else if (!strcmp(a, "--ckpt") && more) v->opt.ckpt = argv[++i];
    else if (a[0] == '-') {
      fprintf(stderr, "migc verify: unknown option or missing value: '%s'\n", a);
      help(stderr);
      return -1;
    } else if (!v->opt.target) v->opt.target = a;
    else {
      fprintf(stderr, "migc verify: one model at a time\n");
      return -1;
    }
  }
  if (!v->opt.target) {
    help(stderr);
    return -1;
  }
  if (strcmp(v->opt.backend, "interp") && strcmp(v->opt.backend, "c") && strcmp(v->opt.backend, "mindspore-emu") &&
      strcmp(v->opt.backend, "ascend-emu")) {
    fprintf(stderr, "migc verify: --backend must be interp, c, mindspore-emu or ascend-emu, got '%s'\n", v->opt.backend);
    return -1;
  }
  if (v->opt.grad && !strcmp(v->opt.backend, "ascend-emu")) {
    fprintf(stderr, "migc verify: --grad: the Ascend program computes the forward pass only (give --grad with the "
                    "interp or mindspore-emu backend)\n");
    return -1;
  }
  if (v->opt.precision && !strcmp(v->opt.precision, "fp32")) v->opt.precision = NULL;
  if (v->opt.precision && strcmp(v->opt.precision, "fp16") && strcmp(v->opt.precision, "bf16")) {
    fprintf(stderr, "migc verify: --precision must be fp32, fp16 or bf16, got '%s'\n", v->opt.precision);
    return -1;
  }
  if (v->opt.precision && strcmp(v->opt.backend, "c")) {
    fprintf(stderr, "migc verify: --precision %s runs the generated C code: give --backend c (the %s backend "
                    "runs float32 only)\n", v->opt.precision, v->opt.backend);
    return -1;
  }
  /* 16-bit weights move every traced node's output past the float32 layer gate */
  if (v->opt.precision) v->opt.no_layers = 1, v->opt.no_localize = 1;
  if (!v->opt.ckpt != !v->opt.map) {
    fprintf(stderr, "migc verify: --ckpt and --weights-map go together\n");
    return -1;
  }
  return 0;
}

static void vctx_free(vctx *v) {
  if (v->have_grads) grad_result_free(&v->grads);
  if (v->outs && v->m) mg_arrays_free(v->outs, v->m->graph->n_outputs);
  free(v->inputs);
  if (v->ref) mg_arrays_free(v->ref, v->n_ref);
  for (int i = 0; i < v->n_res; i++) free(v->res[i].own.data);
  free(v->res);
  free(v->wres);
  policy_free(v->policy);
  json_decref(v->map);
  json_decref(v->refjson);
  if (v->pth_src) wt_close(v->pth_src);
  mg_model_free(v->m);
  if (v->tmpdir[0]) verify_rmtree(v->tmpdir);
  mg_diags_free(&v->d);
}

static int has_module_refs(const vctx *v) {
  for (int i = 0; i < v->n_ref; i++)
    if (v->ref[i].name && !strncmp(v->ref[i].name, "modules/", 8)) return 1;
  return 0;
}

/* Localises the first diverging node: against torch's module outputs (interp) or
 * the runner's trace (c). */
static void localise(vctx *v) {
  if (v->loc_tried) return;
  v->loc_tried = 1;
  if (is_ms(v) || is_asc(v)) {
    snprintf(v->loc_note, sizeof v->loc_note,
             "no node-by-node localisation for --backend %s (%s); `migc verify` with the interpreter localises the "
             "ONNX itself", v->opt.backend, is_ms(v) ? "net.py writes no trace" : "the device keeps the intermediates");
    return;
  }
  parity_tol tol = forward_tol(v, NULL, NULL);
  if (!strcmp(v->opt.backend, "c")) {
    if (verify_c_trace(v)) return;
    if (loc_against_trace(v->m, v->inputs, v->n_inputs, v->trace_dir, &tol, &v->loc, &v->d)) return;
  } else {
    if (!has_module_refs(v)) {
      snprintf(v->loc_note, sizeof v->loc_note, "the reference holds no per-module outputs (modules/...)");
      return;
    }
    if (v->pth[0] && !v->pth_src) {
      mg_diags quiet;
      mg_diags_init(&quiet);
      if (pth_open(v->pth, NULL, &v->pth_src, &quiet)) v->pth_src = NULL;
      mg_diags_free(&quiet);
    }
    if (loc_against_torch(v->m, v->inputs, v->n_inputs, v->ref, v->n_ref, v->pth_src, &tol, &v->loc, &v->d)) return;
  }
  v->localised = 1;
}

/* mg_prepare, keeping every path from a parameter unfolded when gradients with
 * respect to parameters are wanted (a folded Transpose(W) would hide W). */
static int prepare(vctx *v) {
  v->m->keep_param_paths = v->opt.grad;
  return mg_prepare(v->m, NULL, 0, &v->d);
}

int cmd_verify(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return EXIT_OK;
  }
  vctx *v = calloc(1, sizeof *v);
  if (!v) return EXIT_INTERNAL;
  mg_diags_init(&v->d);
  double t0 = now();
  int rc = EXIT_OK;
  if (parse_args(v, argc, argv)) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  /* the reports by the output rule, refused before the work rather than after */
  cli_output_rule(v->opt.force, NULL, 0);
  if ((v->opt.json && mg_out_check(v->opt.json, 1, &v->d)) || (v->opt.junit && mg_out_check(v->opt.junit, 1, &v->d))) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  if (resolve_target(v, v->opt.target) || (v->opt.policy && policy_load(v->opt.policy, &v->policy, &v->d)) ||
      onnx_import(v->onnx, &v->d, &v->m) || prepare(v) ||
      npz_read_file(v->reference, &v->ref, &v->n_ref, &v->d) || gather_inputs(v)) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  if (v->opt.map) {
    json_error_t e;
    v->map = json_load_file(v->opt.map, 0, &e);
    if (!v->map) {
      mg_error(&v->d, MALFORMED, NULL, NULL, "%s:%d: %s", v->opt.map, e.line, e.text);
      rc = EXIT_BAD_INPUT;
      goto out;
    }
  }
  double t1 = now();
  int frc = !strcmp(v->opt.backend, "c") ? verify_runner_forward(v, 0)
            : is_asc(v)                    ? verify_runner_forward(v, 1)
            : is_ms(v)                     ? verify_ms_run(v)
                                           : interp_run(v->m, v->inputs, v->n_inputs, &(interp_options){0}, &v->outs, &v->d);
  v->t_forward = now() - t1;
  if (frc) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  compare_outputs(v, v->outs);
  /* Layer by layer: every torch module's output (interp) or every traced node of
   * the generated code against the interpreter (c) is part of the verdict, since a
   * small error inside (a Gelu approximated, a LayerNorm epsilon) can hide under
   * the output tolerance after later layers. */
  int is_c = !strcmp(v->opt.backend, "c");
  if (!v->opt.no_layers && !is_ms(v) && !is_asc(v) && (is_c || has_module_refs(v))) {
    localise(v);
    if (v->localised) {
      vresult *r = add_result(v, V_LAYERS, is_c ? "generated code vs interpreter" : "torch modules", NULL);
      if (r) {
        r->tol = forward_tol(v, NULL, NULL);
        r->status = v->loc.found ? V_FAIL : V_PASS;
        snprintf(r->shape, sizeof r->shape, "%d", v->loc.compared);
        int k = snprintf(r->why, sizeof r->why, "%d %s agree; worst '%.300s' rel norm err %.3g", v->loc.compared,
                         is_c ? "traced node outputs" : "module outputs", v->loc.worst, v->loc.worst_m.rel_norm);
        if (v->loc.found) {
          r->m = v->loc.m;
          r->compared = 1;
          if (v->loc.module[0])
            k = snprintf(r->why, sizeof r->why, "module '%.200s' (node %.200s, %s) diverges: rel norm err %.3g",
                         v->loc.module, v->loc.node, v->loc.op, v->loc.m.rel_norm);
          else
            k = snprintf(r->why, sizeof r->why, "node %.200s (%s) diverges: rel norm err %.3g", v->loc.node, v->loc.op,
                         v->loc.m.rel_norm);
        }
        (void)k;
      }
    }
  }
  if (v->opt.grad) {
    /* gradients that cannot be computed (an op without a VJP) are an error row,
     * named by the diagnostics; the forward verdict above stands */
    size_t first = v->d.count;
    if (compare_gradients(v)) {
      vresult *r = add_result(v, V_INPUT_GRAD, "(all gradients)", NULL);
      if (!r) {
        rc = EXIT_INTERNAL;
        goto out;
      }
      r->status = V_ERROR;
      int k = snprintf(r->why, sizeof r->why, "not computed:");
      for (size_t i = first; i < v->d.count && k > 0 && (size_t)k + 2 < sizeof r->why; i++) {
        const mg_diag *g = &v->d.items[i];
        if (g->severity != MG_SEV_ERROR) continue;
        k += snprintf(r->why + k, sizeof r->why - (size_t)k, "%s %s%s%s%s%s%s%s", i > first ? ";" : "",
                      g->node ? "node '" : "", g->node ? g->node : "", g->node ? "'" : "", g->op ? " (" : "",
                      g->op ? g->op : "", g->op ? ")" : "", g->node || g->op ? ": " : "");
        if ((size_t)k < sizeof r->why) k += snprintf(r->why + k, sizeof r->why - (size_t)k, "%s", g->message);
      }
    }
  }
  if (v->opt.ckpt && verify_weights(v)) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  int fwd_failed = 0, any_failed = 0;
  for (int i = 0; i < v->n_res; i++) {
    if (v->res[i].status == V_PASS) continue;
    any_failed = 1;
    fwd_failed |= v->res[i].kind == V_OUTPUT;
  }
  for (int i = 0; i < v->n_wres; i++) any_failed |= v->wres[i].status != V_PASS;
  if (fwd_failed && !v->opt.no_localize) localise(v);
  if (fwd_failed && v->localised && !v->loc.found) {
    const loc_result *l = &v->loc;
    int k = snprintf(v->loc_note, sizeof v->loc_note, "no single node diverges beyond tolerance (%d values compared)",
                     l->compared);
    if (l->compared && k > 0 && (size_t)k < sizeof v->loc_note)
      k += snprintf(v->loc_note + k, sizeof v->loc_note - (size_t)k,
                    ": the error accumulates, from rel norm %.2g at '%.120s' to %.2g at '%.120s'", l->first_err,
                    l->first, l->worst_m.rel_norm, l->worst);
    if (l->growth > 0 && k > 0 && (size_t)k < sizeof v->loc_note)
      snprintf(v->loc_note + k, sizeof v->loc_note - (size_t)k,
               "; the largest growth in one step is x%.2g at '%.120s' (%.2g out of %.2g carried in)", l->growth,
               l->grew, l->grew_err, l->grew_carried);
  }
  v->t_total = now() - t0;
  verify_print(v);
  cli_output_rule(v->opt.force, NULL, 0); /* a conversion run for a backend had its own */
  if ((v->opt.json && verify_write_json(v)) || (v->opt.junit && verify_write_junit(v))) {
    rc = EXIT_BAD_INPUT;
    goto out;
  }
  rc = any_failed ? EXIT_PARITY : EXIT_OK;
  /* a comparison memory refused is no parity verdict */
  if (mg_diags_oom(&v->d, 0)) rc = EXIT_INTERNAL;
out:
  cli_report(&v->d);
  vctx_free(v);
  free(v);
  return rc;
}
