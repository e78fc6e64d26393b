/* Rules files (libxml2) and the renaming plan. */
#include "rename.h"
#include "safe_xml.h"
#include "arena.h"
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *torch, *ms;  /* ms NULL when dropped */
  int unsqueeze_axis;
} param_rule;

typedef struct {
  char *type;
  param_rule *params;
  int n;
} module_rule;

typedef struct {
  regex_t re;
  char *pattern, *replace;
  int is_override, drop;
  char *torch;       /* override: exact name */
} name_rule;

struct wt_rules {
  mg_arena arena;
  module_rule *modules;
  int n_modules, cap_modules;
  name_rule *names;
  int n_names, cap_names;
  int oom; /* an allocation failed while loading: the load fails, whatever else it found */
};

wt_rules *wt_rules_new(void) {
  wt_rules *r = mg_calloc(1, sizeof *r);
  if (r) mg_arena_init(&r->arena, 16 * 1024);
  return r;
}

void wt_rules_free(wt_rules *r) {
  if (!r) return;
  for (int i = 0; i < r->n_names; i++)
    if (!r->names[i].is_override) regfree(&r->names[i].re);
  mg_free(r->modules);
  mg_free(r->names);
  mg_arena_destroy(&r->arena);
  mg_free(r);
}

/* Attribute name of n, copied into r's arena; NULL when absent, and when memory
 * is short, which sets r->oom (an absent drop= or layout= means something). */
static char *attr(wt_rules *r, xmlNode *n, const char *name) {
  xmlChar *v = xmlGetProp(n, (const xmlChar *)name);
  if (!v) return NULL;
  char *s = mg_arena_strdup(&r->arena, (const char *)v);
  xmlFree(v);
  if (!s) r->oom = 1;
  return s;
}

#define RULE_ERROR(node, ...)                                                         \
  do {                                                                                \
    char _msg[512];                                                                   \
    snprintf(_msg, sizeof _msg, __VA_ARGS__);                                         \
    mg_error(d, INVALID, NULL, NULL, "%s:%ld: %s", path, (long)xmlGetLineNo(node), _msg); \
    rc = -1;                                                                          \
  } while (0)

/* Makes room for one more element; -1 when memory is short. */
static int grow(void **arr, int *cap, int count, size_t elem) {
  if (count < *cap) return 0;
  int ncap = *cap ? *cap * 2 : 16;
  void *n = mg_realloc(*arr, (size_t)ncap * elem);
  if (!n) return -1;
  *arr = n;
  *cap = ncap;
  return 0;
}

static int load_module(wt_rules *r, xmlNode *m, const char *path, mg_diags *d) {
  int rc = 0;
  char *type = attr(r, m, "type");
  if (!type || !*type) {
    RULE_ERROR(m, "<module> needs a type attribute");
    return rc;
  }
  module_rule mr = {type, NULL, 0};
  int count = 0;
  for (xmlNode *p = m->children; p; p = p->next)
    if (p->type == XML_ELEMENT_NODE) count++;
  mr.params = mg_arena_alloc(&r->arena, sizeof(param_rule) * (size_t)(count + 1));
  if (!mr.params) return r->oom = 1, -1;
  for (xmlNode *p = m->children; p; p = p->next) {
    if (p->type != XML_ELEMENT_NODE) continue;
    if (strcmp((const char *)p->name, "param")) {
      RULE_ERROR(p, "unexpected <%s> in <module>", p->name);
      continue;
    }
    param_rule pr = {attr(r, p, "torch"), attr(r, p, "ms"), -1};
    char *drop = attr(r, p, "drop"), *layout = attr(r, p, "layout");
    if (!pr.torch || !*pr.torch) RULE_ERROR(p, "<param> needs a torch attribute");
    int dropped = drop && !strcmp(drop, "true");
    if (drop && !dropped && strcmp(drop, "false")) RULE_ERROR(p, "drop must be true or false");
    if (dropped) pr.ms = NULL;
    else if (!pr.ms || !*pr.ms) RULE_ERROR(p, "<param> needs ms or drop=\"true\"");
    if (layout) {
      char *end;
      if (strncmp(layout, "unsqueeze:", 10) || (pr.unsqueeze_axis = (int)strtol(layout + 10, &end, 10)) < 0 ||
          *end || end == layout + 10)
        RULE_ERROR(p, "layout '%s' is not unsqueeze:AXIS", layout);
    }
    for (int k = 0; k < mr.n; k++)
      if (pr.torch && !strcmp(mr.params[k].torch, pr.torch))
        RULE_ERROR(p, "duplicate <param torch=\"%s\"> in module %s", pr.torch, type);
    if (!rc) mr.params[mr.n++] = pr;
  }
  if (rc) return rc;
  for (int i = 0; i < r->n_modules; i++)
    if (!strcmp(r->modules[i].type, type)) { /* a later file overrides */
      r->modules[i] = mr;
      return 0;
    }
  if (grow((void **)&r->modules, &r->cap_modules, r->n_modules, sizeof(module_rule))) return r->oom = 1, -1;
  r->modules[r->n_modules++] = mr;
  return 0;
}

static int load_name_rule(wt_rules *r, xmlNode *n, const char *path, mg_diags *d) {
  int rc = 0;
  name_rule nr = {0};
  if (!strcmp((const char *)n->name, "rename")) {
    nr.pattern = attr(r, n, "match");
    nr.replace = attr(r, n, "replace");
    if (!nr.pattern || !nr.replace) {
      RULE_ERROR(n, "<rename> needs match and replace");
      return rc;
    }
    int e = regcomp(&nr.re, nr.pattern, REG_EXTENDED);
    if (e) {
      char msg[256];
      regerror(e, &nr.re, msg, sizeof msg);
      RULE_ERROR(n, "bad regular expression '%s': %s", nr.pattern, msg);
      return rc;
    }
  } else {
    nr.is_override = 1;
    nr.torch = attr(r, n, "torch");
    nr.replace = attr(r, n, "ms");
    char *drop = attr(r, n, "drop");
    nr.drop = drop && !strcmp(drop, "true");
    if (!nr.torch || (!nr.replace && !nr.drop)) {
      RULE_ERROR(n, "<override> needs torch and ms (or drop=\"true\")");
      return rc;
    }
  }
  if (grow((void **)&r->names, &r->cap_names, r->n_names, sizeof(name_rule))) {
    if (!nr.is_override) regfree(&nr.re);
    return r->oom = 1, -1;
  }
  r->names[r->n_names++] = nr;
  return 0;
}

int wt_rules_load(wt_rules *r, const char *path, mg_diags *d) {
  xmlDoc *doc = mg_xml_read(path, d);
  if (!doc) return -1;
  int rc = 0;
  xmlNode *root = xmlDocGetRootElement(doc);
  if (!root || strcmp((const char *)root->name, "naming")) {
    RULE_ERROR(root ? root : (xmlNode *)doc, "the root element must be <naming>");
  } else {
    for (xmlNode *n = root->children; n; n = n->next) {
      if (n->type != XML_ELEMENT_NODE) continue;
      int e = 0;
      if (!strcmp((const char *)n->name, "module")) e = load_module(r, n, path, d);
      else if (!strcmp((const char *)n->name, "rename") || !strcmp((const char *)n->name, "override"))
        e = load_name_rule(r, n, path, d);
      else RULE_ERROR(n, "unknown element <%s> (expected module, rename or override)", n->name);
      if (e) rc = -1;
    }
  }
  xmlFreeDoc(doc);
  if (r->oom) { /* what was not read may have been a drop or a layout change */
    mg_error(d, OOM, NULL, NULL, "%s: out of memory reading the naming rules", path);
    r->oom = 0;
    rc = -1;
  }
  return rc;
}

static const module_rule *find_module(const wt_rules *r, const char *type) {
  for (int i = 0; i < r->n_modules; i++)
    if (!strcmp(r->modules[i].type, type)) return &r->modules[i];
  return NULL;
}

/* The module prefix and leaf of a state_dict key: "a.b.weight" -> "a.b", "weight". */
static const char *leaf_of(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot ? dot + 1 : name;
}

static int same_prefix(const char *a, const char *b) {
  size_t la = (size_t)(leaf_of(a) - a), lb = (size_t)(leaf_of(b) - b);
  return la == lb && !strncmp(a, b, la);
}

/* Recognises a module from its parameters when the graph did not say. */
static const char *pattern_type(const wt_source *s, const wt_tensor *t) {
  int has_mean = 0, has_var = 0, has_weight = 0, has_bias = 0, others = 0, wrank = -1, brank = -1;
  for (int i = 0; i < wt_count(s); i++) {
    const wt_tensor *u = wt_get(s, i);
    if (!same_prefix(u->name, t->name)) continue;
    const char *l = leaf_of(u->name);
    if (!strcmp(l, "running_mean")) has_mean = 1;
    else if (!strcmp(l, "running_var")) has_var = 1;
    else if (!strcmp(l, "num_batches_tracked")) ;
    else if (!strcmp(l, "weight")) has_weight = 1, wrank = u->rank;
    else if (!strcmp(l, "bias")) has_bias = 1, brank = u->rank;
    else others = 1;
  }
  if (leaf_of(t->name) == t->name) return NULL; /* a root-level parameter has no module */
  if (has_mean && has_var) return "BatchNorm2d";
  if (others) return NULL;
  if (has_weight && wrank == 1 && has_bias && brank == 1) return "LayerNorm";
  if (has_weight && wrank == 1 && !has_bias) return "PReLU";
  if (has_weight && wrank == 3) return "Conv1d";
  return NULL;
}

/* Whether t is a module's only tensor and a 2-D "weight": the shape of both an
 * Embedding and a bias-free Linear, whose MindSpore names differ. */
static int lone_matrix_weight(const wt_source *s, const wt_tensor *t) {
  if (t->rank != 2 || strcmp(leaf_of(t->name), "weight") || leaf_of(t->name) == t->name) return 0;
  for (int i = 0; i < wt_count(s); i++) {
    const wt_tensor *u = wt_get(s, i);
    if (u != t && same_prefix(u->name, t->name)) return 0;
  }
  return 1;
}

/* buf[2048] := in with nr's regex replaced (groups \1 to \9); 0 when it does
 * not match. */
static int regex_apply(const name_rule *nr, const char *in, char *buf) {
  regmatch_t m[10];
  if (regexec(&nr->re, in, 10, m, 0)) return 0;
  const size_t cap = 2048;
  size_t k = 0;
  k += (size_t)snprintf(buf, cap, "%.*s", (int)m[0].rm_so, in);
  for (const char *p = nr->replace; *p && k + 1 < cap; p++) {
    if (*p == '\\' && p[1] >= '0' && p[1] <= '9') {
      int g = p[1] - '0';
      if (m[g].rm_so >= 0)
        k += (size_t)snprintf(buf + k, cap - k, "%.*s", (int)(m[g].rm_eo - m[g].rm_so), in + m[g].rm_so);
      p++;
    } else {
      buf[k++] = *p;
    }
  }
  if (k < cap) snprintf(buf + k, cap - k, "%s", in + m[0].rm_eo);
  else buf[cap - 1] = 0;
  return 1;
}

int wt_plan(const wt_source *s, const wt_rules *r, const wt_type_hint *hints, int n_hints,
            wt_plan_entry **out, int *n_out, mg_diags *d) {
  int n = wt_count(s);
  wt_plan_entry *p = mg_calloc((size_t)n + 1, sizeof *p);
  *out = NULL;
  *n_out = 0;
  if (!p) {
    mg_error(d, OOM, NULL, NULL, "out of memory");
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const wt_tensor *t = wt_get(s, i);
    wt_plan_entry *e = &p[i];
    e->src = t;
    e->unsqueeze_axis = -1;
    /* Module type: the graph's word for any tensor of the module wins. */
    for (int h = 0; h < n_hints && !e->module_type; h++)
      if (same_prefix(hints[h].tensor, t->name) && hints[h].module_type) {
        e->module_type = hints[h].module_type;
        e->type_from = WT_TYPE_GRAPH;
      }
    if (!e->module_type && (e->module_type = pattern_type(s, t))) e->type_from = WT_TYPE_PATTERN;
    if (!hints && !e->module_type && lone_matrix_weight(s, t))
      mg_warn(d, GRAPH, t->name, NULL,
              "a lone 2-D weight is an nn.Embedding (MindSpore 'embedding_table') or a bias-free nn.Linear "
              "('weight'), and the parameters cannot tell which: kept as '%s'; --graph MODEL.onnx resolves it",
              leaf_of(t->name));
    const module_rule *mr = e->module_type ? find_module(r, e->module_type) : NULL;
    const char *leaf = leaf_of(t->name);
    char name[2048];
    snprintf(name, sizeof name, "%s", t->name);
    int dropped = 0;
    for (int k = 0; mr && k < mr->n; k++) {
      if (strcmp(mr->params[k].torch, leaf)) continue;
      e->rule = "module";
      if (!mr->params[k].ms) dropped = 1;
      else snprintf(name, sizeof name, "%.*s%s", (int)(leaf - t->name), t->name, mr->params[k].ms);
      e->unsqueeze_axis = mr->params[k].unsqueeze_axis;
    }
    for (int k = 0; k < r->n_names && !dropped; k++) {
      const name_rule *nr = &r->names[k];
      if (nr->is_override) {
        if (strcmp(nr->torch, t->name)) continue;
        e->rule = "override";
        if (nr->drop) dropped = 1;
        else snprintf(name, sizeof name, "%s", nr->replace);
      } else {
        char nn[2048];
        if (!regex_apply(nr, name, nn)) continue;
        e->rule = "regex";
        snprintf(name, sizeof name, "%s", nn);
      }
    }
    if (e->unsqueeze_axis > t->rank) e->unsqueeze_axis = -1;
    if (!dropped) {
      e->ms_name = mg_malloc(strlen(name) + 1);
      if (!e->ms_name) {
        mg_error(d, OOM, NULL, NULL, "out of memory");
        rc = -1;
        break;
      }
      strcpy(e->ms_name, name);
      e->renamed = strcmp(name, t->name) != 0;
    }
  }
  for (int i = 0; i < n && !rc; i++)
    for (int k = i + 1; k < n && p[i].ms_name; k++)
      if (p[k].ms_name && !strcmp(p[i].ms_name, p[k].ms_name)) {
        mg_error(d, INVALID, p[i].ms_name, NULL, "'%s' and '%s' would both be written as this name",
                 p[i].src->name, p[k].src->name);
        rc = -1;
      }
  if (rc) {
    wt_plan_free(p, n);
    return -1;
  }
  *out = p;
  *n_out = n;
  return 0;
}

void wt_plan_free(wt_plan_entry *p, int n) {
  if (!p) return;
  for (int i = 0; i < n; i++) mg_free(p[i].ms_name);
  mg_free(p);
}
