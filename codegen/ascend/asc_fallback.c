/* The second and third of the diary's routes for a node aclnn cannot take
 * (asc_internal.h): the node runs on the host through the CPU target's own code
 * for it, between a device-to-host and a host-to-device copy in stream order; and
 * each op type that falls back gets a custom-op skeleton (custom_ops/<Op>/) to
 * replace the fallback with an Ascend C kernel. */
#include "asc_internal.h"
#include "codegen.h"
#include "writer.h"
#include <limits.h>
#include <stdio.h>
#include <string.h>

static size_t value_bytes(const mg_value *v) {
  int64_t n = mg_shape_numel(&v->shape);
  return n < 0 ? 0 : (size_t)n * mg_dtype_size(v->dtype);
}

static const char *addr_of(asc_ctx *c, const mg_value *v) {
  const asc_loc *l = &c->loc[c->root[v->id]];
  switch (l->kind) {
  case LOC_ARENA: return mg_arena_printf(&c->a, "(char *)m->arena + %zu", l->offset);
  case LOC_WEIGHTS: return mg_arena_printf(&c->a, "(char *)m->weights + %zu", l->offset);
  case LOC_INPUT: return mg_arena_printf(&c->a, "m->in_dev[%d]", l->index);
  default: return NULL;
  }
}

/* The first error of q, for a refusal. */
static const char *first_error(asc_ctx *c, const mg_diags *q) {
  for (size_t i = 0; i < q->count; i++)
    if (q->items[i].severity == MG_SEV_ERROR)
      return mg_arena_printf(&c->a, "%s", q->items[i].message ? q->items[i].message : "");
  return "the C emitter failed";
}

/* The msopgen type name of a dtype (facts.md section 5: float16/fp16, float/fp32,
 * int8, int32, bool, bfloat16, ...). */
static const char *opgen_type(mg_dtype t) {
  switch (t) {
  case MG_F32: return "float"; case MG_F16: return "float16"; case MG_BF16: return "bfloat16";
  case MG_I8: return "int8"; case MG_I16: return "int16"; case MG_I32: return "int32"; case MG_I64: return "int64";
  case MG_U8: return "uint8"; case MG_BOOL: return "bool"; case MG_F64: return "double";
  default: return "float";
  }
}

static const char *attr_type(const mg_attr *a) {
  switch (a->kind) {
  case MG_ATTR_INT: return "int";
  case MG_ATTR_FLOAT: return "float";
  case MG_ATTR_INTS: return "listInt";
  case MG_ATTR_FLOATS: return "listFloat";
  case MG_ATTR_STRING: return "string";
  default: return NULL;
  }
}

/* custom_ops/<Op>/ for the first node of each op type that falls back: the
 * msopgen JSON from the graph, op_host/ and op_kernel/ skeletons stating the
 * shape and tiling logic, the MindSpore registration, and a README. */
static int write_skeleton(asc_ctx *c, const mg_node *n, const char *dir) {
  char op[128], sub[PATH_MAX], path[PATH_MAX];
  snprintf(op, sizeof op, "%sCustom", n->op_type);
  for (int i = 0; i < c->n_skeletons; i++)
    if (!strcmp(c->skeletons[i], op)) return 0;
  if (c->n_skeletons < (int)(sizeof c->skeletons / sizeof c->skeletons[0]))
    c->skeletons[c->n_skeletons++] = mg_arena_strdup(&c->a, op);
  snprintf(sub, sizeof sub, "%s/custom_ops/%s", dir, n->op_type);
  cg_buf j = {0}, host = {0}, kern = {0}, reg = {0}, readme = {0};
  /* msopgen JSON: a list of ops; format and type lists pair up position by position */
  cg_buf_printf(&j, "[\n  {\n    \"op\": \"%s\",\n    \"language\": \"cpp\",\n    \"input_desc\": [\n", op);
  int k = 0;
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) continue;
    cg_buf_printf(&j, "%s      {\"name\": \"x%d\", \"param_type\": \"required\", \"format\": [\"ND\"], \"type\": [\"%s\"]}",
                  k++ ? ",\n" : "", i, opgen_type(n->in[i]->dtype));
  }
  cg_buf_printf(&j, "\n    ],\n    \"output_desc\": [\n");
  k = 0;
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i]) continue;
    cg_buf_printf(&j, "%s      {\"name\": \"y%d\", \"param_type\": \"required\", \"format\": [\"ND\"], \"type\": [\"%s\"]}",
                  k++ ? ",\n" : "", i, opgen_type(n->out[i]->dtype));
  }
  cg_buf_printf(&j, "\n    ],\n    \"attr\": [");
  k = 0;
  for (int i = 0; i < n->n_attr; i++) {
    const char *t = attr_type(&n->attr[i]);
    if (!t) continue;
    cg_buf_printf(&j, "%s\n      {\"name\": ", k++ ? "," : "");
    cg_buf_c_literal(&j, n->attr[i].name);
    cg_buf_printf(&j, ", \"param_type\": \"required\", \"type\": \"%s\"}", t);
  }
  cg_buf_printf(&j, "%s]\n  }\n]\n", k ? "\n    " : "");
  cg_buf_printf(&host,
                "// Skeleton written by migc for ONNX %s: register it with msopgen\n"
                "// (msopgen gen -i ../%s.json -c ai_core-<soc_version> -lan cpp -out %s), then fill in:\n"
                "//\n"
                "// Shape inference: the output shapes this model needs, from the graph:\n",
                n->op_type, op, op);
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i]) continue;
    char sh[256];
    cg_buf_printf(&host, "//   y%d: %s %s\n", i, opgen_type(n->out[i]->dtype), mg_shape_str(&n->out[i]->shape, sh, sizeof sh));
  }
  cg_buf_printf(&host,
                "// (inputs:");
  for (int i = 0; i < n->n_in; i++) {
    if (!n->in[i]) continue;
    char sh[256];
    cg_buf_printf(&host, " x%d %s %s;", i, opgen_type(n->in[i]->dtype), mg_shape_str(&n->in[i]->shape, sh, sizeof sh));
  }
  cg_buf_printf(&host,
                ")\n"
                "// Tiling: split the outputs' leading axis across the AI cores (blockDim), each core\n"
                "// taking whole rows so that no two cores write one element; pass the row count and\n"
                "// the per-core range in the tiling data (%s_tiling.h).\n"
                "// Until this kernel is built and installed, the generated program runs this node on\n"
                "// the host with the CPU runtime's kernel (host_*.c): the reference to test against.\n",
                op);
  cg_buf_printf(&kern,
                "// Skeleton written by migc: the AI Core kernel of %s (ONNX %s). The host fallback\n"
                "// (../../host_*.c, the CPU runtime's kernel) computes what it must compute; port that\n"
                "// loop nest here with the tiling of op_host/, then compare the two on the same inputs.\n",
                op, n->op_type);
  cg_buf_printf(&reg,
                "# Written by migc: the MindSpore registration of the Ascend C kernel, once built and\n"
                "# installed (facts.md section 5: func=\"aclnn<OpName>\", func_type=\"aot\").\n"
                "import mindspore\n\n"
                "%s = mindspore.ops.Custom(func=\"aclnn%s\", out_shape=", op, op);
  k = 0;
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i]) continue;
    cg_buf_printf(&reg, "%s[", k++ ? ", " : "");
    for (int r = 0; r < n->out[i]->shape.rank; r++)
      cg_buf_printf(&reg, "%s%lld", r ? ", " : "", (long long)n->out[i]->shape.d[r].v);
    cg_buf_printf(&reg, "]");
  }
  cg_buf_printf(&reg, ", out_dtype=mindspore.%s, func_type=\"aot\", bprop=None, reg_info=None)\n",
                n->out[0] ? (n->out[0]->dtype == MG_F32 ? "float32" : opgen_type(n->out[0]->dtype)) : "float32");
  cg_buf_printf(&readme,
                "# %s: a custom operator for ONNX %s\n\n"
                "aclnn has no call this model's %s nodes can take (coverage.md says why), so the\n"
                "generated program runs them on the host with the CPU runtime's kernel (`host_*.c`),\n"
                "between a device-to-host and a host-to-device copy in stream order. To run them on\n"
                "the device instead (facts.md section 5):\n\n"
                "1. `msopgen gen -i %s.json -c ai_core-<soc_version> -lan cpp -out %s` makes the\n"
                "   operator project; merge `op_host/` and `op_kernel/` from here into it.\n"
                "2. `bash build.sh` gives `build_out/custom_opp_<os>_<arch>.run`; install it, or point\n"
                "   `ASCEND_CUSTOM_OPP_PATH` at its vendor folder.\n"
                "3. The two-phase API `aclnn%sGetWorkspaceSize` / `aclnn%s` then comes from\n"
                "   `opp/vendors/<vendor>/op_api/{include,lib/libcust_opapi.so}`: add a rule for %s to a\n"
                "   rules file calling it (`migc convert --rules`), link `-lcust_opapi`, and the host\n"
                "   fallback is gone.\n"
                "4. For MindSpore, `mindspore_register.py` is the `ops.Custom(func=\"aclnn%s\",\n"
                "   func_type=\"aot\")` that calls it.\n\n"
                "Test the kernel against the host fallback: both must give the same outputs.\n",
                op, n->op_type, n->op_type, op, op, op, op, n->op_type, op);
  int rc = j.failed || host.failed || kern.failed || reg.failed || readme.failed ? -1 : 0;
  char host_dir[PATH_MAX + 16], kern_dir[PATH_MAX + 16];
  snprintf(host_dir, sizeof host_dir, "%s/op_host", sub);
  snprintf(kern_dir, sizeof kern_dir, "%s/op_kernel", sub);
  snprintf(path, sizeof path, "%s.json", op);
  char hname[160], kname[160];
  snprintf(hname, sizeof hname, "%s.cpp", op);
  snprintf(kname, sizeof kname, "%s.cpp", op);
  if (rc) mg_error(c->d, OOM, NULL, NULL, "out of memory writing a custom-op skeleton");
  rc = rc || cg_mkdirs(host_dir) || cg_mkdirs(kern_dir) || cg_write_text(c->d, sub, path, j.s) ||
       cg_write_text(c->d, host_dir, hname, host.s) || cg_write_text(c->d, kern_dir, kname, kern.s) ||
       cg_write_text(c->d, sub, "mindspore_register.py", reg.s) || cg_write_text(c->d, sub, "README.md", readme.s);
  cg_buf_free(&j), cg_buf_free(&host), cg_buf_free(&kern), cg_buf_free(&reg), cg_buf_free(&readme);
  return rc ? -1 : 0;
}

int asc_host_fallback(asc_ctx *c, const mg_node *n, const char *why, const char **refusal) {
  *refusal = NULL;
  for (int i = 0; i < n->n_attr; i++)
    if (n->attr[i].kind == MG_ATTR_GRAPH) { *refusal = "control flow (a subgraph) cannot be one host kernel"; return 0; }
  const mg_value **ins = mg_arena_alloc(&c->a, sizeof *ins * (size_t)(n->n_in + 1));
  if (!ins) return -1;
  int n_ins = 0;
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    if (!v || (v->data && v->kind != MG_V_INPUT)) continue; /* a constant: the kernel's own */
    if (!addr_of(c, v)) { *refusal = mg_arena_printf(&c->a, "input '%s' has no device buffer", v->name); return 0; }
    int seen = 0;
    for (int k = 0; k < n_ins; k++) seen |= ins[k] == v;
    if (!seen) ins[n_ins++] = v;
  }
  for (int i = 0; i < n->n_out; i++)
    if (n->out[i] && c->loc[c->root[n->out[i]->id]].kind != LOC_ARENA) {
      *refusal = mg_arena_printf(&c->a, "output '%s' has no device buffer (a shape known only at run time)", n->out[i]->name);
      return 0;
    }
  mg_model *sub = cg_one_node_model(c->m, n, ins, n_ins);
  if (!sub) return -1;
  mg_diags q;
  mg_diags_init(&q);
  int bad = cg_check_model(sub, &q);
  if (bad) *refusal = mg_arena_printf(&c->a, "the CPU target cannot take it either (%s)", first_error(c, &q));
  char base[96], ident[128];
  cg_ident(n->name, base, sizeof base);
  const char *pfx = c->o->prefix && *c->o->prefix && strcmp(c->o->prefix, "model") ? c->o->prefix : NULL;
  if (pfx) snprintf(ident, sizeof ident, "%s_host_%s", pfx, base); /* batched: unique across models */
  else snprintf(ident, sizeof ident, "host_%s", base);
  for (int k = 2, clash = 1; clash && !bad; k++) {
    clash = 0;
    for (int i = 0; i < c->n_fallbacks && !clash; i++) clash = !strcmp(c->fallback_idents[i], ident);
    if (clash) snprintf(ident, sizeof ident, "%s%shost_%s_%d", pfx ? pfx : "", pfx ? "_" : "", base, k);
  }
  int rc = 0;
  if (!bad && c->dir) {
    mg_diags_free(&q);
    mg_diags_init(&q);
    cg_options o = {.prefix = ident, .embed_weights = 1, .no_runner = 1};
    cg_report r;
    if (emit_c(sub, &o, c->dir, &r, &q) || r.n_unsupported) {
      for (size_t i = 0; i < q.count; i++)
        if (q.items[i].severity == MG_SEV_ERROR)
          mg_diag_add(c->d, MG_SEV_ERROR, q.items[i].code, q.items[i].node, q.items[i].op, "ascend: host fallback: %s",
                      q.items[i].message ? q.items[i].message : "");
      rc = -1;
    } else if (!pfx && write_skeleton(c, n, c->dir)) rc = -1;
  }
  mg_model_free(sub);
  mg_diags_free(&q);
  if (bad || rc) return bad ? 0 : -1;
  if (c->n_fallbacks == (int)(sizeof c->fallback_idents / sizeof c->fallback_idents[0])) {
    *refusal = "too many host fallbacks in one model";
    return 0;
  }
  const char *id = c->fallback_idents[c->n_fallbacks++] = mg_arena_strdup(&c->a, ident);
  /* the staging buffer: the inputs, then the outputs */
  size_t off = 0, moved = 0;
  cg_buf *b = &c->run;
  cg_buf_printf(b, "  /* ");
  cg_buf_printable(b, n->name);
  cg_buf_printf(b, " (%s): host fallback, the CPU target's kernel (%s.c): device to host, kernel, host to\n"
                   "     device, after what the stream holds */\n", n->op_type, id);
  cg_buf_printf(b, "  STN(aclrtSynchronizeStream(m->stream), ");
  cg_buf_c_literal(b, n->name);
  cg_buf_printf(b, ", \"aclrtSynchronizeStream\");\n  {\n    const void *ins[%d];\n    void *outs[%d];\n",
                n_ins ? n_ins : 1, n->n_out ? n->n_out : 1);
  for (int i = 0; i < n_ins; i++) {
    size_t nb = value_bytes(ins[i]);
    cg_buf_printf(b, "    ins[%d] = m->host_stage + %zu;\n    STN(aclrtMemcpy(m->host_stage + %zu, %zu, %s, %zu, "
                     "ACL_MEMCPY_DEVICE_TO_HOST), ", i, off, off, nb ? nb : 1, addr_of(c, ins[i]), nb);
    cg_buf_c_literal(b, n->name);
    cg_buf_printf(b, ", \"aclrtMemcpy\");\n");
    off += (nb + 63) / 64 * 64, moved += nb;
  }
  size_t out_off = off;
  int k = 0;
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i]) continue;
    cg_buf_printf(b, "    outs[%d] = m->host_stage + %zu;\n", k++, off);
    off += (value_bytes(n->out[i]) + 63) / 64 * 64;
  }
  cg_buf_printf(b, "    if (%s_run_v(&m->%s, ins, outs)) return fail(m, 1, ", id, id);
  cg_buf_c_literal(b, n->name);
  cg_buf_printf(b, ", \"the host fallback's CPU kernel\");\n");
  off = out_off;
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i]) continue;
    size_t nb = value_bytes(n->out[i]);
    cg_buf_printf(b, "    STN(aclrtMemcpy(%s, %zu, m->host_stage + %zu, %zu, ACL_MEMCPY_HOST_TO_DEVICE), ",
                  addr_of(c, n->out[i]), nb ? nb : 1, off, nb);
    cg_buf_c_literal(b, n->name);
    cg_buf_printf(b, ", \"aclrtMemcpy\");\n");
    off += (nb + 63) / 64 * 64, moved += nb;
  }
  cg_buf_printf(b, "  }\n");
  if (off > c->host_stage_bytes) c->host_stage_bytes = off;
  c->r->n_fallbacks++;
  c->r->fallback_bytes += moved;
  mg_diag_add(c->d, MG_SEV_WARNING, MG_D_UNSUPPORTED, n->name, n->op_type,
              "ascend: host-fallback (cpu kernel): %s; %zu bytes cross between device and host per run "
              "(custom_ops/%s/ is the skeleton of a device kernel)", why, moved, n->op_type);
  return 1;
}
