/* Localisation: when outputs disagree, find the first node whose output diverges.
 *
 * Two yardsticks:
 *  - torch: the per-module outputs that tools/torch_reference.py recorded with
 *    forward hooks (ref.npz "modules/<path>"). ONNX node names carry the module
 *    scope (`/layer1/layer1.0/conv1/Conv` -> `layer1.0.conv1`); the last node of a
 *    scope produces that module's output, unless it reads a constant the exporter
 *    folded (`onnx::Conv_46`: a BatchNorm folded into the Conv): such modules are
 *    skipped, since comparing them would blame a correct node. The interpreter runs the model and each
 *    such node's output is compared with its module's.
 *  - trace: a directory of per-node outputs written by a generated runner with
 *    `--trace DIR` (DIR/<value name made safe>.npy; values a fused activation
 *    swallowed or views are absent). The interpreter runs the model and every
 *    traced value is compared with it.
 * A value diverges when its relative norm error exceeds the tolerance's
 * max_rel_norm (PARITY_LAYER_REL_NORM when unset), its cosine falls below the
 * tolerance's floor, or NaN/Inf disagree: a norm test, so that elementwise float32
 * noise in large intermediates does not look like the culprit. */
#ifndef MG_LOCALIZE_H
#define MG_LOCALIZE_H
#include "interp.h"
#include "parity.h"

struct wt_source;

enum { LOC_NAME = 512, LOC_MAX_INPUTS = 16 };

typedef struct {
  char name[LOC_NAME];   /* value (or parameter) name */
  char source[64];       /* what it was compared with: "torch module", "graph input", "weights", "trace" */
  char module[LOC_NAME]; /* torch module it corresponds to, when known */
  int known;             /* 0: nothing to compare it with */
  parity_metrics m;
} loc_input;

typedef struct {
  int found;             /* a diverging node was found */
  int compared;          /* comparisons made */
  char node[LOC_NAME], op[64], value[LOC_NAME];
  char module[LOC_NAME]; /* torch module path, when the node's scope names one */
  parity_metrics m;      /* the diverging value against its reference */
  loc_input inputs[LOC_MAX_INPUTS];
  int n_inputs;
  char worst[LOC_NAME];  /* the compared value with the largest relative norm error */
  parity_metrics worst_m;
  /* What accumulates when no single value diverges: the first compared value and
   * its error, and the compared value whose error grew most over what its
   * inputs carried in (growth = its rel norm error / the carried one). */
  char first[LOC_NAME];
  double first_err;
  char grew[LOC_NAME];
  double grew_err, grew_carried, growth;
} loc_result;


/* Against torch module outputs: refs/n_refs are ref.npz's arrays (only those named
 * "modules/..." are used); weights (may be NULL) is the .pth to compare parameters
 * feeding the culprit with. 0 with *r filled (r->found tells), or -1 with
 * diagnostics when the interpreter fails. */
int loc_against_torch(mg_model *m, const mg_array *inputs, int n_inputs, const mg_array *refs, int n_refs,
                      const struct wt_source *weights, const parity_tol *tol, loc_result *r, mg_diags *d);

/* Against a runner's trace directory (see above). */
int loc_against_trace(mg_model *m, const mg_array *inputs, int n_inputs, const char *trace_dir,
                      const parity_tol *tol, loc_result *r, mg_diags *d);
#endif
