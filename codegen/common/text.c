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

/* The code point of the UTF-8 sequence at s, its length in *len; -1 (len 1) when
 * the bytes there are not a well-formed sequence. */
static long utf8_next(const unsigned char *s, int *len) {
  static const long min[5] = {0, 0, 0x80, 0x800, 0x10000};
  int n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
  *len = 1;
  if (!n) return -1;
  long cp = n == 1 ? s[0] : s[0] & (0x7f >> n);
  for (int i = 1; i < n; i++) {
    if ((s[i] & 0xc0) != 0x80) return -1; /* also stops at the terminating NUL */
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  *len = n;
  return cp;
}

int cg_utf8_valid(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n;
    if (utf8_next(p, &n) < 0) return 0;
    p += n;
  }
  return 1;
}

void cg_buf_py_literal(cg_buf *b, const char *s) {
  cg_buf_printf(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n;
    long cp = utf8_next(p, &n);
    if (cp == '"' || cp == '\\') cg_buf_printf(b, "\\%c", (int)cp);
    else if (cp < 0) cg_buf_printf(b, "\\x%02x", *p);
    else if (cp < 0x20 || cp == 0x7f) cg_buf_printf(b, "\\x%02lx", cp);
    else if (cp < 0x7f) cg_buf_printf(b, "%c", (int)cp);
    else if (cp <= 0xffff) cg_buf_printf(b, "\\u%04lx", cp);
    else cg_buf_printf(b, "\\U%08lx", cp);
    p += n;
  }
  cg_buf_printf(b, "\"");
}

void cg_buf_printable(cg_buf *b, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    int n;
    long cp = utf8_next(p, &n);
    if (cp < 0 || cp < 0x20 || cp == 0x7f) cg_buf_printf(b, "\\x%02x", *p);
    else cg_buf_printf(b, "%.*s", n, (const char *)p);
    p += n;
  }
}

void cg_buf_sh_literal(cg_buf *b, const char *s) {
  cg_buf_printf(b, "'");
  for (; *s; s++) {
    if (*s == '\'') cg_buf_printf(b, "'\\''");
    else cg_buf_printf(b, "%c", *s);
  }
  cg_buf_printf(b, "'");
}
