/* libFuzzer target: the legacy (pre-zip, torch < 1.6) .pth reader alone, from
 * memory: the magic pickle, the protocol and system-info pickles, the restricted
 * unpickler on the object pickle, the storage-key list and the raw storages after
 * it. fuzz_unpickle reaches it only for inputs that keep the legacy magic; here
 * every input is a legacy .pth, so a crash artifact reproduces with `migc weights
 * ARTIFACT -o OUT.ckpt`. The checks and MIGC_FUZZ_FAULTS are fuzz_unpickle.c's,
 * compiled here with the reader fixed. */
#define FUZZ_LEGACY_PTH_ONLY 1
#define FUZZ_NAME "fuzz_legacy_pth"
#include "fuzz_unpickle.c"
