/* rules/mindspore.xml and rules/aclnn.xml against the fact tables.
 *
 * The rules are data that emitters trust, so every name in them is checked here
 * against ../shared/mindspore-api.json and ../shared/aclnn-api.json (the facts, read
 * from public sources) and against core/ops.def, and the translations that people get
 * wrong are asserted one by one. Paths: MIGC_RULES_DIR (rules/) and MIGC_SHARED
 * (../shared); both must be set. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "dtype.h"
#include "ir.h"
#include "mapping.h"

static xmlDocPtr g_ms, g_acl;
static json_t *g_ms_api, *g_acl_api;

/* ---------- helpers ---------- */

static int is_el(const xmlNode *n, const char *name) {
  return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* Attribute text, or NULL. The text of a plain attribute is read in place; one
 * that libxml2 split into several nodes (entities) is copied into a pool freed at
 * teardown. */
enum { POOL_MAX = 4096 };
static xmlChar *g_pool[POOL_MAX];
static int g_npool;
static const char *prop(const xmlNode *n, const char *name) {
  xmlAttrPtr a = xmlHasProp((xmlNodePtr)n, (const xmlChar *)name);
  if (!a || a->type != XML_ATTRIBUTE_NODE) return NULL;
  if (!a->children) return "";
  if (a->children->type == XML_TEXT_NODE && !a->children->next)
    return (const char *)a->children->content;
  assert_true(g_npool < POOL_MAX);
  xmlChar *v = xmlNodeListGetString(n->doc, a->children, 1);
  g_pool[g_npool++] = v;
  return v ? (const char *)v : "";
}

static xmlNode *root(xmlDocPtr d) { return xmlDocGetRootElement(d); }

#define FOR_RULES(doc, r) \
  for (xmlNode *r = root(doc)->children; r; r = r->next) \
    if (is_el(r, "rule"))
#define FOR_CHILD(parent, c, name) \
  for (xmlNode *c = (parent)->children; c; c = c->next) \
    if (is_el(c, name))

static xmlNode *first_child(const xmlNode *p, const char *name) {
  for (xmlNode *c = p->children; c; c = c->next)
    if (is_el(c, name)) return c;
  return NULL;
}

static const char *arg_value(const xmlNode *call, const char *name) {
  FOR_CHILD(call, a, "arg") {
    const char *n = prop(a, "name");
    if (n && !strcmp(n, name)) return prop(a, "value");
  }
  return NULL;
}

/* The value of the require whose `attr` is `attr`, or NULL. */
static const char *require_values(const xmlNode *rule, const char *attr) {
  FOR_CHILD(rule, q, "require") {
    const char *a = prop(q, "attr");
    if (a && !strcmp(a, attr)) return prop(q, "values");
  }
  return NULL;
}

static int has_word(const char *list, const char *word) {
  if (!list) return 0;
  size_t n = strlen(word);
  for (const char *p = list; *p;) {
    while (*p == ' ') p++;
    const char *e = p;
    while (*e && *e != ' ') e++;
    if ((size_t)(e - p) == n && !strncmp(p, word, n)) return 1;
    p = e;
  }
  return 0;
}

static char *read_env_path(const char *env, const char *leaf) {
  const char *dir = getenv(env);
  if (!dir || !*dir) return NULL;
  size_t n = strlen(dir) + strlen(leaf) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, leaf);
  return p;
}

static json_t *ms_api(const char *api) {
  size_t i;
  json_t *e;
  json_array_foreach(g_ms_api, i, e) {
    const char *a = json_string_value(json_object_get(e, "api"));
    if (a && !strcmp(a, api)) return e;
  }
  return NULL;
}

static json_t *acl_fn(const char *fn) {
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(g_acl_api, "functions"), i, e) {
    const char *a = json_string_value(json_object_get(e, "name"));
    if (a && !strcmp(a, fn)) return e;
  }
  return NULL;
}

/* The parameters the rule's args describe: those of fn's GetWorkspaceSize phase
 * without the trailing workspaceSize/executor, or fn's own for a plain call. */
static json_t *acl_params(const char *fn, size_t *n) {
  char gws[256];
  snprintf(gws, sizeof gws, "%sGetWorkspaceSize", fn);
  json_t *e = acl_fn(gws);
  if (e) {
    json_t *p = json_object_get(e, "params");
    size_t k = json_array_size(p);
    assert_true(k >= 2);
    assert_string_equal(json_string_value(json_array_get(json_array_get(p, k - 2), 1)),
                        "workspaceSize");
    const char *ex = json_string_value(json_array_get(json_array_get(p, k - 1), 1));
    assert_true(!strcmp(ex, "executor") || !strcmp(ex, "opExecutor"));
    *n = k - 2;
    return p;
  }
  e = acl_fn(fn);
  assert_non_null(e);
  *n = json_array_size(json_object_get(e, "params"));
  return json_object_get(e, "params");
}

/* Matches a fact-table parameter template such as 'weight_ih_l{k}[_reverse]':
 * {x} is one or more digits, [...] an optional literal. */
static int tmpl_match(const char *t, const char *s) {
  if (!*t) return !*s;
  if (*t == '{') {
    const char *e = strchr(t, '}');
    if (!e || !isdigit((unsigned char)*s)) return 0;
    while (isdigit((unsigned char)*s)) {
      s++;
      if (tmpl_match(e + 1, s)) return 1;
    }
    return 0;
  }
  if (*t == '[') {
    const char *e = strchr(t, ']');
    if (!e) return 0;
    size_t n = (size_t)(e - t - 1);
    if (!strncmp(t + 1, s, n) && tmpl_match(e + 1, s + n)) return 1;
    return tmpl_match(e + 1, s);
  }
  return *t == *s && tmpl_match(t + 1, s + 1);
}

/* ---------- value expressions ---------- */

/* The vocabulary is the loader's own (mapping/values.def): one table. */
static int in_vocab(const char *id) { return rules_value_known(id); }

static int acl_enum_known(const char *id) {
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(g_acl_api, "enums"), k, v) {
    if (json_object_get(json_object_get(v, "values"), id)) return 1;
  }
  return 0;
}

/* Checks one value expression: balanced quotes and parentheses, every identifier in
 * the vocabulary (or an aclnn enum name on the ascend side), and every attr(NAME)
 * a canonical attribute of `op`. */
static void check_value(const char *v, mg_op op, int ascend, const char *where) {
  if (!v || !*v) fail_msg("%s: empty value", where);
  int depth = 0;
  for (const char *p = v; *p;) {
    if (*p == '\'') {
      const char *e = strchr(p + 1, '\'');
      if (!e) fail_msg("%s: unterminated string in '%s'", where, v);
      p = e + 1;
    } else if (isalpha((unsigned char)*p) || *p == '_' ) {
      char id[64];
      size_t n = 0;
      while ((isalnum((unsigned char)*p) || *p == '_') && n < sizeof id - 1) id[n++] = *p++;
      id[n] = 0;
      int ok = in_vocab(id) || (ascend && !strncmp(id, "ACL_", 4) && acl_enum_known(id));
      if (!ok) fail_msg("%s: unknown identifier '%s' in '%s'", where, id, v);
      if (!strcmp(id, "attr") && *p == '(') {
        const char *s = p + 1;
        n = 0;
        while ((isalnum((unsigned char)*s) || *s == '_') && n < sizeof id - 1) id[n++] = *s++;
        id[n] = 0;
        mg_attr_kind kind;
        int hd;
        const char *dt;
        if (!mg_op_attr_spec(op, id, &kind, &hd, &dt))
          fail_msg("%s: attr(%s) is not an attribute of %s", where, id, mg_op_name(op));
        depth++; /* the '(' skipped with the name */
        p = s;
      }
    } else if (isdigit((unsigned char)*p)) {
      while (isalnum((unsigned char)*p) || *p == '.') p++;
    } else {
      if (*p == '(') depth++;
      if (*p == ')' && --depth < 0) fail_msg("%s: unbalanced ')' in '%s'", where, v);
      p++;
    }
  }
  if (depth) fail_msg("%s: unbalanced '(' in '%s'", where, v);
}

/* ---------- setup ---------- */

static int setup(void **state) {
  (void)state;
  char *ms = read_env_path("MIGC_RULES_DIR", "mindspore.xml");
  char *acl = read_env_path("MIGC_RULES_DIR", "aclnn.xml");
  char *msj = read_env_path("MIGC_SHARED", "mindspore-api.json");
  char *aclj = read_env_path("MIGC_SHARED", "aclnn-api.json");
  int rc = 0;
  if (!ms || !msj) {
    print_error("MIGC_RULES_DIR and MIGC_SHARED must be set\n");
    rc = -1;
    goto out;
  }
  g_ms = xmlReadFile(ms, NULL, XML_PARSE_NONET);
  g_acl = xmlReadFile(acl, NULL, XML_PARSE_NONET);
  json_error_t err;
  g_ms_api = json_load_file(msj, 0, &err);
  if (!g_ms_api) print_error("%s: %s (line %d)\n", msj, err.text, err.line);
  g_acl_api = json_load_file(aclj, 0, &err);
  if (!g_acl_api) print_error("%s: %s (line %d)\n", aclj, err.text, err.line);
  if (!g_ms) print_error("%s: not well-formed XML\n", ms);
  if (!g_acl) print_error("%s: not well-formed XML\n", acl);
  if (!g_ms || !g_acl || !json_is_array(g_ms_api) ||
      !json_is_array(json_object_get(g_acl_api, "functions")))
    rc = -1;
out:
  free(ms), free(acl), free(msj), free(aclj);
  return rc;
}

static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < g_npool; i++) xmlFree(g_pool[i]);
  if (g_ms) xmlFreeDoc(g_ms);
  if (g_acl) xmlFreeDoc(g_acl);
  json_decref(g_ms_api);
  json_decref(g_acl_api);
  xmlCleanupParser();
  return 0;
}

/* ---------- structure ---------- */

static void check_structure(xmlDocPtr d, const char *target) {
  xmlNode *r = root(d);
  assert_string_equal((const char *)r->name, "rules");
  assert_string_equal(prop(r, "target"), target);
  assert_string_equal(prop(r, "version"), "1");
  int rules = 0;
  for (xmlNode *c = r->children; c; c = c->next) {
    if (c->type != XML_ELEMENT_NODE) continue;
    assert_true(is_el(c, "rule"));
    rules++;
    const char *op = prop(c, "op");
    assert_non_null(op);
    if (mg_op_lookup(op) == MG_OP_UNKNOWN) fail_msg("%s: op '%s' is not in ops.def", target, op);
    const char *os = prop(c, "opset");
    if (os) { /* "A-" or "A-B", A >= 1, B >= A */
      char *e;
      long a = strtol(os, &e, 10);
      if (a < 1 || *e != '-') fail_msg("%s %s: bad opset '%s'", target, op, os);
      if (e[1]) {
        char *e2;
        long b = strtol(e + 1, &e2, 10);
        if (*e2 || b < a) fail_msg("%s %s: bad opset '%s'", target, op, os);
      }
    }
    int calls = 0, decs = 0;
    for (xmlNode *k = c->children; k; k = k->next) {
      if (k->type != XML_ELEMENT_NODE) continue;
      if (is_el(k, "call")) calls++;
      else if (is_el(k, "decompose")) decs++;
      else if (!is_el(k, "require")) fail_msg("%s %s: unexpected <%s>", target, op, k->name);
    }
    if (calls + decs != 1) fail_msg("%s %s: a rule needs exactly one call or decompose", target, op);
  }
  assert_true(rules > 0);
}

static void test_structure(void **state) {
  (void)state;
  check_structure(g_ms, "mindspore");
  check_structure(g_acl, "ascend");
}

/* Named predicates allowed in require values besides literal values. */
static int is_predicate(const char *w) {
  static const char *const P[] = {"depthwise", "grouped", "zeros", "ones", "symmetric",
                                  "default", "batched_matmul", NULL};
  for (int i = 0; P[i]; i++)
    if (!strcmp(P[i], w)) return 1;
  return 0;
}

static int is_number(const char *w) {
  char *e;
  strtod(w, &e);
  return e != w && !*e;
}

static void check_requires(xmlDocPtr d, const char *target) {
  FOR_RULES(d, r) {
    mg_op op = mg_op_lookup(prop(r, "op"));
    const mg_op_info *info = mg_op_get(op);
    FOR_CHILD(r, q, "require") {
      const char *attr = prop(q, "attr"), *dt = prop(q, "dtype"), *rank = prop(q, "rank");
      const char *st = prop(q, "static"), *in = prop(q, "input"), *outp = prop(q, "output");
      int kinds = !!attr + !!dt + !!rank + !!st + !!in + !!outp - (in && dt); /* input+dtype: that input's */
      if (kinds != 1) fail_msg("%s %s: a require states one condition", target, info->name);
      if (attr) {
        mg_attr_kind kind;
        int hd;
        const char *def;
        if (!mg_op_attr_spec(op, attr, &kind, &hd, &def))
          fail_msg("%s %s: '%s' is not a canonical attribute", target, info->name, attr);
        const char *vals = prop(q, "values");
        assert_non_null(vals);
        char buf[512];
        snprintf(buf, sizeof buf, "%s", vals);
        int n = 0;
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "), n++) {
          int ok = is_predicate(w);
          if (kind == MG_ATTR_STRING) ok = 1;
          if ((kind == MG_ATTR_INT || kind == MG_ATTR_FLOAT || kind == MG_ATTR_TENSOR) &&
              is_number(w))
            ok = 1;
          if (!ok) fail_msg("%s %s: '%s' is no value of %s", target, info->name, w, attr);
        }
        assert_true(n > 0);
      }
      if (dt) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", dt);
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "))
          if (mg_dtype_parse(w) == MG_UNDEFINED || strcmp(mg_dtype_name(mg_dtype_parse(w)), w))
            fail_msg("%s %s: '%s' is not a canonical dtype name", target, info->name, w);
      }
      if (rank) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", rank);
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " ")) {
          long k = strtol(w, NULL, 10);
          if (!is_number(w) || k < 0 || k > MG_MAX_RANK) fail_msg("%s %s: rank '%s'", target, info->name, w);
        }
      }
      if (st) assert_true(!strcmp(st, "true") || !strcmp(st, "false"));
      if (in) {
        long k = strtol(in, NULL, 10);
        assert_true(k >= 0 && (info->max_in < 0 || k < info->max_in));
        const char *pr = prop(q, "present");
        if (dt && !pr) continue; /* <require input="N" dtype=...>: checked above */
        assert_non_null(pr);
        char buf[256];
        snprintf(buf, sizeof buf, "%s", pr);
        for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "))
          if (strcmp(w, "optional") && strcmp(w, "required") && strcmp(w, "absent") && strcmp(w, "initializer") &&
              strcmp(w, "constant") && strcmp(w, "parameter"))
            fail_msg("%s %s: present '%s'", target, info->name, w);
      }
      if (outp) {
        long k = strtol(outp, NULL, 10);
        assert_true(k >= 0 && (info->max_out < 0 || k < info->max_out));
        assert_string_equal(prop(q, "present"), "unused");
      }
    }
  }
}

static void test_requires(void **state) {
  (void)state;
  check_requires(g_ms, "mindspore");
  check_requires(g_acl, "ascend");
}

/* ---------- MindSpore calls ---------- */

static int ms_sig_has(json_t *api, const char *name) {
  size_t i;
  json_t *p;
  json_array_foreach(json_object_get(api, "signature"), i, p) {
    if (!strcmp(json_string_value(json_array_get(p, 0)), name)) return 1;
  }
  return 0;
}

static int ms_param_has(json_t *api, const char *name) {
  const char *k;
  json_t *v;
  json_object_foreach(json_object_get(api, "parameters"), k, v) {
    (void)v;
    if (tmpl_match(k, name)) return 1;
  }
  return 0;
}

static void test_mindspore_calls(void **state) {
  (void)state;
  int calls = 0;
  FOR_RULES(g_ms, r) {
    const char *op = prop(r, "op");
    xmlNode *c = first_child(r, "call");
    if (!c) continue;
    calls++;
    assert_null(prop(c, "fn"));
    const char *api = prop(c, "api"), *kind = prop(c, "kind");
    assert_non_null(api);
    json_t *e = ms_api(api);
    if (!e) fail_msg("%s: %s is not in mindspore-api.json", op, api);
    if (json_object_get(e, "unverified")) fail_msg("%s: %s is marked unverified", op, api);
    int is_cell = !strncmp(api, "mindspore.nn.", 13);
    assert_non_null(kind);
    if (strcmp(kind, is_cell ? "cell" : "function"))
      fail_msg("%s: %s must be kind=\"%s\"", op, api, is_cell ? "cell" : "function");
    /* every arg is a signature parameter (or, for a Cell, one of its learnable
     * parameters: a weight binding); no arg twice */
    FOR_CHILD(c, a, "arg") {
      const char *n = prop(a, "name");
      assert_non_null(n);
      assert_null(prop(a, "pos"));
      if (!ms_sig_has(e, n) && !(is_cell && ms_param_has(e, n)))
        fail_msg("%s: '%s' is not a parameter of %s", op, n, api);
      int seen = 0;
      FOR_CHILD(c, b, "arg") {
        const char *bn = prop(b, "name");
        seen += bn && !strcmp(bn, n);
      }
      if (seen != 1) fail_msg("%s: %s '%s' given %d times", op, api, n, seen);
      char where[256];
      snprintf(where, sizeof where, "mindspore %s %s(%s)", op, api, n);
      check_value(prop(a, "value"), mg_op_lookup(op), 0, where);
    }
    /* every argument of the signature is given explicitly */
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(e, "signature"), i, p) {
      const char *n = json_string_value(json_array_get(p, 0));
      const char *def = json_string_value(json_array_get(p, 1));
      if (def && (!strcmp(def, "<kwonly-marker>") || !strcmp(def, "<varkw>"))) continue;
      if (!strcmp(n, "*args")) continue;
      if (!arg_value(c, n)) fail_msg("%s: %s argument '%s' not given explicitly", op, api, n);
    }
  }
  assert_true(calls > 0);
}

/* ---------- aclnn calls ---------- */

static void test_aclnn_calls(void **state) {
  (void)state;
  int calls = 0;
  FOR_RULES(g_acl, r) {
    const char *op = prop(r, "op");
    xmlNode *c = first_child(r, "call");
    if (!c) continue;
    calls++;
    assert_null(prop(c, "api"));
    const char *fn = prop(c, "fn");
    assert_non_null(fn);
    json_t *e = acl_fn(fn);
    if (!e) fail_msg("%s: %s is not in aclnn-api.json", op, fn);
    char gws[256];
    snprintf(gws, sizeof gws, "%sGetWorkspaceSize", fn);
    json_t *g = acl_fn(gws);
    if (json_is_true(json_object_get(e, "semantics_unverified")) ||
        (g && json_is_true(json_object_get(g, "semantics_unverified"))))
      fail_msg("%s: %s has unverified semantics in the fact table", op, fn);
    size_t np;
    json_t *params = acl_params(fn, &np);
    unsigned seen[64] = {0};
    assert_true(np < 64);
    FOR_CHILD(c, a, "arg") {
      const char *n = prop(a, "name"), *ps = prop(a, "pos");
      assert_non_null(n);
      if (!ps) fail_msg("%s: %s arg '%s' has no pos", op, fn, n);
      char *end;
      long pos = strtol(ps, &end, 10);
      if (*end || pos < 0 || (size_t)pos >= np) fail_msg("%s: %s has no parameter %s", op, fn, ps);
      const char *want = json_string_value(json_array_get(json_array_get(params, (size_t)pos), 1));
      if (strcmp(n, want)) fail_msg("%s: %s parameter %ld is '%s', not '%s'", op, fn, pos, want, n);
      seen[pos]++;
      char where[256];
      snprintf(where, sizeof where, "ascend %s %s(%s)", op, fn, n);
      check_value(prop(a, "value"), mg_op_lookup(op), 1, where);
    }
    for (size_t k = 0; k < np; k++) {
      const char *want = json_string_value(json_array_get(json_array_get(params, k), 1));
      if (seen[k] != 1)
        fail_msg("%s: %s parameter %zu (%s) given %u times", op, fn, k, want, seen[k]);
    }
  }
  assert_true(calls > 0);
}

/* ---------- decompositions and duplicates ---------- */

static int has_rule(xmlDocPtr d, const char *op) {
  FOR_RULES(d, r) if (!strcmp(prop(r, "op"), op)) return 1;
  return 0;
}

static void check_decompose(xmlDocPtr d, const char *target) {
  FOR_RULES(d, r) {
    xmlNode *dc = first_child(r, "decompose");
    if (!dc) continue;
    const char *op = prop(r, "op"), *into = prop(dc, "into");
    assert_non_null(into);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", into);
    int n = 0;
    for (char *w = strtok(buf, " "); w; w = strtok(NULL, " "), n++) {
      if (mg_op_lookup(w) == MG_OP_UNKNOWN) fail_msg("%s %s: '%s' is not in ops.def", target, op, w);
      if (!has_rule(d, w)) fail_msg("%s %s: decomposes into %s, which has no rule", target, op, w);
    }
    assert_true(n > 0);
    if (!map_lower_has_recipe(mg_op_lookup(op), into))
      fail_msg("%s %s: no recipe in mapping/lower.c decomposes it into '%s'", target, op, into);
  }
}

static void test_decompositions(void **state) {
  (void)state;
  check_decompose(g_ms, "mindspore");
  check_decompose(g_acl, "ascend");
}

/* A rule's key: op, opset range and its requires, in document order. */
static void rule_key(xmlNode *r, char *buf, size_t cap) {
  const char *os = prop(r, "opset");
  size_t n = (size_t)snprintf(buf, cap, "%s@%s", prop(r, "op"), os ? os : "1-");
  FOR_CHILD(r, q, "require") {
    for (xmlAttr *a = q->properties; a && n < cap; a = a->next) {
      xmlChar *v = xmlNodeListGetString(q->doc, a->children, 1);
      n += (size_t)snprintf(buf + n, cap - n, "|%s=%s", a->name, v ? (const char *)v : "");
      xmlFree(v);
    }
  }
}

static void check_duplicates(xmlDocPtr d, const char *target) {
  FOR_RULES(d, r) {
    char k1[2048];
    rule_key(r, k1, sizeof k1);
    for (xmlNode *s = r->next; s; s = s->next) {
      if (!is_el(s, "rule")) continue;
      char k2[2048];
      rule_key(s, k2, sizeof k2);
      if (!strcmp(k1, k2)) fail_msg("%s: duplicate rule %s", target, k1);
    }
  }
}

static void test_no_duplicates(void **state) {
  (void)state;
  check_duplicates(g_ms, "mindspore");
  check_duplicates(g_acl, "ascend");
}

/* ---------- coverage of the torchvision op set ---------- */

/* The op types of the 18 torchvision models exported at opset 17 (default and
 * PRESERVE), Constant aside (docs/rules-notes.md lists them with their models). */
static const char *const TV_OPS[] = {
    "Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "ConstantOfShape",
    "Conv", "Div", "Dropout", "Einsum", "Equal", "Erf", "Expand", "Flatten", "Gather", "Gemm",
    "GlobalAveragePool", "HardSigmoid", "HardSwish", "Identity", "LayerNormalization",
    "MatMul", "MaxPool", "Mod", "Mul", "Not", "Pad", "Pow", "Range", "ReduceMean", "Relu",
    "Reshape", "Resize", "ScatterND", "Shape", "Sigmoid", "Slice", "Softmax", "Sub", "Tanh",
    "Transpose", "Unsqueeze", "Where", NULL};
/* The gaps recorded in docs/rules-notes.md: no fact-table API and no decomposition. */
static const char *const MS_GAPS[] = {"Shape", "ScatterND", NULL};
static const char *const ACL_GAPS[] = {"Mod", "Range", "Shape", "ScatterND", NULL};

static int listed(const char *const *l, const char *op) {
  for (int i = 0; l[i]; i++)
    if (!strcmp(l[i], op)) return 1;
  return 0;
}

static void test_torchvision_coverage(void **state) {
  (void)state;
  /* Constant is no IR op: the importer turns it into a constant value. */
  assert_int_equal(mg_op_lookup("Constant"), MG_OP_UNKNOWN);
  for (int i = 0; TV_OPS[i]; i++) {
    const char *op = TV_OPS[i];
    assert_int_not_equal(mg_op_lookup(op), MG_OP_UNKNOWN);
    if (has_rule(g_ms, op) == listed(MS_GAPS, op))
      fail_msg("mindspore %s: rule present = %d, but gap listed = %d", op, has_rule(g_ms, op),
               listed(MS_GAPS, op));
    if (has_rule(g_acl, op) == listed(ACL_GAPS, op))
      fail_msg("ascend %s: rule present = %d, but gap listed = %d", op, has_rule(g_acl, op),
               listed(ACL_GAPS, op));
  }
}

/* ---------- the translations people get wrong ---------- */

/* Calls `fn(rule, call)` for every rule of `op` whose call names `name` (api or fn). */
typedef void (*call_cb)(xmlNode *rule, xmlNode *call, void *ctx);
static int each_call(xmlDocPtr d, const char *op, const char *name, call_cb cb, void *ctx) {
  int n = 0;
  FOR_RULES(d, r) {
    if (strcmp(prop(r, "op"), op)) continue;
    xmlNode *c = first_child(r, "call");
    if (!c) continue;
    const char *a = prop(c, "api") ? prop(c, "api") : prop(c, "fn");
    if (name && strcmp(a, name)) continue;
    cb(r, c, ctx);
    n++;
  }
  return n;
}

static void acl_arg(xmlNode *call, int pos, const char *name, const char **value) {
  FOR_CHILD(call, a, "arg") {
    if (strtol(prop(a, "pos"), NULL, 10) == pos) {
      assert_string_equal(prop(a, "name"), name);
      *value = prop(a, "value");
      return;
    }
  }
  fail_msg("no arg at pos %d (%s)", pos, name);
}

static void ms_conv_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *pm = arg_value(c, "pad_mode");
  assert_non_null(pm); /* the default 'same' must never be left implicit */
  if (!strcmp(pm, "'pad'")) {
    assert_string_equal(arg_value(c, "padding"), "pads_tblr");
    assert_true(has_word(require_values(r, "auto_pad"), "NOTSET"));
    (*(int *)ctx)++;
  } else {
    assert_string_equal(arg_value(c, "padding"), "0");
  }
  if (!strcmp(pm, "'same'")) { /* 'same' = SAME_UPPER, never SAME_LOWER */
    assert_string_equal(require_values(r, "auto_pad"), "SAME_UPPER");
  }
  assert_string_equal(arg_value(c, "has_bias"), "has_input(2)"); /* default False */
  assert_string_equal(arg_value(c, "stride"), "strides");
  assert_string_equal(arg_value(c, "dilation"), "dilations");
  assert_true(has_word(require_values(r, "group"), "1"));
  assert_true(has_word(require_values(r, "group"), "depthwise"));
  assert_false(has_word(require_values(r, "group"), "grouped"));
}

static void acl_conv_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *v;
  assert_string_equal(prop(c, "fn"), "aclnnConvolution");
  acl_arg(c, 4, "padding", &v);
  /* conv2d: [top, bottom, left, right]; conv1d: one symmetric element (the order of
   * two is not given) */
  const char *rank = NULL;
  FOR_CHILD(r, q, "require") if (prop(q, "rank")) rank = prop(q, "rank");
  assert_non_null(rank);
  assert_string_equal(v, !strcmp(rank, "3") ? "pads_hw" : "pads_tblr");
  acl_arg(c, 6, "transposed", &v);
  assert_string_equal(v, "False");
  acl_arg(c, 7, "outputPadding", &v);
  assert_string_equal(v, "zeros_spatial");
  acl_arg(c, 3, "stride", &v);
  assert_string_equal(v, "strides");
  (*(int *)ctx)++;
}

static void test_conv_padding_order(void **state) {
  (void)state;
  int pad = 0, acl = 0;
  assert_true(each_call(g_ms, "Conv", "mindspore.nn.Conv2d", ms_conv_cb, &pad) >= 1);
  assert_int_equal(pad, 1);
  /* every ascend Conv call is aclnnConvolution with the reordered padding */
  assert_true(each_call(g_acl, "Conv", NULL, acl_conv_cb, &acl) >= 1);
  assert_true(acl >= 1);
}

static void ms_gelu_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *ap = require_values(r, "approximate");
  assert_non_null(ap); /* the rule must say which form it implements */
  const char *api = prop(c, "api"), *v = arg_value(c, "approximate");
  assert_non_null(v);
  if (!strcmp(ap, "none")) {
    if (!strcmp(api, "mindspore.ops.gelu")) assert_string_equal(v, "'none'");
    else if (!strcmp(api, "mindspore.nn.GELU")) assert_string_equal(v, "False");
    else fail_msg("exact Gelu maps to %s", api);
    (*(int *)ctx)++;
  } else {
    assert_string_equal(ap, "tanh");
    if (!strcmp(api, "mindspore.ops.gelu")) assert_string_equal(v, "'tanh'");
    else assert_string_equal(v, "True");
  }
}

static void acl_gelu_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *ap = require_values(r, "approximate");
  assert_non_null(ap);
  const char *fn = prop(c, "fn");
  if (!strcmp(ap, "none")) {
    assert_string_equal(fn, "aclnnGeluV2"); /* aclnnGelu is the tanh form */
    const char *v;
    acl_arg(c, 1, "approximate", &v);
    assert_string_equal(v, "0");
    (*(int *)ctx)++;
  } else if (!strcmp(fn, "aclnnGeluV2")) {
    const char *v;
    acl_arg(c, 1, "approximate", &v);
    assert_string_equal(v, "1");
  }
}

static void test_gelu_exact(void **state) {
  (void)state;
  int ms = 0, acl = 0;
  each_call(g_ms, "Gelu", NULL, ms_gelu_cb, &ms);
  each_call(g_acl, "Gelu", NULL, acl_gelu_cb, &acl);
  assert_int_equal(ms, 1);
  assert_int_equal(acl, 1);
}

static void ms_ln_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  const char *api = prop(c, "api");
  if (!strcmp(api, "mindspore.nn.LayerNorm")) {
    assert_string_equal(arg_value(c, "epsilon"), "attr(epsilon)"); /* default 1e-7 */
    assert_string_equal(arg_value(c, "begin_norm_axis"), "attr(axis)");
    assert_string_equal(arg_value(c, "begin_params_axis"), "attr(axis)");
  } else {
    assert_string_equal(api, "mindspore.ops.layer_norm");
    assert_string_equal(arg_value(c, "eps"), "attr(epsilon)");
  }
  (*(int *)ctx)++;
}

static void acl_ln_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  const char *v;
  acl_arg(c, 4, "eps", &v);
  assert_string_equal(v, "attr(epsilon)");
  acl_arg(c, 1, "normalizedShape", &v);
  assert_string_equal(v, "shape(1)");
  (*(int *)ctx)++;
}

static void test_layernorm_epsilon(void **state) {
  (void)state;
  int ms = 0, acl = 0;
  each_call(g_ms, "LayerNormalization", NULL, ms_ln_cb, &ms);
  each_call(g_acl, "LayerNormalization", NULL, acl_ln_cb, &acl);
  assert_true(ms >= 1);
  assert_true(acl >= 1);
}

static void ms_pool_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  assert_string_equal(arg_value(c, "stride"), "strides"); /* default 1, not kernel */
  assert_non_null(arg_value(c, "pad_mode"));
  (*(int *)ctx)++;
}

static void acl_maxpool_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  const char *v;
  assert_string_equal(prop(c, "fn"), "aclnnMaxPool");
  acl_arg(c, 2, "strides", &v);
  assert_string_equal(v, "strides");
  acl_arg(c, 4, "pads", &v);
  assert_string_equal(v, "pads"); /* aclnnMaxPool keeps ONNX order {t, l, b, r} */
  (*(int *)ctx)++;
}

static void acl_avgpool_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *v;
  acl_arg(c, 2, "strides", &v);
  assert_string_equal(v, "strides"); /* an empty array would mean stride = kernel */
  assert_string_equal(require_values(r, "pads"), "symmetric");
  (*(int *)ctx)++;
}

static void test_pool_stride_explicit(void **state) {
  (void)state;
  int n = 0, k;
  k = each_call(g_ms, "MaxPool", NULL, ms_pool_cb, &n);
  assert_true(k >= 1 && n == k);
  n = 0;
  k = each_call(g_ms, "AveragePool", NULL, ms_pool_cb, &n);
  assert_true(k >= 1 && n == k);
  n = 0;
  k = each_call(g_acl, "MaxPool", NULL, acl_maxpool_cb, &n);
  assert_true(k >= 1 && n == k);
  n = 0;
  k = each_call(g_acl, "AveragePool", NULL, acl_avgpool_cb, &n);
  assert_true(k >= 1 && n == k);
}

static void ms_lstm_cb(xmlNode *r, xmlNode *c, void *ctx) {
  const char *dir = require_values(r, "direction");
  assert_non_null(dir);
  static const char *const P[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"};
  for (int i = 0; i < 4; i++) {
    const char *v = arg_value(c, P[i]);
    if (!v) fail_msg("LSTM: %s not bound", P[i]);
    if (strncmp(v, "lstm_gates_iofc_to_ifgo(", 24)) fail_msg("LSTM %s = %s: no gate reorder", P[i], v);
    assert_non_null(strstr(v, ",0"));
    char rev[64];
    snprintf(rev, sizeof rev, "%s_reverse", P[i]);
    const char *rv = arg_value(c, rev);
    if (!strcmp(dir, "bidirectional")) {
      assert_non_null(rv);
      assert_int_equal(strncmp(rv, "lstm_gates_iofc_to_ifgo(", 24), 0);
      assert_non_null(strstr(rv, ",1"));
      assert_string_equal(arg_value(c, "bidirectional"), "True");
    } else {
      assert_string_equal(dir, "forward");
      assert_null(rv);
      assert_string_equal(arg_value(c, "bidirectional"), "False");
    }
  }
  assert_string_equal(require_values(r, "activations"), "default");
  (*(int *)ctx)++;
}

static void test_lstm_gate_reorder(void **state) {
  (void)state;
  int n = 0;
  each_call(g_ms, "LSTM", "mindspore.nn.LSTM", ms_lstm_cb, &n);
  assert_int_equal(n, 2);
}

static void ms_bn_cb(xmlNode *r, xmlNode *c, void *ctx) {
  /* MindSpore momentum means what ONNX momentum means: no 1 - m here */
  assert_string_equal(arg_value(c, "momentum"), "attr(momentum)");
  assert_string_equal(arg_value(c, "eps"), "attr(epsilon)");
  /* None, not False: a training Cell must use and update batch statistics */
  assert_string_equal(arg_value(c, "use_batch_statistics"), "None");
  assert_string_equal(require_values(r, "training_mode"), "0");
  (*(int *)ctx)++;
}

static void test_batchnorm_momentum(void **state) {
  (void)state;
  int n = 0;
  each_call(g_ms, "BatchNormalization", NULL, ms_bn_cb, &n);
  assert_true(n >= 1);
}

static void ms_gather_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  assert_string_equal(arg_value(c, "input_indices"), "gather_index"); /* no negatives */
  (*(int *)ctx)++;
}

static void ms_interp_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  assert_string_equal(arg_value(c, "scale_factor"), "None");
  assert_string_equal(arg_value(c, "size"), "resize_size");
  const char *mode = arg_value(c, "mode");
  if (!strcmp(mode, "'nearest'")) assert_string_equal(arg_value(c, "align_corners"), "None");
  (*(int *)ctx)++;
}

static void ms_reduce_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)r;
  assert_string_equal(prop(c, "api"), "mindspore.ops.mean");
  assert_string_equal(arg_value(c, "keep_dims"), "bool(attr(keepdims))"); /* default False */
  (*(int *)ctx)++;
}

static void ms_dense_cb(xmlNode *r, xmlNode *c, void *ctx) {
  (void)c;
  assert_string_equal(require_values(r, "transB"), "1"); /* Dense weight is (out, in) */
  assert_string_equal(require_values(r, "transA"), "0");
  (*(int *)ctx)++;
}

static void test_mindspore_pitfalls(void **state) {
  (void)state;
  int n = 0;
  each_call(g_ms, "Gather", "mindspore.ops.gather", ms_gather_cb, &n);
  assert_int_equal(n, 1);
  n = 0;
  each_call(g_ms, "Resize", "mindspore.ops.interpolate", ms_interp_cb, &n);
  assert_true(n >= 1);
  n = 0;
  each_call(g_ms, "ReduceMean", NULL, ms_reduce_cb, &n);
  assert_int_equal(n, 1);
  n = 0;
  each_call(g_ms, "Gemm", "mindspore.nn.Dense", ms_dense_cb, &n);
  assert_int_equal(n, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_structure),
      cmocka_unit_test(test_requires),
      cmocka_unit_test(test_mindspore_calls),
      cmocka_unit_test(test_aclnn_calls),
      cmocka_unit_test(test_decompositions),
      cmocka_unit_test(test_no_duplicates),
      cmocka_unit_test(test_torchvision_coverage),
      cmocka_unit_test(test_conv_padding_order),
      cmocka_unit_test(test_gelu_exact),
      cmocka_unit_test(test_layernorm_epsilon),
      cmocka_unit_test(test_pool_stride_explicit),
      cmocka_unit_test(test_lstm_gate_reorder),
      cmocka_unit_test(test_batchnorm_momentum),
      cmocka_unit_test(test_mindspore_pitfalls),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
