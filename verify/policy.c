/* Parity policy files (see policy.h). */
#include "policy.h"
#include "safe_xml.h"
#include "arena.h"
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef enum { R_FORWARD, R_GRAD, R_OP, R_OUTPUT, R_PARAM } rule_kind;

typedef struct {
  rule_kind kind;
  char *model;     /* fnmatch pattern, NULL: every model */
  char *key;       /* op type, output name or parameter pattern */
  char *precision; /* precision= (forward, op, output): the rule applies only at it; NULL: at all */
  double rtol, atol, cosine, rel_norm, noise, top1; /* NAN: not set by this rule (noise: the multiple) */
} rule;

struct parity_policy {
  rule *rules;
  int n;
};

void policy_free(parity_policy *p) {
  if (!p) return;
  for (int i = 0; i < p->n; i++) mg_free(p->rules[i].model), mg_free(p->rules[i].key), mg_free(p->rules[i].precision);
  mg_free(p->rules);
  mg_free(p);
}

static char *dup(const char *s) {
  if (!s) return NULL;
  char *r = mg_malloc(strlen(s) + 1);
  if (r) strcpy(r, s);
  return r;
}

#define FAIL(node, ...)                                                                          \
  do {                                                                                           \
    char _m[512];                                                                                \
    snprintf(_m, sizeof _m, __VA_ARGS__);                                                        \
    mg_error(d, INVALID, NULL, NULL, "%s:%ld: %s", path, (long)xmlGetLineNo(node), _m);          \
    return -1;                                                                                   \
  } while (0)

/* Reads one rule element into r (attributes checked against what its kind takes). */
static int read_rule(const char *path, xmlNode *x, rule_kind kind, const char *model, rule *r, mg_diags *d) {
  memset(r, 0, sizeof *r);
  r->kind = kind;
  r->rtol = r->atol = r->cosine = r->rel_norm = r->noise = r->top1 = NAN;
  const int forward_kind = kind == R_FORWARD || kind == R_OP || kind == R_OUTPUT;
  const char *key_attr = kind == R_OP ? "type" : kind == R_OUTPUT ? "name" : kind == R_PARAM ? "match" : NULL;
  for (xmlAttr *a = x->properties; a; a = a->next) {
    const char *name = (const char *)a->name;
    xmlChar *v = xmlNodeListGetString(x->doc, a->children, 1);
    const char *s = v ? (const char *)v : "";
    double *slot = !strcmp(name, "rtol") ? &r->rtol : !strcmp(name, "atol") ? &r->atol
                 : !strcmp(name, "cosine") ? &r->cosine : !strcmp(name, "rel-norm") ? &r->rel_norm
                 : !strcmp(name, "noise") ? &r->noise : forward_kind && !strcmp(name, "top1") ? &r->top1 : NULL;
    char problem[300] = "";
    if (slot) {
      char *end;
      *slot = strtod(s, &end);
      if (!*s || *end || !(*slot >= 0))
        snprintf(problem, sizeof problem, "<%s %s=\"%.200s\">: not a non-negative number", x->name, name, s);
    } else if (key_attr && !strcmp(name, key_attr) && !r->key) {
      r->key = dup(s);
    } else if (forward_kind && !strcmp(name, "precision") && !r->precision) {
      if (strcmp(s, "fp32") && strcmp(s, "fp16") && strcmp(s, "bf16") && strcmp(s, "int8"))
        snprintf(problem, sizeof problem, "<%s precision=\"%.200s\">: not fp32, fp16, bf16 or int8", x->name, s);
      else r->precision = dup(s);
    } else {
      snprintf(problem, sizeof problem, "<%s>: unknown attribute '%s'", x->name, name);
    }
    xmlFree(v);
    if (problem[0]) {
      mg_free(r->key);
      mg_free(r->precision);
      r->key = r->precision = NULL;
      FAIL(x, "%s", problem);
    }
  }
  if (key_attr && !r->key) FAIL(x, "<%s> needs %s=", x->name, key_attr);
  r->model = dup(model);
  return 0;
}

static int push(parity_policy *p, const rule *r) {
  rule *n = mg_realloc(p->rules, (size_t)(p->n + 1) * sizeof *n);
  if (!n) return -1;
  p->rules = n;
  p->rules[p->n++] = *r;
  return 0;
}

static int rule_kind_of(const char *name, rule_kind *k) {
  static const char *names[] = {"forward", "grad", "op", "output", "param"};
  for (int i = 0; i < 5; i++)
    if (!strcmp(name, names[i])) return *k = (rule_kind)i, 1;
  return 0;
}

/* Reads the rules under `parent` (the root, or a <model> with pattern `model`). */
static int read_rules(const char *path, xmlNode *parent, const char *model, parity_policy *p, mg_diags *d) {
  for (xmlNode *x = parent->children; x; x = x->next) {
    if (x->type != XML_ELEMENT_NODE) continue;
    const char *name = (const char *)x->name;
    rule_kind k;
    if (!model && !strcmp(name, "model")) {
      xmlChar *m = xmlGetProp(x, (const xmlChar *)"match");
      if (!m) FAIL(x, "<model> needs match=");
      for (xmlAttr *a = x->properties; a; a = a->next)
        if (strcmp((const char *)a->name, "match")) {
          xmlFree(m);
          FAIL(x, "<model>: unknown attribute '%s'", a->name);
        }
      int rc = read_rules(path, x, (const char *)m, p, d);
      xmlFree(m);
      if (rc) return -1;
    } else if (rule_kind_of(name, &k) && (model || (k != R_OUTPUT && k != R_PARAM))) {
      rule r;
      if (read_rule(path, x, k, model, &r, d)) return -1;
      if (push(p, &r)) {
        mg_free(r.key), mg_free(r.model), mg_free(r.precision);
        mg_error(d, OOM, NULL, NULL, "%s: no memory", path);
        return -1;
      }
    } else {
      FAIL(x, "unexpected element <%s>%s", name, model ? " inside <model>" : "");
    }
  }
  return 0;
}

int policy_load(const char *path, parity_policy **out, mg_diags *d) {
  *out = NULL;
  xmlDoc *doc = mg_xml_read(path, d);
  if (!doc) return -1;
  xmlNode *root = xmlDocGetRootElement(doc);
  parity_policy *p = mg_malloc(sizeof *p);
  int rc = -1;
  if (!p) {
    mg_error(d, OOM, NULL, NULL, "%s: no memory", path);
  } else {
    memset(p, 0, sizeof *p);
    if (!root || strcmp((const char *)root->name, "parity-policy"))
      mg_error(d, INVALID, NULL, NULL, "%s:%ld: the root element must be <parity-policy>", path,
               root ? (long)xmlGetLineNo(root) : 0L);
    else rc = read_rules(path, root, NULL, p, d);
  }
  xmlFreeDoc(doc);
  if (rc) policy_free(p);
  else *out = p;
  return rc;
}

static void apply(parity_tol *t, const rule *r) {
  if (!isnan(r->rtol)) t->rtol = r->rtol;
  if (!isnan(r->atol)) t->atol = r->atol;
  if (!isnan(r->cosine)) t->min_cosine = r->cosine;
  if (!isnan(r->rel_norm)) t->max_rel_norm = r->rel_norm;
  if (!isnan(r->noise)) t->noise_mult = r->noise;
  if (!isnan(r->top1)) t->min_top1 = r->top1;
}

/* Applies the rules of `kind` matching key, global ones first, then model ones. */
static void apply_level(const parity_policy *p, parity_tol *t, rule_kind kind, const char *model, const char *key,
                        int key_is_pattern, const char *precision) {
  for (int scoped = 0; scoped < 2; scoped++)
    for (int i = 0; i < p->n; i++) {
      const rule *r = &p->rules[i];
      if (r->kind != kind || (r->model != NULL) != scoped) continue;
      if (r->model && (!model || fnmatch(r->model, model, 0))) continue;
      if (r->key && (!key || (key_is_pattern ? fnmatch(r->key, key, 0) : strcmp(r->key, key)))) continue;
      if (r->precision && strcmp(r->precision, precision ? precision : "fp32")) continue;
      apply(t, r);
    }
}

parity_tol policy_forward(const parity_policy *p, const char *model, const char *op, const char *output) {
  return policy_forward_at(p, NULL, model, op, output);
}

parity_tol policy_forward_at(const parity_policy *p, const char *precision, const char *model, const char *op,
                             const char *output) {
  parity_tol t = parity_default_forward();
  if (precision && strcmp(precision, "fp32")) /* issue 17's acceptance budget */
    t = (parity_tol){.rtol = -1, .atol = -1, .min_cosine = 0.999, .max_rel_norm = -1, .min_top1 = 0.99};
  if (!p) return t;
  apply_level(p, &t, R_FORWARD, model, NULL, 0, precision);
  apply_level(p, &t, R_OP, model, op, 0, precision);
  apply_level(p, &t, R_OUTPUT, model, output, 0, precision);
  return t;
}

parity_tol policy_grad(const parity_policy *p, const char *model, const char *name) {
  parity_tol t = parity_default_grad();
  if (!p) return t;
  apply_level(p, &t, R_GRAD, model, NULL, 0, NULL);
  apply_level(p, &t, R_PARAM, model, name, 1, NULL);
  return t;
}
