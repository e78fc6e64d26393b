/* Emitters of the strings family (runtime/strings.c): StringNormalizer on string
 * tensors, whose output length is known only at run time (see cg_bounded_dims). */
#include "cg.h"
#include <stdlib.h>
#include <string.h>

/* Whether a locale name maps case as ASCII does (what the runtime implements):
 * "", C/POSIX, and English ones ("en", "en_US", "en_US.UTF-8"). */
static int ascii_case_locale(const char *loc) {
  if (!*loc || !strcmp(loc, "C") || !strcmp(loc, "POSIX") || !strncmp(loc, "C.", 2)) return 1;
  return loc[0] == 'e' && loc[1] == 'n' && (!loc[2] || loc[2] == '_' || loc[2] == '-' || loc[2] == '.');
}

/* StringNormalizer: stopwords removed, then ASCII case change, on [C] or [1, C]. */
int cg_emit_StringNormalizer(cg_ctx *c, const mg_node *n) {
  const mg_value *x = n->n_in > 0 ? n->in[0] : NULL, *y = n->n_out > 0 ? n->out[0] : NULL;
  if (!x || !y || x->dtype != MG_STRING || y->dtype != MG_STRING) return cg_unsupported(c, n, "input and output must be strings");
  int64_t xd[MG_MAX_RANK], yd[MG_MAX_RANK];
  int rank = cg_dims(x, xd);
  if (!(rank == 1 || (rank == 2 && xd[0] == 1))) return cg_unsupported(c, n, "input must have shape [C] or [1, C]");
  if (cg_dims(y, yd) != rank) return cg_unsupported(c, n, "output rank differs from the input's");
  int64_t count = xd[rank - 1];
  const char *action = "NONE", *locale = "";
  int64_t sensitive = 0;
  const char *const *stopwords = NULL;
  int n_stop = 0;
  for (int i = 0; i < n->n_attr; i++) {
    const mg_attr *a = &n->attr[i];
    if (!strcmp(a->name, "case_change_action") && a->kind == MG_ATTR_STRING) action = a->s;
    else if (!strcmp(a->name, "is_case_sensitive") && a->kind == MG_ATTR_INT) sensitive = a->i;
    else if (!strcmp(a->name, "locale") && a->kind == MG_ATTR_STRING) locale = a->s;
    else if (!strcmp(a->name, "stopwords") && a->kind == MG_ATTR_STRINGS) {
      stopwords = a->strings;
      n_stop = (int)a->n;
      if ((size_t)n_stop != a->n) return cg_unsupported(c, n, "too many stopwords");
    } else {
      return cg_unsupported(c, n, "attribute '%s' of unexpected kind or name", a->name);
    }
  }
  const char *how = !strcmp(action, "NONE") ? "MG_CASE_NONE"
                    : !strcmp(action, "LOWER") ? "MG_CASE_LOWER"
                    : !strcmp(action, "UPPER") ? "MG_CASE_UPPER" : NULL;
  if (!how) return cg_unsupported(c, n, "attribute case_change_action='%s'", action);
  if (!ascii_case_locale(locale))
    return cg_unsupported(c, n, "attribute locale='%s' (only ASCII case mapping: \"\", C, en*)", locale);
  /* the output holds max(C, 1) strings: the planned (maximum) shape */
  int64_t slots = count > 0 ? count : 1;
  if (yd[rank - 1] != slots || (rank == 2 && yd[0] != 1))
    return cg_unsupported(c, n, "output shape is not the planned [max(C, 1)]");
  const char *dims = cg_bounded_dims(c, y);
  int exact = count >= 1 && n_stop == 0; /* every string kept */
  if (!dims && !exact)
    return cg_unsupported(c, n, "the output's length is known only at run time, so it must be a graph output "
                                "that no node reads");
  /* the locale attribute cannot change an ASCII mapping; is_case_sensitive
   * matters only with stopwords but is honoured either way */
  const char *stop = n_stop ? cg_strs(c, stopwords, n_stop) : "0";
  const char *prm = cg_static(c, "mg_string_normalizer_params", "{%lld, %s, %d, %d, %s}", (long long)count, how,
                              sensitive != 0, n_stop, stop);
  const char *pool = strcmp(how, "MG_CASE_NONE") ? cg_string_pool(c) : "0";
  cg_line(c, "{");
  cg_line(c, "  int64_t kept;");
  cg_line(c, "  int rc = mg_string_normalizer(&%s, %s, %s, &kept, %s);", prm, cg_in(c, x), cg_out(c, y), pool);
  cg_line(c, "  if (rc) return rc;");
  if (dims) cg_line(c, "  %s[%d] = kept;", dims, rank - 1);
  else cg_line(c, "  (void)kept;");
  cg_line(c, "}");
  cg_need(c, "strings.c");
  return 0;
}
