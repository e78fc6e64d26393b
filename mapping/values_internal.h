/* Shared by the evaluators of value expressions (values.c: the parser and the
 * schema's identifiers; values_named.c: the named translations). */
#ifndef MG_VALUES_INTERNAL_H
#define MG_VALUES_INTERNAL_H
#include "mapping_internal.h"

/* One evaluation: the node, the target, where results live, the parse position,
 * and the first failure (later ones keep it). */
typedef struct {
  const mg_node *n;
  int ascend;           /* the target is ascend (aclnn), else mindspore */
  mg_arena *a;
  const char *expr, *p;
  int failed;
  map_status status;
  char *why;
  size_t wn;
} ev_ctx;

/* The evaluator of each identifier of values.def: argv[0..argc) are the
 * evaluated arguments in parentheses (none when it was written bare). 0 with *out
 * set, or -1 after ev_fail. The table is generated from values.def, so an
 * identifier without an evaluator does not link. */
#define VALUE(name, what) int ev_##name(ev_ctx *c, int argc, const map_value *argv, map_value *out);
#include "values.def"
#undef VALUE

/* Records the first failure (status and reason) and returns -1. */
int ev_fail(ev_ctx *c, map_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ev_oom(ev_ctx *c);

/* Result constructors: 0, or -1 when out of memory. */
void ev_set_int(map_value *out, int64_t i);
void ev_set_bool(map_value *out, int b);
int ev_set_ints(ev_ctx *c, map_value *out, const int64_t *v, int n);
int ev_set_floats(ev_ctx *c, map_value *out, const double *v, int n);
/* out := a reference to input or output index of the node (MV_NONE when omitted). */
void ev_set_ref(map_value *out, map_ref_role role, int index, const mg_value *v);
/* Copies dims/strides (strides may be NULL: C order) into a view of ref. */
int ev_set_view(ev_ctx *c, map_ref *ref, int rank, const int64_t *dims, const int64_t *strides, int64_t offset);

/* argv[k] as an index (an integer literal); fails naming id otherwise. */
int ev_index_arg(ev_ctx *c, const char *id, int argc, const map_value *argv, int k, int *out);
/* Input/output i of the node, NULL when omitted. */
const mg_value *ev_in(const ev_ctx *c, int i);
const mg_value *ev_out(const ev_ctx *c, int i);
/* Input i given, or a failure naming what needs it. */
const mg_value *ev_need_in(ev_ctx *c, int i, const char *what);
/* v's rank (known) or a failure; v's shape with every dim static or a failure. */
int ev_rank_of(ev_ctx *c, const mg_value *v, const char *what, int *rank);
int ev_static_dims(ev_ctx *c, const mg_value *v, const char *what, int64_t *dims, int *rank);
/* The elements of constant input i as ints (at most cap); a failure when it is
 * not a constant (dynamic-shape: its value is only known at run time). */
int ev_const_ints(ev_ctx *c, int i, const char *what, int64_t *out, int cap, int *n);
/* A number (int, bool, float, a one-element constant): 0, or -1 when v is none. */
int ev_number(const map_value *v, int *is_float, int64_t *i, double *f);
#endif
