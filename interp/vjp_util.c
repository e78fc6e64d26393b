/* The VJP table (expanded from vjp_families.def) and the helpers every VJP uses. */
#include "vjp.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

vjp_fn *vjp_for(mg_op op) {
  switch (op) {
#define OP(name) case MG_OP_##name:
#define FAMILY(fn) return fn;
#include "vjp_families.def"
#undef OP
#undef FAMILY
  default:
    return NULL;
  }
}

/* Records a diagnostic of the given code about a's node; returns -1. */
static int fail_code(const vjp_args *a, mg_diag_code code, const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  mg_diag_add(a->d, MG_SEV_ERROR, code, a->n->name, a->n->op_type, "gradient of %s: %s", a->n->op_type, msg);
  return -1;
}

int vjp_fail(const vjp_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_code(a, MG_D_INVALID, fmt, ap);
  va_end(ap);
  return -1;
}

int vjp_unsupported(const vjp_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fail_code(a, MG_D_UNSUPPORTED_ATTR, fmt, ap);
  va_end(ap);
  return -1;
}

double *vjp_zeros(const vjp_args *a, int64_t k) {
  if (k < 0 || k > ((int64_t)1 << 37)) {
    vjp_fail(a, "intermediate of %lld elements is too large", (long long)k);
    return NULL;
  }
  double *p = mg_calloc((size_t)k + 1, sizeof(double));
  if (!p) mg_error(a->d, OOM, a->n->name, a->n->op_type, "out of memory");
  return p;
}

double *vjp_f64(const vjp_args *a, const mg_array *t) {
  int64_t k = it_numel(t);
  double *p = vjp_zeros(a, k);
  if (!p) return NULL;
  if (t->dtype == MG_F32) { /* the common case, without a dtype switch per element */
    const unsigned char *s = t->data;
    for (int64_t i = 0; i < k; i++) {
      float f;
      memcpy(&f, s + 4 * i, 4);
      p[i] = f;
    }
  } else if (t->dtype == MG_F64) {
    memcpy(p, t->data, sizeof(double) * (size_t)k);
  } else {
    for (int64_t i = 0; i < k; i++) p[i] = it_get_f64(t, i);
  }
  return p;
}

void vjp_unbroadcast_add(double *acc, const mg_array *to, const double *g, const mg_array *from) {
  int64_t strides[MG_ARRAY_MAX_RANK], coord[MG_ARRAY_MAX_RANK] = {0};
  it_bcast_strides(to, from->rank, from->dims, strides);
  int64_t k = it_numel(from), off = 0;
  for (int64_t i = 0; i < k; i++) {
    acc[off] += g[i];
    for (int d = from->rank - 1; d >= 0; d--) {
      coord[d]++;
      off += strides[d];
      if (coord[d] < from->dims[d]) break;
      off -= strides[d] * from->dims[d];
      coord[d] = 0;
    }
  }
}

int vjp_any_gy(const vjp_args *a) {
  for (int i = 0; i < a->n->n_out; i++)
    if (a->gy[i]) return 1;
  return 0;
}
