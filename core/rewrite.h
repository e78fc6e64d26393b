/* The IR rewriter every lowering pass builds on (codegen/common/lower*.c today):
 * it rebuilds a graph's node list in order, letting a pass keep a node, drop it,
 * or put new nodes in its place, and makes fresh values and constants.
 *
 * Usage: mg_rw_begin, then for each original node either mg_rw_keep or any number
 * of mg_rw_node calls, then mg_rw_end, which installs the new list (ids
 * renumbered). Any allocation failure sets w->failed; later calls then do nothing
 * and mg_rw_end returns -1. New values get the dtype and shape the pass gives
 * them; the caller re-runs shape inference afterwards. */
#ifndef MG_REWRITE_H
#define MG_REWRITE_H
#include "ir.h"

typedef struct {
  mg_model *m;
  mg_graph *g;
  mg_node **nodes; /* the new node list */
  int n, cap;
  int failed;
  int changed;     /* nodes added or dropped */
} mg_rw;

void mg_rw_begin(mg_rw *w, mg_model *m, mg_graph *g);
/* Keeps original node n at the current position. */
void mg_rw_keep(mg_rw *w, mg_node *n);
/* Installs the new node list; 0, or -1 when any step failed (out of memory). */
int mg_rw_end(mg_rw *w);

/* A fresh run-time value named after base, with the given dtype and shape. */
mg_value *mg_rw_value(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape);
/* A constant holding data (nbytes bytes, C order) of the given dtype and shape. */
mg_value *mg_rw_const(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, const void *data,
                      size_t nbytes);
/* An initializer (a named parameter, appended to the graph's inits) holding data,
 * as mg_rw_const; for a pass that splits one parameter into the ones it came from. */
mg_value *mg_rw_init(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, const void *data,
                     size_t nbytes);
/* An int64 constant: a scalar when rank is 0, else a 1-D tensor of n elements. */
mg_value *mg_rw_const_i64(mg_rw *w, const char *base, const int64_t *v, int n, int rank);
/* A constant of the given float dtype (f32/f64/f16/bf16) and shape, every element
 * equal to x; NULL (without failing) for other dtypes. */
mg_value *mg_rw_const_fill(mg_rw *w, const char *base, mg_dtype dtype, const mg_shape *shape, double x);
/* Appends a new node of op reading in[0..n_in) and producing out[0..n_out) (each
 * output's producer is set); the node is in the default domain at the model's opset. */
mg_node *mg_rw_node(mg_rw *w, mg_op op, const char *name, int n_in, mg_value *const *in, int n_out,
                    mg_value *const *out);
/* Adds an attribute to a node mg_rw_node made. */
void mg_rw_attr_int(mg_rw *w, mg_node *n, const char *name, int64_t v);
void mg_rw_attr_float(mg_rw *w, mg_node *n, const char *name, float v);
void mg_rw_attr_ints(mg_rw *w, mg_node *n, const char *name, const int64_t *v, int count);

/* Whether two static shapes are equal. */
int mg_rw_same_shape(const mg_shape *a, const mg_shape *b);
#endif
