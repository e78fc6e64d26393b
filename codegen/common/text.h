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
/* Appends s as a Python 3 str literal in double quotes, ASCII only: quotes and
 * backslashes escaped, control characters and DEL as \xNN, every other non-ASCII
 * character decoded from UTF-8 as \uXXXX or \UXXXXXXXX, so the literal reads back
 * as exactly the string s names and no byte of s can end it or start a new line.
 * Bytes that are not UTF-8 become \xNN (U+00NN): check with cg_utf8_valid first
 * where the text must round-trip. */
void cg_buf_py_literal(cg_buf *b, const char *s);
/* Appends s for a comment or a line of prose: UTF-8 as it is, control characters,
 * DEL and bytes that are not UTF-8 as \xNN, so the text stays on its line and the
 * file stays UTF-8. */
void cg_buf_printable(cg_buf *b, const char *s);
/* Appends s as one POSIX shell word in single quotes (' as '\''): nothing in it
 * is expanded, so $(...), backquotes and newlines stay text. */
void cg_buf_sh_literal(cg_buf *b, const char *s);
/* 1 when s is well-formed UTF-8 (no overlong forms, surrogates or code points
 * past U+10FFFF), else 0. */
int cg_utf8_valid(const char *s);
/* A C (and Python) identifier from any name: other characters become '_', a
 * leading digit is prefixed; written to out (n bytes). */
void cg_ident(const char *name, char *out, size_t n);
#endif
