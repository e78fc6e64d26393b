/* ops.Custom AOT fallbacks of the MindSpore script (contracts in emit_custom.h). */
#include "emit_custom.h"
#include "codegen.h"
#include "passes.h"
#include "writer.h"
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { IDENT_MAX = 48 };

/* The dtypes a kernel can be handed: MindSpore's name for each, and the string the
 * AOT call passes for it (facts.md section 5: "float32", "float16", ...; bfloat16
 * has none there, so a node using it is refused rather than guessed). */
static const struct {
  mg_dtype t;
  const char *py, *aot;
} AOT_TYPES[] = {
    {MG_F16, "mindspore.float16", "float16"}, {MG_F32, "mindspore.float32", "float32"},
    {MG_F64, "mindspore.float64", "float64"}, {MG_I8, "mindspore.int8", "int8"},
    {MG_I16, "mindspore.int16", "int16"},     {MG_I32, "mindspore.int32", "int32"},
    {MG_I64, "mindspore.int64", "int64"},     {MG_U8, "mindspore.uint8", "uint8"},
    {MG_U16, "mindspore.uint16", "uint16"},   {MG_U32, "mindspore.uint32", "uint32"},
    {MG_U64, "mindspore.uint64", "uint64"},   {MG_BOOL, "mindspore.bool_", "bool"},
};

static int aot_type(mg_dtype t) {
  for (size_t i = 0; i < sizeof AOT_TYPES / sizeof AOT_TYPES[0]; i++)
    if (AOT_TYPES[i].t == t) return (int)i;
  return -1;
}

typedef struct {
  char ident[IDENT_MAX + 16];
  const char **rt; /* runtime sources its folder holds */
  int n_rt;
} custom_op;

struct ms_custom {
  char *dir; /* DIR/custom, or NULL: a check */
  mg_diags *d;
  mg_arena a;
  custom_op *ops;
  int n, cap;
  int failed; /* out of memory or I/O, already recorded */
};

ms_custom *ms_custom_new(const char *dir, mg_diags *d) {
  ms_custom *cu = mg_calloc(1, sizeof *cu);
  if (!cu) return NULL;
  cu->d = d;
  mg_arena_init(&cu->a, 1 << 14);
  if (dir && !(cu->dir = mg_arena_printf(&cu->a, "%s/custom", dir))) {
    ms_custom_free(cu);
    return NULL;
  }
  return cu;
}

void ms_custom_free(ms_custom *cu) {
  if (!cu) return;
  mg_free(cu->ops);
  mg_arena_destroy(&cu->a);
  mg_free(cu);
}

int ms_custom_count(const ms_custom *cu) { return cu ? cu->n : 0; }

static int fail(ms_custom *cu, const char *what) {
  if (what) mg_error(cu->d, OOM, NULL, NULL, "out of memory %s", what);
  cu->failed = 1;
  return -1;
}

static const char *say(ms_custom *cu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A refusal's text, kept for the emitter's diagnostic. */
static const char *say(ms_custom *cu, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_buf b = {0};
  cg_buf_vprintf(&b, fmt, ap);
  va_end(ap);
  const char *s = b.failed ? NULL : mg_arena_strdup(&cu->a, b.s ? b.s : "");
  cg_buf_free(&b);
  if (!s) fail(cu, "wording a refusal"); /* recorded: never a refusal's text alone */
  return s ? s : "out of memory";
}

static int in_top(const mg_model *m, const mg_value *v) {
  const mg_graph *g = m->graph;
  return v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

/* Whether a value can cross the AOT boundary: a tensor of static shape derived by
 * inference (never only declared: the kernel relies on it) and of a dtype with an
 * AOT string. NULL, or why not. */
static const char *boundary_refusal(ms_custom *cu, const mg_value *v) {
  char s[160];
  if (v->vtype != MG_VT_TENSOR) return say(cu, "value '%s' is a sequence or optional, not a tensor", v->name);
  if (v->shape.rank < 0 || !mg_shape_is_static(&v->shape) || v->shape_declared)
    return say(cu, "value '%s' has shape %s%s; an ops.Custom kernel is generated for static shapes (give "
                   "--input-shape)", v->name, mg_shape_str(&v->shape, s, sizeof s),
               v->shape_declared ? " only as the model declares it" : "");
  if (aot_type(v->dtype) < 0)
    return say(cu, "value '%s' has dtype %s, which has no ops.Custom aot dtype string", v->name,
               mg_dtype_name(v->dtype));
  return NULL;
}

/* Why n cannot be a custom op before its kernel is tried, or NULL; the distinct
 * run-time inputs (the kernel's inputs, in the node's order) go to ins. */
static const char *node_refusal(ms_custom *cu, const ms_custom_graph *g, const mg_node *n, const mg_value **ins,
                                int *n_ins) {
  *n_ins = 0;
  for (int i = 0; i < n->n_attr; i++)
    if (n->attr[i].kind == MG_ATTR_GRAPH) return "control flow (a subgraph) cannot be one kernel";
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    if (!v) continue;
    if (v->kind == MG_V_INIT) {
      const char *why = NULL;
      ms_param_view view;
      const char *tag = g->tag ? g->tag(g->tag_ctx, v, &view, &why) : v->name;
      /* a kernel would freeze it: net.py could neither load nor train it */
      if (tag)
        return say(cu, "it reads checkpoint parameter '%s' (a kernel has none to load or train)", tag);
      if (why) return say(cu, "it reads '%s', which stands for checkpoint parameters (%s)", v->name, why);
    }
    if (v->data && v->kind != MG_V_INPUT) continue; /* a constant: the kernel's own */
    if (!in_top(g->m, v) || !g->pyname[v->id]) return say(cu, "input '%s' is not a value net.py computes", v->name);
    const char *why = boundary_refusal(cu, v);
    if (why) return why;
    int seen = 0;
    for (int k = 0; k < *n_ins; k++) seen |= ins[k] == v;
    if (!seen) ins[(*n_ins)++] = v;
  }
  int outs = 0;
  for (int i = 0; i < n->n_out; i++) {
    const mg_value *v = n->out[i];
    if (!v) continue;
    const char *why = boundary_refusal(cu, v);
    if (why) return why;
    if (!in_top(g->m, v) || !g->pyname[v->id]) return say(cu, "output '%s' has no name in net.py", v->name);
    outs++;
  }
  return outs ? NULL : "it has no output";
}

/* The first error of q (the CPU emitter's reason), for a refusal. */
static const char *first_error(ms_custom *cu, const mg_diags *q) {
  for (size_t i = 0; i < q->count; i++)
    if (q->items[i].severity == MG_SEV_ERROR) return say(cu, "%s", q->items[i].message ? q->items[i].message : "");
  return "the C emitter failed";
}

/* Passes q's errors on to cu->d: an I/O or allocation failure is the emitter's. */
static int pass_on(ms_custom *cu, const mg_diags *q) {
  for (size_t i = 0; i < q->count; i++) {
    const mg_diag *e = &q->items[i];
    if (e->severity == MG_SEV_ERROR)
      mg_diag_add(cu->d, MG_SEV_ERROR, e->code, e->node, e->op, "%s", e->message ? e->message : "");
  }
  return fail(cu, NULL);
}

static void py_comment(cg_buf *b, const char *s) {
  for (; *s; s++) cg_buf_printf(b, "%c", (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
}

/* out_shape and out_dtype of the op: one list and one dtype, or (with several
 * outputs) a tuple of each, as the kernel's outputs come. */
static void out_spec(cg_buf *b, const mg_node *n) {
  int several = 0;
  for (int i = 0, k = 0; i < n->n_out; i++) several = (k += n->out[i] != NULL) > 1;
  for (int pass = 0; pass < 2; pass++) {
    cg_buf_printf(b, pass ? ", out_dtype=%s" : "out_shape=%s", several ? "(" : "");
    for (int i = 0, k = 0; i < n->n_out; i++) {
      const mg_value *v = n->out[i];
      if (!v) continue;
      cg_buf_printf(b, "%s", k++ ? ", " : "");
      if (pass) {
        cg_buf_printf(b, "%s", AOT_TYPES[aot_type(v->dtype)].py);
        continue;
      }
      cg_buf_printf(b, "[");
      for (int r = 0; r < v->shape.rank; r++) cg_buf_printf(b, "%s%lld", r ? ", " : "", (long long)v->shape.d[r].v);
      cg_buf_printf(b, "]");
    }
    cg_buf_printf(b, "%s", several ? ")" : "");
  }
}

/* Every parameter of the AOT call, inputs then outputs, as the wrapper checks it. */
static void param_tables(cg_buf *b, const mg_value *const *vs, int nv) {
  for (int i = 0; i < nv; i++) {
    cg_buf_printf(b, "static const int64_t dims%d[%d] = {", i, vs[i]->shape.rank ? vs[i]->shape.rank : 1);
    for (int r = 0; r < vs[i]->shape.rank; r++) cg_buf_printf(b, "%s%lld", r ? ", " : "", (long long)vs[i]->shape.d[r].v);
    cg_buf_printf(b, "%s};\n", vs[i]->shape.rank ? "" : "0");
  }
  cg_buf_printf(b, "static const int rank[%d] = {", nv);
  for (int i = 0; i < nv; i++) cg_buf_printf(b, "%s%d", i ? ", " : "", vs[i]->shape.rank);
  cg_buf_printf(b, "};\nstatic const int64_t *const dims[%d] = {", nv);
  for (int i = 0; i < nv; i++) cg_buf_printf(b, "%sdims%d", i ? ", " : "", i);
  cg_buf_printf(b, "};\nstatic const int64_t numel[%d] = {", nv);
  for (int i = 0; i < nv; i++) cg_buf_printf(b, "%s%lld", i ? ", " : "", (long long)mg_shape_numel(&vs[i]->shape));
  cg_buf_printf(b, "};\nstatic const char *const dtype[%d] = {", nv);
  for (int i = 0; i < nv; i++) cg_buf_printf(b, "%s\"%s\"", i ? ", " : "", AOT_TYPES[aot_type(vs[i]->dtype)].aot);
  cg_buf_printf(b, "};\n\n");
}

/* The AOT entry of node n over the generated model <prefix>: every parameter
 * MindSpore passes is checked against what the model was generated for before
 * any byte is written, and the model is initialised once, under a lock (MindSpore
 * may call a kernel from several threads; the model's workspace is one). */
static char *wrapper_source(const mg_node *n, const char *ident, const mg_value *const *ins, int n_ins) {
  const mg_value **vs = mg_malloc(sizeof(mg_value *) * (size_t)(n_ins + n->n_out + 1));
  int nv = 0;
  if (!vs) return NULL;
  for (int i = 0; i < n_ins; i++) vs[nv++] = ins[i];
  for (int i = 0; i < n->n_out; i++)
    if (n->out[i]) vs[nv++] = n->out[i];
  cg_buf b = {0};
  cg_buf_printf(&b, "/* Generated by migc: the ops.Custom AOT kernel of ONNX node \"");
  for (const char *s = n->name; *s; s++) /* never ends the comment */
    cg_buf_printf(&b, "%c", (unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f || (s[0] == '*' && s[1] == '/') ? '?' : *s);
  cg_buf_printf(&b, "\" (%s) for net.py: the CPU\n * target's code for it (mc_%s.c), behind the AOT signature of MindSpore's\n"
                    " * ops.Custom(func_type=\"aot\"). Returns 0, or: 1 wrong parameter count or a NULL array, 2 wrong\n"
                    " * rank, 3 wrong dims, 4 wrong dtype string, 5 a NULL buffer, 16 + k the model's error k\n"
                    " * (mg_rt_strerror). Nothing is written unless every parameter is what it was made for. */\n",
                n->op_type, ident);
  cg_buf_printf(&b, "#define _POSIX_C_SOURCE 200809L\n#include <pthread.h>\n#include <stdint.h>\n#include <string.h>\n"
                    "#include \"mc_%s.h\"\n\n", ident);
  cg_buf_printf(&b, "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
                    "__attribute__((visibility(\"default\"))) int migc_%s(int nparam, void **params, int *ndims,\n"
                    "    int64_t **shapes, const char **dtypes, void *stream, void *extra);\n"
                    "#ifdef __cplusplus\n}\n#endif\n\n", ident);
  param_tables(&b, vs, nv);
  cg_buf_printf(&b, "static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;\nstatic mc_%s_t model;\nstatic int ready;\n\n",
                ident);
  cg_buf_printf(&b,
                "int migc_%s(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,\n"
                "    void *stream, void *extra) {\n"
                "  const void *in[%d];\n  void *out[%d];\n  int i, k, rc;\n"
                "  (void)stream;\n  (void)extra;\n"
                "  if (nparam != %d || !params || !ndims || !shapes || !dtypes) return 1;\n"
                "  for (i = 0; i < %d; i++) {\n"
                "    if (ndims[i] != rank[i]) return 2;\n"
                "    if (rank[i] > 0 && !shapes[i]) return 3;\n"
                "    for (k = 0; k < rank[i]; k++)\n      if (shapes[i][k] != dims[i][k]) return 3;\n"
                "    if (!dtypes[i] || strcmp(dtypes[i], dtype[i])) return 4;\n"
                "    if (!params[i] && numel[i]) return 5;\n  }\n"
                "  for (i = 0; i < %d; i++) in[i] = params[i];\n"
                "  for (i = 0; i < %d; i++) out[i] = params[%d + i];\n%s"
                "  pthread_mutex_lock(&lock);\n"
                "  rc = ready ? 0 : mc_%s_init_embedded(&model);\n"
                "  if (!rc) {\n    ready = 1;\n    rc = mc_%s_run_v(&model, in, out);\n  }\n"
                "  pthread_mutex_unlock(&lock);\n"
                "  return rc ? 16 + rc : 0;\n}\n",
                ident, n_ins ? n_ins : 1, nv - n_ins, nv, nv, n_ins, nv - n_ins, n_ins, n_ins ? "" : "  in[0] = 0;\n", ident,
                ident);
  mg_free(vs);
  char *s = b.failed ? NULL : b.s;
  if (!s) cg_buf_free(&b);
  return s;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The runtime sources emit_c copied into dir/runtime, sorted. -1 on OOM or I/O. */
static int list_runtime(ms_custom *cu, custom_op *op, const char *dir) {
  char path[4400];
  snprintf(path, sizeof path, "%s/runtime", dir);
  DIR *dd = opendir(path);
  if (!dd) {
    mg_error(cu->d, IO, path, NULL, "cannot list %s", path);
    return fail(cu, NULL);
  }
  struct dirent *e;
  int cap = 0;
  while ((e = readdir(dd))) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".c")) continue;
    if (op->n_rt == cap) {
      const char **rt = mg_arena_alloc(&cu->a, sizeof(char *) * (size_t)(cap = cap ? 2 * cap : 16));
      if (!rt) break;
      if (op->n_rt) memcpy(rt, op->rt, sizeof(char *) * (size_t)op->n_rt);
      op->rt = rt;
    }
    if (!(op->rt[op->n_rt] = mg_arena_strdup(&cu->a, e->d_name))) break;
    op->n_rt++;
  }
  int oom = e != NULL;
  closedir(dd);
  if (oom) return fail(cu, "listing the runtime sources");
  if (op->n_rt) qsort(op->rt, (size_t)op->n_rt, sizeof(char *), by_name);
  return 0;
}

/* emit_c of the one-node model into DIR/custom/<ident>/ and its AOT wrapper. */
static int write_kernel(ms_custom *cu, const ms_custom_graph *g, const mg_node *n, custom_op *op,
                        const mg_value *const *ins, int n_ins) {
  char dir[4200], prefix[IDENT_MAX + 32], name[IDENT_MAX + 40];
  if (snprintf(dir, sizeof dir, "%s/%s", cu->dir, op->ident) >= (int)sizeof dir) {
    mg_error(cu->d, IO, cu->dir, NULL, "the path of %s/%s is too long", cu->dir, op->ident);
    return fail(cu, NULL);
  }
  snprintf(prefix, sizeof prefix, "mc_%s", op->ident);
  mg_model *sub = cg_one_node_model(g->m, n, ins, n_ins);
  if (!sub) return fail(cu, "building a one-node model");
  cg_options o = {.prefix = prefix, .embed_weights = 1, .no_runner = 1};
  cg_report r;
  mg_diags q;
  mg_diags_init(&q);
  int rc = emit_c(sub, &o, dir, &r, &q);
  mg_model_free(sub);
  if (rc || r.n_unsupported) rc = pass_on(cu, &q); /* the check took it: this is no refusal */
  mg_diags_free(&q);
  if (rc) return -1;
  char *src = wrapper_source(n, op->ident, ins, n_ins);
  if (!src) return fail(cu, "writing an ops.Custom kernel");
  snprintf(name, sizeof name, "%s_aot.c", prefix);
  rc = cg_write_text(cu->d, dir, name, src);
  mg_free(src);
  if (rc) return fail(cu, NULL);
  return list_runtime(cu, op, dir);
}

/* A fresh identifier for n's kernel: its name's, numbered when another has it. */
static void unique_ident(const ms_custom *cu, const mg_node *n, char *out, size_t size) {
  char base[IDENT_MAX + 1];
  cg_ident(n->name, base, sizeof base);
  snprintf(out, size, "%s", base);
  for (int k = 2, clash = 1; clash; k++) {
    clash = 0;
    for (int i = 0; i < cu->n && !clash; i++) clash = !strcmp(cu->ops[i].ident, out);
    if (clash) snprintf(out, size, "%s_%d", base, k);
  }
}

/* construct's call and __init__'s construction of the op (see emit_custom.h). */
static void python_text(const ms_custom_graph *g, const mg_node *n, const char *ident, const char *why,
                        const mg_value *const *ins, int n_ins, cg_buf *init, cg_buf *body) {
  cg_buf_printf(init, "        # ");
  py_comment(init, n->name);
  cg_buf_printf(init, " (%s): custom-op (cpu kernel) custom/%s/, as ", n->op_type, ident);
  py_comment(init, why);
  cg_buf_printf(init, "\n        self.custom_%s = mindspore.ops.Custom(func=CUSTOM_SO + \":migc_%s\", ", ident, ident);
  out_spec(init, n);
  cg_buf_printf(init, ", func_type=\"aot\", bprop=None, reg_info=None)\n");
  for (int i = 0, k = 0; i < n->n_out; i++)
    if (n->out[i]) cg_buf_printf(body, "%s%s", k++ ? ", " : "        ", g->pyname[n->out[i]->id]);
  cg_buf_printf(body, " = self.custom_%s(", ident);
  for (int i = 0; i < n_ins; i++) cg_buf_printf(body, "%s%s", i ? ", " : "", g->pyname[ins[i]->id]);
  cg_buf_printf(body, ")\n");
}

int ms_custom_node(ms_custom *cu, const ms_custom_graph *g, const mg_node *n, const char *why, cg_buf *init,
                   cg_buf *body, const char **refusal) {
  *refusal = NULL;
  if (cu->failed) return -1;
  const mg_value **ins = mg_arena_alloc(&cu->a, sizeof(mg_value *) * (size_t)(n->n_in + 1));
  if (!ins) return fail(cu, "checking a custom op");
  int n_ins;
  if ((*refusal = node_refusal(cu, g, n, ins, &n_ins))) return 0;
  mg_model *sub = cg_one_node_model(g->m, n, ins, n_ins);
  if (!sub) return fail(cu, "building a one-node model");
  /* the verdict is the check's in both modes, so coverage and convert agree */
  mg_diags q;
  mg_diags_init(&q);
  int bad = cg_check_model(sub, &q);
  mg_model_free(sub);
  if (bad) *refusal = say(cu, "the CPU target cannot take it either (%s)", first_error(cu, &q));
  mg_diags_free(&q);
  if (bad) return 0;
  if (cu->n == cu->cap) {
    int cap = cu->cap ? 2 * cu->cap : 8;
    custom_op *ops = mg_realloc(cu->ops, sizeof *ops * (size_t)cap);
    if (!ops) return fail(cu, "recording a custom op");
    cu->ops = ops, cu->cap = cap;
  }
  custom_op *op = &cu->ops[cu->n];
  memset(op, 0, sizeof *op);
  unique_ident(cu, n, op->ident, sizeof op->ident);
  if (cu->dir && write_kernel(cu, g, n, op, ins, n_ins)) return -1;
  cu->n++;
  /* the step map_node suggests is the one taken */
  const char *next = strstr(why, "; next step: ");
  int len = next ? (int)(next - why) : (int)strlen(why);
  const char *reason = say(cu, "%.*s", len, why);
  python_text(g, n, op->ident, reason, ins, n_ins, init, body);
  mg_diag_add(cu->d, MG_SEV_WARNING, MG_D_UNSUPPORTED, n->name, n->op_type, "mindspore: custom-op (cpu kernel): %s",
              reason);
  return 1;
}

void ms_custom_module_text(const ms_custom *cu, cg_buf *b) {
  if (!cu || !cu->n) return;
  cg_buf_printf(b, "# The ops.Custom AOT kernels of the nodes MindSpore has no rule for: `make -C custom`\n"
                   "# builds them from the CPU runtime's code. Found beside this file, whatever the working\n"
                   "# directory (MindSpore's MS_CUSTOM_AOT_WHITE_LIST, when set, must name that folder).\n"
                   "CUSTOM_SO = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"custom\", "
                   "\"libmigc_custom.so\")\n");
}

int ms_custom_finish(ms_custom *cu) {
  if (!cu || cu->failed) return -1;
  if (!cu->dir || !cu->n) return 0;
  cg_buf b = {0};
  cg_buf_printf(&b, "# Generated by migc: libmigc_custom.so, the ops.Custom AOT kernels net.py calls, one per\n"
                    "# node MindSpore has no rule for, each the CPU target's own code for it. `make` here;\n"
                    "# override CC and CFLAGS as needed. Only the migc_* entries are exported.\n"
                    "CC ?= cc\nCFLAGS ?= -O2\n\nOBJS =");
  /* one copy of each runtime source: every folder's is the same file */
  for (int i = 0; i < cu->n; i++) {
    const custom_op *op = &cu->ops[i];
    cg_buf_printf(&b, " \\\n  %s/mc_%s.o %s/mc_%s_weights.o %s/mc_%s_aot.o", op->ident, op->ident, op->ident, op->ident,
                  op->ident, op->ident);
    for (int k = 0; k < op->n_rt; k++) {
      int seen = 0;
      for (int j = 0; j < i && !seen; j++)
        for (int q = 0; q < cu->ops[j].n_rt && !seen; q++) seen = !strcmp(cu->ops[j].rt[q], op->rt[k]);
      size_t len = strlen(op->rt[k]);
      if (!seen) cg_buf_printf(&b, " %s/runtime/%.*s.o", op->ident, (int)(len - 2), op->rt[k]);
    }
  }
  cg_buf_printf(&b, "\n\nlibmigc_custom.so: $(OBJS)\n\t$(CC) -shared -fPIC $(CFLAGS) -o $@ $(OBJS) -lm -pthread\n");
  for (int i = 0; i < cu->n; i++) {
    const char *id = cu->ops[i].ident;
    cg_buf_printf(&b, "\n%s/%%.o: %s/%%.c $(wildcard %s/*.h %s/runtime/*.h)\n"
                      "\t$(CC) -std=c99 -fPIC -fvisibility=hidden $(CFLAGS) -I%s -I%s/runtime -c $< -o $@\n",
                  id, id, id, id, id, id);
  }
  cg_buf_printf(&b, "\nclean:\n\trm -f libmigc_custom.so $(OBJS)\n\n.PHONY: clean\n");
  int rc = b.failed ? fail(cu, "writing the custom ops' Makefile") : cg_write_text(cu->d, cu->dir, "Makefile", b.s);
  cg_buf_free(&b);
  return rc ? -1 : 0;
}
