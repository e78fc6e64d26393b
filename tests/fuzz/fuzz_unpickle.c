/* libFuzzer target: the restricted unpickler and the .pth / .safetensors readers,
 * from memory.
 *
 * Each input is treated as the bytes of a weights file, and the reader is chosen
 * by content the way weights_open() does: a zip archive goes to the .pth zip
 * reader (libzip over the buffer; storages read through zip_fseek/zip_fread), a
 * pickle that starts with the legacy magic to the legacy reader, an 8-byte length
 * followed by '{' to the safetensors reader, and anything else is unpickled as a
 * bare data.pkl (pth_open_pickle_buffer: tensors are listed, storages read as
 * zeros). So every crash artifact is itself a file that reproduces with
 * `migc weights`, except bare pickles, which reproduce inside a zip.
 *
 * A source that opens is read back: up to 4096 elements of each tensor, whole
 * and then in odd-sized chunks, so the strided reader and the zip window cache
 * run on whatever views the input builds. Everything is freed before the next
 * input; ASan/LSan report any leak and UBSan (-fno-sanitize-recover) aborts on
 * undefined behaviour.
 *
 * Besides crashes and leaks the target aborts on logic errors no input may
 * provoke: a failing call that records no error diagnostic, a success that
 * records errors or returns no source, and a failure that returns one.
 *
 * MIGC_FUZZ_FAULTS=1 adds allocation-failure injection as in fuzz_onnx_import.c:
 * each input runs once to count its allocations, then again with allocation
 * 1 + hash(input) % count (and every later one) failing. */
#include "arena.h"
#include "diag.h"
#include "unpickle.h"
#include "weights.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifndef FUZZ_NAME
#define FUZZ_NAME "fuzz_unpickle" /* how a finding names the target */
#endif

static int fault_mode;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *e = getenv("MIGC_FUZZ_FAULTS");
  fault_mode = e && *e && strcmp(e, "0") != 0;
  return 0;
}

static void die(const char *why, const mg_diags *d) {
  char line[2048];
  fprintf(stderr, "%s: %s\n", FUZZ_NAME, why);
  for (size_t i = 0; d && i < d->count; i++) {
    mg_diag_format(&d->items[i], line, sizeof line);
    fprintf(stderr, "  %s\n", line);
  }
  abort();
}

/* The reader weights_open() would pick for these bytes (fuzz_safetensors.c and
 * fuzz_legacy_pth.c build this file with FUZZ_SAFETENSORS_ONLY or
 * FUZZ_LEGACY_PTH_ONLY: every input goes to that one reader, so its parser gets all
 * the fuzzer's time instead of the other formats' magic). */
static int open_any(const uint8_t *b, size_t n, wt_source **s, mg_diags *d) {
#if defined FUZZ_SAFETENSORS_ONLY
  return safetensors_open_buffer(b, n, s, d);
#elif defined FUZZ_LEGACY_PTH_ONLY
  return pth_open_buffer(b, n, NULL, s, d);
#endif
  if (n >= 4 && b[0] == 'P' && b[1] == 'K') return pth_open_buffer(b, n, NULL, s, d);
  if (n >= 4 && b[0] == 0x80 && b[2] == 0x8a && b[3] == 0x0a) return pth_open_buffer(b, n, NULL, s, d);
  if (n >= 9 && b[8] == '{') return safetensors_open_buffer(b, n, s, d);
  /* A key taken from the input's last byte now and then, so that dotted-path
   * selection runs too. */
  static const char *keys[] = {"state_dict", "model", "w", "optimizer.state", "0", "a.b"};
  const char *key = n && (b[n - 1] & 0xf0) == 0x50 ? keys[b[n - 1] % 6] : NULL;
  return pth_open_pickle_buffer(b, n, key, s, d);
}

static void run_once(const uint8_t *data, size_t size, int injecting) {
  static const uint8_t empty[1];
  const uint8_t *b = size ? data : empty;
  mg_diags d;
  mg_diags_init(&d);
  wt_source *s = NULL;
  int rc = open_any(b, size, &s, &d);
  if (rc != 0) {
    if (s) die("open failed but returned a source", &d);
    if (!d.errors && !injecting) die("open failed without an error diagnostic", &d);
    mg_diags_free(&d);
    return;
  }
  if (!s) die("open succeeded without a source", &d);
  if (d.errors) die("open succeeded but recorded errors", &d);
  static unsigned char buf[4096 * 16];
  for (int i = 0; i < wt_count(s); i++) {
    const wt_tensor *t = wt_get(s, i);
    size_t es = mg_dtype_size(t->dtype);
    if (!es || es > 16) die("tensor with an element size outside 1..16", NULL);
    int64_t n = wt_numel(t);
    if (n > 4096) n = 4096;
    mg_diags rd;
    mg_diags_init(&rd);
    /* The open checked every view against its storage: reads cannot fail except
     * for allocation failures (a compressed entry or a cache being loaded) and
     * archives whose entries are damaged past the central directory. */
    if (wt_read(s, t, 0, n, buf, &rd) == 0) {
      for (int64_t f = 0; f < n; f += 7)
        if (wt_read(s, t, f, n - f < 7 ? n - f : 7, buf, &rd)) break;
    } else if (!rd.errors && !injecting) {
      die("wt_read failed without an error diagnostic", &rd);
    }
    mg_diags_free(&rd);
  }
  wt_close(s);
  mg_diags_free(&d);
}

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
    mg_fault_fail_at(1 + (long)(hash_bytes(data, size) % (uint64_t)n), 1);
    run_once(data, size, 1);
    mg_fault_fail_at(0, 0);
  }
  return 0;
}
