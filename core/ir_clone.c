/* A deep copy of a prepared model, so that each target's lowering passes can
 * rewrite a model of their own while every target starts from the one import. */
#include "ir.h"
#include <string.h>

typedef struct clone_ctx clone_ctx;
/* The values of one source graph and their copies, by id. */
typedef struct {
  const mg_graph *src;
  mg_value **copy;
} graph_map;

struct clone_ctx {
  mg_model *dst;
  graph_map *maps;
  int n_maps, cap_maps;
  int failed;
};

static graph_map *map_of(clone_ctx *c, const mg_graph *g) {
  for (int i = 0; i < c->n_maps; i++)
    if (c->maps[i].src == g) return &c->maps[i];
  return NULL;
}

/* The copy of v, which belongs to g or one of its ancestors (a subgraph reads
 * values of the graphs around it); a detached value (id -1: an attribute's
 * tensor) is copied where it is met. */
static mg_value *copy_value(clone_ctx *c, const mg_graph *g, const mg_value *v);

static void copy_fields(mg_value *to, const mg_value *from, mg_arena *a, int *failed) {
  const char *name = to->name;
  int id = to->id;
  *to = *from;
  to->name = name, to->id = id;
  to->producer = NULL; /* set when the producing node is copied */
  if (from->n_elems) {
    to->elems = mg_arena_alloc(a, sizeof(mg_dim) * (size_t)from->n_elems);
    if (!to->elems) *failed = 1;
    else memcpy(to->elems, from->elems, sizeof(mg_dim) * (size_t)from->n_elems);
  }
}

static mg_value *copy_value(clone_ctx *c, const mg_graph *g, const mg_value *v) {
  if (!v) return NULL;
  for (const mg_graph *s = g; s; s = s->parent)
    if (v->id >= 0 && v->id < s->n_values && s->values[v->id] == v) {
      graph_map *gm = map_of(c, s);
      return gm ? gm->copy[v->id] : NULL;
    }
  mg_value *d = mg_value_detached(c->dst, v->name);
  if (!d) {
    c->failed = 1;
    return NULL;
  }
  copy_fields(d, v, &c->dst->arena, &c->failed);
  return d;
}

static mg_graph *copy_graph(clone_ctx *c, const mg_graph *g, mg_graph *parent);

static mg_value **copy_list(clone_ctx *c, const mg_graph *g, mg_value *const *list, int n) {
  mg_value **out = mg_arena_alloc(&c->dst->arena, sizeof(mg_value *) * (size_t)(n ? n : 1));
  if (!out) {
    c->failed = 1;
    return NULL;
  }
  for (int i = 0; i < n; i++) out[i] = copy_value(c, g, list[i]);
  return out;
}

static void copy_attrs(clone_ctx *c, const mg_node *from, mg_node *to, mg_graph *g) {
  mg_arena *a = &c->dst->arena;
  to->attr = mg_arena_alloc(a, sizeof(mg_attr) * (size_t)(from->n_attr ? from->n_attr : 1));
  if (!to->attr) {
    c->failed = 1;
    return;
  }
  for (int k = 0; k < from->n_attr; k++) {
    to->attr[k] = from->attr[k]; /* names, strings and number arrays are shared */
    if (from->attr[k].t) to->attr[k].t = copy_value(c, from->graph, from->attr[k].t);
    if (from->attr[k].g) to->attr[k].g = copy_graph(c, from->attr[k].g, g);
  }
}

static mg_graph *copy_graph(clone_ctx *c, const mg_graph *g, mg_graph *parent) {
  mg_graph *d = mg_graph_new(c->dst, parent);
  if (!d || c->failed) {
    c->failed = 1;
    return NULL;
  }
  d->name = g->name;
  if (c->n_maps == c->cap_maps) {
    int cap = c->cap_maps ? 2 * c->cap_maps : 8;
    graph_map *m = mg_realloc(c->maps, sizeof *m * (size_t)cap);
    if (!m) {
      c->failed = 1;
      return NULL;
    }
    c->maps = m, c->cap_maps = cap;
  }
  graph_map *gm = &c->maps[c->n_maps++];
  gm->src = g;
  gm->copy = mg_arena_alloc(&c->dst->arena, sizeof(mg_value *) * (size_t)(g->n_values ? g->n_values : 1));
  if (!gm->copy) {
    c->failed = 1;
    return NULL;
  }
  for (int i = 0; i < g->n_values; i++) {
    mg_value *v = mg_value_new(d, g->values[i]->name, NULL);
    if (!v) {
      c->failed = 1;
      return NULL;
    }
    copy_fields(v, g->values[i], &c->dst->arena, &c->failed);
    gm->copy[i] = v;
  }
  d->inputs = copy_list(c, g, g->inputs, g->n_inputs), d->n_inputs = g->n_inputs;
  d->outputs = copy_list(c, g, g->outputs, g->n_outputs), d->n_outputs = g->n_outputs;
  d->inits = copy_list(c, g, g->inits, g->n_inits), d->n_inits = g->n_inits;
  for (int i = 0; i < g->n_nodes && !c->failed; i++) {
    const mg_node *n = g->nodes[i];
    mg_node *k = mg_node_new(d, n->op, n->name, n->n_in, n->n_out);
    if (!k) {
      c->failed = 1;
      break;
    }
    k->op_type = n->op_type, k->domain = n->domain, k->opset = n->opset, k->synthetic = n->synthetic;
    k->n_attr = n->n_attr;
    for (int j = 0; j < n->n_in; j++) k->in[j] = copy_value(c, g, n->in[j]);
    for (int j = 0; j < n->n_out; j++) {
      k->out[j] = copy_value(c, g, n->out[j]);
      if (k->out[j]) k->out[j]->producer = k;
    }
    copy_attrs(c, n, k, d);
    if (mg_graph_push_node(d, k)) c->failed = 1;
  }
  return c->failed ? NULL : d;
}

mg_model *mg_model_clone(const mg_model *src) {
  mg_model *m = mg_model_new();
  if (!m) return NULL;
  clone_ctx c = {.dst = m};
  m->path = src->path;
  m->ir_version = src->ir_version;
  m->producer_name = src->producer_name, m->producer_version = src->producer_version;
  m->opsets = src->opsets, m->n_opsets = src->n_opsets, m->opset = src->opset;
  m->keep_param_paths = src->keep_param_paths, m->derive_shapes_only = src->derive_shapes_only;
  m->graph = src->graph ? copy_graph(&c, src->graph, NULL) : NULL;
  mg_free(c.maps);
  if (c.failed || (src->graph && !m->graph)) {
    mg_model_free(m);
    return NULL;
  }
  return m;
}
