/* Evaluation of rules' value expressions for one node: the parser, arithmetic,
 * and the identifiers of the schema and the operands (values_named.c has the
 * named translations). The grammar is what rules_check_value accepts:
 *   expr := term (('+' | '-') term)*      term := unary (('*' | '/') unary)*
 *   unary := '-' unary | primary
 *   primary := NUMBER | 'STRING' | '[' expr, ... ']' | '(' expr ')' | ID [ '(' args ')' ]
 * with attr(NAME[, D]) taking its first argument as a name. Arithmetic follows
 * Python: int op int stays int except '/', anything with a float is float. */
#include "values_internal.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_ARGS = 4, MAX_LIST = 64 };

typedef struct {
  const char *id;
  int (*fn)(ev_ctx *c, int argc, const map_value *argv, map_value *out);
} evaluator;

static const evaluator EVALUATORS[] = {
#define VALUE(name, what) {#name, ev_##name},
#include "values.def"
#undef VALUE
};

static const evaluator *find_evaluator(const char *id) {
  for (size_t i = 0; i < sizeof EVALUATORS / sizeof EVALUATORS[0]; i++)
    if (!strcmp(EVALUATORS[i].id, id)) return &EVALUATORS[i];
  return NULL;
}

int map_value_has_evaluator(const char *id) { return find_evaluator(id) != NULL; }

/* ---------- helpers shared with values_named.c ---------- */

int ev_fail(ev_ctx *c, map_status st, const char *fmt, ...) {
  if (!c->failed) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, c->wn, fmt, ap);
    va_end(ap);
    c->failed = 1;
    c->status = st;
  }
  return -1;
}

int ev_oom(ev_ctx *c) { return ev_fail(c, MAP_UNSUPPORTED_OP, "out of memory"); }

void ev_set_int(map_value *out, int64_t i) {
  memset(out, 0, sizeof *out);
  out->kind = MV_INT, out->i = i;
}

void ev_set_bool(map_value *out, int b) {
  memset(out, 0, sizeof *out);
  out->kind = MV_BOOL, out->b = b != 0;
}

/* n elements of es bytes copied into the arena (never NULL for n = 0). */
static void *copy_elems(ev_ctx *c, const void *v, size_t es, int n) {
  void *copy = mg_arena_alloc(c->a, es * (size_t)(n + 1));
  if (copy && n) memcpy(copy, v, es * (size_t)n);
  return copy;
}

int ev_set_ints(ev_ctx *c, map_value *out, const int64_t *v, int n) {
  memset(out, 0, sizeof *out);
  out->kind = MV_INTS, out->n = n;
  out->ints = copy_elems(c, v, sizeof *v, n);
  return out->ints ? 0 : ev_oom(c);
}

int ev_set_floats(ev_ctx *c, map_value *out, const double *v, int n) {
  memset(out, 0, sizeof *out);
  out->kind = MV_FLOATS, out->n = n;
  out->floats = copy_elems(c, v, sizeof *v, n);
  return out->floats ? 0 : ev_oom(c);
}

void ev_set_ref(map_value *out, map_ref_role role, int index, const mg_value *v) {
  memset(out, 0, sizeof *out);
  out->kind = v || role == MAP_REF_ZEROS || role == MAP_REF_SCRATCH ? MV_TENSOR : MV_NONE;
  out->ref.role = role, out->ref.index = index, out->ref.v = v;
  out->ref.dtype = v ? v->dtype : MG_UNDEFINED;
  out->ref.view_rank = -1;
}

int ev_set_view(ev_ctx *c, map_ref *ref, int rank, const int64_t *dims, const int64_t *strides, int64_t offset) {
  int64_t *d = mg_arena_alloc(c->a, sizeof *d * (size_t)(2 * rank + 1));
  if (!d) return ev_oom(c);
  int64_t *s = d + rank, step = 1;
  for (int r = rank - 1; r >= 0; r--) {
    d[r] = dims[r];
    s[r] = strides ? strides[r] : step;
    step *= dims[r] > 0 ? dims[r] : 1;
  }
  ref->view_rank = rank, ref->view_dims = d, ref->view_strides = s, ref->view_offset = offset;
  return 0;
}

int ev_index_arg(ev_ctx *c, const char *id, int argc, const map_value *argv, int k, int *out) {
  if (k >= argc || argv[k].kind != MV_INT || argv[k].i < 0 || argv[k].i > 64)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s needs an index as argument %d", id, k + 1);
  *out = (int)argv[k].i;
  return 0;
}

const mg_value *ev_in(const ev_ctx *c, int i) { return i >= 0 && i < c->n->n_in ? c->n->in[i] : NULL; }
const mg_value *ev_out(const ev_ctx *c, int i) { return i >= 0 && i < c->n->n_out ? c->n->out[i] : NULL; }

const mg_value *ev_need_in(ev_ctx *c, int i, const char *what) {
  const mg_value *v = ev_in(c, i);
  if (!v) ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: input %d is absent", what, i);
  return v;
}

int ev_rank_of(ev_ctx *c, const mg_value *v, const char *what, int *rank) {
  if (!v) return -1;
  if (v->shape.rank < 0) return ev_fail(c, MAP_DYNAMIC_SHAPE, "%s: the rank of '%s' is unknown", what, v->name);
  *rank = v->shape.rank;
  return 0;
}

int ev_static_dims(ev_ctx *c, const mg_value *v, const char *what, int64_t *dims, int *rank) {
  if (ev_rank_of(c, v, what, rank)) return -1;
  for (int r = 0; r < *rank; r++) {
    if (v->shape.d[r].v < 0)
      return ev_fail(c, MAP_DYNAMIC_SHAPE, "%s: dim %d of '%s' is not static", what, r, v->name);
    dims[r] = v->shape.d[r].v;
  }
  return 0;
}

int ev_const_ints(ev_ctx *c, int i, const char *what, int64_t *out, int cap, int *n) {
  const mg_value *v = ev_need_in(c, i, what);
  if (!v) return -1;
  if (!v->data) return ev_fail(c, MAP_DYNAMIC_SHAPE, "%s: input %d ('%s') is not a constant", what, i, v->name);
  int64_t k = mg_value_ints(v, out, cap);
  if (k < 0) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: input %d is not a short integer list", what, i);
  *n = (int)k;
  return 0;
}

int ev_number(const map_value *v, int *is_float, int64_t *i, double *f) {
  *is_float = 0;
  switch (v->kind) {
  case MV_INT: *i = v->i, *f = (double)v->i; return 0;
  case MV_BOOL: *i = v->b, *f = v->b; return 0;
  case MV_FLOAT: *is_float = 1, *f = v->f, *i = (int64_t)v->f; return 0;
  case MV_TENSOR:
    if (v->ref.role != MAP_REF_CONST || v->ref.n_elems != 1) return -1;
    *is_float = v->ref.floats != NULL;
    *f = v->ref.floats ? v->ref.floats[0] : (double)v->ref.ints[0];
    *i = v->ref.ints ? v->ref.ints[0] : (int64_t)v->ref.floats[0];
    return 0;
  default: return -1;
  }
}

/* ---------- the parser ---------- */

static int expr(ev_ctx *c, map_value *out);

static void skip(ev_ctx *c) {
  while (*c->p == ' ') c->p++;
}

static int is_id_start(char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_'; }
static int is_id_char(char ch) { return is_id_start(ch) || (ch >= '0' && ch <= '9'); }

static int syntax(ev_ctx *c, const char *what) {
  return ev_fail(c, MAP_UNSUPPORTED_ATTR, "cannot read '%s' at '%s': %s", c->expr, c->p, what);
}

static int number(ev_ctx *c, map_value *out) {
  const char *s = c->p;
  char *end;
  double f = strtod(s, &end);
  int is_float = 0;
  for (const char *q = s; q < end; q++) is_float |= *q == '.' || *q == 'e' || *q == 'E';
  c->p = end;
  memset(out, 0, sizeof *out);
  if (is_float) out->kind = MV_FLOAT, out->f = f;
  else ev_set_int(out, strtoll(s, NULL, 10));
  return 0;
}

static int string(ev_ctx *c, map_value *out) {
  const char *e = strchr(c->p + 1, '\'');
  if (!e) return syntax(c, "unterminated string");
  memset(out, 0, sizeof *out);
  out->kind = MV_STRING;
  out->s = mg_arena_strndup(c->a, c->p + 1, (size_t)(e - c->p - 1));
  c->p = e + 1;
  return out->s ? 0 : ev_oom(c);
}

/* '[' a, b, ... ']': ints, or floats when any element is a float. */
static int list(ev_ctx *c, map_value *out) {
  int64_t iv[MAX_LIST];
  double fv[MAX_LIST];
  int n = 0, any_float = 0;
  c->p++;
  skip(c);
  while (*c->p != ']') {
    map_value e;
    int fl;
    if (n == MAX_LIST) return syntax(c, "list too long");
    if (expr(c, &e)) return -1;
    if (ev_number(&e, &fl, &iv[n], &fv[n])) return syntax(c, "a list holds numbers");
    any_float |= fl, n++;
    skip(c);
    if (*c->p == ',') c->p++, skip(c);
    else if (*c->p != ']') return syntax(c, "expected ',' or ']'");
  }
  c->p++;
  return any_float ? ev_set_floats(c, out, fv, n) : ev_set_ints(c, out, iv, n);
}

/* The arguments in parentheses after an identifier; attr's first is a name. */
static int call_args(ev_ctx *c, const char *id, map_value *argv, int *argc) {
  *argc = 0;
  c->p++;
  skip(c);
  while (*c->p != ')') {
    if (*argc == MAX_ARGS) return syntax(c, "too many arguments");
    map_value *a = &argv[(*argc)++];
    if (!strcmp(id, "attr") && *argc == 1) {
      const char *s = c->p;
      while (is_id_char(*c->p)) c->p++;
      memset(a, 0, sizeof *a);
      a->kind = MV_STRING;
      a->s = mg_arena_strndup(c->a, s, (size_t)(c->p - s));
      if (!a->s) return ev_oom(c);
    } else if (expr(c, a)) {
      return -1;
    }
    skip(c);
    if (*c->p == ',') c->p++, skip(c);
    else if (*c->p != ')') return syntax(c, "expected ',' or ')'");
  }
  c->p++;
  return 0;
}

static int identifier(ev_ctx *c, map_value *out) {
  char id[64];
  size_t k = 0;
  while (is_id_char(*c->p) && k + 1 < sizeof id) id[k++] = *c->p++;
  id[k] = 0;
  if (c->ascend && !strncmp(id, "ACL_", 4)) {
    memset(out, 0, sizeof *out);
    out->kind = MV_ENUM;
    out->s = mg_arena_strdup(c->a, id);
    return out->s ? 0 : ev_oom(c);
  }
  const evaluator *e = find_evaluator(id);
  if (!e) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "'%s' is not in the value vocabulary (mapping/values.def)", id);
  map_value argv[MAX_ARGS];
  int argc = 0;
  skip(c);
  if (*c->p == '(' && call_args(c, id, argv, &argc)) return -1;
  return e->fn(c, argc, argv, out);
}

static int primary(ev_ctx *c, map_value *out) {
  skip(c);
  char ch = *c->p;
  if (ch == '(') {
    c->p++;
    if (expr(c, out)) return -1;
    skip(c);
    if (*c->p != ')') return syntax(c, "expected ')'");
    c->p++;
    return 0;
  }
  if (ch == '\'') return string(c, out);
  if (ch == '[') return list(c, out);
  if ((ch >= '0' && ch <= '9') || ch == '.') return number(c, out);
  if (is_id_start(ch)) return identifier(c, out);
  return syntax(c, "expected a value");
}

/* a op b for numbers. */
static int arith(ev_ctx *c, char op, const map_value *a, const map_value *b, map_value *out) {
  int fa, fb;
  int64_t ia, ib;
  double xa, xb;
  if (ev_number(a, &fa, &ia, &xa) || ev_number(b, &fb, &ib, &xb))
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "'%c' in '%s' needs numbers on both sides", op, c->expr);
  if (!fa && !fb && op != '/') {
    ev_set_int(out, op == '+' ? ia + ib : op == '-' ? ia - ib : ia * ib);
    return 0;
  }
  if (op == '/' && xb == 0) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "division by zero in '%s'", c->expr);
  memset(out, 0, sizeof *out);
  out->kind = MV_FLOAT;
  out->f = op == '+' ? xa + xb : op == '-' ? xa - xb : op == '*' ? xa * xb : xa / xb;
  return 0;
}

static int unary(ev_ctx *c, map_value *out) {
  skip(c);
  if (*c->p != '-') return primary(c, out);
  c->p++;
  map_value v, zero;
  if (unary(c, &v)) return -1;
  ev_set_int(&zero, 0);
  return arith(c, '-', &zero, &v, out);
}

static int binary(ev_ctx *c, map_value *out, const char *ops, int (*operand)(ev_ctx *, map_value *)) {
  if (operand(c, out)) return -1;
  for (;;) {
    skip(c);
    if (!*c->p || !strchr(ops, *c->p)) return 0;
    char op = *c->p++;
    map_value rhs, lhs = *out;
    if (operand(c, &rhs) || arith(c, op, &lhs, &rhs, out)) return -1;
  }
}

static int term(ev_ctx *c, map_value *out) { return binary(c, out, "*/", unary); }
static int expr(ev_ctx *c, map_value *out) { return binary(c, out, "+-", term); }

int map_eval(const mg_node *n, const char *target, const char *text, mg_arena *arena, map_value *out,
             map_status *status, char *why, size_t wn) {
  ev_ctx c = {.n = n, .ascend = target && !strcmp(target, "ascend"), .a = arena, .expr = text, .p = text,
              .why = why, .wn = wn};
  why[0] = 0;
  memset(out, 0, sizeof *out);
  if (!expr(&c, out)) {
    skip(&c);
    if (!*c.p) return 0;
    syntax(&c, "unexpected text");
  }
  *status = c.status;
  return -1;
}

/* ---------- literals ---------- */

int ev_True(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)c, (void)argc, (void)argv;
  ev_set_bool(out, 1);
  return 0;
}

int ev_False(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)c, (void)argc, (void)argv;
  ev_set_bool(out, 0);
  return 0;
}

int ev_None(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)c, (void)argc, (void)argv;
  memset(out, 0, sizeof *out);
  return 0;
}

/* ---------- the schema ---------- */

/* An ops.def default (the text after '=') of the given kind; 0, or -1 when the
 * kind has no scalar reading. */
static int parse_default(ev_ctx *c, mg_attr_kind kind, const char *text, map_value *out) {
  size_t len = strcspn(text, " ");
  char buf[128];
  snprintf(buf, sizeof buf, "%.*s", (int)(len < sizeof buf ? len : sizeof buf - 1), text);
  memset(out, 0, sizeof *out);
  if (kind == MG_ATTR_INT) ev_set_int(out, strtoll(buf, NULL, 10));
  else if (kind == MG_ATTR_FLOAT) out->kind = MV_FLOAT, out->f = (float)strtod(buf, NULL);
  else if (kind == MG_ATTR_STRING) out->kind = MV_STRING, out->s = mg_arena_strdup(c->a, buf);
  else return -1;
  return out->kind == MV_STRING && !out->s ? ev_oom(c) : 0;
}

static int attr_value(ev_ctx *c, const mg_attr *a, map_value *out) {
  memset(out, 0, sizeof *out);
  switch (a->kind) {
  case MG_ATTR_INT: ev_set_int(out, a->i); return 0;
  case MG_ATTR_TYPE: ev_set_int(out, a->tp_dtype); return 0;
  case MG_ATTR_FLOAT: out->kind = MV_FLOAT, out->f = a->f; return 0;
  case MG_ATTR_STRING: out->kind = MV_STRING, out->s = a->s; return 0;
  case MG_ATTR_INTS: return ev_set_ints(c, out, a->ints, (int)a->n);
  case MG_ATTR_FLOATS: {
    double *f = mg_arena_alloc(c->a, sizeof *f * (a->n + 1));
    if (!f) return ev_oom(c);
    for (size_t i = 0; i < a->n; i++) f[i] = a->floats[i];
    out->kind = MV_FLOATS, out->floats = f, out->n = (int)a->n;
    return 0;
  }
  default: return ev_fail(c, MAP_UNSUPPORTED_ATTR, "attribute %s is not a number, string or list of numbers", a->name);
  }
}

/* attr(NAME[, D]): the attribute; when absent D, else its ops.def default, else None. */
int ev_attr(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  if (argc < 1 || argv[0].kind != MV_STRING) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "attr needs a name");
  const mg_attr *a = mg_node_attr(c->n, argv[0].s);
  if (a) return attr_value(c, a, out);
  if (argc > 1) return *out = argv[1], 0;
  mg_attr_kind kind;
  int has_default;
  const char *dflt;
  if (mg_op_attr_spec(c->n->op, argv[0].s, &kind, &has_default, &dflt) && has_default &&
      !parse_default(c, kind, dflt, out))
    return 0;
  memset(out, 0, sizeof *out);
  return c->failed ? -1 : 0;
}

/* shape(I): every dim of input I; shape(I, D): dim D. Static, or a failure. */
int ev_shape(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0, rank = 0;
  int64_t dims[MG_MAX_RANK];
  char what[32];
  if (ev_index_arg(c, "shape", argc, argv, 0, &i)) return -1;
  snprintf(what, sizeof what, "shape(%d)", i);
  const mg_value *v = ev_need_in(c, i, what);
  if (!v || ev_rank_of(c, v, what, &rank)) return -1;
  if (argc < 2) return ev_static_dims(c, v, what, dims, &rank) ? -1 : ev_set_ints(c, out, dims, rank);
  int64_t d = argv[1].kind == MV_INT ? argv[1].i : -1;
  if (d < 0) d += rank;
  if (d < 0 || d >= rank) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "shape(%d, ...): no such dim of a rank-%d input", i, rank);
  if (v->shape.d[d].v < 0)
    return ev_fail(c, MAP_DYNAMIC_SHAPE, "shape(%d,%lld): dim %lld of '%s' is not static", i, (long long)d,
                   (long long)d, v->name);
  ev_set_int(out, v->shape.d[d].v);
  return 0;
}

int ev_has_input(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "has_input", argc, argv, 0, &i)) return -1;
  ev_set_bool(out, ev_in(c, i) != NULL);
  return 0;
}

static int dtype_of(ev_ctx *c, const mg_value *v, const char *what, map_value *out) {
  if (!v) return -1;
  if (v->dtype == MG_UNDEFINED) return ev_fail(c, MAP_UNSUPPORTED_DTYPE, "%s: the dtype of '%s' is unknown", what, v->name);
  memset(out, 0, sizeof *out);
  out->kind = MV_DTYPE, out->dtype = v->dtype;
  return 0;
}

int ev_dtype(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "dtype", argc, argv, 0, &i)) return -1;
  return dtype_of(c, ev_need_in(c, i, "dtype"), "dtype", out);
}

/* ---------- operands ---------- */

int ev_input(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "input", argc, argv, 0, &i)) return -1;
  ev_set_ref(out, MAP_REF_INPUT, i, ev_in(c, i));
  return 0;
}

int ev_inputs(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  (void)argc, (void)argv;
  map_ref *refs = mg_arena_alloc(c->a, sizeof *refs * (size_t)(c->n->n_in + 1));
  if (!refs) return ev_oom(c);
  memset(out, 0, sizeof *out);
  out->kind = MV_TENSORS, out->refs = refs;
  for (int i = 0; i < c->n->n_in; i++) {
    if (!c->n->in[i]) continue;
    map_value one;
    ev_set_ref(&one, MAP_REF_INPUT, i, c->n->in[i]);
    refs[out->n++] = one.ref;
  }
  return 0;
}

int ev_output(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "output", argc, argv, 0, &i)) return -1;
  ev_set_ref(out, MAP_REF_OUTPUT, i, ev_out(c, i));
  return 0;
}

/* Decodes constant v's elements into ref (up to 4096 of them). */
static int decode_const(ev_ctx *c, const mg_value *v, map_ref *ref) {
  size_t es = mg_dtype_size(v->dtype);
  int64_t n = es ? (int64_t)(v->nbytes / es) : -1;
  ref->n_elems = n;
  if (n < 0 || n > 4096) return ref->n_elems = -1, 0;
  if (mg_dtype_is_float(v->dtype)) {
    double *f = mg_arena_alloc(c->a, sizeof *f * (size_t)(n + 1));
    if (!f) return ev_oom(c);
    for (int64_t k = 0; k < n; k++) f[k] = mg_load_f64(v->dtype, (const char *)v->data + (size_t)k * es);
    ref->floats = f;
    return 0;
  }
  int64_t *iv = mg_arena_alloc(c->a, sizeof *iv * (size_t)(n + 1));
  if (!iv) return ev_oom(c);
  if (mg_value_ints(v, iv, n) != n) return ev_fail(c, MAP_UNSUPPORTED_DTYPE, "constant '%s' is not numeric", v->name);
  ref->ints = iv;
  return 0;
}

/* const(I[, D]): constant input I with its value; D (or None) when omitted. */
int ev_const(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "const", argc, argv, 0, &i)) return -1;
  const mg_value *v = ev_in(c, i);
  if (!v) {
    if (argc > 1) return *out = argv[1], 0;
    memset(out, 0, sizeof *out);
    return 0;
  }
  if (!v->data) return ev_fail(c, MAP_DYNAMIC_SHAPE, "const(%d): input %d ('%s') is not a constant", i, i, v->name);
  ev_set_ref(out, MAP_REF_CONST, i, v);
  return decode_const(c, v, &out->ref);
}

int ev_rank(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0, rank = 0;
  if (ev_index_arg(c, "rank", argc, argv, 0, &i)) return -1;
  const mg_value *v = ev_need_in(c, i, "rank");
  if (!v || ev_rank_of(c, v, "rank", &rank)) return -1;
  ev_set_int(out, rank);
  return 0;
}

/* The output index an out_* identifier names: its argument, or 0 when bare. */
static int out_index(ev_ctx *c, const char *id, int argc, const map_value *argv, const mg_value **v) {
  int i = 0;
  if (argc && ev_index_arg(c, id, argc, argv, 0, &i)) return -1;
  *v = ev_out(c, i);
  if (!*v) return ev_fail(c, MAP_UNSUPPORTED_ATTR, "%s: the node has no output %d", id, i);
  return 0;
}

int ev_out_shape(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  const mg_value *v;
  int64_t dims[MG_MAX_RANK];
  int rank = 0;
  if (out_index(c, "out_shape", argc, argv, &v) || ev_static_dims(c, v, "out_shape", dims, &rank)) return -1;
  return ev_set_ints(c, out, dims, rank);
}

int ev_out_rank(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  const mg_value *v;
  int rank = 0;
  if (out_index(c, "out_rank", argc, argv, &v) || ev_rank_of(c, v, "out_rank", &rank)) return -1;
  ev_set_int(out, rank);
  return 0;
}

int ev_out_dtype(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  const mg_value *v;
  if (out_index(c, "out_dtype", argc, argv, &v)) return -1;
  return dtype_of(c, v, "out_dtype", out);
}

int ev_data(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int i = 0;
  if (ev_index_arg(c, "data", argc, argv, 0, &i)) return -1;
  const mg_value *v = ev_need_in(c, i, "data");
  if (!v) return -1;
  ev_set_ref(out, MAP_REF_DATA, i, v);
  return 0;
}

int ev_bool(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int fl;
  int64_t i;
  double f;
  if (argc != 1 || ev_number(&argv[0], &fl, &i, &f))
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "bool(X) needs a number in '%s'", c->expr);
  ev_set_bool(out, fl ? f != 0 : i != 0);
  return 0;
}

int ev_float(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int fl;
  int64_t i;
  double f;
  if (argc != 1 || ev_number(&argv[0], &fl, &i, &f))
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "float(X) needs a number in '%s'", c->expr);
  memset(out, 0, sizeof *out);
  out->kind = MV_FLOAT, out->f = fl ? f : (double)i;
  return 0;
}

/* int(X): a number (a one-element integer constant: CumSum's axis, TopK's k) as a
 * Python int; a float that is not integral is refused. */
int ev_int(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  int fl;
  int64_t i;
  double f;
  if (argc == 1 && argv[0].kind == MV_INTS && argv[0].n == 1) { /* a 1-D conv's kernel_shape */
    ev_set_int(out, argv[0].ints[0]);
    return 0;
  }
  if (argc != 1 || ev_number(&argv[0], &fl, &i, &f) || (fl && f != (double)(int64_t)f))
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "int(X) needs an integral number in '%s'", c->expr);
  ev_set_int(out, fl ? (int64_t)f : i);
  return 0;
}

/* ints(X): the elements of a constant integer tensor (Tile's repeats) as a tuple. */
int ev_ints(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  if (argc != 1 || argv[0].kind != MV_TENSOR || argv[0].ref.role != MAP_REF_CONST || !argv[0].ref.ints ||
      argv[0].ref.n_elems < 0 || argv[0].ref.n_elems > MG_MAX_RANK)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "ints(X) needs a constant integer tensor in '%s'", c->expr);
  return ev_set_ints(c, out, argv[0].ref.ints, (int)argv[0].ref.n_elems);
}

/* The dtype argument of ms_dtype/acl_dtype: a dtype, or an ONNX dtype id. */
static int dtype_arg(ev_ctx *c, const char *id, int argc, const map_value *argv, mg_dtype *t) {
  if (argc == 1 && argv[0].kind == MV_DTYPE) return *t = argv[0].dtype, 0;
  if (argc == 1 && argv[0].kind == MV_INT && mg_dtype_valid((int)argv[0].i)) return *t = (mg_dtype)argv[0].i, 0;
  return ev_fail(c, MAP_UNSUPPORTED_DTYPE, "%s needs a dtype or an ONNX dtype id in '%s'", id, c->expr);
}

/* A dtype with the target's spelling of it (NULL: the target has none). */
static int spelled(ev_ctx *c, const char *id, mg_dtype t, const char *spelling, map_value *out) {
  if (!spelling) return ev_fail(c, MAP_UNSUPPORTED_DTYPE, "%s: no spelling for dtype %s", id, mg_dtype_name(t));
  memset(out, 0, sizeof *out);
  out->kind = MV_DTYPE, out->dtype = t, out->s = spelling;
  return 0;
}

const char *map_ms_dtype_name(mg_dtype t) {
  switch (t) {
  case MG_F32: return "mindspore.float32";
  case MG_F16: return "mindspore.float16";
  case MG_BF16: return "mindspore.bfloat16";
  case MG_F64: return "mindspore.float64";
  case MG_I8: return "mindspore.int8";
  case MG_I16: return "mindspore.int16";
  case MG_I32: return "mindspore.int32";
  case MG_I64: return "mindspore.int64";
  case MG_U8: return "mindspore.uint8";
  case MG_U16: return "mindspore.uint16";
  case MG_U32: return "mindspore.uint32";
  case MG_U64: return "mindspore.uint64";
  case MG_BOOL: return "mindspore.bool_";
  case MG_C64: return "mindspore.complex64";
  case MG_C128: return "mindspore.complex128";
  default: return NULL;
  }
}

/* aclDataType names (aclnn-api.json enums.aclDataType). */
const char *map_acl_dtype_name(mg_dtype t) {
  switch (t) {
  case MG_F32: return "ACL_FLOAT";
  case MG_F16: return "ACL_FLOAT16";
  case MG_BF16: return "ACL_BF16";
  case MG_F64: return "ACL_DOUBLE";
  case MG_I8: return "ACL_INT8";
  case MG_I16: return "ACL_INT16";
  case MG_I32: return "ACL_INT32";
  case MG_I64: return "ACL_INT64";
  case MG_U8: return "ACL_UINT8";
  case MG_U16: return "ACL_UINT16";
  case MG_U32: return "ACL_UINT32";
  case MG_U64: return "ACL_UINT64";
  case MG_BOOL: return "ACL_BOOL";
  case MG_STRING: return "ACL_STRING";
  case MG_C64: return "ACL_COMPLEX64";
  case MG_C128: return "ACL_COMPLEX128";
  default: return NULL;
  }
}

int ev_ms_dtype(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  mg_dtype t = MG_UNDEFINED;
  return dtype_arg(c, "ms_dtype", argc, argv, &t) ? -1 : spelled(c, "ms_dtype", t, map_ms_dtype_name(t), out);
}

int ev_acl_dtype(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  mg_dtype t = MG_UNDEFINED;
  return dtype_arg(c, "acl_dtype", argc, argv, &t) ? -1 : spelled(c, "acl_dtype", t, map_acl_dtype_name(t), out);
}

int ev_contiguous_strides(ev_ctx *c, int argc, const map_value *argv, map_value *out) {
  if (argc != 1 || argv[0].kind != MV_INTS || argv[0].n > MG_MAX_RANK)
    return ev_fail(c, MAP_UNSUPPORTED_ATTR, "contiguous_strides needs a shape in '%s'", c->expr);
  int64_t s[MG_MAX_RANK], step = 1;
  for (int r = argv[0].n - 1; r >= 0; r--) s[r] = step, step *= argv[0].ints[r] > 0 ? argv[0].ints[r] : 1;
  return ev_set_ints(c, out, s, argv[0].n);
}
