/* Weights prepared at conversion time: a convolution's weights are written to the
 * weights payload already in the layout its kernel reads (SGEMM panels, or the
 * Winograd-transformed kernels in panels: runtime mg_conv2d_prepare), so model_run
 * never repacks or transforms them. The layout depends on the micro-kernel's panel
 * height MR, chosen here for the machine migc runs on (the generated Makefile
 * builds with -march=native); a runtime built for another MR still computes the
 * same result from it, repacking per call (runtime/sgemm.c, mg_sgemm_packed). */
#include "cg_internal.h"

#include <stdlib.h>
#include <string.h>

/* The panel height of the micro-kernel the generated code will most likely be
 * built with: that of the host (runtime/sgemm.c's paths: AVX2+FMA 6, other
 * x86-64 4, aarch64 8, else 4). */
static int host_mr(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 6 : 4;
#elif defined(__aarch64__)
  return 8;
#else
  return 4;
#endif
}

/* Whether Conv node n can have prepared weights: a constant float32 W of the
 * right size, not of run-time length, and a 2-D geometry the emitter takes. On
 * success fills p (preparation unset). */
static int conv_candidate(cg_ctx *c, const mg_node *n, mg_conv2d_params *p) {
  const mg_value *w = n->n_in >= 2 ? n->in[1] : NULL;
  int rc;
  if (n->op != MG_OP_Conv || c->absorbed[n->id] || (c->dyn_node && c->dyn_node[n->id])) return 0;
  if (!w || !cg_is_const(w) || w->dtype != MG_F32 || !mg_shape_is_static(&w->shape)) return 0;
  if ((size_t)cg_numel(w) * sizeof(float) != w->nbytes) return 0;
  c->probing = 1;
  rc = cg_conv_geometry(c, n, p);
  c->probing = 0;
  c->cur_failed = 0;
  return rc == 0;
}

int cg_prepare_weights(cg_ctx *c) {
  const mg_graph *g = c->g;
  const int mr = c->o->pack_mr > 0 ? c->o->pack_mr : host_mr();
  c->prep = mg_calloc((size_t)g->n_nodes + 1, sizeof *c->prep);
  if (!c->prep) return -1;
  if (c->o->pack_mr < 0) return 0;
  for (int i = 0; i < g->n_nodes; i++) {
    const mg_node *n = g->nodes[i];
    mg_conv2d_params p;
    if (!conv_candidate(c, n, &p)) continue;
    p.prepared = (int)mg_conv2d_prep_kind(&p);
    if (p.prepared == MG_CONV_PREP_NONE) continue;
    p.prepared_mr = mr;
    size_t floats = mg_conv2d_prepared_floats(&p);
    /* the graph's bytes may sit unaligned in the mapped model: read a copy */
    float *w = mg_malloc(n->in[1]->nbytes), *out = mg_malloc(floats * sizeof(float));
    if (!w || !out) {
      mg_free(w);
      mg_free(out);
      return -1;
    }
    memcpy(w, n->in[1]->data, n->in[1]->nbytes);
    mg_conv2d_prepare(&p, w, out);
    mg_free(w);
    c->prep[i] = (cg_prep){.data = out, .nbytes = floats * sizeof(float), .kind = p.prepared, .mr = mr};
    c->n_prep++;
  }
  return 0;
}

const char *cg_prepared(cg_ctx *c, const mg_node *n, int *kind, int *mr) {
  const cg_prep *p = c->prep && n->id >= 0 && n->id < c->g->n_nodes ? &c->prep[n->id] : NULL;
  *kind = 0, *mr = 0;
  if (!p || !p->data) return NULL;
  *kind = p->kind, *mr = p->mr;
  return str(c, "((const float *)(W + %zu))", p->offset);
}

int cg_threads(const cg_ctx *c) { return c->o->threads > 1 ? c->o->threads : 1; }
