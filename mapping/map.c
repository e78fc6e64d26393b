/* The status of a node for a target. */
#include "mapping_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *map_target_name(int t) {
  static const char *const names[] = {"cpu", "ascend", "mindspore"};
  return t >= 0 && t < MAP_TARGET_COUNT ? names[t] : "?";
}

int map_cpu_supports(mg_op op) {
  switch (op) {
#define KERNEL(name) case MG_OP_##name: return 1;
#include "../runtime/kernels.def"
#undef KERNEL
  default:
    return 0;
  }
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  char *s = mg_malloc(strlen(buf) + 1);
  if (s) strcpy(s, buf);
  return s;
}

void node_map_free(node_map *m) {
  mg_free(m->detail);
  m->detail = NULL;
}

static int in_list(const requirement *q, const char *v) {
  for (int i = 0; i < q->n_values; i++)
    if (!strcmp(q->values[i], v)) return 1;
  return 0;
}

static void join(const requirement *q, char *buf, size_t n) {
  buf[0] = 0;
  for (int i = 0; i < q->n_values; i++)
    snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", i ? " " : "", q->values[i]);
}

/* Checks one requirement; on failure sets *status and a reason. */
static int check(const mg_node *n, const requirement *q, map_status *status, char *why, size_t wn) {
  const mg_value *x = n->n_in ? n->in[0] : NULL;
  char allowed[512];
  join(q, allowed, sizeof allowed);
  switch (q->kind) {
  case REQ_ATTR: {
    const mg_attr *a = mg_node_attr(n, q->attr);
    char v[128] = "(absent)";
    if (a && a->kind == MG_ATTR_INT) snprintf(v, sizeof v, "%lld", (long long)a->i);
    else if (a && a->kind == MG_ATTR_STRING) snprintf(v, sizeof v, "%s", a->s);
    else if (a && a->kind == MG_ATTR_FLOAT) snprintf(v, sizeof v, "%g", (double)a->f);
    if (in_list(q, v)) return 1;
    /* "depthwise" admits group == C_in == C_out */
    if (in_list(q, "depthwise") && a && a->kind == MG_ATTR_INT && x && x->shape.rank >= 2 &&
        n->n_out && n->out[0] && n->out[0]->shape.rank >= 2 && x->shape.d[1].v == a->i &&
        n->out[0]->shape.d[1].v == a->i)
      return 1;
    *status = MAP_UNSUPPORTED_ATTR;
    snprintf(why, wn, "attribute %s=%s; the rule allows %s", q->attr, v, allowed);
    return 0;
  }
  case REQ_DTYPE:
    if (x && in_list(q, mg_dtype_name(x->dtype))) return 1;
    *status = MAP_UNSUPPORTED_DTYPE;
    snprintf(why, wn, "dtype %s; the rule allows %s", x ? mg_dtype_name(x->dtype) : "?", allowed);
    return 0;
  case REQ_RANK: {
    if (!x || x->shape.rank < 0) {
      *status = MAP_DYNAMIC_SHAPE;
      snprintf(why, wn, "input rank unknown; the rule needs rank %s", allowed);
      return 0;
    }
    char r[16];
    snprintf(r, sizeof r, "%d", x->shape.rank);
    if (in_list(q, r)) return 1;
    *status = MAP_UNSUPPORTED_ATTR;
    snprintf(why, wn, "input rank %d; the rule allows %s", x->shape.rank, allowed);
    return 0;
  }
  case REQ_STATIC:
    if (x && mg_shape_is_static(&x->shape)) return 1;
    *status = MAP_DYNAMIC_SHAPE;
    snprintf(why, wn, "input shape is not static");
    return 0;
  }
  return 1;
}

/* Whether op has a rule with no requirements that fail for a synthetic node: a
 * decomposition target only needs some rule. */
static const rule *first_rule(const rule_set *rs, mg_op op) {
  for (int i = 0; i < rs->n; i++)
    if (rs->rules[i].op == op && !rs->rules[i].removed) return &rs->rules[i];
  return NULL;
}

static int decomposable(const rule_set *rs, const rule *r, int depth, char *missing, size_t mn) {
  if (depth > 8) return 0;
  for (int i = 0; i < r->n_decompose; i++) {
    const rule *s = first_rule(rs, mg_op_lookup(r->decompose[i]));
    if (!s) {
      snprintf(missing, mn, "%s", r->decompose[i]);
      return 0;
    }
    if (s->n_decompose && !decomposable(rs, s, depth + 1, missing, mn)) return 0;
  }
  return 1;
}

node_map map_node(const mg_node *n, const rule_set *rs) {
  node_map m = {MAP_UNSUPPORTED_OP, NULL};
  if (n->op == MG_OP_UNKNOWN) {
    m.detail = fmt("%s%s%s is not an op migc knows; next step: a custom op (%s)", n->domain,
                   *n->domain ? "::" : "", n->op_type,
                   !rs ? "a C kernel" : !strcmp(rs->target, "ascend") ? "an Ascend C kernel" : "ops.Custom");
    return m;
  }
  if (!rs) {
    if (map_cpu_supports(n->op)) {
      m.status = MAP_SUPPORTED;
      m.detail = fmt("runtime kernel for %s", n->op_type);
    } else {
      m.detail = fmt("no CPU runtime kernel for %s yet", n->op_type);
    }
    return m;
  }
  char why[768] = "";
  map_status fail = MAP_UNSUPPORTED_OP;
  int tried = 0;
  for (int i = 0; i < rs->n; i++) {
    const rule *r = &rs->rules[i];
    if (r->op != n->op || r->removed) continue;
    if (n->opset && (n->opset < r->opset_lo || n->opset > r->opset_hi)) {
      if (!tried) snprintf(why, sizeof why, "no rule for opset %lld", (long long)n->opset);
      continue;
    }
    tried = 1;
    int ok = 1;
    for (int k = 0; k < r->n_reqs && ok; k++) ok = check(n, &r->reqs[k], &fail, why, sizeof why);
    if (!ok) continue;
    if (r->call) {
      m.status = MAP_SUPPORTED;
      m.detail = fmt("%s", r->call);
      return m;
    }
    char missing[128];
    if (!decomposable(rs, r, 0, missing, sizeof missing)) {
      fail = MAP_UNSUPPORTED_OP;
      snprintf(why, sizeof why, "decomposes into %s, which has no rule", missing);
      continue;
    }
    char into[512] = "";
    for (int k = 0; k < r->n_decompose; k++)
      snprintf(into + strlen(into), sizeof into - strlen(into), "%s%s", k ? ", " : "", r->decompose[k]);
    m.status = MAP_DECOMPOSED;
    m.detail = fmt("decomposed into %s", into);
    return m;
  }
  m.status = fail;
  if (!why[0]) snprintf(why, sizeof why, "no %s rule for %s; next step: a custom op (%s)", rs->target,
                        n->op_type, !strcmp(rs->target, "ascend") ? "an Ascend C kernel" : "ops.Custom");
  m.detail = fmt("%s", why);
  return m;
}
