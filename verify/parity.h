/* The parity gate: how far a computed tensor is from its reference, and whether
 * that is close enough.
 *
 * Metrics are computed in double over any numeric dtypes (the two arrays must have
 * the same element count; shapes are checked by the caller, which knows whether a
 * reshape is legitimate). Two kinds of tolerance exist because forward outputs and
 * gradients fail differently: a forward output is judged element by element (plus a
 * cosine floor), a gradient only in norm, since gradients sum many products and
 * single elements near zero carry no signal. Defaults are documented in
 * docs/parity.md; a policy file (verify/policy.c) overrides them. */
#ifndef MG_PARITY_H
#define MG_PARITY_H
#include "npy.h"
#include <stdint.h>

/* Error measures of `got` against `ref`. */
typedef struct {
  int64_t n;              /* elements compared */
  double max_abs;         /* max |got - ref| */
  double max_rel;         /* max |got - ref| / max(|ref|, PARITY_REL_FLOOR) */
  double cosine;          /* <got,ref> / (|got| |ref|); 1 when both are zero, 0 when one is */
  double rel_norm;        /* ||got - ref|| / ||ref|| (||got|| when ref is zero: absolute) */
  double ulp_median, ulp_p99, ulp_max; /* distance in float32 units in the last place */
  double frac_over;       /* fraction of elements with |err| > atol + rtol*|ref| */
  int64_t n_over;
  int64_t n_nonfinite;    /* elements where exactly one side is NaN/Inf, or they differ */
  int64_t worst_index;    /* flat index of the max abs error */
} parity_metrics;

/* The floor under |ref| in max_rel: keeps elements at zero from dominating. */
#define PARITY_REL_FLOOR 1e-6

/* A tolerance: forward checks use rtol/atol elementwise and the cosine floor;
 * gradient checks use the cosine floor and rel_norm ceiling; layer-by-layer checks
 * (verify/localize.h) use the forward tolerance's cosine floor and rel_norm ceiling.
 * A negative field means "not checked". */
typedef struct {
  double rtol, atol;
  double min_cosine;
  double max_rel_norm;
  /* The reference's own float32 error (a torch_reference.py folder measures it
   * against a float64 copy): `noise` is max |ref32 - ref64| for a forward output
   * and ||g32 - g64|| / ||g64|| for a gradient, 0 when unknown; `noise_mult`
   * multiples of it are allowed on top of atol + rtol*|ref| (forward) or of the
   * rel-norm ceiling (gradients), since no float32 result can be held closer to
   * torch's than torch is to exact arithmetic. */
  double noise, noise_mult;
  /* verify --precision: the least share of samples (rows of a [samples, classes] output)
   * whose argmax agrees with the reference's; 0 or less: not checked */
  double min_top1;
} parity_tol;

/* Layer-by-layer (verify/localize.h): an intermediate (a torch module's output, a
 * traced node) diverges when its relative norm error exceeds both the floor
 * PARITY_LAYER_REL_NORM (a forward tolerance's max_rel_norm overrides it) and
 * PARITY_LAYER_GROWTH times the error its inputs carried in. Float32 noise grows
 * slowly with depth (vit_b_16's head: 2.3e-6 after 12 blocks, carried in from the
 * encoder) while a wrong op adds error at once (a LayerNorm epsilon of 1e-7 instead
 * of 1e-5: 6e-6 out of inputs at 2e-7). */
#define PARITY_LAYER_REL_NORM 1e-6
#define PARITY_LAYER_GROWTH 8.0

/* The default multiple of the reference's own noise allowed (docs/parity.md):
 * the interpreter sits near float64 (one noise away from torch), float32 code
 * such as the generated C up to about two; 4 leaves room for both while a 1%
 * weight error is still orders of magnitude above it. */
#define PARITY_NOISE_MULT 4.0

/* Documented float32 defaults (docs/parity.md, section "migc verify"). */
parity_tol parity_default_forward(void);
parity_tol parity_default_grad(void);

/* Computes every metric; rtol/atol of tol decide frac_over. Returns 0, or -1 when
 * the element counts differ or a dtype is not numeric (recorded in d, naming
 * `what`). */
int parity_compare(const mg_array *got, const mg_array *ref, const parity_tol *tol, parity_metrics *out,
                   const char *what, mg_diags *d);

/* Whether metrics m meet tol as a forward output (elementwise, no NaN
 * disagreement, cosine) or, with grad set, as a gradient (cosine, rel norm). On
 * failure, why (the first unmet bound) is written to why[n]. */
int parity_passes(const parity_metrics *m, const parity_tol *tol, int grad, char *why, size_t n);

/* Accumulates several tensors into one group metric (a gradient group: every
 * parameter of one torch module). Start with parity_group_init; add each
 * (got, ref) pair; parity_group_finish fills out. Element-wise maxima are maxima
 * over members; cosine and rel_norm are over the concatenation; ULP quantiles are
 * the worst member's. */
typedef struct {
  double dot, gg, rr, dd;
  parity_metrics acc;
  int members;
} parity_group;
void parity_group_init(parity_group *g);
void parity_group_add(parity_group *g, const mg_array *got, const mg_array *ref, const parity_metrics *m);
void parity_group_finish(const parity_group *g, parity_metrics *out);
#endif
