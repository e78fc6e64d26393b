/* JUnit XML writer (see junit.h). */
#include "junit.h"
#include "outfile.h"
#include <errno.h>
#include <libxml/xmlwriter.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int attr_f(xmlTextWriterPtr w, const char *name, double v) {
  return xmlTextWriterWriteFormatAttribute(w, (const xmlChar *)name, "%.6f", v);
}

int junit_write(const char *path, const char *suite, const junit_case *cases, int n, double time, mg_diags *d) {
  /* the file is opened here, not by libxml2, whose I/O errors would print; by the
   * output rule (core/outfile.h) */
  mg_out_file o;
  if (mg_out_fopen(&o, path, d)) return -1;
  FILE *f = o.f;
  xmlOutputBufferPtr ob = xmlOutputBufferCreateFile(f, NULL);
  xmlTextWriterPtr w = ob ? xmlNewTextWriter(ob) : NULL;
  if (!w) {
    if (ob) xmlOutputBufferClose(ob);
    mg_out_abort(&o);
    mg_error(d, OOM, path, NULL, "no memory for the JUnit writer");
    return -1;
  }
  int failures = 0, errors = 0;
  for (int i = 0; i < n; i++) failures += cases[i].status == JUNIT_FAILURE, errors += cases[i].status == JUNIT_ERROR;
  int bad = 0;
  xmlTextWriterSetIndent(w, 1);
  bad |= xmlTextWriterStartDocument(w, NULL, "UTF-8", NULL) < 0;
  bad |= xmlTextWriterStartElement(w, (const xmlChar *)"testsuites") < 0;
  bad |= xmlTextWriterStartElement(w, (const xmlChar *)"testsuite") < 0;
  bad |= xmlTextWriterWriteAttribute(w, (const xmlChar *)"name", (const xmlChar *)suite) < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, (const xmlChar *)"tests", "%d", n) < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, (const xmlChar *)"failures", "%d", failures) < 0;
  bad |= xmlTextWriterWriteFormatAttribute(w, (const xmlChar *)"errors", "%d", errors) < 0;
  bad |= attr_f(w, "time", time) < 0;
  for (int i = 0; i < n && !bad; i++) {
    const junit_case *c = &cases[i];
    bad |= xmlTextWriterStartElement(w, (const xmlChar *)"testcase") < 0;
    bad |= xmlTextWriterWriteAttribute(w, (const xmlChar *)"name", (const xmlChar *)c->name) < 0;
    bad |= xmlTextWriterWriteAttribute(w, (const xmlChar *)"classname", (const xmlChar *)c->classname) < 0;
    bad |= attr_f(w, "time", c->time) < 0;
    if (c->status != JUNIT_PASS) {
      bad |= xmlTextWriterStartElement(w, (const xmlChar *)(c->status == JUNIT_FAILURE ? "failure" : "error")) < 0;
      bad |= xmlTextWriterWriteAttribute(w, (const xmlChar *)"message",
                                         (const xmlChar *)(c->message ? c->message : "")) < 0;
      bad |= xmlTextWriterWriteAttribute(w, (const xmlChar *)"type", (const xmlChar *)(c->type ? c->type : "parity")) < 0;
      if (c->details) bad |= xmlTextWriterWriteString(w, (const xmlChar *)c->details) < 0;
      bad |= xmlTextWriterEndElement(w) < 0;
    }
    bad |= xmlTextWriterEndElement(w) < 0;
  }
  bad |= xmlTextWriterEndDocument(w) < 0; /* closes every open element */
  xmlFreeTextWriter(w); /* flushes into f, which stays ours to close */
  if (bad) {
    mg_out_abort(&o);
    mg_error(d, IO, path, NULL, "cannot write the JUnit report");
    return -1;
  }
  return mg_out_commit(&o, d);
}
