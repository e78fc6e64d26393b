/* JUnit XML for CI: one <testsuite> in a <testsuites> root, in the shape of
 * Jenkins' junit-10.xsd (testsuite: name, tests, failures, errors, time; testcase:
 * name, classname, time; failure/error: message, type). Written with libxml2. */
#ifndef MG_JUNIT_H
#define MG_JUNIT_H
#include "diag.h"

typedef enum { JUNIT_PASS, JUNIT_FAILURE, JUNIT_ERROR } junit_status;

typedef struct {
  const char *name;
  const char *classname;
  junit_status status;
  const char *message;  /* the failure's one-line reason (metrics); NULL when passing */
  const char *type;     /* failure type, e.g. "parity" */
  const char *details;  /* element text (may be NULL) */
  double time;          /* seconds */
} junit_case;

/* Writes the report to path atomically (temporary file, then rename). 0 or -1. */
int junit_write(const char *path, const char *suite, const junit_case *cases, int n, double time, mg_diags *d);
#endif
