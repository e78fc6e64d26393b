#include "ir.h"
#include "mapfile.h"
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct mg_mapping {
  void *addr;
  size_t len;
  mg_mapping *next;
};

static const mg_op_info op_table[] = {
    [MG_OP_UNKNOWN] = {"<unknown>", 0, -1, 0, -1, MG_SH_OWN, 0, ""},
#define OP(name, mi, ma, mo, mao, rule, flags, unary, attrs) \
  [MG_OP_##name] = {#name, mi, ma, mo, mao, MG_SH_##rule, flags, attrs},
#include "ops.def"
#undef OP
};
_Static_assert(sizeof op_table / sizeof op_table[0] == MG_OP_COUNT, "op table");

const mg_op_info *mg_op_get(mg_op op) {
  return (unsigned)op < MG_OP_COUNT ? &op_table[op] : &op_table[0];
}
const char *mg_op_name(mg_op op) { return mg_op_get(op)->name; }

mg_op mg_op_lookup(const char *name) {
  /* Linear scan is fine: ~200 rows, and the importer caches nothing per name. */
  if (!strncmp(name, "Migc", 4)) return MG_OP_UNKNOWN; /* internal ops are never read from a file */
  for (int i = 1; i < MG_OP_COUNT; i++)
    if (!strcmp(op_table[i].name, name)) return (mg_op)i;
  return MG_OP_UNKNOWN;
}

int mg_op_attr_spec(mg_op op, const char *name, mg_attr_kind *kind, int *has_default,
                    const char **default_text) {
  const char *p = mg_op_get(op)->attrs;
  size_t len = strlen(name);
  while (*p) {
    while (*p == ' ') p++;
    const char *colon = strchr(p, ':');
    if (!colon) return 0;
    const char *end = p + strcspn(p, " ");
    if ((size_t)(colon - p) == len && !strncmp(p, name, len)) {
      const char *t = colon + 1;
      size_t tl = strcspn(t, "= ");
      static const struct { const char *code; mg_attr_kind kind; } kinds[] = {
          {"i", MG_ATTR_INT},      {"f", MG_ATTR_FLOAT},   {"s", MG_ATTR_STRING},
          {"is", MG_ATTR_INTS},    {"fs", MG_ATTR_FLOATS}, {"ss", MG_ATTR_STRINGS},
          {"t", MG_ATTR_TENSOR},   {"g", MG_ATTR_GRAPH},   {"tp", MG_ATTR_TYPE}};
      int found = 0;
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (strlen(kinds[k].code) == tl && !strncmp(kinds[k].code, t, tl)) {
          *kind = kinds[k].kind;
          found = 1;
        }
      if (!found) return 0;
      *has_default = t[tl] == '=';
      *default_text = *has_default ? t + tl + 1 : NULL;
      return 1;
    }
    p = end;
  }
  return 0;
}

mg_model *mg_model_new(void) {
  mg_model *m = mg_calloc(1, sizeof *m);
  if (!m) return NULL;
  mg_arena_init(&m->arena, 256 * 1024);
  return m;
}

int mg_model_add_mapping(mg_model *m, void *addr, size_t len) {
  mg_mapping *mp = mg_malloc(sizeof *mp);
  if (!mp) return -1;
  mp->addr = addr;
  mp->len = len;
  mp->next = m->mappings;
  m->mappings = mp;
  return 0;
}

void mg_model_free(mg_model *m) {
  if (!m) return;
  for (mg_mapping *mp = m->mappings, *next; mp; mp = next) {
    next = mp->next;
    mg_unmap_file(mp->addr, mp->len);
    mg_free(mp);
  }
  mg_arena_destroy(&m->arena);
  mg_free(m);
}

mg_graph *mg_graph_new(mg_model *m, mg_graph *parent) {
  mg_graph *g = mg_arena_alloc(&m->arena, sizeof *g);
  if (!g) return NULL;
  g->model = m;
  g->parent = parent;
  g->name = "";
  return g;
}

static uint32_t hash_name(const char *s) {
  uint32_t h = 2166136261u; /* FNV-1a */
  while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
  return h;
}

static int table_insert(mg_value **table, int cap, mg_value *v) {
  uint32_t i = hash_name(v->name) & (uint32_t)(cap - 1);
  while (table[i]) i = (i + 1) & (uint32_t)(cap - 1);
  table[i] = v;
  return 0;
}

static int table_grow(mg_graph *g) {
  int cap = g->table_cap ? g->table_cap * 2 : 64;
  mg_value **t = mg_arena_alloc(&g->model->arena, (size_t)cap * sizeof *t);
  if (!t) return -1;
  for (int i = 0; i < g->table_cap; i++)
    if (g->table[i]) table_insert(t, cap, g->table[i]);
  g->table = t;
  g->table_cap = cap;
  return 0;
}

mg_value *mg_graph_find_local(const mg_graph *g, const char *name) {
  if (!g->table_cap) return NULL;
  uint32_t i = hash_name(name) & (uint32_t)(g->table_cap - 1);
  while (g->table[i]) {
    if (!strcmp(g->table[i]->name, name)) return g->table[i];
    i = (i + 1) & (uint32_t)(g->table_cap - 1);
  }
  return NULL;
}

mg_value *mg_graph_find(const mg_graph *g, const char *name) {
  for (; g; g = g->parent) {
    mg_value *v = mg_graph_find_local(g, name);
    if (v) return v;
  }
  return NULL;
}

static int grow_array(mg_arena *a, void **arr, int *cap, int count, size_t elem) {
  if (count < *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  void *n = mg_arena_alloc(a, (size_t)ncap * elem);
  if (!n) return -1;
  if (count) memcpy(n, *arr, (size_t)count * elem);
  *arr = n;
  *cap = ncap;
  return 0;
}

mg_value *mg_value_detached(mg_model *m, const char *name) {
  mg_value *v = mg_arena_alloc(&m->arena, sizeof *v);
  if (!v) return NULL;
  v->name = mg_arena_strdup(&m->arena, name ? name : "");
  if (!v->name) return NULL;
  v->shape.rank = -1;
  v->decl_shape.rank = -1;
  v->id = -1;
  return v;
}

mg_value *mg_value_new(mg_graph *g, const char *name, mg_value **existing) {
  if (existing) *existing = NULL;
  mg_value *old = mg_graph_find_local(g, name);
  if (old) {
    if (existing) *existing = old;
    return NULL;
  }
  if ((g->n_values + 1) * 2 > g->table_cap && table_grow(g)) return NULL;
  if (grow_array(&g->model->arena, (void **)&g->values, &g->cap_values, g->n_values,
                 sizeof(mg_value *)))
    return NULL;
  mg_value *v = mg_value_detached(g->model, name);
  if (!v) return NULL;
  v->id = g->n_values;
  g->values[g->n_values++] = v;
  table_insert(g->table, g->table_cap, v);
  return v;
}

mg_node *mg_node_new(mg_graph *g, mg_op op, const char *name, int n_in, int n_out) {
  mg_arena *a = &g->model->arena;
  mg_node *n = mg_arena_alloc(a, sizeof *n);
  if (!n) return NULL;
  n->op = op;
  n->graph = g;
  n->name = mg_arena_strdup(a, name ? name : "");
  n->op_type = mg_op_name(op);
  n->domain = "";
  n->n_in = n_in;
  n->n_out = n_out;
  n->in = mg_arena_alloc(a, sizeof(mg_value *) * (size_t)(n_in ? n_in : 1));
  n->out = mg_arena_alloc(a, sizeof(mg_value *) * (size_t)(n_out ? n_out : 1));
  if (!n->name || !n->in || !n->out) return NULL;
  return n;
}

int mg_graph_push_node(mg_graph *g, mg_node *n) {
  if (grow_array(&g->model->arena, (void **)&g->nodes, &g->cap_nodes, g->n_nodes,
                 sizeof(mg_node *)))
    return -1;
  n->id = g->n_nodes;
  g->nodes[g->n_nodes++] = n;
  return 0;
}

int mg_graph_push_list(mg_graph *g, mg_value ***list, int *count, mg_value *v) {
  /* Lists are small and built once at import, so grow by copying each power of two. */
  int cap = 1;
  while (cap < *count) cap *= 2;
  if (*count == 0 || *count == cap) {
    int ncap = *count ? cap * 2 : 4;
    mg_value **n = mg_arena_alloc(&g->model->arena, (size_t)ncap * sizeof *n);
    if (!n) return -1;
    if (*count) memcpy(n, *list, (size_t)*count * sizeof *n);
    *list = n;
  }
  (*list)[(*count)++] = v;
  return 0;
}

const mg_attr *mg_node_attr(const mg_node *n, const char *name) {
  for (int i = 0; i < n->n_attr; i++)
    if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
  return NULL;
}

#ifndef NDEBUG
/* A lookup of an attribute that n's op does not declare (or declares with another
 * kind) would silently return the caller's default: in debug builds it is a bug. */
static int attr_declared(const mg_node *n, const char *name, mg_attr_kind want) {
  mg_attr_kind kind;
  int has_default;
  const char *dflt;
  if (n->op == MG_OP_UNKNOWN) return 1;
  if (!mg_op_attr_spec(n->op, name, &kind, &has_default, &dflt)) {
    fprintf(stderr, "migc: internal: %s has no attribute '%s' in ops.def\n", mg_op_name(n->op), name);
    return 0;
  }
  if (kind != want && !(kind == MG_ATTR_TYPE && want == MG_ATTR_INT)) {
    fprintf(stderr, "migc: internal: %s attribute '%s' read as another kind\n", mg_op_name(n->op), name);
    return 0;
  }
  return 1;
}
#define CHECK_DECLARED(n, name, kind) assert(attr_declared(n, name, kind))
#else
#define CHECK_DECLARED(n, name, kind) ((void)0)
#endif

int64_t mg_attr_int(const mg_node *n, const char *name, int64_t dflt) {
  CHECK_DECLARED(n, name, MG_ATTR_INT);
  const mg_attr *a = mg_node_attr(n, name);
  return a && a->kind == MG_ATTR_INT ? a->i : dflt;
}

float mg_attr_float(const mg_node *n, const char *name, float dflt) {
  CHECK_DECLARED(n, name, MG_ATTR_FLOAT);
  const mg_attr *a = mg_node_attr(n, name);
  return a && a->kind == MG_ATTR_FLOAT ? a->f : dflt;
}

const char *mg_attr_str(const mg_node *n, const char *name, const char *dflt) {
  CHECK_DECLARED(n, name, MG_ATTR_STRING);
  const mg_attr *a = mg_node_attr(n, name);
  return a && a->kind == MG_ATTR_STRING ? a->s : dflt;
}

size_t mg_attr_ints(const mg_node *n, const char *name, const int64_t **out) {
  CHECK_DECLARED(n, name, MG_ATTR_INTS);
  const mg_attr *a = mg_node_attr(n, name);
  if (!a || a->kind != MG_ATTR_INTS) {
    *out = NULL;
    return 0;
  }
  *out = a->ints;
  return a->n;
}

int64_t mg_shape_numel(const mg_shape *s) {
  if (s->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++)
    if (s->d[i].v < 0 || !mg_mul_i64(n, s->d[i].v, &n)) return -1;
  return n;
}

int mg_shape_is_static(const mg_shape *s) {
  if (s->rank < 0) return 0;
  for (int i = 0; i < s->rank; i++)
    if (s->d[i].v < 0) return 0;
  return 1;
}

char *mg_shape_str(const mg_shape *s, char *buf, size_t n) {
  if (s->rank < 0) {
    snprintf(buf, n, "?");
    return buf;
  }
  size_t used = 0;
  buf[0] = 0;
  if (s->rank == 0) snprintf(buf, n, "scalar");
  for (int i = 0; i < s->rank && used < n; i++) {
    int w;
    if (s->d[i].v >= 0)
      w = snprintf(buf + used, n - used, "%s%lld", i ? "x" : "", (long long)s->d[i].v);
    else
      w = snprintf(buf + used, n - used, "%s%s", i ? "x" : "", s->d[i].sym ? s->d[i].sym : "?");
    if (w < 0) break;
    used += (size_t)w;
  }
  return buf;
}

int mg_shape_parse(const char *text, mg_shape *out) {
  memset(out, 0, sizeof *out);
  if (!strcmp(text, "scalar")) return 0;
  const char *p = text;
  while (*p) {
    if (out->rank >= MG_MAX_RANK) return -1;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || v > MG_DIM_MAX) return -1;
    out->d[out->rank++].v = v;
    p = end;
    if (*p == 'x' || *p == ',' || *p == 'X') {
      p++;
      if (!*p) return -1;
    } else if (*p) {
      return -1;
    }
  }
  return out->rank ? 0 : -1;
}

int64_t mg_value_ints(const mg_value *v, int64_t *out, int64_t cap) {
  if (!v || !v->data) return -1;
  size_t es = mg_dtype_size(v->dtype);
  if (!es) return -1;
  int64_t n = (int64_t)(v->nbytes / es);
  if (n > cap) return -1;
  const unsigned char *p = v->data;
  for (int64_t i = 0; i < n; i++) {
    const void *e = p + (size_t)i * es;
    switch (v->dtype) {
    case MG_I64: { int64_t x; memcpy(&x, e, 8); out[i] = x; break; }
    case MG_I32: { int32_t x; memcpy(&x, e, 4); out[i] = x; break; }
    case MG_I16: { int16_t x; memcpy(&x, e, 2); out[i] = x; break; }
    case MG_I8: out[i] = *(const int8_t *)e; break;
    case MG_U8: case MG_BOOL: out[i] = *(const uint8_t *)e; break;
    case MG_U16: { uint16_t x; memcpy(&x, e, 2); out[i] = x; break; }
    case MG_U32: { uint32_t x; memcpy(&x, e, 4); out[i] = x; break; }
    case MG_U64: { uint64_t x; memcpy(&x, e, 8); out[i] = (int64_t)x; break; }
    case MG_F32: { float x; memcpy(&x, e, 4); out[i] = (int64_t)x; break; }
    case MG_F64: { double x; memcpy(&x, e, 8); out[i] = (int64_t)x; break; }
    default: return -1;
    }
  }
  return n;
}

static int walk_rec(mg_graph *g, int (*fn)(mg_graph *, void *), void *ctx) {
  int r = fn(g, ctx);
  if (r) return r;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *n = g->nodes[i];
    for (int k = 0; k < n->n_attr; k++)
      if (n->attr[k].kind == MG_ATTR_GRAPH && n->attr[k].g) {
        r = walk_rec(n->attr[k].g, fn, ctx);
        if (r) return r;
      }
  }
  return 0;
}

int mg_graph_walk(mg_graph *g, int (*fn)(mg_graph *g, void *ctx), void *ctx) {
  return walk_rec(g, fn, ctx);
}

int mg_scope_module(const char *node_name, char *out, size_t n) {
  size_t len = 0, last = 0; /* last: where the previous component starts in out */
  if (n) out[0] = 0;
  if (!node_name || node_name[0] != '/' || !n) return 0;
  const char *end = strrchr(node_name, '/');
  for (const char *p = node_name + 1; p < end;) {
    const char *e = memchr(p, '/', (size_t)(end - p));
    if (!e) e = end;
    size_t cl = (size_t)(e - p), prev = len - last;
    if (!cl) return out[0] = 0, -1;
    if (len && cl > prev && !strncmp(p, out + last, prev) && p[prev] == '.') {
      len = last; /* extends the previous component: replace it */
    } else if (len) {
      if (len + 1 >= n) return out[0] = 0, -1;
      out[len++] = '.';
    }
    last = len;
    if (len + cl >= n) return out[0] = 0, -1;
    memcpy(out + len, p, cl);
    len += cl;
    out[len] = 0;
    p = e + 1;
  }
  return (int)len;
}

static int length_from_data(mg_op op) {
  return op == MG_OP_NonZero || op == MG_OP_Unique || op == MG_OP_NonMaxSuppression || op == MG_OP_Compress ||
         op == MG_OP_If || op == MG_OP_Loop || op == MG_OP_Scan;
}

const mg_node *mg_data_dependent_origin(const mg_value *v) {
  if (!v || !v->producer) return NULL;
  const mg_graph *g = v->producer->graph;
  int n = g->n_values;
  char *seen = mg_calloc((size_t)n + 1, 1);
  const mg_value **stack = mg_malloc(sizeof *stack * ((size_t)n + 1));
  const mg_node *found = NULL;
  int top = 0;
  if (!seen || !stack) goto done; /* out of memory: no origin known, the generic advice stands */
  stack[top++] = v;
  while (top && !found) {
    const mg_value *x = stack[--top];
    const mg_node *p = x->producer;
    if (!p || p->graph != g) continue;
    if (length_from_data(p->op)) {
      found = p;
      break;
    }
    for (int k = 0; k < p->n_in; k++) {
      const mg_value *u = p->in[k];
      if (!u || u->id < 0 || u->id >= n || seen[u->id]) continue;
      seen[u->id] = 1;
      stack[top++] = u;
    }
  }
done:
  mg_free(seen);
  mg_free(stack);
  return found;
}
