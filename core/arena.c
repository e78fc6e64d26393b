#include "arena.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long fault_at;      /* 0: off; else the allocation number that fails */
static long fault_counter; /* allocations since injection was armed */
static int fault_sticky;   /* keep failing after the first injected failure */

void mg_fault_fail_at(long n, int sticky) {
  fault_at = n;
  fault_counter = 0;
  fault_sticky = sticky;
}

long mg_fault_count(void) { return fault_counter; }

static int fault_hit(void) {
  fault_counter++;
  if (fault_at <= 0) return 0;
  if (fault_counter == fault_at) return 1;
  return fault_sticky && fault_counter > fault_at;
}

void *mg_malloc(size_t n) {
  if (fault_hit()) return NULL;
  return malloc(n ? n : 1);
}

void *mg_calloc(size_t count, size_t size) {
  if (fault_hit()) return NULL;
  return calloc(count ? count : 1, size ? size : 1);
}

void *mg_realloc(void *p, size_t n) {
  if (fault_hit()) return NULL;
  return realloc(p, n ? n : 1);
}

void mg_free(void *p) { free(p); }

char *mg_strdup(const char *s) {
  const size_t n = strlen(s) + 1;
  char *c = mg_malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

struct mg_arena_block {
  mg_arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

void mg_arena_init(mg_arena *a, size_t block_size) {
  a->head = NULL;
  a->block_size = block_size ? block_size : 64 * 1024;
  a->total = 0;
}

void *mg_arena_alloc(mg_arena *a, size_t n) {
  size_t need = (n + 15) & ~(size_t)15;
  if (need < n) return NULL;
  mg_arena_block *b = a->head;
  if (!b || b->cap - b->used < need) {
    size_t cap = need > a->block_size ? need : a->block_size;
    if (cap > SIZE_MAX - sizeof(mg_arena_block)) return NULL;
    mg_arena_block *nb = mg_malloc(sizeof(mg_arena_block) + cap);
    if (!nb) return NULL;
    nb->used = 0;
    nb->cap = cap;
    a->total += cap;
    /* A big one-off block goes behind the current head so the head keeps its free tail. */
    if (b && cap > a->block_size) {
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      a->head = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += need;
  memset(p, 0, n);
  return p;
}

char *mg_arena_strndup(mg_arena *a, const char *s, size_t n) {
  if (!s) return NULL;
  char *d = mg_arena_alloc(a, n + 1);
  if (!d) return NULL;
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *mg_arena_strdup(mg_arena *a, const char *s) {
  return s ? mg_arena_strndup(a, s, strlen(s)) : NULL;
}

void *mg_arena_memdup(mg_arena *a, const void *p, size_t n) {
  void *d = mg_arena_alloc(a, n);
  if (d && n) memcpy(d, p, n);
  return d;
}

char *mg_arena_printf(mg_arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  char *d = mg_arena_alloc(a, (size_t)n + 1);
  if (!d) return NULL;
  va_start(ap, fmt);
  vsnprintf(d, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return d;
}

void mg_arena_destroy(mg_arena *a) {
  mg_arena_block *b = a->head;
  while (b) {
    mg_arena_block *next = b->next;
    mg_free(b);
    b = next;
  }
  a->head = NULL;
  a->total = 0;
}

int mg_mul_size(size_t a, size_t b, size_t *out) {
  if (a && b > SIZE_MAX / a) return 0;
  *out = a * b;
  return 1;
}

int mg_mul_i64(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return 0;
  if (a && b > INT64_MAX / a) return 0;
  *out = a * b;
  return 1;
}
