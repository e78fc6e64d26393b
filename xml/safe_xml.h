/* Reading the XML files migc takes from users (rules, naming rules, parity
 * policies) without trusting them: none of them has a use for a DTD, so a
 * document type declaration (and with it every entity but the five predefined
 * ones, the billion-laughs and external-entity attacks) is refused before
 * libxml2 sees the text, and libxml2 parses with no network, no DTD loading and
 * no entity substitution. */
#ifndef MG_SAFE_XML_H
#define MG_SAFE_XML_H
#include "diag.h"
#include <libxml/tree.h>

/* The largest XML file read (rules and policies are a few hundred KiB). */
#define MG_XML_MAX_BYTES ((size_t)64 << 20)

/* Parses the file at path. Returns the document (free with xmlFreeDoc), or NULL
 * with one diagnostic "path:line: reason" on d: unreadable (io), larger than
 * MG_XML_MAX_BYTES (limit), a <!DOCTYPE (invalid), or not well-formed
 * (malformed). */
xmlDoc *mg_xml_read(const char *path, mg_diags *d);
#endif
