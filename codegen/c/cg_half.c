/* 16-bit weights (convert --precision fp16|bf16 on the CPU target).
 *
 * The weights payload holds every large float32 weight, and the prepared
 * (pre-packed) GEMM, convolution and Winograd panels, as float16 or bfloat16, and
 * model_init keeps them so: nothing is widened at load time. Each step that reads
 * such a weight widens it, just before its kernel, into one expansion area at the
 * end of the arena (runtime mg_rt_expand_f16/bf16: F16C, AVX-512 or NEON where the
 * build has them, portable C elsewhere), and the kernel reads and accumulates in
 * float32. The area holds one step's weights, so the resident memory is the 16-bit
 * weights plus the largest layer's weights in float32 (docs/precision.md).
 * Activations stay float32. Kept float32: tensors under CG_W16_MIN elements, the
 * parameters of normalisation layers, and (float16) a tensor beyond its range,
 * each counted in the report and convert.json. */
#include "cg_internal.h"
#include "dtype.h"
#include <math.h>
#include <string.h>

#define ALIGN 64

static size_t round_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

int cg_w16_choose(cg_ctx *c, const mg_value *x, int norm_read, cg_report *r) {
  if (!c->o->weights16 || x->dtype != MG_F32 || !x->data) return 0;
  int64_t n = cg_numel(x);
  if (n < 0 || (size_t)n * sizeof(float) != x->nbytes) return 0;
  if (norm_read) return r->n_w32_norm++, 0;
  if (n < CG_W16_MIN) return r->n_w32_small++, 0;
  if (c->o->weights16 == MG_F16) {
    const unsigned char *p = x->data;
    for (int64_t i = 0; i < n; i++) {
      float v;
      memcpy(&v, p + (size_t)i * sizeof v, sizeof v);
      if (isfinite(v) && fabsf(v) > 65504.0f) {
        mg_warn(c->d, UNSUPPORTED, x->name, NULL,
                "--precision fp16: weight '%s' holds %g, beyond float16's range; it stays float32", x->name,
                (double)v);
        return r->n_w32_range++, 0;
      }
    }
  }
  r->n_w16++;
  return 1;
}

typedef void (*read_fn)(cg_ctx *c, size_t woff, int64_t floats, void *ctx);

/* Calls fn for each 16-bit weight the step of node n reads: the inputs of n and
 * of the nodes fused into it, and n's prepared panels. */
static void for_step_reads(cg_ctx *c, const mg_node *n, read_fn fn, void *ctx) {
  const mg_graph *g = c->g;
  for (int j = 0; j < g->n_nodes; j++) {
    const mg_node *x = g->nodes[j];
    if (j != n->id && (!c->absorbed[j] || cg_step_of(c, x) != n->id)) continue;
    const cg_prep *pr = c->prep ? &c->prep[j] : NULL;
    for (int k = 0; k < x->n_in; k++) {
      const mg_value *v = x->in[k];
      if (!v || v->id < 0 || v->id >= g->n_values || (k == 1 && pr && pr->data)) continue;
      const cg_place *p = &c->place[v->id];
      if (p->at == CG_AT_WEIGHT && p->w16) fn(c, p->offset, cg_numel(v), ctx);
    }
    if (pr && pr->data && pr->w16) fn(c, pr->offset, (int64_t)pr->floats, ctx);
  }
}

/* The expansion area's offset of payload offset woff in this step, or -1. */
static long long slot_of(const cg_ctx *c, size_t woff) {
  for (int i = 0; i < c->n_w16_slot; i++)
    if (c->w16_slot[i].woff == woff) return (long long)c->w16_slot[i].aoff;
  return -1;
}

typedef struct {
  size_t bytes;
  int emit;
} step_ctx;

static void add_read(cg_ctx *c, size_t woff, int64_t floats, void *ctx) {
  step_ctx *s = ctx;
  if (slot_of(c, woff) >= 0) return; /* read twice in the step: widened once */
  if (c->n_w16_slot == (int)(sizeof c->w16_slot / sizeof c->w16_slot[0])) {
    c->cur_failed = 1;
    mg_error(c->d, UNSUPPORTED, c->cur ? c->cur->name : NULL, NULL,
             "--precision: a step reads more than %d 16-bit weights", c->n_w16_slot);
    return;
  }
  size_t aoff = c->w16_base + s->bytes;
  c->w16_slot[c->n_w16_slot].woff = woff;
  c->w16_slot[c->n_w16_slot++].aoff = aoff;
  s->bytes += round_up((size_t)floats * sizeof(float));
  if (s->emit)
    cg_line(c, "mg_rt_expand_%s((float *)(A + %zu), W + %zu, %lld);", c->o->weights16 == MG_BF16 ? "bf16" : "f16",
            aoff, woff, (long long)floats);
}

size_t cg_w16_step_bytes(cg_ctx *c, const mg_node *n) {
  step_ctx s = {0, 0};
  c->n_w16_slot = 0;
  for_step_reads(c, n, add_read, &s);
  c->n_w16_slot = 0;
  return s.bytes;
}

void cg_w16_emit(cg_ctx *c, const mg_node *n) {
  step_ctx s = {0, 1};
  c->n_w16_slot = 0;
  if (c->o->weights16) for_step_reads(c, n, add_read, &s);
}

const char *cg_w16_at(cg_ctx *c, size_t woff, const char *type) {
  long long a = slot_of(c, woff);
  if (a >= 0) return str(c, "((const %s *)(A + %lld))", type, a);
  c->cur_failed = 1;
  mg_error(c->d, GRAPH, c->cur ? c->cur->name : NULL, NULL,
           "internal error: a 16-bit weight is read outside the step that widens it");
  return "0";
}

void cg_w16_payload(mg_dtype t, const void *src, size_t n, void (*emit)(void *, const unsigned char *, size_t),
                    void *ctx) {
  unsigned char buf[4096];
  const unsigned char *p = src;
  for (size_t i = 0; i < n;) {
    size_t m = n - i < sizeof buf / 2 ? n - i : sizeof buf / 2;
    for (size_t k = 0; k < m; k++) {
      float v;
      memcpy(&v, p + (i + k) * sizeof v, sizeof v);
      uint16_t h = t == MG_BF16 ? mg_f32_to_bf16(v) : mg_f32_to_f16(v);
      buf[2 * k] = (unsigned char)h, buf[2 * k + 1] = (unsigned char)(h >> 8);
    }
    emit(ctx, buf, m * 2);
    i += m;
  }
}
