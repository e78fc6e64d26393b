/* The checkpoint check: every checkpoint tensor that the weight map binds to a
 * graph initializer must hold that initializer's values, in MindSpore's layout
 * (Conv1d's unsqueezed axis), and the shape the map promises. */
#ifndef MG_WCHECK_H
#define MG_WCHECK_H
#include "ir.h"
#include "parity.h"

struct wt_source;

typedef struct {
  const char *tag;          /* checkpoint (MindSpore) name */
  const char *init;         /* graph initializer it was bound to */
  int transposed;           /* the initializer is the tensor's transpose (2-D) */
  int rank;                 /* the shape the map promises for the checkpoint tensor */
  int64_t dims[16];
  int cast;                 /* the map records a dtype cast: compare within its rounding */
} wcheck_pair;

typedef enum { WC_OK, WC_MISSING, WC_SHAPE, WC_VALUES, WC_NO_INIT } wcheck_status;

typedef struct {
  wcheck_status status;
  char why[512];
  char node[256];           /* a node that reads the initializer, for the report */
  parity_metrics m;
  int compared;
} wcheck_item;

/* Checks each pair; out[i] gets the verdict of pairs[i]. Returns 0, or -1 when a
 * tensor cannot be read (diagnostics). */
int wcheck_run(const mg_model *m, const struct wt_source *ckpt, const wcheck_pair *pairs, int n, wcheck_item *out,
               mg_diags *d);
#endif
