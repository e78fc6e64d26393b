/* The Ascend emitter (ascend.h): every node's aclnn call from the rules' plan,
 * made once at model_init as a repeatable executor, queued by model_run. */
#include "ascend.h"
#include "asc_internal.h"
#include "codegen.h"
#include "lower.h"
#include "plan.h"
#include "text.h"
#include "writer.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------- the fact table's declarations (codegen/ascend/acl_facts.inc) ---------- */

static const asc_fact *fact_fn(const char *name) { return asc_fact_find(ASC_FACT_FN, name); }

int asc_fn_param_type(const char *fn, int pos, char *type, size_t n) {
  const asc_fact *f = fact_fn(fn);
  const char *p = f ? strchr(f->text, '(') : NULL;
  for (int k = 0; p && k < pos; k++) p = strstr(p + 1, ", ");
  if (!p) return -1;
  p += *p == '(' ? 1 : 2;
  const char *end = p + strcspn(p, ",)");
  const char *sp = end;
  while (sp > p && sp[-1] != ' ') sp--; /* the name starts after the last space */
  if (sp <= p) return -1;
  snprintf(type, n, "%.*s", (int)(sp - 1 - p), p);
  return 0;
}

/* ---------- the emitter ---------- */

static char *dupf(asc_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *dupf(asc_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_buf b = {0};
  cg_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  char *s = b.failed ? NULL : mg_arena_strdup(&c->a, b.s ? b.s : "");
  cg_buf_free(&b);
  if (!s) c->failed = 1;
  return s;
}

/* The aclFormat a function wants for a tensor of rank r (aclnn-api.json
 * conventions.formats: NCHW / NCL for convolution, pooling, BatchNorm and
 * upsampling inputs and outputs, ND otherwise; a 1-D bias or statistic is ND). */
static const char *tensor_format(const char *fn, int rank) {
  static const char *const spatial[] = {"aclnnConvolution", "aclnnMaxPool", "aclnnAvgPool2d", "aclnnBatchNorm",
                                        "aclnnGlobalAveragePool", "aclnnAdaptiveAvgPool2d", "aclnnUpsampleNearest2d",
                                        "aclnnUpsampleBilinear2d", "aclnnRoiAlign"};
  for (size_t i = 0; i < sizeof spatial / sizeof spatial[0]; i++)
    if (!strcmp(fn, spatial[i])) return rank == 4 ? "ACL_FORMAT_NCHW" : rank == 3 ? "ACL_FORMAT_NCL" : "ACL_FORMAT_ND";
  return "ACL_FORMAT_ND";
}

/* The device address expression of value id's buffer. */
static const char *addr_expr(asc_ctx *c, int id) {
  int r = c->root[id];
  const asc_loc *l = &c->loc[r];
  switch (l->kind) {
  case LOC_ARENA: return dupf(c, "(char *)m->arena + %zu", l->offset);
  case LOC_WEIGHTS: return dupf(c, "(char *)m->weights + %zu", l->offset);
  case LOC_INPUT: return dupf(c, "m->in_dev[%d]", l->index);
  default: return "NULL";
  }
}

static void int64_list(cg_buf *b, const int64_t *v, int n) {
  cg_buf_printf(b, "{");
  for (int i = 0; i < n; i++) cg_buf_printf(b, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (!n) cg_buf_printf(b, "0");
  cg_buf_printf(b, "}");
}

/* Why value v has no device buffer. */
static const char *no_buffer(asc_ctx *c, const mg_value *v) {
  if (!mg_dtype_size(v->dtype)) return dupf(c, "value '%s' has a dtype with no device layout", v->name);
  return dupf(c, "value '%s' has a shape known only at run time, and the program plans static device buffers "
                 "(give --input-shape)", v->name);
}

/* A new aclTensor at init over value v (its own dims, dense), or over the view
 * (dims, strides, offset in elements) of v's buffer; its index in m->t. */
static int new_tensor(asc_ctx *c, const char *fn, const mg_value *v, int view_rank, const int64_t *vd,
                      const int64_t *vs, int64_t voff, mg_dtype dtype) {
  int64_t dims[MG_MAX_RANK], strides[MG_MAX_RANK], sdims[MG_MAX_RANK];
  int rank = v->shape.rank;
  for (int k = 0; k < rank; k++) sdims[k] = v->shape.d[k].v;
  if (view_rank >= 0) {
    for (int k = 0; k < view_rank; k++) dims[k] = vd[k], strides[k] = vs[k];
  } else {
    int64_t s = 1;
    for (int k = rank - 1; k >= 0; k--) dims[k] = sdims[k], strides[k] = s, s *= sdims[k];
  }
  int vr = view_rank >= 0 ? view_rank : rank;
  int k = c->n_tensors++;
  if (k >= c->cap_in_list) {
    int cap = c->cap_in_list ? 2 * c->cap_in_list : 256;
    int *p = mg_arena_alloc(&c->a, sizeof *p * (size_t)cap);
    if (!p) { c->failed = 1; return k; }
    if (c->in_list) memcpy(p, c->in_list, sizeof *p * (size_t)c->cap_in_list);
    c->in_list = p, c->cap_in_list = cap;
  }
  const char *acl = map_acl_dtype_name(dtype);
  cg_buf *b = &c->init;
  cg_buf_printf(b, "  {\n    static const int64_t dims[] = ");
  int64_list(b, dims, vr);
  cg_buf_printf(b, ", strides[] = ");
  int64_list(b, strides, vr);
  cg_buf_printf(b, ", storage[] = ");
  int64_list(b, sdims, rank);
  cg_buf_printf(b, ";\n    m->t[%d] = aclCreateTensor(dims, %d, %s, strides, %lld, %s, storage, %d, %s);\n", k, vr,
                acl ? acl : "ACL_DT_UNDEFINED", (long long)(view_rank >= 0 ? voff : 0), tensor_format(fn, vr), rank,
                addr_expr(c, v->id));
  cg_buf_printf(b, "    if (!m->t[%d]) return fail(m, %d, NODE, \"aclCreateTensor\");\n  }\n", k, ACL_EMIT_NULL);
  return k;
}

/* The C argument text of one evaluated plan argument for parameter type `type`
 * of fn, objects made in the init text first. NULL with *why. */
static const char *arg_text(asc_ctx *c, const mg_node *n, const char *fn, const char *type, const map_value *v,
                            const char **why) {
  int is_tensor = strstr(type, "aclTensor*") && !strstr(type, "const*") && !strstr(type, "**");
  if (v->kind == MV_NONE) return "NULL";
  map_value one; /* a one-element constant (Clip's min, Dropout's ratio) for a number parameter */
  if (!is_tensor && !strstr(type, "aclTensorList") && v->kind == MV_TENSOR && v->ref.role == MAP_REF_CONST &&
      v->ref.n_elems == 1) {
    memset(&one, 0, sizeof one);
    if (v->ref.floats) one.kind = MV_FLOAT, one.f = v->ref.floats[0];
    else if (v->ref.dtype == MG_BOOL) one.kind = MV_BOOL, one.b = v->ref.ints[0] != 0;
    else one.kind = MV_INT, one.i = v->ref.ints[0];
    v = &one;
  }
  if (is_tensor) {
    if (v->kind != MV_TENSOR) { *why = "a tensor parameter given a non-tensor value"; return NULL; }
    const map_ref *r = &v->ref;
    if (r->role == MAP_REF_ZEROS || r->role == MAP_REF_SCRATCH) {
      int id = r->role == MAP_REF_ZEROS ? asc_zeros_value(c, r) : asc_scratch_value(c, n, r);
      if (id < 0) { c->failed = 1; *why = "out of memory"; return NULL; }
      const mg_value *z = c->vals[id];
      return dupf(c, "m->t[%d]", new_tensor(c, fn, z, -1, NULL, NULL, 0, z->dtype));
    }
    if (!r->v || r->role == MAP_REF_DATA) { *why = "a tensor argument the program cannot pass"; return NULL; }
    if (c->loc[c->root[r->v->id]].kind == LOC_NONE) { *why = no_buffer(c, r->v); return NULL; }
    const asc_layout *l = asc_strided_layout(c, r->v->id);
    if (l && r->view_rank < 0) /* a Transpose or Slice read in place: a view of its root */
      return dupf(c, "m->t[%d]", new_tensor(c, fn, c->vals[c->root[r->v->id]], l->rank, l->dims, l->strides,
                                           l->offset, r->v->dtype));
    return dupf(c, "m->t[%d]", new_tensor(c, fn, r->v, r->view_rank, r->view_dims, r->view_strides, r->view_offset,
                                         r->v->dtype));
  }
  if (strstr(type, "aclTensorList")) {
    if (v->kind != MV_TENSORS || v->n < 1) { *why = "a tensor list parameter given another value"; return NULL; }
    int first = -1, list = c->n_lists;
    for (int i = 0; i < v->n; i++) {
      const map_ref *r = &v->refs[i];
      if (!r->v || c->loc[c->root[r->v->id]].kind == LOC_NONE) { *why = r->v ? no_buffer(c, r->v) : "a list member the program cannot pass"; return NULL; }
      int k = new_tensor(c, fn, r->v, r->view_rank, r->view_dims, r->view_strides, r->view_offset, r->v->dtype);
      if (k >= c->cap_in_list) { c->failed = 1; *why = "out of memory"; return NULL; }
      c->in_list[k] = list + 1; /* aclDestroyTensorList destroys its members */
      if (first < 0) first = k;
    }
    int k = c->n_lists++;
    asc_use_fn(c, "aclCreateTensorList"), asc_use_fn(c, "aclDestroyTensorList");
    cg_buf_printf(&c->init, "  {\n    const aclTensor *members[] = {");
    for (int i = 0; i < v->n; i++) cg_buf_printf(&c->init, "%sm->t[%d]", i ? ", " : "", first + i);
    cg_buf_printf(&c->init, "};\n    m->tl[%d] = aclCreateTensorList(members, %d);\n"
                            "    if (!m->tl[%d]) return fail(m, %d, NODE, \"aclCreateTensorList\");\n  }\n",
                  k, v->n, k, ACL_EMIT_NULL);
    return dupf(c, "m->tl[%d]", k);
  }
  if (strstr(type, "aclIntArray")) {
    if (v->kind != MV_INTS && v->kind != MV_INT) { *why = "an int array parameter given another value"; return NULL; }
    int k = c->n_arrays++;
    asc_use_fn(c, "aclCreateIntArray"), asc_use_fn(c, "aclDestroyIntArray");
    cg_buf_printf(&c->init, "  {\n    static const int64_t v[] = ");
    if (v->kind == MV_INT) int64_list(&c->init, &v->i, 1);
    else int64_list(&c->init, v->ints, v->n);
    cg_buf_printf(&c->init, ";\n    m->ia[%d] = aclCreateIntArray(v, %d);\n"
                            "    if (!m->ia[%d]) return fail(m, %d, NODE, \"aclCreateIntArray\");\n  }\n",
                  k, v->kind == MV_INT ? 1 : v->n, k, ACL_EMIT_NULL);
    return dupf(c, "m->ia[%d]", k);
  }
  if (strstr(type, "aclScalar")) {
    int k = c->n_scalars++;
    asc_use_fn(c, "aclCreateScalar"), asc_use_fn(c, "aclDestroyScalar");
    int float_input = n->n_in > 0 && n->in[0] && mg_dtype_is_float(n->in[0]->dtype);
    cg_buf_printf(&c->init, "  {\n");
    if (v->kind == MV_BOOL) cg_buf_printf(&c->init, "    bool v = %s;\n    m->sc[%d] = aclCreateScalar(&v, ACL_BOOL);\n",
                                          v->b ? "true" : "false", k);
    else if (v->kind == MV_FLOAT || (v->kind == MV_INT && float_input))
      cg_buf_printf(&c->init, "    float v = %.9g;\n    m->sc[%d] = aclCreateScalar(&v, ACL_FLOAT);\n",
                    v->kind == MV_FLOAT ? v->f : (double)v->i, k);
    else if (v->kind == MV_INT)
      cg_buf_printf(&c->init, "    int64_t v = %lld;\n    m->sc[%d] = aclCreateScalar(&v, ACL_INT64);\n", (long long)v->i, k);
    else { *why = "a scalar parameter given another value"; return NULL; }
    cg_buf_printf(&c->init, "    if (!m->sc[%d]) return fail(m, %d, NODE, \"aclCreateScalar\");\n  }\n", k, ACL_EMIT_NULL);
    return dupf(c, "m->sc[%d]", k);
  }
  if (!strcmp(type, "bool") || !strcmp(type, "const bool")) {
    if (v->kind != MV_BOOL && v->kind != MV_INT) { *why = "a bool parameter given another value"; return NULL; }
    return (v->kind == MV_BOOL ? v->b : v->i != 0) ? "true" : "false";
  }
  if (strstr(type, "double") || strstr(type, "float")) {
    if (v->kind == MV_FLOAT) return dupf(c, "%.17g", v->f);
    if (v->kind == MV_INT || v->kind == MV_BOOL) return dupf(c, "%lld.0", (long long)(v->kind == MV_INT ? v->i : v->b));
    *why = "a floating-point parameter given another value";
    return NULL;
  }
  if (strstr(type, "int") || strstr(type, "size_t")) {
    if (v->kind == MV_INT) return dupf(c, "%lld", (long long)v->i);
    if (v->kind == MV_BOOL) return v->b ? "1" : "0";
    if (v->kind == MV_ENUM) return v->s;
    *why = "an integer parameter given another value";
    return NULL;
  }
  if (strstr(type, "aclDataType")) {
    if (v->kind == MV_DTYPE && v->s) return v->s;
    *why = "a dtype parameter given another value";
    return NULL;
  }
  if (strstr(type, "char*")) {
    if (v->kind != MV_STRING) { *why = "a string parameter given another value"; return NULL; }
    cg_buf b = {0};
    cg_buf_c_literal(&b, v->s);
    const char *s = b.failed ? NULL : mg_arena_strdup(&c->a, b.s);
    cg_buf_free(&b);
    if (!s) c->failed = 1;
    return s;
  }
  if (v->kind == MV_ENUM) return v->s;
  *why = dupf(c, "a parameter of type '%s' the emitter does not pass", type);
  return NULL;
}

/* Node n has no aclnn call (why): the host fallback, else an unsupported node. */
static void refuse(asc_ctx *c, const mg_node *n, const char *why) {
  if (c->failed || !why) { c->failed = 1; return; } /* out of memory, never a refusal */
  const char *refusal = NULL;
  int k = asc_host_fallback(c, n, why, &refusal);
  if (k < 0) c->failed = 1;
  if (k) return;
  asc_unsupported(c, n, dupf(c, "%s; no host fallback either: %s", why, refusal ? refusal : "?"));
}

/* One node: its GetWorkspaceSize call at init (an executor made repeatable) and
 * its phase-2 call in model_run, or a view, or an unsupported diagnostic. */
static const map_value *arg_named(const map_plan *p, const char *name) {
  for (int i = 0; i < p->n_args; i++)
    if (!strcmp(p->args[i].name, name)) return &p->args[i].value;
  return NULL;
}

/* A pooling call's padding beyond what the fact table's note allows, or NULL:
 * aclnnAvgPool2d "paddings len 1|2 symmetric, pad <= kernel/2"; aclnnMaxPool "pads
 * len4 = {top, left, bottom, right} (ONNX order) and per-axis pad sum <= kernel".
 * The rules' pads predicates cannot say it; such a node is no call of that function. */
static const char *pool_pad_limit(asc_ctx *c, const char *fn, const map_plan *p) {
  int avg = !strcmp(fn, "aclnnAvgPool2d"), max = !strcmp(fn, "aclnnMaxPool");
  if (!avg && !max) return NULL;
  const map_value *k = arg_named(p, avg ? "kernelSize" : "kernelShape"), *pd = arg_named(p, avg ? "paddings" : "pads");
  if (!k || !pd || k->kind != MV_INTS || pd->kind != MV_INTS || k->n < 1) return NULL;
  for (int i = 0; i < pd->n; i++) {
    int axis = max && pd->n == 4 ? i % 2 : i;
    int64_t kern = k->ints[axis < k->n ? axis : k->n - 1];
    if (avg && pd->ints[i] > kern / 2)
      return dupf(c, "padding %lld exceeds kernel/2 = %lld (the fact table: pad <= kernel/2)",
                  (long long)pd->ints[i], (long long)(kern / 2));
    if (max && pd->n == 4 && i < 2 && pd->ints[i] + pd->ints[i + 2] > kern)
      return dupf(c, "pads %lld + %lld exceed the kernel %lld (the fact table: per-axis pad sum <= kernel)",
                  (long long)pd->ints[i], (long long)pd->ints[i + 2], (long long)kern);
  }
  return NULL;
}

static void emit_node(asc_ctx *c, const mg_node *n) {
  int folded = n->n_out > 0;
  for (int k = 0; k < n->n_out; k++) folded &= !n->out[k] || n->out[k]->data != NULL;
  if (folded) return; /* computed at conversion: its outputs are constants */
  map_plan *p = map_node_plan(n, c->rs, &c->a);
  if (!p) { c->failed = 1; return; }
  const char *fn = p->rule ? rule_call(p->rule) : NULL;
  if (p->status != MAP_SUPPORTED || !fn) {
    refuse(c, n, p->detail ? p->detail : "no aclnn rule");
    return;
  }
  if (n->n_out > 0 && n->out[0] && asc_strided_layout(c, n->out[0]->id)) {
    c->r->n_views++, c->n_strided_views++;
    cg_buf_printf(&c->init, "  /* %s (%s): a strided view of its input's buffer, read in place by every reader "
                            "(their fact-table notes accept non-contiguous inputs) */\n", n->name, n->op_type);
    return;
  }
  if (!strcmp(fn, "aclCreateTensor")) { /* a view: asc_plan_buffers aliased it */
    c->r->n_views++;
    cg_buf_printf(&c->init, "  /* %s (%s): a view of its input's buffer (aclCreateTensor where it is read) */\n",
                  n->name, n->op_type);
    return;
  }
  char ws_fn[160];
  snprintf(ws_fn, sizeof ws_fn, "%sGetWorkspaceSize", fn);
  if (!fact_fn(ws_fn) || !fact_fn(fn)) {
    refuse(c, n, dupf(c, "%s has no two-phase entry in the fact table", fn));
    return;
  }
  const char *limit = pool_pad_limit(c, fn, p);
  if (limit) {
    refuse(c, n, dupf(c, "%s: %s", fn, limit));
    return;
  }
  size_t mark = c->init.len;
  int tensors0 = c->n_tensors, arrays0 = c->n_arrays, scalars0 = c->n_scalars, lists0 = c->n_lists;
  cg_buf_printf(&c->init, "#undef NODE\n#define NODE ");
  cg_buf_c_literal(&c->init, n->name);
  cg_buf_printf(&c->init, "\n  /* %s (%s): %s */\n", n->name, n->op_type, fn);
  const char **args = mg_arena_alloc(&c->a, sizeof(char *) * ((size_t)p->n_args + 1));
  if (!args) { c->failed = 1; return; }
  const char *why = NULL;
  for (int i = 0; i < p->n_args && !why; i++) {
    const map_arg *a = &p->args[i];
    char type[96];
    if (a->pos != i || asc_fn_param_type(ws_fn, a->pos, type, sizeof type)) {
      why = dupf(c, "argument '%s' is not at position %d of %s", a->name, i, ws_fn);
      break;
    }
    args[i] = arg_text(c, n, fn, type, &a->value, &why);
    if (!args[i] && !why) why = "out of memory", c->failed = 1;
    if (why) why = dupf(c, "argument '%s' (%s): %s", a->name, a->expr, why);
  }
  if (c->failed) return; /* out of memory: the emitter fails, no node is refused for it */
  if (why) { /* take back what this node wrote */
    c->init.len = mark;
    if (c->init.s) c->init.s[mark] = 0;
    c->n_tensors = tensors0, c->n_arrays = arrays0, c->n_scalars = scalars0, c->n_lists = lists0;
    refuse(c, n, why);
    return;
  }
  int e = c->n_execs++;
  cg_buf_printf(&c->init, "  ST(%s(", ws_fn);
  for (int i = 0; i < p->n_args; i++) cg_buf_printf(&c->init, "%s, ", args[i]);
  cg_buf_printf(&c->init, "&m->ws[%d], &m->ex[%d]), \"%s\");\n", e, e, ws_fn);
  cg_buf_printf(&c->init, "  ST(aclSetAclOpExecutorRepeatable(m->ex[%d]), \"aclSetAclOpExecutorRepeatable\");\n", e);
  cg_buf_printf(&c->init, "  if (m->ws[%d] > m->workspace_bytes) m->workspace_bytes = m->ws[%d];\n", e, e);
  cg_buf_printf(&c->run, "  STN(%s(m->workspace, m->ws[%d], m->ex[%d], m->stream), ", fn, e, e);
  cg_buf_c_literal(&c->run, n->name);
  cg_buf_printf(&c->run, ", \"%s\");\n", fn);
  asc_use_fn(c, ws_fn);
  asc_use_fn(c, fn);
  c->r->n_calls++;
}

int emit_ascend(mg_model *m, const rule_set *rs, const asc_options *o, const char *dir, const char *model_path,
                asc_report *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  if (map_lower(m, rs, d) < 0) return -1;
  static const asc_options none = {0};
  asc_ctx c = {.m = m, .rs = rs, .d = d, .r = r, .model_path = model_path, .dir = dir, .o = o ? o : &none};
  mg_arena_init(&c.a, 1 << 16);
  mg_graph *g = m->graph;
  int rc = -1;
  /* a string tensor (an array of host pointers) has no device form: no aclTensor
   * holds ACL_STRING data, and the runner's descriptor has no dtype for it here */
  for (int i = 0; i < g->n_inputs + g->n_outputs; i++) {
    const mg_value *v = i < g->n_inputs ? g->inputs[i] : g->outputs[i - g->n_inputs];
    if (v->dtype != MG_STRING) continue;
    mg_diag_add(d, MG_SEV_ERROR, MG_D_UNSUPPORTED, v->name, NULL,
                "ascend: graph %s '%s' is a string tensor, which has no device buffer (nothing written)",
                i < g->n_inputs ? "input" : "output", v->name);
    r->n_unsupported++;
  }
  if (r->n_unsupported) {
    mg_arena_destroy(&c.a);
    return 0;
  }
  /* what depends only on constants is computed now, as the C target does (swin's
   * attention masks, built by ScatterND): constants of the weights buffer */
  for (int i = 0; i < g->n_nodes; i++)
    if (cg_fold_node(m, g->nodes[i]) < 0) {
      mg_error(d, OOM, NULL, NULL, "out of memory folding constants for the Ascend target");
      mg_arena_destroy(&c.a);
      return -1;
    }
  if (asc_plan_buffers(&c) == 0) {
    for (int i = 0; i < g->n_nodes && !c.failed; i++) emit_node(&c, g->nodes[i]);
    r->n_objects = c.n_tensors + c.n_arrays + c.n_scalars + c.n_lists;
    r->arena_bytes = c.arena_bytes, r->weights_bytes = c.weights_bytes;
    if (!c.failed && !c.init.failed && !c.run.failed) rc = dir ? asc_write_project(&c, dir) : 0;
    else mg_error(d, OOM, NULL, NULL, "out of memory writing the Ascend project");
  }
  cg_buf_free(&c.init);
  cg_buf_free(&c.run);
  mg_arena_destroy(&c.a);
  return rc;
}
