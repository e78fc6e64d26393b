/* NumPy .npy and .npz files: the reference tensors that verify/ compares against.
 *
 * Reading accepts format versions 1.0, 2.0 and 3.0 and the dtypes float16/32/64,
 * int8/16/32/64, uint8/16/32/64, bool and complex64/128. Data comes back in the
 * host's byte order and in C (row-major) order whatever the file used: big-endian
 * ('>') data is byte-swapped and fortran_order arrays are transposed. Bool bytes
 * are normalised to 0/1. Unicode arrays ('<U<n>', UTF-32 NUL-padded) read as
 * MG_STRING: an array of owned UTF-8 strings, trailing NULs dropped. Everything
 * else (structured, bytes, object dtypes) is rejected with an unsupported-dtype
 * diagnostic.
 *
 * Writing produces format 1.0 (2.0 only if the header would not fit 1.0), in the
 * host's byte order, C order, header padded to 64 bytes as numpy does. MG_STRING
 * arrays (.npy only) are written as '<U<n>', n the longest string in code points
 * (at least 1, as numpy does). Files are replaced atomically: a temporary file in
 * the same directory is written, fsynced and renamed over the target, so a reader
 * never sees a half-written file.
 *
 * All functions return 0 on success and -1 on error, with the reason recorded in
 * `d`; on error the outputs are left empty and nothing needs freeing. */
#ifndef MG_NPY_H
#define MG_NPY_H
#include <stddef.h>
#include <stdint.h>
#include "diag.h"
#include "dtype.h"

enum { MG_ARRAY_MAX_RANK = 16 };

typedef struct {
  mg_dtype dtype;
  int rank;                          /* 0 for a scalar (0-d array) */
  int64_t dims[MG_ARRAY_MAX_RANK];
  void *data;                        /* owned; C order, host byte order; for
                                        MG_STRING an array of owned char * */
  size_t nbytes;                     /* product(dims) * mg_dtype_size(dtype) */
  char *name;                        /* owned; npz member name without ".npy", or NULL */
} mg_array;

/* Read one .npy file. `out` is overwritten; free it with mg_array_free. */
int npy_read_file(const char *path, mg_array *out, mg_diags *d);
/* Read an .npy image held in memory; `what` names it in diagnostics. */
int npy_read_mem(const void *buf, size_t len, const char *what, mg_array *out, mg_diags *d);
/* Write `a` (name ignored) to `path` atomically. bfloat16 is rejected. */
int npy_write_file(const char *path, const mg_array *a, mg_diags *d);

/* Read every member of an .npz (stored or deflated). On success *arrays holds
 * *count arrays in archive order (free with mg_arrays_free, also when *count
 * is 0); names are set. Directory entries are skipped; any other member that
 * is not a valid .npy fails the whole read. */
int npz_read_file(const char *path, mg_array **arrays, int *count, mg_diags *d);
/* Write `count` arrays to an .npz atomically; members are "<name>.npy", or
 * "arr_<i>.npy" for unnamed arrays as numpy.savez does. Duplicate names are an
 * error. `compress` selects deflate instead of stored. */
int npz_write_file(const char *path, const mg_array *arrays, int count, int compress,
                   mg_diags *d);

/* Free the data and name of one array and empty it; safe on an emptied array. */
void mg_array_free(mg_array *a);
/* Free n arrays and the block holding them (as returned by npz_read_file). */
void mg_arrays_free(mg_array *a, int n);
#endif
