/* Shared by infer.c, infer_ops.c and infer_ops_tensor.c. */
#ifndef MG_INFER_INTERNAL_H
#define MG_INFER_INTERNAL_H
#include "infer.h"
#include <stdio.h>

typedef struct {
  mg_model *m;
  mg_diags *d;
  int oom;
} infer_ctx;

int infer_graph(infer_ctx *c, mg_graph *g);
int infer_node(infer_ctx *c, mg_node *n);
int infer_own(infer_ctx *c, mg_node *n);
int infer_binary_elems(infer_ctx *c, mg_node *n);
/* Known elements of a small int tensor (from data or partial value); -1 if none. */
int infer_elems(const mg_value *v, mg_dim *out, int cap);
/* All elements known as plain integers; -1 otherwise. */
int infer_const_ints(const mg_value *v, int64_t *out, int cap);
/* Shape dims and partial-value elements use different encodings of "unknown". */
mg_dim infer_dim_to_elem(mg_dim d);
mg_dim infer_elem_to_dim(mg_dim e);
int infer_set_elems(infer_ctx *c, mg_value *v, const mg_dim *e, int n);
void infer_out(mg_node *n, int i, mg_dtype dt, const mg_shape *s);
mg_dim infer_dim_unknown(void);
int infer_dim_eq(mg_dim a, mg_dim b);
int infer_broadcast(const mg_shape *a, const mg_shape *b, mg_shape *out);
int64_t infer_norm_axis(int64_t axis, int rank);
/* The OWN rules of the tensor family (infer_ops_tensor.c), then of the sequence
 * ops (infer_ops.c, which reports an op without a rule). */
int infer_own_tensor(infer_ctx *c, mg_node *n);
int infer_sequences(infer_ctx *c, mg_node *n);
/* The shape given by the small int tensor input `slot` of n: 1 with *s when its
 * elements are known, else 0 with *s of known rank (the input's length) or unknown. */
int infer_shape_from_input(infer_ctx *c, mg_node *n, int slot, mg_shape *s);

/* ---- helpers of the OWN rules (infer_ops.c, infer_ops_tensor.c) ---- */

#define X0 (n->in[0])
#define IN(i) ((i) < n->n_in ? n->in[i] : NULL)
#define UNK infer_dim_unknown()

/* A shape of unknown rank. */
static inline mg_shape unknown_rank(void) { return (mg_shape){.rank = -1}; }

/* Rank known, dims not; a rank beyond MG_MAX_RANK (a hostile shape input) is
 * unknown, and the kernel or a later check rejects it. */
static inline mg_shape rank_unknown_dims(int rank) {
  if (rank < 0 || rank > MG_MAX_RANK) return unknown_rank();
  mg_shape s = {.rank = rank};
  for (int i = 0; i < rank; i++) s.d[i] = UNK;
  return s;
}

/* Records a SHAPE error for n; returns -1. */
static inline int bad(infer_ctx *c, mg_node *n, const char *msg) {
  mg_error(c->d, SHAPE, n->name, n->op_type, "%s", msg);
  return -1;
}

/* a * b, symbolic through a factor 1, unknown on overflow. */
static inline mg_dim dim_mul(mg_dim a, mg_dim b) {
  int64_t r;
  if (a.v >= 0 && b.v >= 0) return mg_mul_i64(a.v, b.v, &r) ? (mg_dim){r, NULL} : UNK;
  if (a.v == 1) return b;
  if (b.v == 1) return a;
  return UNK;
}

/* a / b for b > 0, symbolic through b = 1. */
static inline mg_dim dim_div(mg_dim a, int64_t b) {
  if (a.v >= 0 && b > 0) return (mg_dim){a.v / b, NULL};
  if (b == 1) return a;
  return UNK;
}

/* n's dtype attribute `name`, or dflt when absent or not a dtype. */
static inline mg_dtype attr_dtype(const mg_node *n, const char *name, mg_dtype dflt) {
  int64_t t = mg_attr_int(n, name, dflt);
  return mg_dtype_valid((int)t) ? (mg_dtype)t : dflt;
}

#endif
