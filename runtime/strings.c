/* String tensor kernels; see mg_rt_strings.h. */
#include "mg_runtime.h"

#include <string.h>

char *mg_rt_pool_put(mg_rt_string_pool *pool, const char *s, size_t n) {
  char *out;
  if (!pool || !pool->base || pool->used > pool->cap || n >= pool->cap - pool->used) return NULL;
  out = pool->base + pool->used;
  memcpy(out, s, n);
  out[n] = 0;
  pool->used += n + 1;
  return out;
}

/* ASCII (C locale) case mapping, independent of the process's locale. */
static unsigned char ascii_lower(unsigned char ch) { return ch >= 'A' && ch <= 'Z' ? (unsigned char)(ch + 32) : ch; }
static unsigned char ascii_upper(unsigned char ch) { return ch >= 'a' && ch <= 'z' ? (unsigned char)(ch - 32) : ch; }

/* Whether a equals b ignoring ASCII case (as strcasecmp in the C locale). */
static int ascii_equal_nocase(const char *a, const char *b) {
  const unsigned char *p = (const unsigned char *)a, *q = (const unsigned char *)b;
  for (; *p && *q; p++, q++)
    if (ascii_lower(*p) != ascii_lower(*q)) return 0;
  return *p == *q;
}

static int is_stopword(const mg_string_normalizer_params *p, const char *s) {
  int k;
  for (k = 0; k < p->n_stopwords; k++)
    if (p->case_sensitive ? !strcmp(s, p->stopwords[k]) : ascii_equal_nocase(s, p->stopwords[k])) return 1;
  return 0;
}

/* s with its case changed: s itself when no byte changes, else a pool copy;
 * NULL when the pool is full. */
static const char *change_case(const char *s, mg_case_change how, mg_rt_string_pool *pool) {
  const unsigned char *q;
  size_t n, i;
  char *out;
  if (how == MG_CASE_NONE) return s;
  for (q = (const unsigned char *)s; *q; q++)
    if ((how == MG_CASE_LOWER ? ascii_lower(*q) : ascii_upper(*q)) != *q) break;
  if (!*q) return s;
  n = strlen(s);
  out = mg_rt_pool_put(pool, s, n);
  if (!out) return NULL;
  for (i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)out[i];
    out[i] = (char)(how == MG_CASE_LOWER ? ascii_lower(ch) : ascii_upper(ch));
  }
  return out;
}

int mg_string_normalizer(const mg_string_normalizer_params *p, const char *const *x, const char **y, int64_t *kept,
                         mg_rt_string_pool *pool) {
  int64_t i, j = 0, slots = p->count > 0 ? p->count : 1;
  /* j <= i throughout, so y may equal x */
  for (i = 0; i < p->count; i++) {
    const char *s = x[i];
    if (is_stopword(p, s)) continue;
    s = change_case(s, p->case_change, pool);
    if (!s) return MG_RT_ENOMEM;
    y[j++] = s;
  }
  if (!j) y[j++] = "";
  *kept = j;
  for (; j < slots; j++) y[j] = "";
  return MG_RT_OK;
}
