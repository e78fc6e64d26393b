/* The C generator's driver: the pipeline of codegen.h and the services cg.h
 * promises the emitters. */
#include "cg_internal.h"
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ tables */

int cg_kernel_flags(mg_op op) {
  if (cg_has_unary_kernel(op)) return CG_INPLACE;
  switch (op) {
#define KERNEL(name, flags) case MG_OP_##name: return (flags);
#include "kernels.def"
#undef KERNEL
  default:
    return -1;
  }
}

typedef int cg_emitter(cg_ctx *c, const mg_node *n);
static cg_emitter *emitter_of(mg_op op) {
  if (cg_has_unary_kernel(op)) return cg_emit_unary;
  switch (op) {
#define KERNEL(name, flags) case MG_OP_##name: return cg_emit_##name;
#include "kernels.def"
#undef KERNEL
  default:
    return NULL;
  }
}

/* Dropout is an INFER_VIEW: its mask output is unused (checked in check_node). */
int cg_is_view(const mg_node *n) { return (mg_op_get(n->op)->flags & (MG_OPF_VIEW | MG_OPF_INFER_VIEW)) != 0; }


/* ------------------------------------------------------------ cg.h services */

const char *cg_ctype(mg_dtype t) {
  switch (t) {
  case MG_F32: return "float";
  case MG_F64: return "double";
  case MG_I8: return "int8_t";
  case MG_I16: return "int16_t";
  case MG_I32: return "int32_t";
  case MG_I64: return "int64_t";
  case MG_U8: case MG_BOOL: return "uint8_t";
  case MG_U16: case MG_F16: case MG_BF16: return "uint16_t";
  case MG_U32: return "uint32_t";
  case MG_U64: return "uint64_t";
  case MG_STRING: return "const char *";
  default: return NULL;
  }
}

size_t cg_elem_bytes(mg_dtype t) { return t == MG_STRING ? 8 : mg_dtype_size(t); }

int cg_out_dims_offset(const mg_graph *g, int j) {
  int off = 0;
  for (int i = 0; i < j && i < g->n_outputs; i++) off += g->outputs[i]->shape.rank > 0 ? g->outputs[i]->shape.rank : 0;
  return off;
}

const char *cg_rt_dtype(mg_dtype t) {
  switch (t) {
  case MG_F32: return "MG_RT_F32";
  case MG_F64: return "MG_RT_F64";
  case MG_I8: return "MG_RT_I8";
  case MG_I16: return "MG_RT_I16";
  case MG_I32: return "MG_RT_I32";
  case MG_I64: return "MG_RT_I64";
  case MG_U8: return "MG_RT_U8";
  case MG_BOOL: return "MG_RT_BOOL";
  case MG_U16: return "MG_RT_U16";
  case MG_F16: return "MG_RT_F16";
  case MG_BF16: return "MG_RT_BF16";
  case MG_U32: return "MG_RT_U32";
  case MG_U64: return "MG_RT_U64";
  default: return NULL;
  }
}

int cg_dims(const mg_value *v, int64_t *dims) {
  for (int i = 0; i < v->shape.rank; i++) dims[i] = v->shape.d[i].v;
  return v->shape.rank < 0 ? 0 : v->shape.rank;
}

int64_t cg_numel(const mg_value *v) { return mg_shape_numel(&v->shape); }

int cg_is_const(const mg_value *v) { return v && v->data && v->vtype == MG_VT_TENSOR; }

int64_t cg_const_ints(const mg_value *v, int64_t *out, int64_t cap) {
  if (!cg_is_const(v)) return -1;
  return mg_value_ints(v, out, cap);
}

int64_t cg_const_floats(const mg_value *v, float *out, int64_t cap) {
  if (!cg_is_const(v)) return -1;
  size_t es = mg_dtype_size(v->dtype);
  int64_t n = mg_shape_numel(&v->shape);
  if (!es || n < 0 || n > cap || (size_t)n * es > v->nbytes || v->dtype == MG_C64 || v->dtype == MG_C128) return -1;
  for (int64_t i = 0; i < n; i++) out[i] = (float)mg_load_f64(v->dtype, (const char *)v->data + (size_t)i * es);
  return n;
}

static const char *intern(cg_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *intern(cg_ctx *c, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  const char *s = mg_arena_strdup(&c->strings, buf);
  if (!s) {
    c->body.failed = 1;
    return "0";
  }
  return s;
}

void cg_line(cg_ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_buf_printf(&c->body, "  ");
  cg_buf_vprintf(&c->body, fmt, ap);
  cg_buf_printf(&c->body, "\n");
  va_end(ap);
}

void cg_kernel(cg_ctx *c, int scratch, const char *kernel, const char *fmt, ...) {
  const int pooled = cg_threads(c) > 1;
  va_list ap;
  if (pooled) cg_need(c, "pool.c");
  va_start(ap, fmt);
  cg_buf_printf(&c->body, pooled ? "  %s_mt(m->pool, " : "  %s(", kernel);
  cg_buf_vprintf(&c->body, fmt, ap);
  cg_buf_printf(&c->body, "%s);\n", pooled && scratch ? ", scratch_floats()" : "");
  va_end(ap);
}

static const mg_value *storage_of(cg_ctx *c, const mg_value *v) {
  if (v->id >= 0 && v->id < c->g->n_values && c->redirect[v->id] >= 0) return c->g->values[c->redirect[v->id]];
  return v;
}

static const char *pointer(cg_ctx *c, const mg_value *v, int writable, const char *type) {
  v = storage_of(c, v);
  const char *q = writable ? "" : "const ";
  if (!v || v->id < 0 || v->id >= c->g->n_values || c->g->values[v->id] != v) {
    c->cur_failed = 1;
    return "0";
  }
  const cg_place *p = &c->place[v->id];
  if (strchr(type, '*')) {
    /* a pointer element type ("const char *"): the qualifier goes after it */
    q = writable ? "" : " const";
    switch (p->at) {
    case CG_AT_INPUT: return intern(c, "((%s const *)in[%d])", type, p->index);
    case CG_AT_OUTPUT: return intern(c, "((%s%s *)out[%d])", type, q, p->index);
    case CG_AT_ARENA: return intern(c, "((%s%s *)(A + %zu))", type, q, p->offset);
    default: c->cur_failed = 1; return "0";
    }
  }
  switch (p->at) {
  case CG_AT_INPUT:
    return intern(c, "((const %s *)in[%d])", type, p->index);
  case CG_AT_OUTPUT:
    return intern(c, "((%s%s *)out[%d])", q, type, p->index);
  case CG_AT_WEIGHT:
    if (p->w16) return cg_w16_at(c, p->offset, type);
    return intern(c, "((const %s *)(W + %zu))", type, p->offset);
  case CG_AT_ARENA:
    return intern(c, "((%s%s *)(A + %zu))", q, type, p->offset);
  default:
    c->cur_failed = 1;
    return "0";
  }
}

const char *cg_in(cg_ctx *c, const mg_value *v) {
  const char *t = cg_ctype(v->dtype);
  return pointer(c, v, 0, t ? t : "void");
}
const char *cg_out(cg_ctx *c, const mg_value *v) {
  const char *t = cg_ctype(v->dtype);
  return pointer(c, v, 1, t ? t : "void");
}
const char *cg_vin(cg_ctx *c, const mg_value *v) { return pointer(c, v, 0, "void"); }
const char *cg_vout(cg_ctx *c, const mg_value *v) { return pointer(c, v, 1, "void"); }

/* A file-scope "static const <type> NAME<rest>;" unless one with the same key
 * exists; returns NAME. */
static const char *add_static(cg_ctx *c, const char *key, const char *type, const char *rest) {
  /* with a symbolic sequence, two constants that agree at one length only would
   * give that length a text of its own (cg_seq.c): never shared */
  for (int i = 0; i < c->n_statics && !c->seq_sym; i++)
    if (!strcmp(c->static_texts[i], key)) return c->static_names[i];
  if (c->n_statics == c->statics_cap) {
    int cap = c->statics_cap ? c->statics_cap * 2 : 256;
    char **t = mg_realloc(c->static_texts, sizeof(char *) * (size_t)cap);
    if (t) c->static_texts = t;
    char **nm = t ? mg_realloc(c->static_names, sizeof(char *) * (size_t)cap) : NULL;
    if (!t || !nm) {
      c->body.failed = 1;
      return "0";
    }
    c->static_names = nm;
    c->statics_cap = cap;
  }
  char *name = mg_arena_printf(&c->strings, "cg_k%d", c->n_statics);
  char *k = mg_arena_strdup(&c->strings, key);
  if (!name || !k) {
    c->body.failed = 1;
    return "0";
  }
  c->static_texts[c->n_statics] = k;
  c->static_names[c->n_statics++] = name;
  cg_buf_printf(&c->statics, "static const %s %s%s;\n", type, name, rest);
  return name;
}

const char *cg_i64s(cg_ctx *c, const int64_t *v, int n) {
  cg_buf b = {0};
  cg_buf_printf(&b, "[%d] = {", n ? n : 1);
  for (int i = 0; i < n; i++) {
    /* INT64_MIN has no literal form */
    if (v[i] == INT64_MIN) cg_buf_printf(&b, "%sINT64_MIN", i ? ", " : "");
    else cg_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)v[i]);
  }
  cg_buf_printf(&b, n ? "}" : "0}");
  const char *name = b.failed ? "0" : add_static(c, b.s, "int64_t", b.s);
  if (b.failed) c->body.failed = 1;
  cg_buf_free(&b);
  return name;
}

/* A float as a C99 constant expression that reads back bit-exactly. */
static void float_literal(cg_buf *b, float x) {
  if (isnan(x)) cg_buf_printf(b, "NAN");
  else if (isinf(x)) cg_buf_printf(b, x < 0 ? "-INFINITY" : "INFINITY");
  else cg_buf_printf(b, "%af", (double)x);
}

const char *cg_f32s(cg_ctx *c, const float *v, int n) {
  cg_buf b = {0};
  cg_buf_printf(&b, "[%d] = {", n ? n : 1);
  for (int i = 0; i < n; i++) {
    if (i) cg_buf_printf(&b, ", ");
    float_literal(&b, v[i]);
  }
  cg_buf_printf(&b, n ? "}" : "0}");
  char *key = b.failed ? NULL : mg_arena_printf(&c->strings, "f32%s", b.s);
  const char *name = key ? add_static(c, key, "float", b.s) : "0";
  if (!key) c->body.failed = 1;
  cg_buf_free(&b);
  return name;
}

const char *cg_static(cg_ctx *c, const char *type, const char *init_fmt, ...) {
  cg_buf b = {0};
  va_list ap;
  va_start(ap, init_fmt);
  cg_buf_printf(&b, " = ");
  cg_buf_vprintf(&b, init_fmt, ap);
  va_end(ap);
  char *key = b.failed ? NULL : mg_arena_printf(&c->strings, "%s%s", type, b.s);
  const char *name = key ? add_static(c, key, type, b.s) : "0";
  if (!key) c->body.failed = 1;
  cg_buf_free(&b);
  return name;
}


const char *cg_strs(cg_ctx *c, const char *const *v, int n) {
  cg_buf b = {0};
  cg_buf_printf(&b, "[%d] = {", n ? n : 1);
  for (int i = 0; i < n; i++) {
    if (i) cg_buf_printf(&b, ", ");
    cg_buf_c_literal(&b, v[i]);
  }
  cg_buf_printf(&b, n ? "}" : "\"\"}");
  char *key = b.failed ? NULL : mg_arena_printf(&c->strings, "str%s", b.s);
  const char *name = key ? add_static(c, key, "char *const", b.s) : "0";
  if (!key) c->body.failed = 1;
  cg_buf_free(&b);
  return name;
}

const char *cg_string_pool(cg_ctx *c) {
  c->uses_string_pool = 1;
  return "(&m->strings)";
}

const char *cg_bounded_dims(cg_ctx *c, const mg_value *v) {
  v = storage_of(c, v);
  if (!v || v->id < 0 || v->id >= c->g->n_values || !c->bounded[v->id]) return NULL;
  for (int j = 0; j < c->g->n_outputs; j++)
    if (c->g->outputs[j] == v) return intern(c, "(m->out_dims + %d)", cg_out_dims_offset(c->g, j));
  return NULL;
}

const char *cg_scratch(cg_ctx *c, const char *floats_expr, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, floats_expr);
  vsnprintf(buf, sizeof buf, floats_expr, ap);
  va_end(ap);
  int seen = 0;
  /* never shared with a symbolic sequence: see add_static */
  for (int i = 0; i < c->n_scratch && !seen && !c->seq_sym; i++) seen = !strcmp(c->scratch[i], buf);
  if (!seen) {
    if (c->n_scratch == c->scratch_cap) {
      int cap = c->scratch_cap ? c->scratch_cap * 2 : 64;
      char **t = mg_realloc(c->scratch, sizeof(char *) * (size_t)cap);
      if (!t) {
        c->body.failed = 1;
        return "m->scratch";
      }
      c->scratch = t;
      c->scratch_cap = cap;
    }
    char *e = mg_arena_strdup(&c->strings, buf);
    if (!e) c->body.failed = 1;
    else c->scratch[c->n_scratch++] = e;
  }
  return "m->scratch";
}

void cg_need(cg_ctx *c, const char *file) {
  for (int i = 0; i < c->n_needed; i++)
    if (!strcmp(c->needed[i], file)) return;
  if (c->n_needed < (int)(sizeof c->needed / sizeof c->needed[0])) c->needed[c->n_needed++] = file;
}

void cg_select(cg_ctx *c, const char *macro) {
  for (int i = 0; i < c->n_selected; i++)
    if (!strcmp(c->selected[i], macro)) return;
  assert(c->n_selected < (int)(sizeof c->selected / sizeof c->selected[0]));
  c->selected[c->n_selected++] = macro;
}

int cg_unsupported(cg_ctx *c, const mg_node *n, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (c->probing) return -1;
  mg_error(c->d, UNSUPPORTED, n->name, n->op_type, "cpu: %s", buf);
  c->cur_failed = 1;
  return -1;
}

/* ------------------------------------------------------------ checks */

static int value_ok(cg_ctx *c, const mg_node *n, const mg_value *v) {
  if (!v) return 1;
  if (v->vtype != MG_VT_TENSOR) return cg_unsupported(c, n, "value '%s' is a sequence or optional", v->name) + 1;
  if (!cg_ctype(v->dtype))
    return cg_unsupported(c, n, "value '%s' has dtype %s", v->name, mg_dtype_name(v->dtype)) + 1;
  if (v->dtype == MG_STRING && !cg_is_view(n) && !(cg_kernel_flags(n->op) & CG_STRINGS))
    return cg_unsupported(c, n, "value '%s' has dtype string, which no %s kernel takes", v->name, n->op_type) + 1;
  if (v->dtype == MG_STRING && v->data)
    return cg_unsupported(c, n, "constant string tensor '%s' (strings come only from inputs and attributes)",
                          v->name) + 1;
  if (v->id >= 0 && v->id < c->g->n_values && c->bounded[v->id] && v->producer != n)
    return cg_unsupported(c, n, "value '%s' has a run-time length (only a graph output may), and %s reads it",
                          v->name, n->op_type) + 1;
  if (v->shape.rank < 0 || !mg_shape_is_static(&v->shape) || v->shape_declared) {
    char buf[128];
    const mg_node *origin = mg_data_dependent_origin(v);
    if (origin)
      mg_error(c->d, UNSUPPORTED, n->name, n->op_type,
               "cpu: dynamic-shape: value '%s' has shape %s, a length that depends on the data ('%s', %s): "
               "--input-shape cannot fix it, and the C backend has static shapes, so the node is reported "
               "and not converted",
               v->name, mg_shape_str(&v->shape, buf, sizeof buf), origin->name, origin->op_type);
    else
      mg_error(c->d, UNSUPPORTED, n->name, n->op_type,
               "cpu: dynamic-shape: value '%s' has shape %s%s; give --input-shape or fix the export", v->name,
               mg_shape_str(&v->shape, buf, sizeof buf),
               v->shape_declared ? " only as the model declares it (it depends on run-time values)" : "");
    c->cur_failed = 1;
    return 0;
  }
  return 1;
}

/* Whether n can be emitted at all (the emitter checks the rest); records why not. */
static int check_node(cg_ctx *c, const mg_node *n) {
  if (c->batch_why && c->batch_why[n->id])
    return !cg_unsupported(c, n, "symbolic batch '%s': %s", c->batch.sym, c->batch_why[n->id]);
  if (c->dyn_node[n->id] == DYN_FAILED)
    return !cg_unsupported(c, n, "run-time length: %s", c->dyn_guard[n->id] ? c->dyn_guard[n->id] : "no rule");
  for (int i = 0; i < n->n_attr; i++)
    if (n->attr[i].kind == MG_ATTR_GRAPH) return !cg_unsupported(c, n, "control flow (subgraphs) is not supported");
  if (!cg_is_view(n) && !emitter_of(n->op) && c->dyn_node[n->id] != DYN_OWN)
    return !cg_unsupported(c, n, "no CPU kernel for %s%s%s", *n->domain ? n->domain : "", *n->domain ? "::" : "",
                           n->op_type);
  if (n->op == MG_OP_Dropout) {
    /* training mode with ratio 0 (as torchvision's swin exports attention dropout)
     * is the identity too */
    int64_t t = 0;
    float ratio = 0.5f;
    if (n->n_in > 1 && n->in[1] && cg_const_floats(n->in[1], &ratio, 1) != 1) ratio = -1;
    if (n->n_in < 2 || !n->in[1]) ratio = 0.5f;
    if (n->n_in > 2 && n->in[2] && (cg_const_ints(n->in[2], &t, 1) != 1 || t) && ratio != 0)
      return !cg_unsupported(c, n, "training-mode Dropout with a nonzero ratio (random masks)");
    if (n->n_out > 1 && n->out[1] && n->out[1]->n_uses) return !cg_unsupported(c, n, "Dropout mask output is used");
  }
  int ok = 1;
  for (int i = 0; i < n->n_in && ok; i++) ok = value_ok(c, n, n->in[i]);
  for (int i = 0; i < n->n_out && ok; i++) ok = value_ok(c, n, n->out[i]);
  return ok;
}

/* ------------------------------------------------------------ emission */

static void comment_name(cg_buf *b, const char *s) {
  for (; s && *s; s++) {
    if (s[0] == '*' && s[1] == '/') cg_buf_printf(b, "* /");
    else if ((unsigned char)*s >= 32 && *s != '\\') cg_buf_printf(b, "%c", *s);
    else cg_buf_printf(b, "?");
    if (s[0] == '*' && s[1] == '/') s++;
  }
}

static size_t bytes_of(const mg_value *v) {
  int64_t n = mg_shape_numel(&v->shape);
  return n < 0 ? 0 : (size_t)n * cg_elem_bytes(v->dtype);
}

static void emit_copy(cg_ctx *c, const mg_value *dst, const mg_value *src) {
  size_t n = bytes_of(dst);
  if (n) cg_line(c, "memcpy(%s, %s, %zu);", cg_vout(c, dst), cg_vin(c, src), n);
}

/* After a node: hand each output to the trace hook, if the caller gave one. A
 * value of run-time length goes with its actual dims when its layout is dense,
 * and not at all otherwise (its elements are not where the dims would say). */
static void emit_trace(cg_ctx *c, const mg_value *v) {
  int64_t dims[MG_MAX_RANK];
  if (c->rd_off && c->rd_off[v->id] >= 0) {
    if (!cg_dyn_dense(c, v)) return;
    cg_buf name = {0};
    cg_buf_c_literal(&name, v->name);
    const char *dt = cg_rt_dtype(v->dtype);
    int rank = cg_dims(v, dims);
    const char *io = name.failed ? "0"
                                 : cg_static(c, "mg_rt_io", "{%s, %s, %d, 0, 0}", name.s, dt ? dt : "MG_RT_F32", rank);
    if (name.failed) c->body.failed = 1; /* "0" is no io: the project must fail */
    cg_buf_free(&name);
    cg_line(c, "if (trace) {");
    cg_line(c, "  mg_rt_io io_ = %s;", io);
    cg_line(c, "  io_.shape = rd + %d;", c->rd_off[v->id]);
    cg_line(c, "  io_.bytes = (size_t)%s * %zu;", cg_dyn_numel(c, v), cg_elem_bytes(v->dtype));
    cg_line(c, "  trace(tctx, &io_, %s);", cg_vin(c, v));
    cg_line(c, "}");
    return;
  }
  int rank = cg_dims(v, dims);
  const char *shape = cg_i64s(c, dims, rank);
  cg_buf name = {0};
  cg_buf_c_literal(&name, v->name);
  const char *dt = v->dtype == MG_STRING ? "MG_RT_STRING" : cg_rt_dtype(v->dtype);
  const char *io = name.failed ? "0"
                               : cg_static(c, "mg_rt_io", "{%s, %s, %d, %s, %zu}", name.s,
                                           dt ? dt : "MG_RT_F32", rank, shape, bytes_of(v));
  if (name.failed) c->body.failed = 1; /* "0" is no io: the project must fail */
  cg_buf_free(&name);
  cg_line(c, "if (trace) trace(tctx, &%s, %s);", io, cg_vin(c, v));
}

/* What emit_node does for n when no value of run-time length is involved: the
 * view's copy into a graph output, or the op's emitter. */
static int emit_plain(cg_ctx *c, const mg_node *n) {
  if (cg_is_view(n)) {
    if (c->place[n->out[0]->id].at == CG_AT_OUTPUT) emit_copy(c, n->out[0], n->in[0]);
    return 0;
  }
  cg_emitter *e = emitter_of(n->op);
  return e ? e(c, n) : cg_unsupported(c, n, "no CPU kernel for %s", n->op_type);
}

/* Emits node n; returns 0, or -1 when it is unsupported (its text is rolled
 * back and replaced by an early return). */
static int emit_node(cg_ctx *c, const mg_node *n) {
  size_t body_len = c->body.len, statics_len = c->statics.len;
  int n_statics = c->n_statics, n_scratch = c->n_scratch, n_needed = c->n_needed;
  c->cur = n;
  c->cur_failed = 0;
  cg_buf_printf(&c->body, "  /* %d %s \"", n->id, n->op_type);
  comment_name(&c->body, n->name);
  cg_buf_printf(&c->body, "\"%s */\n", c->act[n->id] ? (c->silu_mul[n->id] ? " + SiLU" : " + activation") : "");
  cg_w16_emit(c, n);
  int ok = check_node(c, n);
  if (ok && c->dyn_node[n->id]) {
    ok = cg_emit_dynamic(c, n, emit_plain) == 0 && !c->cur_failed;
    if (!ok && !c->cur_failed) cg_unsupported(c, n, "the emitter failed");
    for (int k = 0; ok && k < n->n_out; k++)
      if (n->out[k]) emit_trace(c, n->out[k]);
  } else if (ok && cg_is_view(n)) {
    const cg_place *po = &c->place[n->out[0]->id];
    if (po->at == CG_AT_OUTPUT) emit_copy(c, n->out[0], n->in[0]);
  } else if (ok) {
    ok = emitter_of(n->op)(c, n) == 0 && !c->cur_failed;
    if (!ok && !c->cur_failed) cg_unsupported(c, n, "the emitter failed");
    for (int k = 0; ok && k < n->n_out; k++)
      if (n->out[k]) emit_trace(c, storage_of(c, n->out[k]));
  }
  if (ok) return 0;
  /* what was fused into it is not computed either */
  const mg_node *absorbed[2] = {c->act[n->id], c->silu_mul[n->id]};
  for (int k = 0; k < 2; k++)
    if (absorbed[k])
      mg_error(c->d, UNSUPPORTED, absorbed[k]->name, absorbed[k]->op_type,
               "cpu: fused into '%s' (%s), which is not converted", n->name, n->op_type);
  c->body.len = body_len;
  c->statics.len = statics_len;
  if (c->body.s) c->body.s[body_len] = 0;
  if (c->statics.s) c->statics.s[statics_len] = 0;
  c->n_statics = n_statics;
  c->n_scratch = n_scratch;
  c->n_needed = n_needed;
  cg_buf_printf(&c->body, "  /* %d %s \"", n->id, n->op_type);
  comment_name(&c->body, n->name);
  cg_buf_printf(&c->body, "\": not converted, see the report */\n  return MG_RT_EUNSUPPORTED;\n");
  return -1;
}

/* Precondition: c was zeroed and its string arena initialised. */
static int ctx_init(cg_ctx *c, mg_model *m, const cg_options *o, mg_diags *d) {
  c->m = m;
  c->g = m->graph;
  c->o = o;
  c->d = d;
  int nv = c->g->n_values + 1, nn = c->g->n_nodes + 1;
  c->place = mg_calloc((size_t)nv, sizeof *c->place);
  c->redirect = mg_malloc(sizeof(int) * (size_t)nv);
  c->act = mg_calloc((size_t)nn, sizeof *c->act);
  c->silu_mul = mg_calloc((size_t)nn, sizeof *c->silu_mul);
  c->absorbed = mg_calloc((size_t)nn, 1);
  c->inplace = mg_calloc((size_t)nn, 1);
  c->bounded = mg_calloc((size_t)nv, 1);
  if (!c->place || !c->redirect || !c->act || !c->silu_mul || !c->absorbed || !c->inplace || !c->bounded) return -1;
  for (int i = 0; i < nv; i++) c->redirect[i] = -1;
  return 0;
}

void cg_ctx_free(cg_ctx *c) {
  for (int i = 0; c->prep && i < c->g->n_nodes; i++) mg_free(c->prep[i].data);
  mg_free(c->prep);
  mg_arena_destroy(&c->strings);
  cg_buf_free(&c->body);
  cg_buf_free(&c->statics);
  mg_free(c->static_texts);
  mg_free(c->static_names);
  mg_free(c->scratch);
  mg_free(c->place);
  mg_free(c->redirect);
  mg_free(c->act);
  mg_free(c->silu_mul);
  mg_free(c->absorbed);
  mg_free(c->inplace);
  mg_free(c->bounded);
  mg_free(c->buffers);
  mg_free(c->rd_off);
  mg_free(c->rd_mask);
  mg_free(c->rd_expr);
  mg_free(c->dyn_node);
  mg_free(c->dyn_guard);
  mg_free(c->vbound);
  mg_free(c->n_vbound);
  mg_free(c->vexact);
  mg_free(c->batch_why);
  cg_batch_free(&c->batch);
}

/* Emits every node and the trailing copies; returns the count of unsupported nodes. */
int cg_emit_body(cg_ctx *c) {
  int bad = 0;
  mg_graph *g = c->g;
  for (int i = 0; i < g->n_nodes; i++)
    if (!c->absorbed[i]) bad += emit_node(c, g->nodes[i]) != 0;
  c->cur = NULL;
  for (int j = 0; j < g->n_outputs; j++) {
    const mg_value *v = g->outputs[j];
    const cg_place *p = &c->place[v->id];
    if (v->dtype == MG_STRING && v->data) {
      mg_error(c->d, UNSUPPORTED, v->name, NULL, "cpu: graph output '%s' is a constant string tensor", v->name);
      cg_line(c, "return MG_RT_EUNSUPPORTED;");
      bad++;
      continue;
    }
    if (c->rd_off[v->id] >= 0) {
      if (!cg_dyn_dense(c, v)) {
        mg_error(c->d, UNSUPPORTED, v->name, NULL,
                 "cpu: graph output '%s' has a run-time length along an axis that is not its leading one", v->name);
        cg_line(c, "return MG_RT_EUNSUPPORTED;");
        bad++;
        continue;
      }
      cg_line(c, "memcpy(m->out_dims + %d, rd + %d, %d * sizeof(int64_t));", cg_out_dims_offset(g, j),
              c->rd_off[v->id], v->shape.rank);
    }
    if (p->at == CG_AT_OUTPUT && p->index == j) continue;
    if (p->at == CG_AT_NONE) continue;
    size_t n = bytes_of(v);
    if (n) cg_line(c, "memcpy(out[%d], %s, %zu);", j, cg_vin(c, v), n);
  }
  return bad;
}

/* Gives each output of run-time length its maximum shape, so it can be planned:
 * StringNormalizer keeps at most its C input strings (at least 1). Such a value
 * is marked bounded when it is a graph output that no node reads; one that
 * feeds a node gets its maximum too, and check_node refuses that node. With no
 * stopwords the length is exact: nothing is bounded. */
static void bound_runtime_lengths(cg_ctx *c) {
  mg_graph *g = c->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    if (n->op != MG_OP_StringNormalizer || n->n_in < 1 || n->n_out < 1 || !n->in[0] || !n->out[0]) continue;
    const mg_value *x = n->in[0];
    mg_value *y = n->out[0];
    if (x->shape.rank < 1 || x->shape.rank > 2 || !mg_shape_is_static(&x->shape) || y->shape.rank != x->shape.rank)
      continue;
    int64_t cnt = x->shape.d[x->shape.rank - 1].v;
    const mg_attr *sw = mg_node_attr(n, "stopwords");
    int exact = cnt >= 1 && (!sw || sw->n == 0);
    for (int k = 0; k < x->shape.rank; k++) y->shape.d[k] = x->shape.d[k];
    y->shape.d[x->shape.rank - 1].v = cnt > 0 ? cnt : 1;
    y->shape.d[x->shape.rank - 1].sym = NULL;
    y->shape_declared = 0;
    if (!exact) c->bounded[y->id] = 1;
  }
}

int cg_prepare_ctx(cg_ctx *c, mg_model *m, const cg_options *o, cg_report *r, mg_diags *d) {
  memset(c, 0, sizeof *c);
  mg_arena_init(&c->strings, 1 << 16);
  if (o->symbolic_batch && cg_batch_begin(&c->batch, m, !o->no_fold_bn, d)) {
    if (!d->errors) mg_error(d, OOM, NULL, NULL, "out of memory generating C");
    return -1;
  }
  if (cg_lower(m, !o->no_fold_bn, &r->n_folded, &r->n_bn_folded, d)) return -1;
  if (ctx_init(c, m, o, d) || cg_batch_check(c) || (bound_runtime_lengths(c), 0) || cg_bound_dynamic(c) ||
      (cg_batch_check_lengths(c), 0) || cg_fuse(c, r) ||
      cg_prepare_weights(c) || cg_plan(c, r)) {
    mg_error(d, OOM, NULL, NULL, "out of memory generating C");
    return -1;
  }
  return cg_plan_verify(c, d);
}

int cg_check_model(mg_model *m, mg_diags *d) {
  cg_options o = {.prefix = "model", .symbolic_batch = 1};
  cg_report r = {0};
  /* a symbolic sequence is checked as it is emitted: at every length */
  int seq = cg_seq_emit(m, &o, NULL, &r, d);
  if (seq != 1) return seq < 0 ? seq : r.n_unsupported;
  cg_ctx c;
  int rc = cg_prepare_ctx(&c, m, &o, &r, d);
  if (!rc) rc = cg_emit_body(&c);
  cg_ctx_free(&c);
  return rc;
}

int emit_c(mg_model *m, const cg_options *o, const char *dir, cg_report *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  int seq = o->symbolic_batch ? cg_seq_emit(m, o, dir, r, d) : 1;
  if (seq != 1) return seq;
  cg_ctx c;
  int rc = cg_prepare_ctx(&c, m, o, r, d);
  if (!rc) {
    r->n_unsupported = cg_emit_body(&c);
    for (int i = 0; i < c.g->n_nodes; i++) r->n_nodes += !c.absorbed[i];
    char *model_h = NULL, *model_c = cg_model_sources(&c, &model_h);
    if (!model_c || !model_h || c.body.failed || c.statics.failed) {
      mg_error(d, OOM, NULL, NULL, "out of memory generating C");
      rc = -1;
    } else {
      rc = cg_write_project(&c, dir, model_c, model_h);
    }
    mg_free(model_c);
    mg_free(model_h);
  }
  cg_ctx_free(&c);
  return rc;
}
