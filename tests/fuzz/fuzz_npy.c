/* libFuzzer target: the .npy reader (interp/npy.c), the format of every --input.
 *
 * Each input is the bytes of a .npy file (a crash artifact reproduces with
 * `migc run MODEL --input x=ARTIFACT`), read from memory with npy_read_mem. The
 * target aborts on a logic error no input may provoke: a failure with no error
 * recorded, or a success with errors recorded or with an array whose byte count
 * disagrees with its dims and dtype. Everything is freed before the next input, so
 * LeakSanitizer sees every leak. */
#include "diag.h"
#include "npy.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Aborts (a libFuzzer crash with this input as the artifact) with a reason. */
static void die(const char *why) {
  fprintf(stderr, "fuzz_npy: %s\n", why);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mg_diags d;
  mg_diags_init(&d);
  mg_array a = {0};
  int rc = npy_read_mem(data, size, "fuzz.npy", &a, &d);
  if (rc && !d.errors) die("failed with no error recorded");
  if (!rc) {
    if (d.errors) die("succeeded with errors recorded");
    size_t n = 1;
    for (int k = 0; k < a.rank; k++) {
      if (a.dims[k] < 0) die("a negative dim");
      n *= (size_t)a.dims[k];
    }
    if (a.dtype != MG_STRING && a.nbytes != n * mg_dtype_size(a.dtype)) die("bytes disagree with dims and dtype");
    mg_array_free(&a);
  }
  mg_diags_free(&d);
  return 0;
}
