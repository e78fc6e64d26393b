/* libFuzzer target: ONNX import, then the whole preparation pipeline.
 *
 * Each input is treated as the bytes of a .onnx file (so every crash artifact is
 * itself a model that reproduces with `migc inspect`). It is imported from memory
 * with no model directory (external data is an error, the filesystem is never
 * touched), and a model that imports is run through mg_prepare(): inference,
 * constant folding, identity elimination, DCE. Everything is freed before the
 * next input; ASan/LSan report any leak and UBSan (built with
 * -fno-sanitize-recover) aborts on undefined behaviour.
 *
 * Besides crashes and leaks the target aborts on two logic errors that no input
 * may provoke:
 *   - an import that succeeds with a model breaking the IR invariants of ir.h, or a
 *     pass that breaks them ("IR invariant broken" diagnostics, which ir_verify()
 *     records; the library is built without NDEBUG so mg_prepare verifies between
 *     passes);
 *   - a failing call that records no error diagnostic (the CLI would then exit 2
 *     with nothing to show).
 *
 * MIGC_FUZZ_FAULTS=1 in the environment adds allocation-failure injection: every
 * input runs once normally to count its allocations, then again with allocation
 * number 1 + hash(input) % count (and every later one) failing, so the error paths
 * of the importer and the passes are checked for leaks and crashes too. The choice
 * is a function of the input alone, so reproducers stay deterministic. */
#include "arena.h"
#include "diag.h"
#include "ir.h"
#include "onnx_import.h"
#include "passes.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fault_mode; /* MIGC_FUZZ_FAULTS set: second run with an injected failure */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *e = getenv("MIGC_FUZZ_FAULTS");
  fault_mode = e && *e && strcmp(e, "0") != 0;
  return 0;
}

static void print_diags(const mg_diags *d) {
  char line[2048];
  for (size_t i = 0; i < d->count; i++) {
    mg_diag_format(&d->items[i], line, sizeof line);
    fprintf(stderr, "  %s\n", line);
  }
}

/* Aborts (a libFuzzer crash with this input as the artifact) with a reason. */
static void die(const char *why, const mg_diags *d) {
  fprintf(stderr, "fuzz_onnx_import: %s\n", why);
  if (d) print_diags(d);
  abort();
}

/* ir_verify() records each violation as a GRAPH error whose message starts with
 * this prefix (passes.c). Only the start is compared: names taken from the input
 * appear later in other messages, and the fuzzer soon learns to put this text in
 * them. */
static int has_broken_invariant(const mg_diags *d) {
  static const char prefix[] = "IR invariant broken: ";
  for (size_t i = 0; i < d->count; i++) {
    const mg_diag *g = &d->items[i];
    if (g->code == MG_D_GRAPH && g->message &&
        strncmp(g->message, prefix, sizeof prefix - 1) == 0)
      return 1;
  }
  return 0;
}

/* One import + prepare. `injecting` relaxes the checks that an allocation failure
 * legitimately defeats (an OOM diagnostic may itself fail to be stored). */
static void run_once(const uint8_t *data, size_t size, int injecting) {
  mg_diags d;
  mg_diags_init(&d);
  mg_model *m = NULL;
  /* libFuzzer passes data == NULL for the empty input; the importer must not
   * dereference it when len is 0, but keep the pointer valid regardless. */
  static const uint8_t empty[1];
  int rc = onnx_import_buffer(size ? (const void *)data : empty, size, NULL, &d, &m);
  if (rc != 0) {
    if (m) die("onnx_import_buffer failed but returned a model", &d);
    if (!d.errors && !injecting) die("onnx_import_buffer failed without an error diagnostic", &d);
    if (has_broken_invariant(&d)) die("import broke an IR invariant", &d);
    mg_diags_free(&d);
    return;
  }
  if (!m) die("onnx_import_buffer succeeded without a model", &d);
  if (d.errors) die("onnx_import_buffer succeeded but recorded errors", &d);

  /* The importer's promise: a model it returns satisfies ir.h's invariants. */
  mg_diags vd;
  mg_diags_init(&vd);
  if (ir_verify(m, &vd) != 0) die("imported model breaks an IR invariant", &vd);
  mg_diags_free(&vd);

  rc = mg_prepare(m, NULL, 0, &d);
  if (has_broken_invariant(&d)) die("mg_prepare broke an IR invariant", &d);
  if (rc != 0) {
    if (!d.errors && !injecting) die("mg_prepare failed without an error diagnostic", &d);
  } else {
    mg_diags_init(&vd);
    if (ir_verify(m, &vd) != 0) die("prepared model breaks an IR invariant", &vd);
    mg_diags_free(&vd);
  }
  mg_model_free(m);
  mg_diags_free(&d);
}

/* FNV-1a: picks the allocation to fail from the input alone. */
static uint64_t hash_bytes(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!fault_mode) {
    run_once(data, size, 0);
    return 0;
  }
  mg_fault_fail_at(0, 0); /* disarm, and reset the allocation counter */
  run_once(data, size, 0);
  long n = mg_fault_count();
  if (n > 0) {
    long k = 1 + (long)(hash_bytes(data, size) % (uint64_t)n);
    mg_fault_fail_at(k, 1);
    run_once(data, size, 1);
    mg_fault_fail_at(0, 0);
  }
  return 0;
}
