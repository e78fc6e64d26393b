#include "diag.h"
#include "arena.h"
#include <stdarg.h>
#include <stdio.h>
#include <string.h>


static const char *const code_names[] = {
#define X(name, str) str,
    MG_DIAG_CODES(X)
#undef X
};
_Static_assert(sizeof code_names / sizeof code_names[0] == MG_D_COUNT, "diag names");

const char *mg_diag_code_name(mg_diag_code c) {
  return (unsigned)c < MG_D_COUNT ? code_names[c] : "?";
}

void mg_diags_init(mg_diags *d) { memset(d, 0, sizeof *d); }

void mg_diags_free(mg_diags *d) {
  for (size_t i = 0; i < d->count; i++) {
    mg_free(d->items[i].file);
    mg_free(d->items[i].node);
    mg_free(d->items[i].op);
    mg_free(d->items[i].message);
  }
  mg_free(d->items);
  memset(d, 0, sizeof *d);
}

static char *dup_or_null(const char *s, int *failed) {
  if (!s) return NULL;
  size_t n = strlen(s);
  char *p = mg_malloc(n + 1);
  if (!p) {
    *failed = 1;
    return NULL;
  }
  memcpy(p, s, n + 1);
  return p;
}

int mg_diags_oom(const mg_diags *d, size_t first) {
  if (d->dropped && d->count < MG_DIAG_CAP) return 1;
  for (size_t i = first; i < d->count; i++)
    if (d->items[i].code == MG_D_OOM) return 1;
  return 0;
}

void mg_diag_add(mg_diags *d, mg_severity sev, mg_diag_code code, const char *node,
                 const char *op, const char *fmt, ...) {
  if (sev == MG_SEV_ERROR) d->errors++;
  if (sev == MG_SEV_WARNING) d->warnings++;
  if (d->count >= MG_DIAG_CAP) {
    d->dropped++;
    return;
  }
  if (d->count == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 16;
    mg_diag *items = mg_realloc(d->items, cap * sizeof *items);
    if (!items) {
      d->dropped++;
      return;
    }
    d->items = items;
    d->cap = cap;
  }
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int failed = 0;
  mg_diag g = {code, sev, dup_or_null(d->file, &failed), dup_or_null(node, &failed),
               dup_or_null(op, &failed), dup_or_null(msg, &failed)};
  if (failed) {
    mg_free(g.file);
    mg_free(g.node);
    mg_free(g.op);
    mg_free(g.message);
    d->dropped++;
    return;
  }
  d->items[d->count++] = g;
}

int mg_diag_format(const mg_diag *g, char *buf, size_t n) {
  static const char *const sev[] = {"error", "warning", "note"};
  char where[512] = "";
  if (g->node && g->op)
    snprintf(where, sizeof where, "node '%s' (%s): ", g->node, g->op);
  else if (g->node)
    snprintf(where, sizeof where, "'%s': ", g->node);
  else if (g->op)
    snprintf(where, sizeof where, "%s: ", g->op);
  return snprintf(buf, n, "%s%s%s[%s]: %s%s", g->file ? g->file : "", g->file ? ": " : "",
                  sev[g->severity], mg_diag_code_name(g->code), where, g->message);
}
