/* Growable text and identifiers, for every target's generated sources. */
#ifndef MG_CG_TEXT_H
#define MG_CG_TEXT_H
#include <stdarg.h>
#include <stddef.h>

typedef struct {
  char *s;
  size_t len, cap;
  int failed; /* an allocation failed: the text is incomplete */
} cg_buf;

void cg_buf_printf(cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cg_buf_vprintf(cg_buf *b, const char *fmt, va_list ap);
void cg_buf_free(cg_buf *b);
/* Appends s as a C string literal: quotes, backslashes, '?' (trigraphs) and bytes
 * outside printable ASCII as octal escapes, so any bytes survive exactly. */
void cg_buf_c_literal(cg_buf *b, const char *s);
/* A C (and Python) identifier from any name: other characters become '_', a
 * leading digit is prefixed; written to out (n bytes). */
void cg_ident(const char *name, char *out, size_t n);
#endif
