/* libFuzzer target: the MindSpore checkpoint reader (weights/ckpt.c).
 *
 * Each input is the bytes of a .ckpt file (so a crash artifact reproduces with
 * `migc ckpt dump`), read from memory with ckpt_open_buffer. An input that opens
 * must give tensors that read back: every tensor is read whole and again in pieces
 * of varying size (crossing the chunk boundaries of joined tensors), and the two
 * must agree. Everything is freed before the next input; ASan/LSan report leaks
 * and UBSan (built with -fno-sanitize-recover) aborts on undefined behaviour.
 *
 * The target aborts on logic errors no input may provoke: a failure without an
 * error diagnostic or with a source left behind, a success with errors recorded,
 * a tensor whose type has no MindSpore name, or a read of an opened tensor that
 * fails or disagrees with itself.
 *
 * MIGC_FUZZ_FAULTS=1 adds allocation-failure injection as in fuzz_onnx_import.c:
 * each input runs once to count its allocations, then again with allocation
 * 1 + hash(input) % count (and every later one) failing. */
#include "arena.h"
#include "ckpt_internal.h"
#include "diag.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fault_mode;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *e = getenv("MIGC_FUZZ_FAULTS");
  fault_mode = e && *e && strcmp(e, "0") != 0;
  return 0;
}

/* Aborts (a libFuzzer crash with this input as the artifact) with a reason. */
static void die(const char *why, const mg_diags *d) {
  fprintf(stderr, "fuzz_ckpt: %s\n", why);
  char line[2048];
  for (size_t i = 0; d && i < d->count; i++) {
    mg_diag_format(&d->items[i], line, sizeof line);
    fprintf(stderr, "  %s\n", line);
  }
  abort();
}

/* Reads every tensor whole and in pieces; the two must agree. */
static void read_all(const wt_source *s, mg_diags *d) {
  for (int i = 0; i < wt_count(s); i++) {
    const wt_tensor *t = wt_get(s, i);
    if (!wt_ms_type_name(t->dtype)) die("a tensor without a MindSpore type", d);
    size_t es = mg_dtype_size(t->dtype);
    int64_t n = wt_numel(t);
    /* n * es is at most the input size: the reader checked content against dims */
    unsigned char *whole = malloc((size_t)n * es + 1), *parts = malloc((size_t)n * es + 1);
    if (!whole || !parts) die("test-side allocation failed", NULL);
    if (wt_read(s, t, 0, n, whole, d)) die("a tensor that opened does not read", d);
    int64_t step = 1;
    for (int64_t k = 0; k < n; k += step, step = step * 3 % 17 + 1) {
      int64_t cnt = n - k < step ? n - k : step;
      if (wt_read(s, t, k, cnt, parts + k * (int64_t)es, d)) die("a piece of a tensor does not read", d);
    }
    if (n && memcmp(whole, parts, (size_t)n * es)) die("whole and piecewise reads disagree", d);
    free(whole);
    free(parts);
  }
}

static void run_once(const uint8_t *data, size_t size, int injecting) {
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = NULL;
  static const uint8_t empty[1];
  int rc = ckpt_open_buffer(size ? (const void *)data : empty, size, "fuzz", &s, &d);
  if (rc != 0) {
    if (s) die("ckpt_open_buffer failed but returned a source", &d);
    if (!d.errors) die("ckpt_open_buffer failed without an error diagnostic", &d);
    mg_diags_free(&d);
    return;
  }
  if (!s) die("ckpt_open_buffer succeeded without a source", &d);
  if (d.errors) die("ckpt_open_buffer succeeded but recorded errors", &d);
  if (wt_count(s) < 1) die("a checkpoint with no tensors opened", &d);
  ckpt_info info;
  if (ckpt_source_info(s, &info) || info.n_values < wt_count(s)) die("inconsistent ckpt_info", &d);
  (void)injecting; /* reading allocates nothing, so injection cannot excuse a failure */
  read_all(s, &d);
  wt_close(s);
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
  mg_fault_fail_at(0, 0);
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
