#include "safe_xml.h"
#include "arena.h"
#include "outfile.h"
#include <errno.h>
#include <stdint.h>
#include <libxml/parser.h>
#include <stdio.h>
#include <string.h>

static void quiet(void *ctx, const char *msg, ...) { (void)ctx, (void)msg; }

/* The file's bytes, NUL-terminated, in *text (mg_malloc'd): 0, or -1 after a
 * diagnostic. */
static int slurp(const char *path, char **text, size_t *len, mg_diags *d) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    mg_error(d, IO, NULL, NULL, "%s: cannot read: %s", path, strerror(errno));
    return -1;
  }
  mg_out_note_input_fd(fileno(f)); /* no output of this run replaces it */
  size_t cap = 0, n = 0;
  char *s = NULL;
  for (;;) {
    if (n + 4097 > cap) {
      if (cap > MG_XML_MAX_BYTES) {
        fclose(f), mg_free(s);
        mg_error(d, LIMIT, NULL, NULL, "%s: larger than %zu MiB, too large for an XML file of migc's",
                 path, MG_XML_MAX_BYTES >> 20);
        return -1;
      }
      char *t = mg_realloc(s, cap = 2 * cap + 4097);
      if (!t) {
        fclose(f), mg_free(s);
        mg_error(d, OOM, NULL, NULL, "%s: out of memory reading it", path);
        return -1;
      }
      s = t;
    }
    size_t got = fread(s + n, 1, cap - n - 1, f);
    n += got;
    if (!got) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    mg_free(s);
    mg_error(d, IO, NULL, NULL, "%s: cannot read", path);
    return -1;
  }
  s[n] = 0;
  *text = s, *len = n;
  return 0;
}

static int line_of(const char *text, const char *at) {
  int line = 1;
  for (const char *p = text; p < at; p++) line += *p == '\n';
  return line;
}

xmlDoc *mg_xml_read(const char *path, mg_diags *d) {
  char *text;
  size_t len;
  if (slurp(path, &text, &len, d)) return NULL;
  /* A DOCTYPE can only come before the root element, but searching the whole
   * text is simpler and refuses nothing a rules file needs. NUL bytes would hide
   * the rest from strstr: they are not XML either. */
  const char *dt = strstr(text, "<!DOCTYPE");
  if (dt || memchr(text, 0, len)) {
    mg_error(d, INVALID, NULL, NULL, "%s:%d: %s", path, dt ? line_of(text, dt) : 1,
             dt ? "a <!DOCTYPE is not accepted (migc's XML files have no use for a DTD or entities)"
                : "a NUL byte: not an XML text");
    mg_free(text);
    return NULL;
  }
  if (len > (size_t)INT32_MAX) len = (size_t)INT32_MAX; /* unreachable under MG_XML_MAX_BYTES */
  xmlSetGenericErrorFunc(NULL, quiet);
  xmlDoc *doc = xmlReadMemory(text, (int)len, path, NULL, XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
  mg_free(text);
  if (!doc) {
    const xmlError *e = xmlGetLastError();
    const char *msg = e && e->message ? e->message : "not well-formed XML";
    mg_error(d, MALFORMED, NULL, NULL, "%s:%d: %.*s", path, e ? e->line : 0, (int)strcspn(msg, "\n"), msg);
  }
  return doc;
}
