/* Shared by infer.c and infer_ops.c. */
#ifndef MG_INFER_INTERNAL_H
#define MG_INFER_INTERNAL_H
#include "infer.h"

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
#endif
