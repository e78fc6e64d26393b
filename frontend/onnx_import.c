#include "onnx_import.h"
#include "mapfile.h"
#include "import_internal.h"
#include "onnx_wire.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { MIN_ZERO_COPY_RAW = 256, MAX_INLINE_DEPTH = 16, MAX_GRAPH_DEPTH = 32 };

/* protobuf-c's allocations through mg_malloc; data, when set, is an int that a
 * failure sets, so that a decode which ran out of memory is not called corrupt. */
static void *pb_alloc(void *data, size_t size) {
  void *p = mg_malloc(size);
  if (!p && data) *(int *)data = 1;
  return p;
}
static void pb_free(void *data, void *p) {
  (void)data;
  mg_free(p);
}
ProtobufCAllocator import_pb_allocator = {pb_alloc, pb_free, NULL};

/* Names resolve either through graph scopes or, inside an inlined function body,
 * through a map from the function's local names to the caller's values. */
typedef struct name_map {
  const char **from;
  mg_value **to;
  int n, cap;
} name_map;

static int map_put(name_map *m, const char *from, mg_value *to) {
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 16;
    const char **f = mg_realloc(m->from, (size_t)cap * sizeof *f);
    if (!f) return -1;
    m->from = f;
    mg_value **t = mg_realloc(m->to, (size_t)cap * sizeof *t);
    if (!t) return -1;
    m->to = t;
    m->cap = cap;
  }
  m->from[m->n] = from;
  m->to[m->n++] = to;
  return 0;
}

static mg_value *map_get(const name_map *m, const char *from) {
  for (int i = m->n - 1; i >= 0; i--)
    if (!strcmp(m->from[i], from)) return m->to[i];
  return NULL;
}

static void map_free(name_map *m) {
  mg_free(m->from);
  mg_free(m->to);
}

/* ---- attributes ---- */

static int import_graph(import_ctx *c, const Onnx__GraphProto *gp, mg_graph *g,
                        const onnx_raw_ref *refs, int n_refs, int depth);

static int import_attr(import_ctx *c, mg_graph *g, const Onnx__AttributeProto *ap,
                       mg_attr *a, const char *node, int depth) {
  mg_arena *ar = &c->m->arena;
  a->name = mg_arena_strdup(ar, ap->name ? ap->name : "");
  if (!a->name) return OOM(c);
  int type = ap->has_type ? (int)ap->type : 0;
  if (!type) { /* IR version 1 files leave the type out: infer it from the field set */
    if (ap->n_floats) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
    else if (ap->n_ints) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
    else if (ap->n_strings) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
    else if (ap->t) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
    else if (ap->g) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
    else if (ap->has_s) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
    else if (ap->has_i) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    else if (ap->has_f) type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
    else type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS; /* an empty list */
  }
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT: a->kind = MG_ATTR_FLOAT; a->f = ap->f; break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT: a->kind = MG_ATTR_INT; a->i = ap->i; break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    a->kind = MG_ATTR_STRING;
    a->s = mg_arena_strndup(ar, ap->s.data ? (const char *)ap->s.data : "", ap->s.len);
    if (!a->s) return OOM(c);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    a->kind = MG_ATTR_FLOATS;
    a->n = ap->n_floats;
    a->floats = mg_arena_memdup(ar, ap->floats, a->n * sizeof(float));
    if (!a->floats) return OOM(c);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    a->kind = MG_ATTR_INTS;
    a->n = ap->n_ints;
    a->ints = mg_arena_memdup(ar, ap->ints, a->n * sizeof(int64_t));
    if (!a->ints) return OOM(c);
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    a->kind = MG_ATTR_STRINGS;
    a->n = ap->n_strings;
    a->strings = mg_arena_alloc(ar, sizeof(char *) * (a->n ? a->n : 1));
    if (!a->strings) return OOM(c);
    for (size_t i = 0; i < a->n; i++) {
      a->strings[i] = mg_arena_strndup(ar, (const char *)ap->strings[i].data, ap->strings[i].len);
      if (!a->strings[i]) return OOM(c);
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    a->kind = MG_ATTR_TENSOR;
    if (!ap->t) {
      mg_error(c->d, INVALID, node, NULL, "tensor attribute '%s' has no tensor", a->name);
      return -1;
    }
    a->t = mg_value_detached(c->m, a->name);
    if (!a->t) return OOM(c);
    a->t->kind = MG_V_CONST;
    return import_tensor(c, ap->t, a->t, NULL);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    a->kind = MG_ATTR_GRAPH;
    if (!ap->g) {
      mg_error(c->d, INVALID, node, NULL, "graph attribute '%s' has no graph", a->name);
      return -1;
    }
    a->g = mg_graph_new(c->m, g);
    if (!a->g) return OOM(c);
    return import_graph(c, ap->g, a->g, NULL, 0, depth + 1);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO: {
    a->kind = MG_ATTR_TYPE;
    mg_value tmp = {.name = a->name};
    if (import_type(c, ap->tp, &tmp)) return -1;
    a->tp = tmp.vtype;
    a->tp_dtype = tmp.decl_dtype;
    break;
  }
  default:
    mg_error(c->d, UNSUPPORTED_ATTR, node, NULL, "attribute '%s' has unsupported type %d",
             a->name, type);
    return -1;
  }
  return 0;
}

/* Checks n's attributes against ops.def and appends the defaults it gives. */
int canonicalise_attrs(import_ctx *c, mg_node *n) {
  if (n->op == MG_OP_UNKNOWN) return 0;
  int ok = 0;
  for (int i = 0; i < n->n_attr; i++) {
    mg_attr_kind kind;
    int has_default;
    const char *dflt;
    mg_attr *a = &n->attr[i];
    if (!mg_op_attr_spec(n->op, a->name, &kind, &has_default, &dflt)) {
      mg_error(c->d, UNSUPPORTED_ATTR, n->name, n->op_type,
               "unknown attribute '%s' (not part of %s as migc knows it)", a->name, n->op_type);
      ok = -1;
      continue;
    }
    if (kind == MG_ATTR_FLOAT && a->kind == MG_ATTR_INT) { /* exporters write 1 for 1.0 */
      a->kind = MG_ATTR_FLOAT;
      a->f = (float)a->i;
    }
    if (kind == MG_ATTR_INT && a->kind == MG_ATTR_FLOAT && a->f == (float)(int64_t)a->f) {
      a->kind = MG_ATTR_INT; /* opset 1 LpPool/GlobalLpPool wrote p as a float */
      a->i = (int64_t)a->f;
    }
    if (kind == MG_ATTR_INTS && a->kind == MG_ATTR_FLOATS && a->n == 0) a->kind = MG_ATTR_INTS;
    if (kind == MG_ATTR_FLOATS && a->kind == MG_ATTR_INTS && a->n == 0) a->kind = MG_ATTR_FLOATS;
    if (kind == MG_ATTR_STRINGS && a->kind == MG_ATTR_INTS && a->n == 0) a->kind = MG_ATTR_STRINGS;
    if (kind != a->kind) {
      mg_error(c->d, INVALID, n->name, n->op_type, "attribute '%s' has the wrong type", a->name);
      ok = -1;
    }
  }
  /* Append defaults for absent attributes. */
  const char *p = mg_op_get(n->op)->attrs;
  int extra = 0;
  for (const char *q = p; *q; q++)
    if (*q == '=') extra++;
  if (!extra) return ok;
  mg_attr *attrs = mg_arena_alloc(&c->m->arena, sizeof(mg_attr) * (size_t)(n->n_attr + extra));
  if (!attrs) return OOM(c);
  memcpy(attrs, n->attr, sizeof(mg_attr) * (size_t)n->n_attr);
  int count = n->n_attr;
  while (*p) {
    while (*p == ' ') p++;
    size_t len = strcspn(p, ":");
    const char *eq = p + strcspn(p, "= ");
    const char *end = p + strcspn(p, " ");
    if (*eq == '=') {
      char name[64];
      snprintf(name, sizeof name, "%.*s", (int)len, p);
      int present = 0;
      for (int i = 0; i < n->n_attr; i++)
        if (!strcmp(n->attr[i].name, name)) present = 1;
      if (!present) {
        mg_attr *a = &attrs[count++];
        mg_attr_kind kind;
        int hd;
        const char *dflt;
        mg_op_attr_spec(n->op, name, &kind, &hd, &dflt);
        a->name = mg_arena_strdup(&c->m->arena, name);
        a->kind = kind;
        size_t dl = (size_t)(end - dflt);
        char text[128];
        snprintf(text, sizeof text, "%.*s", (int)dl, dflt);
        if (kind == MG_ATTR_INT) a->i = strtoll(text, NULL, 10);
        else if (kind == MG_ATTR_FLOAT) a->f = strtof(text, NULL);
        else if (kind == MG_ATTR_STRING) a->s = mg_arena_strdup(&c->m->arena, text);
        if (!a->name || (kind == MG_ATTR_STRING && !a->s)) return OOM(c);
      }
    }
    p = end;
  }
  n->attr = attrs;
  n->n_attr = count;
  return ok;
}

/* ---- nodes ---- */

static const Onnx__FunctionProto *find_function(import_ctx *c, const char *domain,
                                                const char *name) {
  for (size_t i = 0; i < c->proto->n_functions; i++) {
    const Onnx__FunctionProto *f = c->proto->functions[i];
    if (f->name && !strcmp(f->name, name) && !strcmp(f->domain ? f->domain : "", domain))
      return f;
  }
  return NULL;
}

static int64_t opset_of(const mg_model *m, const char *domain, int *found) {
  for (int i = 0; i < m->n_opsets; i++)
    if (!strcmp(m->opsets[i].domain, domain)) {
      *found = 1;
      return m->opsets[i].version;
    }
  *found = 0;
  return 0;
}

static int is_default_domain(const char *d) { return !*d || !strcmp(d, "ai.onnx"); }

static int import_node_proto(import_ctx *c, mg_graph *g, const Onnx__NodeProto *np,
                             mg_value **ins, mg_value **outs, const Onnx__NodeProto *caller,
                             const char *display, int depth);

/* Inlines a call of a model-local function: the body's nodes are imported into g
 * with names prefixed by the call's, and ref attributes taken from the call. */
static int inline_function(import_ctx *c, mg_graph *g, const Onnx__NodeProto *call,
                           const Onnx__FunctionProto *f, mg_value **ins, mg_value **outs,
                           const char *display, int depth) {
  if (c->inline_depth >= MAX_INLINE_DEPTH) {
    mg_error(c->d, LIMIT, display, call->op_type, "functions nest deeper than %d (recursion?)",
             MAX_INLINE_DEPTH);
    return -1;
  }
  name_map map = {0};
  int rc = 0;
  for (size_t i = 0; i < f->n_input && !rc; i++)
    rc = map_put(&map, f->input[i], i < call->n_input ? ins[i] : NULL);
  for (size_t i = 0; i < f->n_output && !rc; i++)
    rc = map_put(&map, f->output[i], i < call->n_output ? outs[i] : NULL);
  if (rc) {
    map_free(&map);
    return OOM(c);
  }
  c->inline_depth++;
  for (size_t k = 0; k < f->n_node && !rc; k++) {
    const Onnx__NodeProto *fn = f->node[k];
    mg_value *fin[64], *fout[64];
    if (fn->n_input > 64 || fn->n_output > 64) {
      mg_error(c->d, LIMIT, display, fn->op_type, "function node has too many inputs/outputs");
      rc = -1;
      break;
    }
    for (size_t i = 0; i < fn->n_input; i++) {
      fin[i] = NULL;
      if (!*fn->input[i]) continue;
      fin[i] = map_get(&map, fn->input[i]);
      if (!fin[i]) {
        mg_error(c->d, GRAPH, display, fn->op_type,
                 "function %s reads '%s', which nothing in it produces", f->name, fn->input[i]);
        rc = -1;
      }
    }
    for (size_t i = 0; i < fn->n_output && !rc; i++) {
      fout[i] = NULL;
      if (!*fn->output[i]) continue;
      fout[i] = map_get(&map, fn->output[i]);
      int is_formal = 0;
      for (size_t j = 0; j < f->n_output; j++)
        if (!strcmp(f->output[j], fn->output[i])) is_formal = 1;
      if (is_formal) {
        if (!fout[i]) { /* the call does not use this output: give it a private value */
          char name[512];
          snprintf(name, sizeof name, "%s/%s/%s", display, f->name, fn->output[i]);
          mg_value *existing;
          fout[i] = mg_value_new(g, name, &existing);
          if (!fout[i] && !existing) rc = OOM(c);
          if (!fout[i] && existing) fout[i] = existing;
        }
        continue;
      }
      char name[512];
      mg_value *existing = NULL;
      int k2 = 0;
      do {
        snprintf(name, sizeof name, "%s/%s%s", display, fn->output[i], k2 ? "_" : "");
        if (k2) snprintf(name + strlen(name), sizeof name - strlen(name), "%d", k2);
        fout[i] = mg_value_new(g, name, &existing);
        k2++;
      } while (!fout[i] && existing);
      if (!fout[i]) rc = OOM(c);
      else if (map_put(&map, fn->output[i], fout[i])) rc = OOM(c);
    }
    if (rc) break;
    char sub[512];
    snprintf(sub, sizeof sub, "%s/%s", display, fn->name && *fn->name ? fn->name : fn->op_type);
    rc = import_node_proto(c, g, fn, fin, fout, call, sub, depth);
  }
  c->inline_depth--;
  map_free(&map);
  return rc;
}

static int import_node_proto(import_ctx *c, mg_graph *g, const Onnx__NodeProto *np,
                             mg_value **ins, mg_value **outs, const Onnx__NodeProto *caller,
                             const char *display, int depth) {
  const char *domain = np->domain ? np->domain : "";
  const char *op_type = np->op_type ? np->op_type : "";
  if (!*op_type) {
    mg_error(c->d, INVALID, display, NULL, "node has no op_type");
    return -1;
  }
  const Onnx__FunctionProto *f = find_function(c, domain, op_type);
  if (f && !(is_default_domain(domain) && mg_op_lookup(op_type) != MG_OP_UNKNOWN))
    return inline_function(c, g, np, f, ins, outs, display, depth);
  int declared;
  int64_t opset = opset_of(c->m, is_default_domain(domain) ? "" : domain, &declared);
  if (is_default_domain(domain) && !declared) opset = opset_of(c->m, "ai.onnx", &declared);
  if (!declared) {
    mg_error(c->d, UNKNOWN_OP, display, op_type,
             "op domain '%s' is not declared in the model's opset_import", domain);
    return -1;
  }
  mg_op op = is_default_domain(domain) ? mg_op_lookup(op_type) : MG_OP_UNKNOWN;
  /* The one op migc knows outside the default domain (its ops.def row says so). */
  if (!strcmp(domain, "ai.onnx.preview.training") && !strcmp(op_type, "Gradient")) op = MG_OP_Gradient;

  if (is_default_domain(domain) && !strcmp(op_type, "Constant")) {
    if (np->n_output != 1 || !outs[0]) {
      mg_error(c->d, INVALID, display, op_type, "Constant must have one output");
      return -1;
    }
    if (np->n_attribute != 1) {
      mg_error(c->d, INVALID, display, op_type, "Constant must have exactly one attribute");
      return -1;
    }
    mg_attr a = {0};
    const Onnx__AttributeProto *ap = np->attribute[0];
    if (ap->ref_attr_name && caller) {
      for (size_t i = 0; i < caller->n_attribute; i++)
        if (caller->attribute[i]->name && !strcmp(caller->attribute[i]->name, ap->ref_attr_name))
          ap = caller->attribute[i];
    }
    if (import_attr(c, g, ap, &a, display, depth)) return -1;
    mg_value *v = outs[0];
    v->kind = MG_V_CONST;
    v->producer = NULL;
    if (a.kind == MG_ATTR_TENSOR && !strcmp(a.name, "value")) {
      v->dtype = a.t->dtype;
      v->shape = a.t->shape;
      v->data = a.t->data;
      v->nbytes = a.t->nbytes;
    } else if (a.kind == MG_ATTR_FLOAT && !strcmp(a.name, "value_float")) {
      mg_value *t = import_const(c, g, v->name, MG_F32, 0, NULL, &a.f);
      if (!t) return OOM(c);
      v->dtype = MG_F32, v->shape.rank = 0, v->data = t->data, v->nbytes = 4;
    } else if (a.kind == MG_ATTR_INT && !strcmp(a.name, "value_int")) {
      mg_value *t = import_const(c, g, v->name, MG_I64, 0, NULL, &a.i);
      if (!t) return OOM(c);
      v->dtype = MG_I64, v->shape.rank = 0, v->data = t->data, v->nbytes = 8;
    } else if (a.kind == MG_ATTR_INTS && !strcmp(a.name, "value_ints")) {
      v->dtype = MG_I64, v->shape.rank = 1, v->shape.d[0].v = (int64_t)a.n;
      v->data = a.ints, v->nbytes = a.n * 8;
    } else if (a.kind == MG_ATTR_FLOATS && !strcmp(a.name, "value_floats")) {
      v->dtype = MG_F32, v->shape.rank = 1, v->shape.d[0].v = (int64_t)a.n;
      v->data = a.floats, v->nbytes = a.n * 4;
    } else if (a.kind == MG_ATTR_STRING && !strcmp(a.name, "value_string")) {
      const char **s = mg_arena_alloc(&c->m->arena, sizeof(char *));
      if (!s) return OOM(c);
      s[0] = a.s;
      v->dtype = MG_STRING, v->shape.rank = 0, v->data = s, v->nbytes = sizeof(char *);
    } else if (a.kind == MG_ATTR_STRINGS && !strcmp(a.name, "value_strings")) {
      v->dtype = MG_STRING, v->shape.rank = 1, v->shape.d[0].v = (int64_t)a.n;
      v->data = a.strings, v->nbytes = a.n * sizeof(char *);
    } else {
      mg_error(c->d, UNSUPPORTED_ATTR, display, op_type,
               "Constant attribute '%s' is not supported", a.name);
      return -1;
    }
    v->vtype = MG_VT_TENSOR;
    return 0;
  }

  mg_node *n = mg_node_new(g, op, display, (int)np->n_input, (int)np->n_output);
  if (!n) return OOM(c);
  n->op_type = mg_arena_strdup(&c->m->arena, op_type);
  n->domain = mg_arena_strdup(&c->m->arena, is_default_domain(domain) ? "" : domain);
  if (!n->op_type || !n->domain) return OOM(c);
  n->opset = opset;
  for (size_t i = 0; i < np->n_input; i++) n->in[i] = ins[i];
  for (size_t i = 0; i < np->n_output; i++) {
    n->out[i] = outs[i];
    if (outs[i]) {
      outs[i]->producer = n;
      outs[i]->producer_slot = (int)i;
    }
  }
  n->attr = mg_arena_alloc(&c->m->arena, sizeof(mg_attr) * (np->n_attribute ? np->n_attribute : 1));
  if (!n->attr) return OOM(c);
  int rc = 0;
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *ap = np->attribute[i];
    if (ap->ref_attr_name && *ap->ref_attr_name) {
      const Onnx__AttributeProto *found = NULL;
      for (size_t k = 0; caller && k < caller->n_attribute; k++)
        if (caller->attribute[k]->name && !strcmp(caller->attribute[k]->name, ap->ref_attr_name))
          found = caller->attribute[k];
      if (!found) continue; /* the caller did not set it: the op's default applies */
      mg_attr *a = &n->attr[n->n_attr];
      if (import_attr(c, g, found, a, display, depth)) { rc = -1; continue; }
      a->name = mg_arena_strdup(&c->m->arena, ap->name);
      if (!a->name) return OOM(c);
      n->n_attr++;
      continue;
    }
    if (import_attr(c, g, ap, &n->attr[n->n_attr], display, depth)) rc = -1;
    else n->n_attr++;
  }
  if (rc) return -1;
  if (op == MG_OP_UNKNOWN && is_default_domain(domain)) {
    /* Old op names that the canonical IR spells differently are handled by
     * normalize_node; anything else stays unknown and is reported. */
    if (normalize_node(c, g, n, opset)) return -1;
  } else if (op != MG_OP_UNKNOWN && is_default_domain(domain)) {
    if (normalize_node(c, g, n, opset)) return -1;
  }
  if (n->op != MG_OP_UNKNOWN) {
    const mg_op_info *info = mg_op_get(n->op);
    /* Trailing omitted inputs/outputs do not count towards arity. */
    while (n->n_in > 0 && !n->in[n->n_in - 1]) n->n_in--;
    while (n->n_out > 1 && !n->out[n->n_out - 1]) n->n_out--;
    if (n->n_in < info->min_in || (info->max_in >= 0 && n->n_in > info->max_in) ||
        n->n_out < info->min_out || (info->max_out >= 0 && n->n_out > info->max_out)) {
      mg_error(c->d, INVALID, n->name, n->op_type,
               "has %d inputs and %d outputs; %s takes %d..%d inputs and %d..%d outputs",
               n->n_in, n->n_out, info->name, info->min_in, info->max_in, info->min_out,
               info->max_out);
      return -1;
    }
    for (int i = 0; i < info->min_out && i < n->n_out; i++)
      if (!n->out[i]) {
        mg_error(c->d, INVALID, n->name, n->op_type, "required output %d has no name", i);
        return -1;
      }
    if (canonicalise_attrs(c, n)) return -1;
  }
  return mg_graph_push_node(g, n) ? OOM(c) : 0;
}

/* ---- graphs ---- */

/* Kahn's algorithm over g's nodes. Dependencies include the outer values that a
 * node's subgraphs read. On a cycle, names one node on it. */
static int collect_deps(const mg_graph *g, const mg_graph *sub, int *indeg, int **succ,
                        int *nsucc, int *capsucc, int consumer);

static int add_edge(int **succ, int *nsucc, int *capsucc, int from, int to) {
  if (nsucc[from] == capsucc[from]) {
    int cap = capsucc[from] ? capsucc[from] * 2 : 4;
    int *s = mg_realloc(succ[from], (size_t)cap * sizeof(int));
    if (!s) return -1;
    succ[from] = s;
    capsucc[from] = cap;
  }
  succ[from][nsucc[from]++] = to;
  return 0;
}

static int value_edge(const mg_graph *g, const mg_value *v, int *indeg, int **succ, int *nsucc,
                      int *capsucc, int consumer) {
  if (!v || !v->producer || v->producer->graph != g) return 0;
  if (add_edge(succ, nsucc, capsucc, v->producer->id, consumer)) return -1;
  indeg[consumer]++;
  return 0;
}

static int collect_deps(const mg_graph *g, const mg_graph *sub, int *indeg, int **succ,
                        int *nsucc, int *capsucc, int consumer) {
  for (int i = 0; i < sub->n_nodes; i++) {
    const mg_node *n = sub->nodes[i];
    for (int k = 0; k < n->n_in; k++)
      if (value_edge(g, n->in[k], indeg, succ, nsucc, capsucc, consumer)) return -1;
    for (int k = 0; k < n->n_attr; k++)
      if (n->attr[k].kind == MG_ATTR_GRAPH &&
          collect_deps(g, n->attr[k].g, indeg, succ, nsucc, capsucc, consumer))
        return -1;
  }
  for (int i = 0; i < sub->n_outputs; i++)
    if (value_edge(g, sub->outputs[i], indeg, succ, nsucc, capsucc, consumer)) return -1;
  return 0;
}

static int topo_sort(import_ctx *c, mg_graph *g) {
  int n = g->n_nodes, rc = 0;
  if (!n) return 0;
  int *indeg = mg_calloc((size_t)n, sizeof(int)), *nsucc = mg_calloc((size_t)n, sizeof(int));
  int *capsucc = mg_calloc((size_t)n, sizeof(int)), *queue = mg_calloc((size_t)n, sizeof(int));
  int **succ = mg_calloc((size_t)n, sizeof(int *));
  mg_node **order = mg_arena_alloc(&c->m->arena, (size_t)n * sizeof(mg_node *));
  if (!indeg || !nsucc || !capsucc || !queue || !succ || !order) {
    rc = OOM(c);
    goto done;
  }
  for (int i = 0; i < n && !rc; i++) {
    mg_node *node = g->nodes[i];
    for (int k = 0; k < node->n_in && !rc; k++)
      rc = value_edge(g, node->in[k], indeg, succ, nsucc, capsucc, i);
    for (int k = 0; k < node->n_attr && !rc; k++)
      if (node->attr[k].kind == MG_ATTR_GRAPH)
        rc = collect_deps(g, node->attr[k].g, indeg, succ, nsucc, capsucc, i);
  }
  if (rc) {
    rc = OOM(c);
    goto done;
  }
  int head = 0, tail = 0, placed = 0;
  for (int i = 0; i < n; i++)
    if (!indeg[i]) queue[tail++] = i;
  while (head < tail) {
    int i = queue[head++];
    order[placed++] = g->nodes[i];
    for (int k = 0; k < nsucc[i]; k++)
      if (--indeg[succ[i][k]] == 0) queue[tail++] = succ[i][k];
  }
  if (placed < n) {
    for (int i = 0; i < n; i++)
      if (indeg[i]) {
        mg_error(c->d, GRAPH, g->nodes[i]->name, g->nodes[i]->op_type,
                 "the graph has a cycle through this node (%d nodes never become ready)",
                 n - placed);
        break;
      }
    rc = -1;
    goto done;
  }
  for (int i = 0; i < n; i++) {
    order[i]->id = i;
    g->nodes[i] = order[i];
  }
done:
  if (succ)
    for (int i = 0; i < n; i++) mg_free(succ[i]);
  mg_free(succ);
  mg_free(indeg);
  mg_free(nsucc);
  mg_free(capsucc);
  mg_free(queue);
  return rc;
}

static int import_graph(import_ctx *c, const Onnx__GraphProto *gp, mg_graph *g,
                        const onnx_raw_ref *refs, int n_refs, int depth) {
  if (depth > MAX_GRAPH_DEPTH) {
    mg_error(c->d, LIMIT, gp->name, NULL, "subgraphs nest deeper than %d", MAX_GRAPH_DEPTH);
    return -1;
  }
  mg_arena *ar = &c->m->arena;
  g->name = mg_arena_strdup(ar, gp->name ? gp->name : "");
  if (!g->name) return OOM(c);
  int rc = 0, r = 0;
  mg_value *existing;
  if (gp->n_sparse_initializer) {
    mg_error(c->d, UNSUPPORTED_DTYPE, gp->name, NULL, "sparse initializers are not supported");
    rc = -1;
  }
  for (size_t i = 0; i < gp->n_initializer; i++) {
    const Onnx__TensorProto *t = gp->initializer[i];
    const char *name = t->name ? t->name : "";
    if (!*name) {
      mg_error(c->d, INVALID, NULL, NULL, "initializer #%zu has no name", i);
      rc = -1;
      continue;
    }
    mg_value *v = mg_value_new(g, name, &existing);
    if (!v) {
      if (!existing) return OOM(c);
      mg_error(c->d, GRAPH, name, NULL, "two initializers share this name");
      rc = -1;
      continue;
    }
    v->kind = MG_V_INIT;
    while (r < n_refs && refs[r].index < (int)i) r++;
    const onnx_raw_ref *raw = r < n_refs && refs[r].index == (int)i ? &refs[r] : NULL;
    if (import_tensor(c, t, v, raw)) rc = -1;
    else if (mg_graph_push_list(g, &g->inits, &g->n_inits, v)) return OOM(c);
  }
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    const char *name = vi->name ? vi->name : "";
    mg_value *v = mg_value_new(g, name, &existing);
    if (!v && existing && existing->kind == MG_V_INIT) {
      /* Older exports list every initializer as an input too: it stays a parameter. */
      if (import_type(c, vi->type, existing)) rc = -1;
      continue;
    }
    if (!v) {
      if (!existing) return OOM(c);
      mg_error(c->d, GRAPH, name, NULL, "graph input declared twice");
      rc = -1;
      continue;
    }
    v->kind = MG_V_INPUT;
    if (import_type(c, vi->type, v)) rc = -1;
    if (mg_graph_push_list(g, &g->inputs, &g->n_inputs, v)) return OOM(c);
  }
  /* Declare every node output first, so that order in the file does not matter. */
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    for (size_t k = 0; k < np->n_output; k++) {
      if (!np->output[k] || !*np->output[k]) continue;
      mg_value *v = mg_value_new(g, np->output[k], &existing);
      if (!v) {
        if (!existing) return OOM(c);
        mg_error(c->d, GRAPH, np->output[k], np->op_type,
                 "value is produced twice (by a second node, or also an input)");
        rc = -1;
      }
    }
  }
  if (rc) return rc;
  for (size_t i = 0; i < gp->n_node; i++) {
    const Onnx__NodeProto *np = gp->node[i];
    char display[512];
    if (np->name && *np->name) snprintf(display, sizeof display, "%s", np->name);
    else snprintf(display, sizeof display, "%s_%zu", np->op_type ? np->op_type : "node", i);
    mg_value **ins = mg_calloc(np->n_input + 1, sizeof(mg_value *));
    mg_value **outs = mg_calloc(np->n_output + 1, sizeof(mg_value *));
    if (!ins || !outs) {
      mg_free(ins);
      mg_free(outs);
      return OOM(c);
    }
    int bad = 0;
    for (size_t k = 0; k < np->n_input; k++) {
      if (!np->input[k] || !*np->input[k]) continue;
      ins[k] = mg_graph_find(g, np->input[k]);
      if (!ins[k]) {
        mg_error(c->d, GRAPH, display, np->op_type,
                 "reads '%s', which no node, input or initializer produces", np->input[k]);
        bad = 1;
      }
    }
    for (size_t k = 0; k < np->n_output; k++)
      if (np->output[k] && *np->output[k]) outs[k] = mg_graph_find_local(g, np->output[k]);
    if (!bad && import_node_proto(c, g, np, ins, outs, NULL, display, depth)) bad = 1;
    mg_free(ins);
    mg_free(outs);
    if (c->oom) return -1;
    if (bad) rc = -1;
  }
  for (size_t i = 0; i < gp->n_value_info; i++) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    mg_value *v = vi->name ? mg_graph_find_local(g, vi->name) : NULL;
    if (v && !v->data && import_type(c, vi->type, v)) rc = -1;
  }
  for (size_t i = 0; i < gp->n_output; i++) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    const char *name = vi->name ? vi->name : "";
    mg_value *v = mg_graph_find(g, name);
    if (!v) {
      mg_error(c->d, GRAPH, name, NULL, "graph output that nothing produces");
      rc = -1;
      continue;
    }
    if (!v->has_decl || v->kind == MG_V_NODE) {
      mg_shape keep = v->shape;
      mg_dtype kd = v->dtype;
      if (import_type(c, vi->type, v)) rc = -1;
      if (v->data) v->shape = keep, v->dtype = kd;
    }
    if (mg_graph_push_list(g, &g->outputs, &g->n_outputs, v)) return OOM(c);
  }
  if (rc) return rc;
  /* A value declared as a node output that no node ended up producing (e.g. the
   * output of a node that failed) is caught above; here only ordering remains. */
  return topo_sort(c, g);
}

static int import_model(import_ctx *c, const Onnx__ModelProto *mp, const onnx_slim *slim) {
  mg_model *m = c->m;
  mg_arena *ar = &m->arena;
  m->ir_version = mp->ir_version;
  m->producer_name = mg_arena_strdup(ar, mp->producer_name ? mp->producer_name : "");
  m->producer_version = mg_arena_strdup(ar, mp->producer_version ? mp->producer_version : "");
  m->opsets = mg_arena_alloc(ar, sizeof(mg_opset) * (mp->n_opset_import + 1));
  if (!m->producer_name || !m->producer_version || !m->opsets) return OOM(c);
  m->opset = -1;
  for (size_t i = 0; i < mp->n_opset_import; i++) {
    const char *dom = mp->opset_import[i]->domain ? mp->opset_import[i]->domain : "";
    if (!strcmp(dom, "ai.onnx")) dom = "";
    m->opsets[m->n_opsets].domain = mg_arena_strdup(ar, dom);
    if (!m->opsets[m->n_opsets].domain) return OOM(c);
    m->opsets[m->n_opsets].version = mp->opset_import[i]->version;
    if (!*dom) m->opset = mp->opset_import[i]->version;
    if (!*dom && (m->opset < 1 || m->opset > MG_MAX_OPSET)) {
      /* ops of a newer opset may mean something else than the forms migc knows */
      mg_error(c->d, UNSUPPORTED, NULL, NULL, "opset %lld of the default domain: migc knows opsets 1 to %d",
               (long long)m->opset, MG_MAX_OPSET);
      return -1;
    }
    m->n_opsets++;
  }
  if (m->opset < 0 && mp->ir_version >= 3 && mp->n_opset_import == 0) {
    mg_error(c->d, INVALID, NULL, NULL, "the model declares no opset_import");
    return -1;
  }
  if (m->opset < 0 && mp->n_opset_import == 0) { /* IR v1/v2 files predate opset_import */
    m->opsets[0].domain = "";
    m->opsets[0].version = 1;
    m->n_opsets = 1;
    m->opset = 1;
  }
  if (!mp->graph) {
    mg_error(c->d, INVALID, NULL, NULL, "the model has no graph (is this an ONNX file?)");
    return -1;
  }
  m->graph = mg_graph_new(m, NULL);
  if (!m->graph) return OOM(c);
  return import_graph(c, mp->graph, m->graph, slim->refs, slim->n_refs, 0);
}

/* What a file that is not an ONNX protobuf looks like from its first bytes, for the
 * diagnostic: a torch zip archive, a pickle, a safetensors file, or NULL. */
static const char *other_format(const unsigned char *b, size_t n) {
  if (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4)
    return "a zip archive (a torch .pth?)";
  if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return "a Python pickle (a legacy torch .pth?)";
  if (n >= 9 && b[8] == '{') return "a safetensors file (8-byte header length, then JSON)";
  return NULL;
}

int onnx_import_buffer(const void *buf, size_t len, const char *base_dir, mg_diags *d,
                       mg_model **out) {
  *out = NULL;
  if (len == 0) {
    mg_error(d, MALFORMED, NULL, NULL, "empty file: not an ONNX model");
    return -1;
  }
  onnx_slim slim;
  const char *why;
  int r = onnx_wire_slim(buf, len, MIN_ZERO_COPY_RAW, &slim, &why);
  if (r == -2) {
    mg_error(d, OOM, NULL, NULL, "out of memory reading the model");
    return -1;
  }
  if (r) {
    const char *fmt = other_format(buf, len);
    if (fmt) mg_error(d, MALFORMED, NULL, NULL, "not an ONNX model: this is %s", fmt);
    else mg_error(d, MALFORMED, NULL, NULL, "not a valid ONNX protobuf: %s", why);
    return -1;
  }
  int pb_oom = 0;
  ProtobufCAllocator pa = import_pb_allocator;
  pa.allocator_data = &pb_oom;
  Onnx__ModelProto *mp = onnx__model_proto__unpack(&pa, slim.slim_len, slim.slim);
  if (!mp) {
    onnx_slim_free(&slim);
    if (pb_oom) mg_error(d, OOM, NULL, NULL, "out of memory decoding the model");
    else mg_error(d, MALFORMED, NULL, NULL, "not a valid ONNX protobuf (decoding ModelProto failed: truncated or corrupt)");
    return -1;
  }
  import_ctx c = {.d = d, .base_dir = base_dir, .file = buf, .proto = mp};
  c.m = mg_model_new();
  int rc = -1;
  if (c.m) rc = import_model(&c, mp, &slim);
  else c.oom = 1;
  if (c.oom) mg_error(d, OOM, NULL, NULL, "out of memory building the IR");
  onnx__model_proto__free_unpacked(mp, &import_pb_allocator);
  onnx_slim_free(&slim);
  if (rc || c.oom) {
    mg_model_free(c.m);
    return -1;
  }
  *out = c.m;
  return 0;
}

int onnx_import(const char *path, mg_diags *d, mg_model **out) {
  *out = NULL;
  const char *saved = d->file;
  d->file = path;
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    mg_error(d, IO, NULL, NULL, "cannot open: %s", strerror(errno));
    d->file = saved;
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    mg_error(d, IO, NULL, NULL, "not a regular file");
    d->file = saved;
    return -1;
  }
  size_t len = (size_t)st.st_size;
  void *p = NULL;
  if (len) {
    p = mg_map_file(fd, len, path); /* a truncation is a diagnostic, not SIGBUS */
    if (p == MAP_FAILED) {
      close(fd);
      mg_error(d, IO, NULL, NULL, "cannot map: %s", strerror(errno));
      d->file = saved;
      return -1;
    }
  }
  close(fd);
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  int rc = onnx_import_buffer(p ? p : "", len, dir, d, out);
  if (rc == 0) {
    (*out)->path = mg_arena_strdup(&(*out)->arena, path);
    if (!(*out)->path || (p && mg_model_add_mapping(*out, p, len))) {
      mg_model_free(*out);
      *out = NULL;
      if (p) mg_unmap_file(p, len);
      mg_error(d, OOM, NULL, NULL, "out of memory");
      rc = -1;
    }
  } else if (p) {
    mg_unmap_file(p, len);
  }
  d->file = saved;
  return rc;
}
