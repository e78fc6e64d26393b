/* Growable text and identifiers, for every target's generated sources. */
#include "text.h"
#include "arena.h"
#include <stdio.h>
#include <string.h>

void cg_buf_vprintf(cg_buf *b, const char *fmt, va_list ap) {
  if (b->failed) return;
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *s = mg_realloc(b->s, cap);
    if (!s) {
      b->failed = 1;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
}

void cg_buf_printf(cg_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  cg_buf_vprintf(b, fmt, ap);
  va_end(ap);
}

void cg_buf_free(cg_buf *b) {
  mg_free(b->s);
  memset(b, 0, sizeof *b);
}

void cg_buf_c_literal(cg_buf *b, const char *s) {
  cg_buf_printf(b, "\"");
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') cg_buf_printf(b, "\\%c", ch);
    else if (ch < 32 || ch >= 127 || ch == '?') cg_buf_printf(b, "\\%03o", ch);
    else cg_buf_printf(b, "%c", ch);
  }
  cg_buf_printf(b, "\"");
}

void cg_ident(const char *name, char *out, size_t n) {
  size_t k = 0;
  if (!name || !*name) name = "v";
  if (*name >= '0' && *name <= '9' && k + 1 < n) out[k++] = '_';
  for (; *name && k + 1 < n; name++) {
    char ch = *name;
    out[k++] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ? ch : '_';
  }
  out[k] = 0;
}
