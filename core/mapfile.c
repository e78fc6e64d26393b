/* Mapped inputs and the SIGBUS handler (mapfile.h). */
#include "mapfile.h"
#include "outfile.h"
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* A slot is free while addr is 0. The handler may run at any moment: a slot's
 * len and path are complete before its addr is published, and addr is cleared
 * before the slot is reused. */
typedef struct {
  uintptr_t addr;
  size_t len;
  volatile int truncated;
  char path[256];
} map_slot;

static map_slot slots[MG_MAP_SLOTS];
static volatile sig_atomic_t n_truncated;
static volatile int first_truncated = -1; /* its slot's path is kept: see mg_unmap_file */
static char truncated_path[256];
static volatile int reported; /* mg_map_check has recorded it on some diagnostics */

static void on_sigbus(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  uintptr_t a = (uintptr_t)si->si_addr;
  for (int i = 0; i < MG_MAP_SLOTS; i++) {
    uintptr_t base = __atomic_load_n(&slots[i].addr, __ATOMIC_ACQUIRE);
    if (!base || a < base || a >= base + slots[i].len) continue;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE); /* async-signal-safe */
    uintptr_t from = a & ~(page - 1), end = base + slots[i].len;
    /* zero pages over the rest of the mapping: one fault per truncation */
    if (mmap((void *)from, end - from, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
      break;
    if (!slots[i].truncated) {
      slots[i].truncated = 1;
      if (first_truncated < 0) {
        memcpy(truncated_path, slots[i].path, sizeof truncated_path);
        first_truncated = i;
      }
      n_truncated++;
    }
    return; /* the read is retried and sees zeros */
  }
  signal(sig, SIG_DFL); /* not one of ours: the default action, on the retried access */
}

void mg_map_install_sigbus(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
}

void *mg_map_file(int fd, size_t len, const char *path) {
  void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) return p;
  mg_out_note_input_fd(fd);
  for (int i = 0; i < MG_MAP_SLOTS; i++) {
    uintptr_t zero = 0;
    /* claim the slot with a value no address has, so the handler skips it */
    if (!__atomic_compare_exchange_n(&slots[i].addr, &zero, (uintptr_t)1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
      continue;
    slots[i].len = 0; /* [1, 1): nothing matches while it is filled in */
    slots[i].truncated = 0;
    size_t n = path ? strlen(path) : 0;
    if (n >= sizeof slots[i].path) n = sizeof slots[i].path - 1;
    if (n) memcpy(slots[i].path, path, n);
    slots[i].path[n] = 0;
    slots[i].len = len;
    __atomic_store_n(&slots[i].addr, (uintptr_t)p, __ATOMIC_RELEASE);
    break;
  }
  return p;
}

void mg_unmap_file(void *addr, size_t len) {
  if (!addr) return;
  for (int i = 0; i < MG_MAP_SLOTS; i++)
    if (__atomic_load_n(&slots[i].addr, __ATOMIC_ACQUIRE) == (uintptr_t)addr) {
      __atomic_store_n(&slots[i].addr, (uintptr_t)0, __ATOMIC_RELEASE);
      break;
    }
  munmap(addr, len);
}

void mg_map_touch(const void *p, size_t n) {
  const volatile unsigned char *b = p;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char sink = 0;
  for (size_t i = 0; i < n; i += page) sink ^= b[i];
  if (n) sink ^= b[n - 1];
  (void)sink;
}

int mg_map_truncated(void) { return (int)n_truncated; }

int mg_map_reported(void) { return reported; }

int mg_map_check(mg_diags *d) {
  if (!n_truncated) return 0;
  static const char why[] = "was truncated while migc was reading it (what it read past the new end is not "
                            "the file's content); nothing is written from it";
  for (size_t i = 0; i < d->count; i++)
    if (d->items[i].message && !strcmp(d->items[i].message, why)) return -1;
  const char *saved = d->file;
  d->file = truncated_path;
  mg_error(d, IO, NULL, NULL, "%s", why);
  d->file = saved;
  reported = 1;
  return -1;
}
