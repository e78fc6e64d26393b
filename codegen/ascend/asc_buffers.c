/* Device buffers of the Ascend program (asc_internal.h): inputs, the weights
 * buffer, and the arena of intermediates planned by liveness. */
#include "asc_internal.h"
#include "plan.h"
#include <stdio.h>
#include <string.h>

/* aclCreateTensor's tensorData must be 32-byte aligned (aclnn-api.json
 * aclCreateTensor); 64 keeps every buffer on a cache line too. */
enum { ASC_ALIGN = 64 };

typedef struct asc_scratch {
  int id;              /* its value */
  size_t bytes;
  struct asc_scratch *next;
} asc_scratch;

/* A buffer's bytes: whole alignment units, and one for an empty tensor, so that its
 * address is a live device address (aclCreateTensor's tensorData, aclrtMemcpy's
 * dst/src: the emulator refuses NULL, and an arena of empty tensors only is none). */
static size_t round_up(size_t n) { return ((n ? n : 1) + ASC_ALIGN - 1) / ASC_ALIGN * ASC_ALIGN; }

static size_t value_bytes(const mg_value *v) {
  int64_t n = mg_shape_numel(&v->shape);
  return n < 0 ? 0 : (size_t)n * mg_dtype_size(v->dtype);
}

/* A new value id for v (a zero tensor or a scratch buffer), its own root. */
static int add_value(asc_ctx *c, const mg_value *v) {
  if (c->n_vals == c->cap_vals) {
    int cap = 2 * c->cap_vals + 16;
    const mg_value **vals = mg_arena_alloc(&c->a, sizeof *vals * (size_t)cap);
    int *root = mg_arena_alloc(&c->a, sizeof *root * (size_t)cap);
    asc_loc *loc = mg_arena_alloc(&c->a, sizeof *loc * (size_t)cap);
    if (!vals || !root || !loc) { c->failed = 1; return -1; }
    if (c->n_vals) {
      memcpy(vals, c->vals, sizeof *vals * (size_t)c->n_vals);
      memcpy(root, c->root, sizeof *root * (size_t)c->n_vals);
      memcpy(loc, c->loc, sizeof *loc * (size_t)c->n_vals);
    }
    c->vals = vals, c->root = root, c->loc = loc, c->cap_vals = cap;
  }
  int id = c->n_vals++;
  c->vals[id] = v, c->root[id] = id;
  memset(&c->loc[id], 0, sizeof c->loc[id]);
  return id;
}

/* Whether node n is a view of its input 0 (its rule's call is aclCreateTensor). */
static int is_view(asc_ctx *c, const mg_node *n) {
  map_plan *p = map_node_plan(n, c->rs, &c->a);
  if (!p) { c->failed = 1; return 0; }
  const char *fn = p->status == MAP_SUPPORTED && p->rule ? rule_call(p->rule) : NULL;
  return fn && !strcmp(fn, "aclCreateTensor") && n->n_in > 0 && n->in[0] && n->n_out > 0 && n->out[0];
}

const asc_layout *asc_strided_layout(const asc_ctx *c, int id) {
  return id >= 0 && id < c->n_layout ? c->layout[id] : NULL;
}

/* Whether every reader of v takes it in place as a strided view: an aclnn call whose
 * fact-table note documents non-contiguous inputs (aclnn-api.json
 * conventions.views_no_reshape_op: "Most ops are documented to accept non-contiguous
 * inputs ... to materialise a view use aclnnInplaceCopy or aclnnPermute/aclnnSlice";
 * only the functions whose own note says so are taken), reading v whole as an input.
 * A graph output, a view op (Reshape needs dense input) or a host fallback reader
 * (its copies are dense) needs the materialised copy. */
static int readers_take_strides(asc_ctx *c, const mg_value *v) {
  const mg_graph *g = c->m->graph;
  for (int k = 0; k < g->n_outputs; k++)
    if (g->outputs[k] == v) return 0;
  int readers = 0;
  for (int j = 0; j < g->n_nodes; j++) {
    const mg_node *n = g->nodes[j];
    int reads = 0;
    for (int k = 0; k < n->n_in; k++) reads |= n->in[k] == v;
    if (!reads) continue;
    readers++;
    map_plan *p = map_node_plan(n, c->rs, &c->a);
    if (!p) { c->failed = 1; return 0; }
    const char *fn = p->status == MAP_SUPPORTED && p->rule ? rule_call(p->rule) : NULL;
    char ws_fn[160];
    if (!fn || snprintf(ws_fn, sizeof ws_fn, "%sGetWorkspaceSize", fn) >= (int)sizeof ws_fn ||
        !asc_fact_find(ASC_FACT_NONCONTIG, ws_fn))
      return 0;
    int taken = 0;
    for (int i = 0; i < p->n_args; i++) {
      const map_value *a = &p->args[i].value;
      if (a->kind == MV_TENSORS)
        for (int r = 0; r < a->n; r++)
          if (a->refs[r].v == v) return 0; /* a list member: aclTensorList notes say nothing */
      if (a->kind != MV_TENSOR || a->ref.v != v) continue;
      if (a->ref.role != MAP_REF_INPUT || a->ref.view_rank >= 0) return 0;
      taken = 1;
    }
    if (!taken) return 0;
  }
  return readers > 0;
}

/* Node n's output as a strided view of its input's buffer (*l), when n is a
 * Transpose or a Slice with non-negative strides of a dense, static input and its
 * readers take strides. 1 when it is, else 0. */
static int strided_view(asc_ctx *c, const mg_node *n, asc_layout *l) {
  if ((n->op != MG_OP_Transpose && n->op != MG_OP_Slice) || n->n_out < 1 || !n->out[0] || n->n_in < 1 ||
      !n->in[0] || asc_strided_layout(c, n->in[0]->id) || !mg_shape_is_static(&n->in[0]->shape) ||
      !mg_shape_is_static(&n->out[0]->shape) || n->out[0]->data)
    return 0;
  map_plan *p = map_node_plan(n, c->rs, &c->a);
  if (!p) { c->failed = 1; return 0; }
  if (p->status != MAP_SUPPORTED || !p->rule) return 0;
  const mg_shape *in = &n->in[0]->shape;
  int64_t dense[MG_MAX_RANK], s = 1;
  for (int k = in->rank - 1; k >= 0; k--) dense[k] = s, s *= in->d[k].v;
  memset(l, 0, sizeof *l);
  for (int i = 0; i < p->n_args; i++) {
    const map_value *a = &p->args[i].value;
    if (n->op == MG_OP_Transpose && !strcmp(p->args[i].name, "dims") && a->kind == MV_INTS && a->n == in->rank) {
      l->rank = a->n;
      for (int k = 0; k < a->n; k++) {
        if (a->ints[k] < 0 || a->ints[k] >= in->rank) return 0;
        l->dims[k] = in->d[a->ints[k]].v, l->strides[k] = dense[a->ints[k]];
      }
      return readers_take_strides(c, n->out[0]);
    }
    if (n->op == MG_OP_Slice && a->kind == MV_TENSOR && a->ref.v == n->in[0] && a->ref.view_rank >= 0) {
      const map_ref *r = &a->ref; /* the rule's slice_view: offset and scaled strides */
      l->rank = r->view_rank, l->offset = r->view_offset;
      for (int k = 0; k < r->view_rank; k++) {
        if (r->view_strides[k] < 0) return 0;
        l->dims[k] = r->view_dims[k], l->strides[k] = r->view_strides[k];
      }
      return readers_take_strides(c, n->out[0]);
    }
  }
  return 0;
}

int asc_plan_buffers(asc_ctx *c) {
  mg_graph *g = c->m->graph;
  for (int i = 0; i < g->n_values; i++)
    if (add_value(c, g->values[i]) != i) {
      mg_error(c->d, OOM, NULL, NULL, "out of memory placing the Ascend buffers");
      return -1;
    }
  c->layout = mg_arena_alloc(&c->a, sizeof *c->layout * (size_t)(g->n_values + 1));
  if (!c->layout) {
    c->failed = 1;
    mg_error(c->d, OOM, NULL, NULL, "out of memory placing the Ascend buffers");
    return -1;
  }
  memset(c->layout, 0, sizeof *c->layout * (size_t)(g->n_values + 1));
  c->n_layout = g->n_values;
  for (int i = 0; i < g->n_nodes && !c->failed; i++) {
    const mg_node *n = g->nodes[i];
    asc_layout l;
    if (is_view(c, n)) c->root[n->out[0]->id] = c->root[n->in[0]->id];
    else if (strided_view(c, n, &l)) {
      asc_layout *kept = mg_arena_alloc(&c->a, sizeof *kept);
      if (!kept) { c->failed = 1; break; }
      *kept = l;
      c->layout[n->out[0]->id] = kept;
      c->root[n->out[0]->id] = c->root[n->in[0]->id];
    }
  }
  for (int k = 0; k < g->n_inputs; k++) c->loc[g->inputs[k]->id] = (asc_loc){LOC_INPUT, 0, k};
  /* constants: the weights buffer, in value order */
  for (int i = 0; i < g->n_values; i++) {
    const mg_value *v = g->values[i];
    if (!v->data || v->kind == MG_V_INPUT || c->root[i] != i) continue;
    c->loc[i] = (asc_loc){LOC_WEIGHTS, c->weights_bytes, 0};
    c->weights_bytes += round_up(value_bytes(v));
  }
  /* node outputs: live from their node to their last reader's (a view's readers
   * count for the buffer it shares); graph outputs to the end */
  int *first = mg_arena_alloc(&c->a, sizeof(int) * (size_t)(g->n_values + 1));
  int *last = mg_arena_alloc(&c->a, sizeof(int) * (size_t)(g->n_values + 1));
  cg_buffer *bufs = mg_arena_alloc(&c->a, sizeof *bufs * (size_t)(g->n_values + 1));
  if (!first || !last || !bufs || c->failed) {
    mg_error(c->d, OOM, NULL, NULL, "out of memory planning the Ascend buffers");
    return -1;
  }
  for (int i = 0; i < g->n_values; i++) first[i] = last[i] = -1;
  for (int j = 0; j < g->n_nodes; j++) {
    const mg_node *n = g->nodes[j];
    for (int k = 0; k < n->n_out; k++)
      if (n->out[k] && first[c->root[n->out[k]->id]] < 0) first[c->root[n->out[k]->id]] = j;
    for (int k = 0; k < n->n_in; k++)
      if (n->in[k]) last[c->root[n->in[k]->id]] = j;
  }
  for (int k = 0; k < g->n_outputs; k++) last[c->root[g->outputs[k]->id]] = g->n_nodes;
  int nb = 0;
  for (int i = 0; i < g->n_values; i++) {
    const mg_value *v = g->values[i];
    if (c->root[i] != i || v->kind != MG_V_NODE || v->data || first[i] < 0) continue;
    if (!mg_shape_is_static(&v->shape) || !mg_dtype_size(v->dtype)) continue; /* no buffer: its readers say why */
    bufs[nb++] = (cg_buffer){i, round_up(value_bytes(v)), first[i], last[i] < first[i] ? first[i] : last[i], 0};
  }
  size_t arena = cg_assign_offsets(bufs, nb);
  if (arena == (size_t)-1) {
    mg_error(c->d, OOM, NULL, NULL, "out of memory planning the Ascend arena");
    return -1;
  }
  for (int b = 0; b < nb; b++) c->loc[bufs[b].value] = (asc_loc){LOC_ARENA, bufs[b].offset, 0};
  c->arena_bytes = arena;
  return 0;
}

int asc_zeros_value(asc_ctx *c, const map_ref *r) {
  mg_value *v = mg_arena_alloc(&c->a, sizeof *v);
  if (!v || r->view_rank < 0 || r->view_rank > MG_MAX_RANK) return -1;
  v->name = "zeros", v->kind = MG_V_CONST, v->dtype = r->dtype, v->shape.rank = r->view_rank, v->id = -1;
  for (int k = 0; k < r->view_rank; k++) v->shape.d[k].v = r->view_dims[k];
  int id = add_value(c, v);
  if (id < 0) return -1;
  v->id = id;
  c->loc[id] = (asc_loc){LOC_WEIGHTS, c->weights_bytes, 0}; /* no data: written as zeros */
  c->weights_bytes += round_up(value_bytes(v));
  return id;
}

int asc_scratch_value(asc_ctx *c, const mg_node *n, const map_ref *r) {
  (void)n;
  mg_value *v = mg_arena_alloc(&c->a, sizeof *v);
  asc_scratch *s = mg_arena_alloc(&c->a, sizeof *s);
  if (!v || !s) return -1;
  v->name = "scratch", v->kind = MG_V_NODE, v->id = -1;
  if (r->view_rank >= 0 && r->view_rank <= MG_MAX_RANK) { /* typed: the call checks its dtype and shape */
    v->dtype = r->dtype, v->shape.rank = r->view_rank;
    for (int k = 0; k < r->view_rank; k++) v->shape.d[k].v = r->view_dims[k];
  } else {
    v->dtype = MG_U8, v->shape.rank = 1;
    v->shape.d[0].v = (int64_t)(r->scratch_bytes ? r->scratch_bytes : 1);
  }
  int id = add_value(c, v);
  if (id < 0) return -1;
  v->id = id;
  /* after the planned arena, never shared: a scratch is written only by its node */
  c->loc[id] = (asc_loc){LOC_ARENA, c->arena_bytes, 0};
  c->arena_bytes += round_up(value_bytes(v));
  s->id = id, s->bytes = value_bytes(v), s->next = c->scratch, c->scratch = s;
  return id;
}

void asc_unsupported(asc_ctx *c, const mg_node *n, const char *why) {
  mg_diag_add(c->d, MG_SEV_ERROR, MG_D_UNSUPPORTED, n->name, n->op_type, "ascend: %s", why);
  c->r->n_unsupported++;
  if (!c->first_unsupported)
    c->first_unsupported = mg_arena_printf(&c->a, "node '%s' (%s): %s", n->name, n->op_type, why);
}

void asc_use_fn(asc_ctx *c, const char *fn) {
  for (int i = 0; i < c->n_fns; i++)
    if (!strcmp(c->fns[i], fn)) return;
  if (c->n_fns == c->cap_fns) {
    int cap = 2 * c->cap_fns + 32;
    const char **p = mg_arena_alloc(&c->a, sizeof *p * (size_t)cap);
    if (!p) { c->failed = 1; return; }
    if (c->n_fns) memcpy(p, c->fns, sizeof *p * (size_t)c->n_fns);
    c->fns = p, c->cap_fns = cap;
  }
  c->fns[c->n_fns++] = mg_arena_strdup(&c->a, fn);
}
