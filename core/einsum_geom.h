/* Einsum's equation and loop nest, shared by shape inference, the reference
 * interpreter and the C emitter, so that one parse decides every label, the
 * output and the loops everywhere.
 *
 * The semantics are ONNX's (numpy's einsum): labels are the letters a-z A-Z
 * (spaces ignored); a label repeated within a term takes a diagonal; '...' stands
 * for broadcast dims, right-aligned across the operands; a label that is not in
 * the output is summed. Without "->" the output is the ellipsis dims, then the
 * labels used exactly once, in ASCII order (A-Z before a-z).
 *
 * Labels are numbered A-Z 0..25, a-z 26..51, and the ellipsis dims 52 + j for j
 * in [0, ell) (ell: the widest ellipsis). The loop nest is the output labels in
 * output order, then the summed labels in label order. */
#ifndef MG_EINSUM_GEOM_H
#define MG_EINSUM_GEOM_H
#include "ir.h"
#include <stdint.h>

enum { MG_EIN_LETTERS = 52, MG_EIN_LABELS = MG_EIN_LETTERS + MG_MAX_RANK, MG_EIN_MAX_OPS = 16 };

typedef enum {
  MG_EIN_OK = 0,
  MG_EIN_TOO_LONG,        /* the equation (without spaces) is over 511 characters */
  MG_EIN_OPERANDS,        /* fewer than 1 or more than MG_EIN_MAX_OPS operands */
  MG_EIN_FEWER_TERMS,     /* the equation has fewer terms than operands */
  MG_EIN_MORE_TERMS,      /* the equation has more terms than operands */
  MG_EIN_TERM_RANK,       /* term `term` does not match its operand's rank (or is malformed) */
  MG_EIN_BAD_OUTPUT,      /* the output term is malformed */
  MG_EIN_OUTPUT_RANK,     /* the output has more than MG_MAX_RANK dims */
  MG_EIN_OUTPUT_UNKNOWN,  /* an output letter that no input term has */
  MG_EIN_OUTPUT_REPEATED, /* an output label given twice */
  MG_EIN_LABEL_SIZES,     /* label `label` has sizes a and b (neither a broadcast 1) */
} mg_ein_status;

/* Where a status came from: the term (operand) index, the label and its sizes. */
typedef struct {
  int term, label;
  int64_t a, b;
} mg_ein_error;

typedef struct {
  int n_ops, ell;
  int rank[MG_EIN_MAX_OPS];                 /* labels per operand: its rank */
  int lab[MG_EIN_MAX_OPS][MG_MAX_RANK];     /* each operand dim's label */
  int count[MG_EIN_LABELS];                 /* how many operand dims carry each label */
  int no, olab[MG_MAX_RANK];                /* the output's labels */
  /* filled by mg_einsum_plan: */
  int na, loop[MG_EIN_LABELS];              /* the loop nest's labels, output ones first */
  int64_t size[MG_EIN_LABELS];              /* each loop's trip count */
  int64_t stride[MG_EIN_MAX_OPS][MG_EIN_LABELS]; /* element stride per operand and loop */
  int64_t out_dims[MG_MAX_RANK];            /* the output's dims: size[0..no) */
} mg_einsum_geom;

/* A label's letter for messages: 'A'..'Z', 'a'..'z', '.' for an ellipsis dim. */
char mg_einsum_letter(int label);

/* Parses equation eq for n operands of ranks rank[0..n): every operand dim's
 * label and the output's labels (no dims needed). */
mg_ein_status mg_einsum_labels(const char *eq, int n, const int *rank, mg_einsum_geom *p, mg_ein_error *err);

/* Parses as mg_einsum_labels, then plans the loop nest for operands of dims
 * dims[k][0..rank[k]): a label's size is that of its dims (a broadcast 1 of an
 * ellipsis dim yielding to the other size), the strides are the operands' C-order
 * element strides per loop (0 where a dim has size 1, so it broadcasts). */
mg_ein_status mg_einsum_plan(const char *eq, int n, const int *rank, const int64_t *const *dims,
                             mg_einsum_geom *p, mg_ein_error *err);
#endif
