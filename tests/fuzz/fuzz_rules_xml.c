/* libFuzzer target: the XML users give migc (xml/safe_xml.c), read as a rules file
 * of each target (mapping/rules.c) and as naming rules (weights/rename.c).
 *
 * The readers take paths, so each input is written to one temporary file per
 * process and read from there (a crash artifact reproduces with `migc coverage
 * MODEL --rules ARTIFACT`). The target aborts on a logic error no input may
 * provoke: a failure with no error recorded, or a success with errors recorded.
 * Everything is freed before the next input, so LeakSanitizer sees every leak. */
#include "diag.h"
#include "mapping.h"
#include "rename.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a libFuzzer crash with this input as the artifact) with a reason. */
static void die(const char *what, const char *why) {
  fprintf(stderr, "fuzz_rules_xml: %s: %s\n", what, why);
  abort();
}

/* The per-process file the input is written to; removed at exit. */
static char path[64];

static void remove_path(void) { unlink(path); }

/* The contract every reader must keep: an error recorded exactly when it fails. */
static void check(const char *what, int rc, const mg_diags *d) {
  if (rc && !d->errors) die(what, "failed with no error recorded");
  if (!rc && d->errors) die(what, "succeeded with errors recorded");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) {
    snprintf(path, sizeof path, "/tmp/fuzz_rules_xml.%ld.xml", (long)getpid());
    atexit(remove_path);
  }
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f)) die("temporary file", "cannot write it");
  static const char *const targets[] = {"mindspore", "ascend"};
  for (int t = 0; t < 2; t++) {
    mg_diags d;
    mg_diags_init(&d);
    rule_set *rs = rules_new(targets[t]);
    if (!rs) die("rules_new", "out of memory");
    check(targets[t], rules_load(rs, path, &d), &d);
    rules_free(rs);
    mg_diags_free(&d);
  }
  mg_diags d;
  mg_diags_init(&d);
  wt_rules *r = wt_rules_new();
  if (!r) die("wt_rules_new", "out of memory");
  check("naming rules", wt_rules_load(r, path, &d), &d);
  wt_rules_free(r);
  mg_diags_free(&d);
  return 0;
}
