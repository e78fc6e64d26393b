/* Loading and validating rules files (libxml2). */
#include "mapping_internal.h"
#include "safe_xml.h"
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *map_status_name(map_status s) {
  static const char *const names[] = {"supported", "decomposed", "unsupported-op",
                                      "unsupported-attribute", "unsupported-dtype", "dynamic-shape",
                                      "custom-op (cpu kernel)", "host-fallback"};
  _Static_assert(sizeof names / sizeof names[0] == MAP_STATUS_COUNT, "status names");
  return (unsigned)s < MAP_STATUS_COUNT ? names[s] : "?";
}

int rules_hide(rule_set *rs, const char *name, const char *why) {
  if (rs->n_hidden == (int)(sizeof rs->hidden / sizeof rs->hidden[0])) return -1;
  int k = 0;
  for (int i = 0; i < rs->n; i++) {
    rule *r = &rs->rules[i];
    if (r->removed || (strcmp(mg_op_name(r->op), name) && (!r->call || strcmp(r->call, name)))) continue;
    r->removed = 1;
    r->hidden_by = rs->n_hidden + 1;
    k++;
  }
  if (k) { /* the reason is only words: a copy memory refused is said shorter */
    const char *copy = mg_arena_strdup(&rs->arena, why);
    rs->hidden[rs->n_hidden++] = copy ? copy : "hidden on the command line";
  }
  return k;
}

rule_set *rules_new(const char *target) {
  rule_set *rs = mg_calloc(1, sizeof *rs);
  if (!rs) return NULL;
  mg_arena_init(&rs->arena, 32 * 1024);
  rs->target = mg_arena_strdup(&rs->arena, target);
  if (!rs->target) {
    mg_arena_destroy(&rs->arena);
    mg_free(rs);
    return NULL;
  }
  return rs;
}

void rules_free(rule_set *rs) {
  if (!rs) return;
  mg_free(rs->rules);
  mg_arena_destroy(&rs->arena);
  mg_free(rs);
}

const char *rules_target(const rule_set *rs) { return rs->target; }

int rules_has_op(const rule_set *rs, mg_op op) {
  for (int i = 0; i < rs->n; i++)
    if (rs->rules[i].op == op && !rs->rules[i].removed) return 1;
  return 0;
}

/* Attribute name of n, copied into rs's arena; NULL when absent, and when memory
 * is short, which sets rs->oom (an absent attribute means something: a default
 * kind, a requirement on no attribute). */
static char *prop(rule_set *rs, xmlNode *n, const char *name) {
  xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
  if (!v) return NULL;
  char *s = mg_arena_strdup(&rs->arena, (const char *)v);
  xmlFree(v);
  if (!s) rs->oom = 1;
  return s;
}

/* Splits a space-separated list into the arena. */
static int split_list(rule_set *rs, const char *text, const char ***out) {
  int n = 0;
  for (const char *p = text; *p;) {
    p += strspn(p, " \t\n");
    if (!*p) break;
    p += strcspn(p, " \t\n");
    n++;
  }
  *out = mg_arena_alloc(&rs->arena, sizeof(char *) * (size_t)(n + 1));
  if (!*out) return rs->oom = 1, -1;
  int k = 0;
  for (const char *p = text; *p;) {
    p += strspn(p, " \t\n");
    if (!*p) break;
    size_t len = strcspn(p, " \t\n");
    if (!((*out)[k++] = mg_arena_strndup(&rs->arena, p, len))) return rs->oom = 1, -1;
    p += len;
  }
  return n;
}

static const char *const VALUES[] = {
#define VALUE(name, what) #name,
#include "values.def"
#undef VALUE
};

int rules_value_known(const char *id) {
  for (size_t i = 0; i < sizeof VALUES / sizeof VALUES[0]; i++)
    if (!strcmp(VALUES[i], id)) return 1;
  return 0;
}

static int is_id_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_id_char(char c) { return is_id_start(c) || (c >= '0' && c <= '9'); }

int rules_check_value(const char *v, mg_op op, int acl_enums, char *why, size_t wn) {
  if (!v || !*v) return snprintf(why, wn, "empty value"), -1;
  int depth = 0;
  for (const char *p = v; *p;) {
    if (*p == '\'') {
      const char *e = strchr(p + 1, '\'');
      if (!e) return snprintf(why, wn, "unterminated string in '%s'", v), -1;
      p = e + 1;
    } else if (is_id_start(*p)) {
      char id[64];
      size_t n = 0;
      while (is_id_char(*p) && n < sizeof id - 1) id[n++] = *p++;
      id[n] = 0;
      int acl = acl_enums && !strncmp(id, "ACL_", 4);
      if (!rules_value_known(id) && !acl) return snprintf(why, wn, "unknown value '%s' in '%s'", id, v), -1;
      if (!strcmp(id, "attr") && *p == '(') {
        const char *s = p + 1;
        n = 0;
        while (is_id_char(*s) && n < sizeof id - 1) id[n++] = *s++;
        id[n] = 0;
        mg_attr_kind kind;
        int hd;
        const char *dt;
        if (!mg_op_attr_spec(op, id, &kind, &hd, &dt))
          return snprintf(why, wn, "attr(%s) is not an attribute of %s", id, mg_op_name(op)), -1;
        depth++; /* the '(' skipped with the name */
        p = s;
      }
    } else if (*p >= '0' && *p <= '9') {
      while (is_id_char(*p) || *p == '.') p++;
    } else {
      if (*p == '(') depth++;
      if (*p == ')' && --depth < 0) return snprintf(why, wn, "unbalanced ')' in '%s'", v), -1;
      if (!strchr("(), *+-/[]", *p)) return snprintf(why, wn, "unexpected '%c' in '%s'", *p, v), -1;
      p++;
    }
  }
  if (depth) return snprintf(why, wn, "unbalanced '(' in '%s'", v), -1;
  return 0;
}

#define BAD(node, ...)                                                                      \
  do {                                                                                      \
    char _m[512];                                                                           \
    snprintf(_m, sizeof _m, __VA_ARGS__);                                                   \
    mg_error(d, INVALID, NULL, NULL, "%s:%ld: %s", path, (long)xmlGetLineNo(node), _m);    \
    rc = -1;                                                                                \
  } while (0)

static int parse_opset(const char *text, int64_t *lo, int64_t *hi) {
  char *end;
  *lo = 1;
  *hi = INT64_MAX;
  if (!text || !*text) return 0;
  *lo = strtoll(text, &end, 10);
  if (end == text || *lo < 1) return -1;
  if (!*end) {
    *hi = *lo;
    return 0;
  }
  if (*end != '-') return -1;
  if (!end[1]) return 0;
  char *end2;
  *hi = strtoll(end + 1, &end2, 10);
  return *end2 || *hi < *lo ? -1 : 0;
}

static int load_rule(rule_set *rs, xmlNode *x, const char *path, mg_diags *d, int first_new) {
  int rc = 0;
  rule r = {0};
  r.line = (int)xmlGetLineNo(x);
  if (!(r.file = mg_arena_strdup(&rs->arena, path))) return rs->oom = 1, -1;
  char *op = prop(rs, x, "op"), *opset = prop(rs, x, "opset");
  if (!op) {
    BAD(x, "<rule> needs an op attribute");
    return rc;
  }
  r.op = mg_op_lookup(op);
  if (r.op == MG_OP_UNKNOWN) {
    BAD(x, "rule for unknown op '%s' (not in ops.def)", op);
    return rc;
  }
  if (parse_opset(opset, &r.opset_lo, &r.opset_hi)) BAD(x, "opset '%s' is not N, N- or N-M", opset);
  int count = 0;
  for (xmlNode *c = x->children; c; c = c->next)
    if (c->type == XML_ELEMENT_NODE) count++;
  r.reqs = mg_arena_alloc(&rs->arena, sizeof(requirement) * (size_t)(count + 1));
  if (!r.reqs) return rs->oom = 1, -1;
  for (xmlNode *c = x->children; c; c = c->next) {
    if (c->type != XML_ELEMENT_NODE) continue;
    const char *name = (const char *)c->name;
    if (!strcmp(name, "require")) {
      requirement q = {0};
      char *attr = prop(rs, c, "attr"), *values = prop(rs, c, "values"), *dtype = prop(rs, c, "dtype");
      char *rank = prop(rs, c, "rank"), *stat = prop(rs, c, "static"), *input = prop(rs, c, "input");
      char *output = prop(rs, c, "output");
      if (attr && values) {
        q.kind = REQ_ATTR, q.attr = attr;
        q.n_values = split_list(rs, values, &q.values);
      } else if (dtype) {
        q.kind = REQ_DTYPE;
        if (input) { /* <require input="N" dtype="..."/>: input N's dtype (default input 0) */
          char *end = NULL;
          long idx = strtol(input, &end, 10);
          if (!end || *end || idx < 0 || idx > 64) BAD(c, "input must be an input index, got '%s'", input);
          q.input = (int)idx;
        }
        q.n_values = split_list(rs, dtype, &q.values);
        for (int i = 0; i < q.n_values; i++)
          if (mg_dtype_parse(q.values[i]) == MG_UNDEFINED) BAD(c, "unknown dtype '%s'", q.values[i]);
      } else if (rank) {
        q.kind = REQ_RANK;
        q.n_values = split_list(rs, rank, &q.values);
      } else if (stat) {
        q.kind = REQ_STATIC;
        if (strcmp(stat, "true")) BAD(c, "static must be \"true\"");
      } else if (input) {
        char *present = prop(rs, c, "present"), *end = NULL;
        long idx = strtol(input, &end, 10);
        if (!end || *end || idx < 0 || idx > 64) BAD(c, "input must be an input index, got '%s'", input);
        int known = present != NULL;
        for (const char *w = present; known && *w;) { /* a list: any of the words holds */
          size_t len = strcspn(w, " ");
          known = (len == 8 && !strncmp(w, "required", 8)) || (len == 8 && !strncmp(w, "optional", 8)) ||
                  (len == 6 && !strncmp(w, "absent", 6)) || (len == 11 && !strncmp(w, "initializer", 11)) ||
                  (len == 8 && !strncmp(w, "constant", 8)) || (len == 9 && !strncmp(w, "parameter", 9));
          w += len;
          w += strspn(w, " ");
        }
        if (!known)
          BAD(c, "<require input> needs present=\"required\", \"optional\", \"absent\", \"initializer\", "
                 "\"constant\" or \"parameter\" (or a list of them)");
        if (rc) continue;
        q.kind = REQ_PRESENT, q.input = (int)idx;
        q.n_values = split_list(rs, present, &q.values);
      } else if (output) {
        /* <require output="N" present="unused"/>: output N is absent or read by nothing */
        char *present = prop(rs, c, "present"), *end = NULL;
        long idx = strtol(output, &end, 10);
        if (!end || *end || idx < 0 || idx > 64) BAD(c, "output must be an output index, got '%s'", output);
        if (!present || strcmp(present, "unused")) BAD(c, "<require output> needs present=\"unused\"");
        if (rc) continue;
        q.kind = REQ_OUTPUT, q.input = (int)idx;
        q.n_values = split_list(rs, present, &q.values);
      } else {
        BAD(c, "<require> needs attr+values, dtype, rank, static, input or output");
        continue;
      }
      if (q.n_values < 0) return -1;
      r.reqs[r.n_reqs++] = q;
    } else if (!strcmp(name, "call")) {
      if (r.call || r.n_decompose) { /* a second one would be read with the first's argument count */
        BAD(c, "a rule has one <call> or one <decompose>");
        continue;
      }
      r.call = prop(rs, c, "api");
      if (!r.call) r.call = prop(rs, c, "fn");
      if (!r.call) BAD(c, "<call> needs api (mindspore) or fn (ascend)");
      r.kind = prop(rs, c, "kind");
      int n_args = 0;
      for (xmlNode *a = c->children; a; a = a->next) n_args += a->type == XML_ELEMENT_NODE;
      r.args = mg_arena_alloc(&rs->arena, sizeof(rule_arg) * (size_t)(n_args + 1));
      if (!r.args) return rs->oom = 1, -1;
      for (xmlNode *a = c->children; a; a = a->next) {
        if (a->type != XML_ELEMENT_NODE) continue;
        if (strcmp((const char *)a->name, "arg")) {
          BAD(a, "unexpected <%s> in <call> (expected <arg>)", a->name);
          continue;
        }
        rule_arg g = {prop(rs, a, "name"), prop(rs, a, "value"), -1};
        char *pos = prop(rs, a, "pos"), why[300];
        /* "*operands": Python's variadic parameter */
        const char *id = g.name && g.name[0] == '*' ? g.name + 1 : g.name;
        if (!id || !*id || !is_id_start(id[0])) {
          BAD(a, "<arg> needs a name that is an identifier");
          continue;
        }
        for (const char *q = id; *q; q++)
          if (!is_id_char(*q)) BAD(a, "argument name '%s' is not an identifier", g.name);
        for (int k = 0; k < r.n_args; k++)
          if (!strcmp(r.args[k].name, g.name)) BAD(a, "argument '%s' given twice", g.name);
        if (pos) {
          char *end;
          g.pos = (int)strtol(pos, &end, 10);
          if (*end || g.pos < 0) BAD(a, "pos must be a parameter index, got '%s'", pos);
        }
        if (rules_check_value(g.value, r.op, !strcmp(rs->target, "ascend"), why, sizeof why))
          BAD(a, "argument '%s': %s", g.name, why);
        r.args[r.n_args++] = g;
      }
    } else if (!strcmp(name, "decompose")) {
      if (r.call || r.n_decompose) {
        BAD(c, "a rule has one <call> or one <decompose>");
        continue;
      }
      char *into = prop(rs, c, "into");
      if (!into) {
        BAD(c, "<decompose> needs into");
        continue;
      }
      r.n_decompose = split_list(rs, into, &r.decompose);
      if (r.n_decompose <= 0) BAD(c, "<decompose into> is empty");
      for (int i = 0; i < r.n_decompose; i++)
        if (mg_op_lookup(r.decompose[i]) == MG_OP_UNKNOWN) BAD(c, "decomposes into unknown op '%s'", r.decompose[i]);
    } else {
      BAD(c, "unexpected <%s> in <rule>", name);
    }
  }
  if (!r.call && !r.n_decompose) BAD(x, "rule for %s has neither <call> nor <decompose>", op);
  if (rc) return rc;
  /* duplicate key: same op and opset range, with the same requirements, in one file */
  for (int i = first_new; i < rs->n; i++) {
    const rule *o = &rs->rules[i];
    if (o->op != r.op || o->opset_lo != r.opset_lo || o->opset_hi != r.opset_hi || o->n_reqs != r.n_reqs) continue;
    int same = 1;
    for (int k = 0; k < r.n_reqs && same; k++) {
      same = o->reqs[k].kind == r.reqs[k].kind && o->reqs[k].n_values == r.reqs[k].n_values &&
             (!r.reqs[k].attr || !strcmp(o->reqs[k].attr, r.reqs[k].attr));
      for (int v = 0; same && v < r.reqs[k].n_values; v++) same = !strcmp(o->reqs[k].values[v], r.reqs[k].values[v]);
    }
    if (same) {
      BAD(x, "duplicate rule for %s (same opset and requirements as line %d)", op, o->line);
      return rc;
    }
  }
  if (rs->n == rs->cap) {
    int cap = rs->cap ? rs->cap * 2 : 64;
    rule *n = mg_realloc(rs->rules, sizeof(rule) * (size_t)cap);
    if (!n) return rs->oom = 1, -1;
    rs->rules = n;
    rs->cap = cap;
  }
  rs->rules[rs->n++] = r;
  return 0;
}

int rules_load(rule_set *rs, const char *path, mg_diags *d) {
  xmlDoc *doc = mg_xml_read(path, d);
  int rc = 0;
  if (!doc) return -1;
  xmlNode *root = xmlDocGetRootElement(doc);
  if (!root || strcmp((const char *)root->name, "rules")) {
    BAD(root ? root : (xmlNode *)doc, "the root element must be <rules>");
  } else {
    char *target = prop(rs, root, "target");
    if (!target || strcmp(target, rs->target))
      BAD(root, "rules for target '%s' loaded as '%s'", target ? target : "(none)", rs->target);
  }
  int first_new = rs->n;
  for (xmlNode *x = root && !rc ? root->children : NULL; x; x = x->next) {
    if (x->type != XML_ELEMENT_NODE) continue;
    if (strcmp((const char *)x->name, "rule")) {
      BAD(x, "unexpected <%s> (expected <rule>)", x->name);
      continue;
    }
    if (load_rule(rs, x, path, d, first_new)) rc = -1;
  }
  /* a later file's rules for an op replace the earlier ones */
  for (int i = 0; !rc && i < first_new; i++)
    for (int k = first_new; k < rs->n; k++)
      if (rs->rules[i].op == rs->rules[k].op) rs->rules[i].removed = 1;
  xmlFreeDoc(doc);
  if (rs->oom) { /* what was not read may have been a requirement */
    mg_error(d, OOM, NULL, NULL, "%s: out of memory reading the rules", path);
    rs->oom = 0;
    rc = -1;
  }
  return rc;
}
