/* Diagnostics: errors about the input are recorded here, never printed.
 *
 * Library code reports bad input with mg_error() / mg_warn() (mg_diag_add) and
 * returns a status; only cli/ prints the recorded list. Internal bugs are asserts, not diagnostics. */
#ifndef MG_DIAG_H
#define MG_DIAG_H
#include <stddef.h>

#define MG_DIAG_CODES(X)                                                              \
  X(IO, "io")                     /* a file could not be opened, read or written */    \
  X(MALFORMED, "malformed")       /* the bytes do not decode (protobuf, zip, pickle) */ \
  X(INVALID, "invalid")           /* decodes, but breaks the format's rules */          \
  X(GRAPH, "graph")               /* dangling input, cycle, duplicate output */         \
  X(UNKNOWN_OP, "unknown-op")     /* op or domain migc does not know */                 \
  X(UNSUPPORTED_ATTR, "unsupported-attribute")                                          \
  X(UNSUPPORTED_DTYPE, "unsupported-dtype")                                             \
  X(SHAPE, "shape")               /* shapes that cannot agree */                        \
  X(LIMIT, "limit")               /* beyond a documented implementation limit */        \
  X(OOM, "out-of-memory")                                                               \
  X(USAGE, "usage")                                                                     \
  X(UNSUPPORTED, "unsupported")   /* valid, but a target cannot take it (yet) */

typedef enum {
#define X(name, str) MG_D_##name,
  MG_DIAG_CODES(X)
#undef X
      MG_D_COUNT
} mg_diag_code;

typedef enum { MG_SEV_ERROR, MG_SEV_WARNING, MG_SEV_NOTE } mg_severity;

typedef struct {
  mg_diag_code code;
  mg_severity severity;
  char *file; /* input file the problem is in, or NULL */
  char *node; /* node name (or value name), or NULL */
  char *op;   /* op type, or NULL */
  char *message;
} mg_diag;

/* Records kept per list: beyond this they are counted (errors, warnings,
 * dropped) but not stored. */
enum { MG_DIAG_CAP = 10000 };

typedef struct mg_diags {
  mg_diag *items;
  size_t count, cap;
  size_t errors, warnings;
  size_t dropped;  /* records lost to the cap or to allocation failure */
  const char *file; /* default file for new records; borrowed */
} mg_diags;

void mg_diags_init(mg_diags *d);
void mg_diags_free(mg_diags *d);
const char *mg_diag_code_name(mg_diag_code c);

/* Record a diagnostic. Strings are copied; node and op may be NULL. The error
 * count is kept exact even when the record itself cannot be stored. */
void mg_diag_add(mg_diags *d, mg_severity sev, mg_diag_code code, const char *node,
                 const char *op, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define mg_error(d, code, node, op, ...) \
  mg_diag_add((d), MG_SEV_ERROR, MG_D_##code, (node), (op), __VA_ARGS__)
#define mg_warn(d, code, node, op, ...) \
  mg_diag_add((d), MG_SEV_WARNING, MG_D_##code, (node), (op), __VA_ARGS__)

/* Whether d recorded running out of memory from item first on, or lost a record
 * to it (below the cap, a record is lost only for want of memory): a check that
 * failed so says nothing about its input, and its caller must fail too. */
int mg_diags_oom(const mg_diags *d, size_t first);

/* One line per diagnostic: "FILE: error[CODE]: node 'N' (Op): message". */
int mg_diag_format(const mg_diag *g, char *buf, size_t n);
#endif
