/* The interpreter's driver: frames, value lifetimes, dispatch. Kernels live in
 * one file per op family (see interp_internal.h). */
#include "interp_internal.h"
#include <stdio.h>
#include <string.h>

struct interp_frame {
  interp_frame *parent;
  mg_graph *g;
  mg_rvalue **slot;   /* per value id: the value, or NULL before it is computed */
  char *owned;        /* per value id: slot is this frame's to free */
  int *remaining;     /* per value id: consumers still to run */
  mg_value ***reads;  /* per node: values of this frame it reads (inputs and captures) */
  int *n_reads;
};

void mg_rvalue_free(mg_rvalue *v) {
  if (!v) return;
  if (!v->borrowed) mg_array_free(&v->t);
  if (v->items) mg_arrays_free(v->items, v->n_items);
  memset(v, 0, sizeof *v);
}

static interp_kernel *family_of(mg_op op) {
  switch (op) {
  case MG_OP_UNKNOWN:
  case MG_OP_COUNT:
    return NULL;
#define OP(name, ...) case MG_OP_##name:
#define FAMILY(fn) return fn;
#include "interp_families.def"
#undef OP
#undef FAMILY
  }
  return NULL;
}

interp_kernel *interp_kernel_for(mg_op op) { return family_of(op); }

static int owns_value(const mg_graph *g, const mg_value *v) {
  return v->id >= 0 && v->id < g->n_values && g->values[v->id] == v;
}

/* Values of frame graph g read by subgraph s (and its subgraphs), appended once. */
static int collect_captures(mg_graph *g, mg_graph *s, mg_value **list, int *n, int cap) {
  for (int i = 0; i < s->n_nodes; i++) {
    mg_node *node = s->nodes[i];
    for (int k = 0; k < node->n_in; k++) {
      mg_value *v = node->in[k];
      if (!v || !owns_value(g, v)) continue;
      int seen = 0;
      for (int j = 0; j < *n; j++) seen |= list[j] == v;
      if (seen) continue;
      if (*n >= cap) return -1;
      list[(*n)++] = v;
    }
    for (int k = 0; k < node->n_attr; k++)
      if (node->attr[k].kind == MG_ATTR_GRAPH && collect_captures(g, node->attr[k].g, list, n, cap))
        return -1;
  }
  for (int i = 0; i < s->n_outputs; i++) {
    mg_value *v = s->outputs[i];
    if (!owns_value(g, v)) continue;
    int seen = 0;
    for (int j = 0; j < *n; j++) seen |= list[j] == v;
    if (!seen && *n < cap) list[(*n)++] = v;
  }
  return 0;
}

static void frame_free(interp_frame *f) {
  if (f->slot)
    for (int i = 0; i < f->g->n_values; i++)
      if (f->slot[i] && f->owned[i]) {
        mg_rvalue_free(f->slot[i]);
        mg_free(f->slot[i]);
      }
  if (f->reads)
    for (int i = 0; i < f->g->n_nodes; i++) mg_free(f->reads[i]);
  mg_free(f->reads);
  mg_free(f->n_reads);
  mg_free(f->slot);
  mg_free(f->owned);
  mg_free(f->remaining);
}

static int frame_init(interp_ctx *c, interp_frame *f, interp_frame *parent, mg_graph *g) {
  memset(f, 0, sizeof *f);
  f->parent = parent;
  f->g = g;
  size_t nv = (size_t)g->n_values + 1, nn = (size_t)g->n_nodes + 1;
  f->slot = mg_calloc(nv, sizeof *f->slot);
  f->owned = mg_calloc(nv, 1);
  f->remaining = mg_calloc(nv, sizeof(int));
  f->reads = mg_calloc(nn, sizeof *f->reads);
  f->n_reads = mg_calloc(nn, sizeof(int));
  if (!f->slot || !f->owned || !f->remaining || !f->reads || !f->n_reads) goto oom;
  for (int i = 0; i < g->n_nodes; i++) {
    mg_node *node = g->nodes[i];
    int cap = node->n_in + 64;
    for (;;) {
      mg_value **list = mg_malloc(sizeof(mg_value *) * (size_t)cap);
      if (!list) goto oom;
      int n = 0, overflow = 0;
      for (int k = 0; k < node->n_in && !overflow; k++) {
        mg_value *v = node->in[k];
        if (!v || !owns_value(g, v)) continue;
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= list[j] == v;
        if (!seen) list[n++] = v;
      }
      for (int k = 0; k < node->n_attr && !overflow; k++)
        if (node->attr[k].kind == MG_ATTR_GRAPH && collect_captures(g, node->attr[k].g, list, &n, cap))
          overflow = 1;
      if (overflow) {
        mg_free(list);
        cap *= 4;
        continue;
      }
      f->reads[i] = list;
      f->n_reads[i] = n;
      for (int j = 0; j < n; j++) f->remaining[list[j]->id]++;
      break;
    }
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (owns_value(g, g->outputs[i])) f->remaining[g->outputs[i]->id] += 1 << 20; /* kept */
  return 0;
oom:
  frame_free(f);
  mg_error(c->d, OOM, NULL, NULL, "out of memory starting the interpreter");
  return -1;
}

/* The run-time value of v, looked up through the frames; constants are borrowed
 * from the IR on first use. */
static mg_rvalue *lookup(interp_ctx *c, interp_frame *f, const mg_value *v) {
  for (; f; f = f->parent) {
    if (!owns_value(f->g, v)) continue;
    if (f->slot[v->id]) return f->slot[v->id];
    if (!v->data || v->vtype != MG_VT_TENSOR) return NULL;
    mg_rvalue *r = mg_calloc(1, sizeof *r);
    if (!r) {
      mg_error(c->d, OOM, v->name, NULL, "out of memory");
      return NULL;
    }
    r->kind = MG_RV_TENSOR;
    r->borrowed = 1;
    r->t.dtype = v->dtype;
    r->t.rank = v->shape.rank;
    for (int i = 0; i < v->shape.rank; i++) r->t.dims[i] = v->shape.d[i].v;
    r->t.data = (void *)v->data;
    r->t.nbytes = v->nbytes;
    f->slot[v->id] = r;
    f->owned[v->id] = 1;
    return r;
  }
  return NULL;
}

mg_rvalue *interp_lookup(interp_ctx *c, interp_frame *f, const mg_value *v) { return lookup(c, f, v); }

static void release(interp_frame *f, const mg_value *v) {
  if (--f->remaining[v->id] > 0 || !f->slot[v->id] || !f->owned[v->id]) return;
  mg_rvalue_free(f->slot[v->id]);
  mg_free(f->slot[v->id]);
  f->slot[v->id] = NULL;
}

static int run_node(interp_ctx *c, interp_frame *f, int idx) {
  mg_node *n = f->g->nodes[idx];
  interp_kernel *k = family_of(n->op);
  if (!k) {
    mg_error(c->d, UNKNOWN_OP, n->name, n->op_type, "the interpreter has no kernel for %s%s%s",
             *n->domain ? n->domain : "", *n->domain ? "::" : "", n->op_type);
    return -1;
  }
  mg_rvalue *inbuf[64], *outbuf[64];
  mg_rvalue **in = inbuf, **out = outbuf;
  if (n->n_in > 64 || n->n_out > 64) {
    in = mg_calloc((size_t)n->n_in + 1, sizeof *in);
    out = mg_calloc((size_t)n->n_out + 1, sizeof *out);
    if (!in || !out) {
      mg_free(in != inbuf ? in : NULL);
      mg_free(out != outbuf ? out : NULL);
      mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
      return -1;
    }
  }
  int rc = 0;
  for (int i = 0; i < n->n_in; i++) {
    in[i] = NULL;
    if (!n->in[i]) continue;
    in[i] = lookup(c, f, n->in[i]);
    if (!in[i]) {
      rc = -1;
      if (!c->d->errors)
        mg_error(c->d, GRAPH, n->name, n->op_type, "input '%s' has no value", n->in[i]->name);
    }
  }
  for (int i = 0; i < n->n_out; i++) out[i] = NULL;
  for (int i = 0; i < n->n_out && !rc; i++) {
    if (!n->out[i]) continue;
    out[i] = mg_calloc(1, sizeof(mg_rvalue));
    if (!out[i]) {
      mg_error(c->d, OOM, n->name, n->op_type, "out of memory");
      rc = -1;
    }
  }
  if (!rc) rc = k(c, n, in, out, f);
  for (int i = 0; i < n->n_out; i++) {
    if (!n->out[i] || !out[i]) continue;
    if (rc) {
      mg_rvalue_free(out[i]);
      mg_free(out[i]);
      continue;
    }
    int id = n->out[i]->id;
    f->slot[id] = out[i];
    f->owned[id] = 1;
  }
  if (!rc && c->opt && c->opt->observe) {
    mg_rvalue *obs[64];
    int cnt = n->n_out < 64 ? n->n_out : 64;
    for (int i = 0; i < cnt; i++) obs[i] = n->out[i] ? f->slot[n->out[i]->id] : NULL;
    if (c->opt->observe(c->opt->observe_ctx, n, obs)) rc = 1;
  }
  for (int j = 0; j < f->n_reads[idx]; j++) release(f, f->reads[idx][j]);
  for (int i = 0; i < n->n_out; i++) /* outputs nobody reads are dropped at once */
    if (n->out[i] && f->slot[n->out[i]->id] && f->remaining[n->out[i]->id] == 0) {
      f->remaining[n->out[i]->id] = 1;
      release(f, n->out[i]);
    }
  if (in != inbuf) mg_free(in);
  if (out != outbuf) mg_free(out);
  return rc;
}

static int run_frame(interp_ctx *c, interp_frame *f) {
  for (int i = 0; i < f->g->n_nodes; i++) {
    int rc = run_node(c, f, i);
    if (rc) return rc;
  }
  return 0;
}

/* Moves (or copies, when borrowed or shared) the value of v into dst. */
static int take_value(interp_ctx *c, interp_frame *f, const mg_value *v, mg_rvalue *dst) {
  mg_rvalue *r = lookup(c, f, v);
  if (!r) {
    mg_error(c->d, GRAPH, v->name, NULL, "output has no value after the run");
    return -1;
  }
  memset(dst, 0, sizeof *dst);
  dst->kind = r->kind;
  interp_frame *owner = f;
  while (owner && !owns_value(owner->g, v)) owner = owner->parent;
  int movable = owner == f && f->owned[v->id] && !r->borrowed;
  /* A value that is also a graph output twice, or an input, must be copied. */
  if (movable) {
    int count = 0;
    for (int i = 0; i < f->g->n_outputs; i++) count += f->g->outputs[i] == v;
    movable = count == 1 && v->kind == MG_V_NODE;
  }
  if (movable) {
    *dst = *r;
    memset(r, 0, sizeof *r);
    return 0;
  }
  if (r->kind == MG_RV_TENSOR) return it_copy(c, NULL, &dst->t, &r->t);
  if (r->kind == MG_RV_SEQUENCE) {
    dst->items = mg_calloc((size_t)r->n_items + 1, sizeof(mg_array));
    if (!dst->items) return it_fail(c, NULL, "out of memory");
    for (int i = 0; i < r->n_items; i++) {
      if (it_copy(c, NULL, &dst->items[i], &r->items[i])) {
        mg_arrays_free(dst->items, i);
        dst->items = NULL;
        return -1;
      }
      dst->n_items++;
    }
  }
  return 0;
}

int interp_run_body(interp_ctx *c, interp_frame *parent, const mg_node *n, mg_graph *g,
                    mg_rvalue **inputs, int n_inputs, mg_rvalue *outputs) {
  if (c->depth > 64) return it_fail(c, n, "subgraphs nest too deep at run time");
  if (n_inputs != g->n_inputs)
    return it_fail(c, n, "body takes %d inputs, given %d", g->n_inputs, n_inputs);
  interp_frame f;
  if (frame_init(c, &f, parent, g)) return -1;
  for (int i = 0; i < n_inputs; i++) {
    f.slot[g->inputs[i]->id] = inputs[i];
    f.owned[g->inputs[i]->id] = 0;
  }
  c->depth++;
  int rc = run_frame(c, &f);
  c->depth--;
  for (int i = 0; i < g->n_outputs && !rc; i++) {
    rc = take_value(c, &f, g->outputs[i], &outputs[i]);
    if (rc)
      for (int k = 0; k < i; k++) mg_rvalue_free(&outputs[k]);
  }
  frame_free(&f);
  return rc;
}

static int check_input(interp_ctx *c, const mg_value *v, const mg_array *a) {
  if (v->dtype && a->dtype != v->dtype) {
    mg_error(c->d, USAGE, v->name, NULL, "input has dtype %s; the model wants %s",
             mg_dtype_name(a->dtype), mg_dtype_name(v->dtype));
    return -1;
  }
  if (v->shape.rank >= 0) {
    int ok = v->shape.rank == a->rank;
    for (int i = 0; ok && i < a->rank; i++)
      if (v->shape.d[i].v >= 0 && v->shape.d[i].v != a->dims[i]) ok = 0;
    if (!ok) {
      char want[256], got[256] = "";
      mg_shape_str(&v->shape, want, sizeof want);
      size_t used = 0;
      for (int i = 0; i < a->rank && used < sizeof got; i++)
        used += (size_t)snprintf(got + used, sizeof got - used, "%s%lld", i ? "x" : "", (long long)a->dims[i]);
      if (!a->rank) snprintf(got, sizeof got, "scalar");
      mg_error(c->d, USAGE, v->name, NULL, "input has shape %s; the model wants %s", got, want);
      return -1;
    }
  }
  return 0;
}

int interp_run(mg_model *m, const mg_array *inputs, int n_inputs, const interp_options *opt,
               mg_array **outputs, mg_diags *d) {
  *outputs = NULL;
  interp_options defaults = {0};
  interp_ctx c = {.m = m, .d = d, .opt = opt ? opt : &defaults};
  c.rng = c.opt->seed ? c.opt->seed : 0x9E3779B97F4A7C15ull;
  mg_graph *g = m->graph;
  interp_frame f;
  if (frame_init(&c, &f, NULL, g)) return -1;
  int rc = 0;
  mg_rvalue *fed = mg_calloc((size_t)g->n_inputs + 1, sizeof *fed);
  if (!fed) {
    frame_free(&f);
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  for (int i = 0; i < g->n_inputs; i++) {
    const mg_value *v = g->inputs[i];
    const mg_array *a = NULL;
    for (int k = 0; k < n_inputs; k++)
      if (inputs[k].name && !strcmp(inputs[k].name, v->name)) a = &inputs[k];
    if (!a) {
      mg_error(d, USAGE, v->name, NULL, "graph input not fed");
      rc = -1;
      continue;
    }
    if (check_input(&c, v, a)) {
      rc = -1;
      continue;
    }
    fed[i].kind = MG_RV_TENSOR;
    fed[i].borrowed = 1;
    fed[i].t = *a;
    fed[i].t.name = NULL;
    f.slot[v->id] = &fed[i];
    f.owned[v->id] = 0;
  }
  for (int k = 0; k < n_inputs; k++)
    if (!inputs[k].name || !mg_graph_find_local(g, inputs[k].name) ||
        mg_graph_find_local(g, inputs[k].name)->kind != MG_V_INPUT) {
      mg_error(d, USAGE, inputs[k].name ? inputs[k].name : "?", NULL, "the model has no such input");
      rc = -1;
    }
  if (!rc) rc = run_frame(&c, &f);
  mg_array *outs = NULL;
  if (!rc) {
    outs = mg_calloc((size_t)g->n_outputs + 1, sizeof *outs);
    if (!outs) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      rc = -1;
    }
  }
  for (int i = 0; i < g->n_outputs && !rc; i++) {
    mg_rvalue r;
    rc = take_value(&c, &f, g->outputs[i], &r);
    if (rc) break;
    if (r.kind != MG_RV_TENSOR) {
      mg_rvalue_free(&r);
      mg_error(d, UNSUPPORTED_DTYPE, g->outputs[i]->name, NULL, "graph output is not a tensor");
      rc = -1;
      break;
    }
    outs[i] = r.t;
    outs[i].name = mg_malloc(strlen(g->outputs[i]->name) + 1);
    if (!outs[i].name) {
      mg_error(d, OOM, NULL, NULL, "out of memory");
      rc = -1;
    } else {
      strcpy(outs[i].name, g->outputs[i]->name);
    }
  }
  if (rc && outs) {
    mg_arrays_free(outs, g->n_outputs);
    outs = NULL;
  }
  frame_free(&f);
  mg_free(fed);
  *outputs = outs;
  return rc ? -1 : 0;
}

/* One node on constant inputs, outside any frame: the kernel reads its inputs
 * through borrowed values, as lookup() would materialise them. */
int interp_eval_node(mg_model *m, const mg_node *n, mg_array *outs, mg_diags *d) {
  interp_kernel *k = family_of(n->op);
  if (!k || n->n_in > 64 || n->n_out > 64) return -1;
  for (int i = 0; i < n->n_attr; i++)
    if (n->attr[i].kind == MG_ATTR_GRAPH) return -1;
  interp_options opt = {0};
  interp_ctx c = {.m = m, .d = d, .opt = &opt, .rng = 0x9E3779B97F4A7C15ull};
  mg_rvalue inv[64], outv[64], *in[64], *out[64];
  memset(outv, 0, sizeof outv);
  for (int i = 0; i < n->n_in; i++) {
    const mg_value *v = n->in[i];
    in[i] = NULL;
    if (!v) continue;
    if (!v->data || v->vtype != MG_VT_TENSOR) return -1;
    memset(&inv[i], 0, sizeof inv[i]);
    inv[i].kind = MG_RV_TENSOR;
    inv[i].borrowed = 1;
    inv[i].t.dtype = v->dtype;
    inv[i].t.rank = v->shape.rank;
    for (int r = 0; r < v->shape.rank; r++) inv[i].t.dims[r] = v->shape.d[r].v;
    inv[i].t.data = (void *)v->data;
    inv[i].t.nbytes = v->nbytes;
    in[i] = &inv[i];
  }
  for (int i = 0; i < n->n_out; i++) out[i] = n->out[i] ? &outv[i] : NULL;
  int rc = k(&c, n, in, out, NULL);
  for (int i = 0; i < n->n_out; i++) {
    if (!rc && out[i] && outv[i].kind == MG_RV_TENSOR) {
      outs[i] = outv[i].t;
      memset(&outv[i].t, 0, sizeof outv[i].t);
    } else {
      memset(&outs[i], 0, sizeof outs[i]);
      if (out[i] && outv[i].kind != MG_RV_TENSOR) rc = -1;
    }
    mg_rvalue_free(&outv[i]);
  }
  if (rc)
    for (int i = 0; i < n->n_out; i++) mg_array_free(&outs[i]);
  return rc ? -1 : 0;
}
