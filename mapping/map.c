/* The status of a node for a target. */
#include "mapping_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *map_target_name(int t) {
  static const char *const names[] = {"cpu", "ascend", "mindspore"};
  return t >= 0 && t < MAP_TARGET_COUNT ? names[t] : "?";
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

/* group == C_in == C_out (a depthwise convolution). */
static int is_depthwise(const mg_node *n, const mg_attr *a) {
  const mg_value *x = n->n_in ? n->in[0] : NULL, *y = n->n_out ? n->out[0] : NULL;
  return a && a->kind == MG_ATTR_INT && a->i > 1 && x && y && x->shape.rank >= 2 && y->shape.rank >= 2 &&
         x->shape.d[1].v == a->i && y->shape.d[1].v == a->i;
}

/* An Einsum equation that is a batched matrix product: "<b>ik,<b>kj-><b>ij", up to
 * swapping the last two labels of an operand or of the result; no ellipsis, no
 * repeated label within an operand. */
static int is_batched_matmul(const char *eq) {
  char a[32], b[32], o[32], compact[128];
  size_t k = 0;
  for (const char *p = eq; p && *p && k + 1 < sizeof compact; p++)
    if (*p != ' ') compact[k++] = *p; /* exporters may space the labels out */
  compact[k] = 0;
  if (!eq || strchr(eq, '.') || sscanf(compact, "%31[a-zA-Z],%31[a-zA-Z]->%31[a-zA-Z]", a, b, o) != 3) return 0;
  size_t la = strlen(a), lb = strlen(b), lo = strlen(o);
  if (la < 2 || la != lb || la != lo) return 0;
  size_t nb = la - 2;
  if (strncmp(a, b, nb) || strncmp(a, o, nb)) return 0;
  for (size_t i = 0; i < la; i++)
    for (size_t k = i + 1; k < la; k++)
      if (a[i] == a[k] || b[i] == b[k] || o[i] == o[k]) return 0;
  char i1 = a[nb], k1 = a[nb + 1];
  char kb = b[nb] == k1 || b[nb + 1] == k1 ? k1 : 0;
  if (!kb) { /* a may be transposed: a = <b>ki */
    k1 = a[nb], i1 = a[nb + 1];
    if (b[nb] != k1 && b[nb + 1] != k1) return 0;
  }
  char j1 = b[nb] == k1 ? b[nb + 1] : b[nb];
  return (o[nb] == i1 && o[nb + 1] == j1) || (o[nb] == j1 && o[nb + 1] == i1);
}

/* Whether attribute a of n satisfies one allowed value: a literal (compared as
 * text; floats exactly) or a named predicate (docs/rules-notes.md). */
static int value_matches(const mg_node *n, const mg_attr *a, const char *name, const char *want,
                         const char *have) {
  if (!strcmp(want, have)) return 1;
  if (a && a->kind == MG_ATTR_FLOAT) {
    char *end;
    float f = strtof(want, &end);
    if (!*end && end != want && f == a->f) return 1;
  }
  if (!strcmp(want, "depthwise")) return is_depthwise(n, a);
  if (!strcmp(want, "grouped")) return a && a->kind == MG_ATTR_INT && a->i > 1 && !is_depthwise(n, a);
  if (!strcmp(want, "zeros") || !strcmp(want, "ones")) {
    if (!a) return 1;
    if (a->kind != MG_ATTR_INTS) return 0;
    for (size_t i = 0; i < a->n; i++)
      if (a->ints[i] != (want[0] == 'o')) return 0;
    return 1;
  }
  if (!strcmp(want, "symmetric")) {
    if (!a) return 1;
    if (a->kind != MG_ATTR_INTS || a->n % 2) return 0;
    for (size_t i = 0; i < a->n / 2; i++)
      if (a->ints[i] != a->ints[i + a->n / 2]) return 0;
    return 1;
  }
  if (!strcmp(want, "default")) {
    mg_attr_kind kind;
    int has_default;
    const char *dflt;
    if (!a) return 1;
    if (!mg_op_attr_spec(n->op, name, &kind, &has_default, &dflt) || !has_default) return 0;
    size_t len = strcspn(dflt, " ");
    return strlen(have) == len && !strncmp(have, dflt, len);
  }
  if (!strcmp(want, "batched_matmul")) return a && a->kind == MG_ATTR_STRING && is_batched_matmul(a->s);
  return 0;
}

/* Whether v is computed from the model's parameters alone: an initializer, a
 * constant, or the output of nodes whose inputs all are (a PRESERVE export's LSTM
 * weights: Slices and a Concat of the .pth's gates), never from a graph input.
 * `depth` bounds the walk; a chain deeper than that counts as run-time. */
static int from_parameters(const mg_value *v, int depth) {
  if (!v) return 1; /* an absent optional input */
  if (v->kind == MG_V_INIT || v->kind == MG_V_CONST || v->data) return 1;
  if (v->kind == MG_V_INPUT || !v->producer || depth <= 0) return 0;
  for (int i = 0; i < v->producer->n_in; i++)
    if (!from_parameters(v->producer->in[i], depth - 1)) return 0;
  return 1;
}

/* Checks one requirement; on failure sets *status and a reason. */
static int check(const mg_node *n, const requirement *q, map_status *status, char *why, size_t wn) {
  const mg_value *x = n->n_in ? n->in[0] : NULL;
  char allowed[512];
  join(q, allowed, sizeof allowed);
  switch (q->kind) {
  case REQ_ATTR: {
    const mg_attr *a = mg_node_attr(n, q->attr);
    char v[256] = "(absent)";
    if (a && a->kind == MG_ATTR_INT) snprintf(v, sizeof v, "%lld", (long long)a->i);
    else if (a && a->kind == MG_ATTR_STRING) snprintf(v, sizeof v, "%s", a->s);
    else if (a && a->kind == MG_ATTR_FLOAT) snprintf(v, sizeof v, "%.9g", (double)a->f);
    else if (a && a->kind == MG_ATTR_INTS) {
      v[0] = 0;
      for (size_t i = 0; i < a->n && strlen(v) + 24 < sizeof v; i++)
        snprintf(v + strlen(v), sizeof v - strlen(v), "%s%lld", i ? "," : "", (long long)a->ints[i]);
    }
    for (int i = 0; i < q->n_values; i++)
      if (value_matches(n, a, q->attr, q->values[i], v)) return 1;
    *status = MAP_UNSUPPORTED_ATTR;
    if (snprintf(why, wn, "attribute %s=%s; the rule allows %s", q->attr, v, allowed) >= (int)wn)
      if (wn > 4) memcpy(why + wn - 4, "...", 4); /* a cut reason says it was cut */
    return 0;
  }
  case REQ_DTYPE:
    if (q->input) x = q->input < n->n_in ? n->in[q->input] : NULL; /* <require input="N" dtype=...> */
    if (x && in_list(q, mg_dtype_name(x->dtype))) return 1;
    *status = MAP_UNSUPPORTED_DTYPE;
    if (q->input) snprintf(why, wn, "input %d dtype %s; the rule allows %s", q->input, x ? mg_dtype_name(x->dtype) : "?", allowed);
    else snprintf(why, wn, "dtype %s; the rule allows %s", x ? mg_dtype_name(x->dtype) : "?", allowed);
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
  case REQ_PRESENT: {
    /* any listed word holds: required, optional, absent, or initializer (a graph
     * initializer: a layer's parameter the checkpoint holds, not a run-time value;
     * constant: its value known at conversion, an initializer or a constant;
     * parameter: computed from initializers alone, from_parameters) */
    const mg_value *v = q->input < n->n_in ? n->in[q->input] : NULL;
    int given = v != NULL, init = v && v->kind == MG_V_INIT;
    for (int i = 0; i < q->n_values; i++) {
      const char *want = q->values[i];
      if (!strcmp(want, "optional") || (!strcmp(want, "required") && given) || (!strcmp(want, "absent") && !given) ||
          (!strcmp(want, "initializer") && init) || (!strcmp(want, "constant") && given && v->data) ||
          (!strcmp(want, "parameter") && given && from_parameters(v, 16)))
        return 1;
    }
    if (!q->n_values) return 1;
    int asks_init = 0;
    for (int i = 0; i < q->n_values; i++)
      asks_init |= !strcmp(q->values[i], "initializer") || !strcmp(q->values[i], "constant") ||
                   !strcmp(q->values[i], "parameter");
    *status = MAP_UNSUPPORTED_ATTR;
    snprintf(why, wn, "input %d is %s; the rule requires it %s", q->input,
             !given ? "absent" : !asks_init ? "given" : init ? "an initializer" : v->data ? "a constant" : "a run-time value", allowed);
    return 0;
  }
  case REQ_OUTPUT: {
    /* a call that returns fewer values than the node has outputs (nn.Dropout's
     * mask, nn.MaxPool2d's indices, nn.LayerNorm's mean) */
    const mg_value *y = q->input < n->n_out ? n->out[q->input] : NULL;
    if (!y || !y->n_uses) return 1;
    *status = MAP_UNSUPPORTED_ATTR;
    snprintf(why, wn, "output %d ('%s') is used; the rule's call does not return it", q->input, y->name);
    return 0;
  }
  case REQ_STATIC:
    if (x && mg_shape_is_static(&x->shape) && !x->shape_declared) return 1;
    *status = MAP_DYNAMIC_SHAPE;
    const mg_node *origin = mg_data_dependent_origin(x);
    if (origin)
      snprintf(why, wn, "input length depends on the data (%s '%s'): --input-shape cannot fix it",
               origin->op_type, origin->name);
    else
      snprintf(why, wn, x && x->shape_declared ? "input shape is only declared: it depends on run-time values"
                                               : "input shape is not static: give --input-shape");
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

const rule *map_match(const mg_node *n, const rule_set *rs, map_status *status, char *detail, size_t dn) {
  *status = MAP_UNSUPPORTED_OP;
  if (n->op == MG_OP_UNKNOWN) {
    snprintf(detail, dn, "%s%s%s is not an op migc knows; next step: a custom op (%s)", n->domain,
             *n->domain ? "::" : "", n->op_type,
             !rs ? "a C kernel" : !strcmp(rs->target, "ascend") ? "an Ascend C kernel" : "ops.Custom");
    return NULL;
  }
  if (!rs) { /* the CPU target has no rules: its emitter decides (coverage_cpu) */
    snprintf(detail, dn, "no rules for this target");
    return NULL;
  }
  char why[768] = "";
  map_status fail = MAP_UNSUPPORTED_OP;
  int tried = 0, best = 0;
  for (int i = 0; i < rs->n; i++) {
    const rule *r = &rs->rules[i];
    if (r->op != n->op || r->removed) continue;
    if (n->opset && (n->opset < r->opset_lo || n->opset > r->opset_hi)) {
      if (!tried) snprintf(why, sizeof why, "no rule for opset %lld", (long long)n->opset);
      continue;
    }
    tried = 1;
    int ok = 1, k = 0;
    char why_here[768];
    map_status fail_here = fail;
    for (; k < r->n_reqs && ok; k++) ok = check(n, &r->reqs[k], &fail_here, why_here, sizeof why_here);
    if (!ok) {
      /* the reason of the rule that came closest (most requirements met) */
      if (k > best) best = k, fail = fail_here, snprintf(why, sizeof why, "%s", why_here);
      continue;
    }
    if (r->call) {
      *status = MAP_SUPPORTED;
      snprintf(detail, dn, "%s", r->call);
      return r;
    }
    char missing[128];
    if (!decomposable(rs, r, 0, missing, sizeof missing)) {
      fail = MAP_UNSUPPORTED_OP;
      best = r->n_reqs + 1;
      snprintf(why, sizeof why, "decomposes into %s, which has no rule", missing);
      continue;
    }
    char into[512] = "";
    for (int k = 0; k < r->n_decompose; k++)
      snprintf(into + strlen(into), sizeof into - strlen(into), "%s%s", k ? ", " : "", r->decompose[k]);
    *status = MAP_DECOMPOSED;
    snprintf(detail, dn, "decomposed into %s", into);
    return r;
  }
  *status = fail;
  if (!why[0] && rs->n_hidden) /* its rules were hidden (rules_hide) */
    for (int i = 0; i < rs->n && !why[0]; i++)
      if (rs->rules[i].op == n->op && rs->rules[i].hidden_by)
        snprintf(why, sizeof why, "no %s rule for %s: %s", rs->target, n->op_type, rs->hidden[rs->rules[i].hidden_by - 1]);
  if (!why[0]) snprintf(why, sizeof why, "no %s rule for %s; next step: a custom op (%s)", rs->target,
                        n->op_type, !strcmp(rs->target, "ascend") ? "an Ascend C kernel" : "ops.Custom");
  snprintf(detail, dn, "%s", why);
  return NULL;
}

node_map map_node(const mg_node *n, const rule_set *rs) {
  node_map m;
  char detail[1024];
  map_match(n, rs, &m.status, detail, sizeof detail);
  m.detail = fmt("%s", detail);
  return m;
}

const char *rule_call(const rule *r) { return r->call; }
const char *rule_kind(const rule *r) { return r->kind; }
const char *rule_file(const rule *r) { return r->file; }
int rule_line(const rule *r) { return r->line; }
int rule_n_decompose(const rule *r) { return r->n_decompose; }
mg_op rule_decompose_op(const rule *r, int i) {
  return i >= 0 && i < r->n_decompose ? mg_op_lookup(r->decompose[i]) : MG_OP_UNKNOWN;
}

/* Evaluates the arguments of p's call; the first that fails sets p's status and
 * detail. 0, or -1 when out of memory. */
static int plan_args(map_plan *p, const mg_node *n, const rule_set *rs, mg_arena *a) {
  const rule *r = p->rule;
  p->args = mg_arena_alloc(a, sizeof *p->args * (size_t)(r->n_args + 1));
  if (!p->args) return -1;
  for (int i = 0; i < r->n_args; i++) {
    map_arg *g = &p->args[p->n_args++];
    g->name = r->args[i].name, g->pos = r->args[i].pos, g->expr = r->args[i].value;
    map_status st;
    char why[512];
    if (!map_eval(n, rs->target, g->expr, a, &g->value, &st, why, sizeof why)) continue;
    if (!strcmp(why, "out of memory")) return -1;
    g->value.kind = MV_NONE;
    if (p->failed_arg < 0) {
      p->failed_arg = i;
      p->status = st;
      char d[768];
      snprintf(d, sizeof d, "argument '%s' = %s of %s: %s", g->name, g->expr, r->call, why);
      p->detail = mg_arena_strdup(a, d);
      if (!p->detail) return -1;
    }
  }
  return 0;
}

map_plan *map_node_plan(const mg_node *n, const rule_set *rs, mg_arena *a) {
  map_plan *p = mg_arena_alloc(a, sizeof *p);
  if (!p) return NULL;
  memset(p, 0, sizeof *p);
  p->failed_arg = -1;
  char detail[1024];
  p->rule = map_match(n, rs, &p->status, detail, sizeof detail);
  p->detail = mg_arena_strdup(a, detail);
  if (!p->detail) return NULL;
  if (p->rule && p->rule->call) return plan_args(p, n, rs, a) ? NULL : p;
  if (p->rule) {
    mg_op *into = mg_arena_alloc(a, sizeof *into * (size_t)(p->rule->n_decompose + 1));
    if (!into) return NULL;
    for (int i = 0; i < p->rule->n_decompose; i++) into[i] = rule_decompose_op(p->rule, i);
    p->into = into, p->n_into = p->rule->n_decompose;
  }
  return p;
}
