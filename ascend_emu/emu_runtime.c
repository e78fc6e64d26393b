/* acl runtime of the strict aclnn emulator: init/finalize order, devices, streams,
 * device memory kept apart from host memory, the error channel and the leak report.
 * Facts: ../shared/aclnn-api.json (runtime entries) and facts.md §3. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "emu_internal.h"

static int g_state;          /* 0 before aclInit, 1 initialised, 2 finalised */
static int g_device = -1;    /* current device, -1 = none */
static unsigned g_devset;    /* devices set and not reset */
static int g_ndevices = 1;   /* emulated devices (ACL_EMU_DEVICES, default 1) */
static unsigned g_violations;
static char g_errmsg[2048];

/* device arena: one memfd mapped twice. The PROT_NONE mapping is what aclrtMalloc
 * hands out (the host cannot touch it); the read-write mapping at the same offset is
 * what the emulator itself computes on. */
static char *g_dev, *g_sh;
static size_t g_arena, g_used;
static emu_buf *g_bufs;
static size_t g_nbufs, g_capbufs;

static void emu_vreport(const char *head, const char *fmt, va_list ap) {
  char msg[1600];
  vsnprintf(msg, sizeof msg, fmt, ap);
  snprintf(g_errmsg, sizeof g_errmsg, "%s%s", head, msg);
  fprintf(stderr, "acl-emu: error: %s\n", g_errmsg);
  g_violations++;
}

int emu_arg_error(int status, const char *fn, const char *param, int pos, const char *fmt, ...) {
  char head[256];
  va_list ap;
  snprintf(head, sizeof head, "%s: argument '%s' (%d): ", fn, param, pos);
  va_start(ap, fmt);
  emu_vreport(head, fmt, ap);
  va_end(ap);
  return status;
}

int emu_fn_error(int status, const char *fn, const char *fmt, ...) {
  char head[256];
  va_list ap;
  snprintf(head, sizeof head, "%s: ", fn);
  va_start(ap, fmt);
  emu_vreport(head, fmt, ap);
  va_end(ap);
  return status;
}

/* aclGetRecentErrMsg note: "Returns last error text (useful after a non-zero
 * aclnnStatus)". Empty string while nothing went wrong. */
const char *aclGetRecentErrMsg(void) { return g_errmsg; }

int emu_current_device(void) { return g_device; }

int emu_ready(const char *fn, int need_device) {
  /* aclInit note: the process must call aclInit first (facts.md §3 step 2). */
  if (g_state == 0)
    return emu_fn_error(ACL_ERROR_UNINITIALIZE, fn,
                        "called before aclInit (facts.md §3: aclInit(NULL) comes first)");
  /* aclFinalize note: "Call before process exit" - nothing may follow it. */
  if (g_state == 2)
    return emu_fn_error(ACL_ERROR_UNINITIALIZE, fn, "called after aclFinalize");
  /* aclrtSetDevice note: "Must precede aclrtMalloc/aclrtCreateStream (creates default
   * context)". */
  if (need_device && g_device < 0)
    return emu_fn_error(ACL_ERROR_INVALID_DEVICE, fn,
                        "no current device: aclrtSetDevice must come first (aclrtSetDevice "
                        "note: must precede aclrtMalloc/aclrtCreateStream)");
  return 0;
}

/* ---- device memory ------------------------------------------------------------- */
static void emu_segv(int sig, siginfo_t *si, void *uc) {
  char *a = (char *)si->si_addr;
  char line[512];
  (void)uc;
  if (g_dev && a >= g_dev && a < g_dev + g_arena) {
    size_t off = (size_t)(a - g_dev), lo = 0, hi = g_nbufs;
    int n;
    while (hi - lo > 1) { /* last buffer starting at or before off */
      size_t mid = (lo + hi) / 2;
      if (g_bufs[mid].off <= off) lo = mid; else hi = mid;
    }
    if (g_nbufs && g_bufs[lo].off <= off)
      n = snprintf(line, sizeof line,
                   "acl-emu: error: host access to device memory at %p (aclrtMalloc buffer #%u, "
                   "%zu bytes, offset %zu%s): device memory is only reachable through "
                   "aclrtMemcpy (aclrtMalloc note: device alloc)\n",
                   (void *)a, g_bufs[lo].serial, g_bufs[lo].size, off - g_bufs[lo].off,
                   off - g_bufs[lo].off >= g_bufs[lo].size ? ", past its end"
                   : g_bufs[lo].alive ? "" : ", freed");
    else
      n = snprintf(line, sizeof line,
                   "acl-emu: error: host access to device memory at %p (no aclrtMalloc buffer)\n",
                   (void *)a);
    if (n > 0) {
      ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
      (void)w;
    }
    _exit(3);
  }
  signal(sig, SIG_DFL); /* not ours: let the fault happen again, as without the emulator */
}

static int emu_arena_open(void) {
  size_t want = (size_t)32 << 30;
  const char *env = getenv("ACL_EMU_ARENA_MB");
  int fd = memfd_create("acl-emu-device", 0);
  if (env && atol(env) > 0) want = (size_t)atol(env) << 20;
  if (fd < 0) return -1;
  while (want >= ((size_t)64 << 20) && ftruncate(fd, (off_t)want) != 0) want /= 2;
  if (want < ((size_t)64 << 20)) { close(fd); return -1; }
  g_dev = mmap(NULL, want, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  g_sh = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  close(fd);
  if (g_dev == MAP_FAILED || g_sh == MAP_FAILED) { g_dev = g_sh = NULL; return -1; }
  g_arena = want;
  return 0;
}

int emu_in_device_range(const void *p) {
  const char *c = (const char *)p;
  return g_dev && c >= g_dev && c < g_dev + g_arena;
}

emu_buf *emu_buf_of(const void *p) {
  size_t off, lo = 0, hi = g_nbufs;
  if (!emu_in_device_range(p) || !g_nbufs) return NULL;
  off = (size_t)((const char *)p - g_dev);
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (g_bufs[mid].off <= off) lo = mid; else hi = mid;
  }
  if (g_bufs[lo].off <= off && off < g_bufs[lo].off + g_bufs[lo].size) return &g_bufs[lo];
  return NULL;
}

char *emu_shadow(const void *dev) { return g_sh + ((const char *)dev - g_dev); }

size_t emu_buf_offset(const emu_buf *b, const void *p) {
  return (size_t)((const char *)p - g_dev) - b->off;
}

void emu_mark_pending(emu_buf *b, emu_stream *s) { if (b) b->pending = s; }

static const char *emu_where(const void *p, char *buf, size_t n) {
  emu_buf *b = emu_buf_of(p);
  if (b)
    snprintf(buf, n, "aclrtMalloc buffer #%u (%zu bytes%s), offset %zu", b->serial, b->size,
             b->alive ? "" : ", freed", (size_t)((const char *)p - g_dev) - b->off);
  else if (emu_in_device_range(p))
    snprintf(buf, n, "device range but no aclrtMalloc buffer");
  else
    snprintf(buf, n, "host memory");
  return buf;
}

/* aclrtMalloc note: "Device alloc; real size aligned to 32 bytes and padded by 32
 * bytes (header comment); free with aclrtFree". The emulator gives every buffer its
 * own pages (so 32-byte alignment holds) and never reuses an address. */
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
  static const char *fn = "aclrtMalloc";
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), span;
  int pv = (int)policy;
  EMU_CHK(emu_ready(fn, 1));
  if (!devPtr)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0, "is NULL");
  *devPtr = NULL;
  /* the facts give no meaning to a 0-byte device allocation: refused */
  if (size == 0)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "size", 1,
                         "is 0; the fact table does not say what a 0-byte aclrtMalloc gives");
  /* policy: one of aclrtMemMallocPolicy's values (fact table enum) */
  if (!((pv >= 0 && pv <= 7) || pv == 256 || pv == 4096 || pv == 1048576))
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "policy", 2,
                         "is %d, not an aclrtMemMallocPolicy value", pv);
  if (!g_dev && emu_arena_open() != 0)
    return emu_fn_error(ACL_ERROR_BAD_ALLOC, fn, "cannot map the emulated device memory (%s)",
                        strerror(errno));
  span = (size + 32 + pg - 1) / pg * pg;
  if (span > g_arena - g_used)
    return emu_fn_error(ACL_ERROR_BAD_ALLOC, fn, "out of emulated device memory (%zu of %zu "
                        "bytes used; ACL_EMU_ARENA_MB sets the size)", g_used, g_arena);
  if (g_nbufs == g_capbufs) {
    g_capbufs = g_capbufs ? 2 * g_capbufs : 64;
    g_bufs = realloc(g_bufs, g_capbufs * sizeof *g_bufs);
    if (!g_bufs) { fputs("acl-emu: out of host memory\n", stderr); _exit(4); }
  }
  g_bufs[g_nbufs].serial = (unsigned)g_nbufs + 1;
  g_bufs[g_nbufs].off = g_used;
  g_bufs[g_nbufs].size = size;
  g_bufs[g_nbufs].alive = 1;
  g_bufs[g_nbufs].device = g_device;
  g_bufs[g_nbufs].pending = NULL;
  g_nbufs++;
  *devPtr = g_dev + g_used;
  g_used += span;
  return ACL_SUCCESS;
}

aclError aclrtFree(void *devPtr) {
  static const char *fn = "aclrtFree";
  emu_buf *b;
  char w[160];
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  EMU_CHK(emu_ready(fn, 1));
  b = emu_buf_of(devPtr);
  if (!devPtr) return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0, "is NULL");
  /* aclrtMalloc note: "free with aclrtFree" - only what aclrtMalloc returned */
  if (!b || devPtr != g_dev + b->off)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0,
                         "%p is not an address aclrtMalloc returned (%s)", devPtr,
                         emu_where(devPtr, w, sizeof w));
  if (!b->alive)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0,
                         "aclrtMalloc buffer #%u was already freed", b->serial);
  /* facts.md §3: "Sync once before reading results on the host, or before freeing
   * buffers still in use"; conventions.two_phase: keep workspace and tensors alive until
   * aclrtSynchronizeStream. */
  if (b->pending)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0,
                         "aclrtMalloc buffer #%u is still used by work queued on aclrtStream #%u; "
                         "aclrtSynchronizeStream first (facts.md §3: free only after a sync)",
                         b->serial, b->pending->h.serial);
  b->alive = 0;
  madvise(g_sh + b->off, (b->size + 32 + pg - 1) / pg * pg, MADV_REMOVE);
  return ACL_SUCCESS;
}

/* check that [p, p+n) lies in one live buffer of the current device; 0 or status */
static int emu_dev_range(const char *fn, const char *param, int pos, const void *p, size_t n,
                         emu_buf **out) {
  emu_buf *b = emu_buf_of(p);
  char w[160];
  if (!b || !b->alive)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, param, pos,
                         "%p is not in a live aclrtMalloc buffer (%s)", p,
                         emu_where(p, w, sizeof w));
  if (b->device != g_device)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, param, pos,
                         "aclrtMalloc buffer #%u belongs to device %d, the current device is %d",
                         b->serial, b->device, g_device);
  if ((size_t)((const char *)p - g_dev) - b->off + n > b->size)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, param, pos,
                         "%zu bytes from offset %zu run past the end of aclrtMalloc buffer #%u "
                         "(%zu bytes)", n, (size_t)((const char *)p - g_dev) - b->off, b->serial,
                         b->size);
  *out = b;
  return 0;
}

static int emu_host_ptr(const char *fn, const char *param, int pos, const void *p) {
  char w[160];
  if (emu_in_device_range(p))
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, param, pos,
                         "%p is device memory (%s) but the copy kind says host", p,
                         emu_where(p, w, sizeof w));
  return 0;
}

/* aclrtMemcpy note: "argument order (dst, destMax, src, count, kind) - destMax
 * (capacity of dst) comes BEFORE src ... Synchronous." */
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                     aclrtMemcpyKind kind) {
  static const char *fn = "aclrtMemcpy";
  emu_buf *bd = NULL, *bs = NULL;
  int k = (int)kind, dd, sd;
  EMU_CHK(emu_ready(fn, 1));
  if (!dst) return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "dst", 0, "is NULL");
  if (!src) return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "src", 2, "is NULL");
  if (count > destMax)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "count", 3,
                         "%zu bytes exceed destMax %zu (the capacity of dst)", count, destMax);
  /* kinds 0..3 have a plain meaning; DEFAULT and the BUF/INNER/INTER kinds are not
   * described by the fact table: refused */
  if (k < 0 || k > 3)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "kind", 4,
                         "is %d; the emulator accepts HOST_TO_HOST (0), HOST_TO_DEVICE (1), "
                         "DEVICE_TO_HOST (2), DEVICE_TO_DEVICE (3) - the fact table does not "
                         "describe the others", k);
  dd = (k == 1 || k == 3);
  sd = (k == 2 || k == 3);
  if (dd) EMU_CHK(emu_dev_range(fn, "dst", 0, dst, destMax, &bd));
  else EMU_CHK(emu_host_ptr(fn, "dst", 0, dst));
  if (sd) EMU_CHK(emu_dev_range(fn, "src", 2, src, count, &bs));
  else EMU_CHK(emu_host_ptr(fn, "src", 2, src));
  /* facts.md §3: "Sync once before reading results on the host" */
  if (bs && bs->pending && !dd)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "src", 2,
                         "aclrtMalloc buffer #%u is used by work queued on aclrtStream #%u "
                         "that was not synchronized (facts.md §3: aclrtSynchronizeStream before "
                         "reading results on the host)", bs->serial, bs->pending->h.serial);
  memmove(dd ? emu_shadow(dst) : (char *)dst, sd ? emu_shadow(src) : (const char *)src, count);
  return ACL_SUCCESS;
}

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
  static const char *fn = "aclrtMemset";
  emu_buf *b;
  EMU_CHK(emu_ready(fn, 1));
  if (!devPtr) return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "devPtr", 0, "is NULL");
  if (count > maxCount)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "count", 3,
                         "%zu bytes exceed maxCount %zu", count, maxCount);
  EMU_CHK(emu_dev_range(fn, "devPtr", 0, devPtr, maxCount, &b));
  memset(emu_shadow(devPtr), value & 0xff, count);
  return ACL_SUCCESS;
}

/* ---- init, devices, streams --------------------------------------------------- */
static void emu_atexit(void) {
  if (g_state == 1) {
    fprintf(stderr, "acl-emu: error: the process exited after aclInit without aclFinalize "
                    "(facts.md §3 step 7: teardown ends with aclFinalize; aclFinalize note: "
                    "call before process exit)\n");
    fprintf(stderr, "acl-emu: %u contract violations, not counting leaks (never finalized)\n",
            g_violations + 1);
    _exit(4);
  }
  if (g_violations) {
    fprintf(stderr, "acl-emu: exit status forced to 4: %u contract violations and leaks were "
                    "reported\n", g_violations);
    _exit(4);
  }
}

aclError aclInit(const char *configPath) {
  static const char *fn = "aclInit";
  struct sigaction sa;
  const char *env = getenv("ACL_EMU_DEVICES");
  /* aclInit note: "only once per process (ACL_ERROR_REPEAT_INITIALIZE 100002)" */
  if (g_state != 0)
    return emu_fn_error(ACL_ERROR_REPEAT_INITIALIZE, fn, "called again%s; only once per process "
                        "(aclInit note)", g_state == 2 ? " after aclFinalize" : "");
  /* aclInit note: "configPath may be NULL" - the config file format is not in the
   * fact table, so a path is refused */
  if (configPath)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "configPath", 0,
                         "is \"%s\"; the emulator accepts only NULL (the fact table does not "
                         "describe the config file)", configPath);
  if (env && atoi(env) > 0 && atoi(env) <= 32) g_ndevices = atoi(env);
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = emu_segv;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, NULL);
  sigaction(SIGBUS, &sa, NULL);
  atexit(emu_atexit);
  g_state = 1;
  return ACL_SUCCESS;
}

aclError aclrtSetDevice(int32_t deviceId) {
  static const char *fn = "aclrtSetDevice";
  EMU_CHK(emu_ready(fn, 0));
  if (deviceId < 0 || deviceId >= g_ndevices)
    return emu_arg_error(ACL_ERROR_INVALID_DEVICE, fn, "deviceId", 0,
                         "is %d; the emulator has %d device(s) (ACL_EMU_DEVICES)", (int)deviceId,
                         g_ndevices);
  g_devset |= 1u << deviceId;
  g_device = deviceId;
  return ACL_SUCCESS;
}

aclError aclrtResetDevice(int32_t deviceId) {
  static const char *fn = "aclrtResetDevice";
  EMU_CHK(emu_ready(fn, 0));
  if (deviceId < 0 || deviceId >= g_ndevices || !(g_devset & (1u << deviceId)))
    return emu_arg_error(ACL_ERROR_INVALID_DEVICE, fn, "deviceId", 0,
                         "device %d was not set with aclrtSetDevice", (int)deviceId);
  g_devset &= ~(1u << deviceId);
  if (g_device == deviceId) {
    int d;
    g_device = -1;
    for (d = 0; d < g_ndevices; d++)
      if (g_devset & (1u << d)) { g_device = d; break; }
  }
  return ACL_SUCCESS;
}

aclError aclrtCreateStream(aclrtStream *stream) {
  static const char *fn = "aclrtCreateStream";
  emu_stream *s;
  EMU_CHK(emu_ready(fn, 1));
  if (!stream) return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "stream", 0, "is NULL");
  s = emu_obj_new(EK_STREAM, sizeof *s, fn);
  s->device = g_device;
  *stream = s;
  return ACL_SUCCESS;
}

emu_stream *emu_stream_of(aclrtStream st, const char *fn, const char *param, int pos,
                          int *status) {
  emu_stream *s = (emu_stream *)st;
  /* the fact table never says what a NULL stream means: a stream from
   * aclrtCreateStream is required (facts.md §3 step 2) */
  *status = emu_check_obj(fn, param, pos, st, EK_STREAM, 1);
  if (*status) return NULL;
  if (s->device != g_device) {
    *status = emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, param, pos,
                            "aclrtStream #%u was created on device %d, the current device is %d",
                            s->h.serial, s->device, g_device);
    return NULL;
  }
  return s;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
  static const char *fn = "aclrtSynchronizeStream";
  int st;
  size_t i;
  emu_stream *s;
  EMU_CHK(emu_ready(fn, 1));
  s = emu_stream_of(stream, fn, "stream", 0, &st);
  if (!s) return ACL_ERROR_INVALID_PARAM;
  /* phase 2 computes synchronously; the sync ends the "queued" window in which host
   * reads and frees are violations */
  s->queued = 0;
  for (i = 0; i < g_nbufs; i++)
    if (g_bufs[i].pending == s) g_bufs[i].pending = NULL;
  emu_sync_objects(s);
  return ACL_SUCCESS;
}

aclError aclrtDestroyStream(aclrtStream stream) {
  static const char *fn = "aclrtDestroyStream";
  int st;
  emu_stream *s;
  EMU_CHK(emu_ready(fn, 1));
  s = emu_stream_of(stream, fn, "stream", 0, &st);
  if (!s) return ACL_ERROR_INVALID_PARAM;
  /* aclrtDestroyStream note: "Synchronize the stream first (header restriction)" */
  if (s->queued)
    return emu_arg_error(ACL_ERROR_INVALID_PARAM, fn, "stream", 0,
                         "aclrtStream #%u has queued work that was never synchronized "
                         "(aclrtDestroyStream note: synchronize the stream first)", s->h.serial);
  s->h.alive = 0;
  s->h.killer = fn;
  return ACL_SUCCESS;
}

aclError aclFinalize(void) {
  static const char *fn = "aclFinalize";
  unsigned leaks = 0;
  size_t i;
  int d;
  EMU_CHK(emu_ready(fn, 0));
  emu_report_leaks(&leaks);
  for (i = 0; i < g_nbufs; i++)
    if (g_bufs[i].alive) {
      fprintf(stderr, "acl-emu: error: leak: aclrtMalloc buffer #%u (%zu bytes) was never freed "
                      "with aclrtFree\n", g_bufs[i].serial, g_bufs[i].size);
      leaks++;
    }
  /* facts.md §3 step 7: ... aclrtDestroyStream -> aclrtResetDevice -> aclFinalize */
  for (d = 0; d < g_ndevices; d++)
    if (g_devset & (1u << d)) {
      fprintf(stderr, "acl-emu: error: leak: device %d set by aclrtSetDevice was never reset "
                      "with aclrtResetDevice\n", d);
      leaks++;
    }
  fprintf(stderr, "acl-emu: %u contract violations, %u leaks\n", g_violations, leaks);
  g_state = 2;
  g_device = -1;
  emu_objects_release();
  if (g_violations + leaks > 0) {
    snprintf(g_errmsg, sizeof g_errmsg, "aclFinalize: %u contract violations, %u leaks",
             g_violations, leaks);
    g_violations += leaks; /* the exit status is forced non-zero too (atexit) */
    return ACL_ERROR_FAILURE;
  }
  return ACL_SUCCESS;
}
