/* libFuzzer target: the .safetensors reader (weights/safetensors.c) alone, from
 * memory: the 8-byte header length, the JSON header (dtypes, shapes, offsets,
 * __metadata__) and the tensors it lays over the data. fuzz_unpickle reaches it
 * only for inputs whose ninth byte is '{'; here every input is a safetensors file,
 * so a crash artifact reproduces with `migc weights ARTIFACT -o OUT.ckpt`. The
 * checks (a failure records an error, a success records none, every tensor reads
 * back) and MIGC_FUZZ_FAULTS are fuzz_unpickle.c's, compiled here with the reader
 * fixed. */
#define FUZZ_SAFETENSORS_ONLY 1
#define FUZZ_NAME "fuzz_safetensors"
#include "fuzz_unpickle.c"
