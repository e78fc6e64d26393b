/* Arena allocation and the one allocation hook that fault-injection tests use.
 *
 * Every allocation in migc goes through mg_malloc()/mg_free() so that a test can
 * make the Nth allocation fail (mg_fault_fail_at) and prove each error path frees
 * what it took. Arenas hand out memory that lives until the arena is destroyed:
 * a graph owns one arena, and each stage that needs scratch memory owns another. */
#ifndef MG_ARENA_H
#define MG_ARENA_H
#include <stddef.h>
#include <stdint.h>

/* Allocation hook. Returns NULL on failure (real or injected); never aborts. */
void *mg_malloc(size_t n);
void *mg_calloc(size_t count, size_t size);
void *mg_realloc(void *p, size_t n);
void mg_free(void *p);
/* A copy of s from mg_malloc (free with mg_free); NULL when allocation fails. */
char *mg_strdup(const char *s);

/* Fault injection: the nth allocation from now (1-based) fails, and so does every
 * later one while `sticky` is set. n = 0 disables injection. */
void mg_fault_fail_at(long n, int sticky);
/* Allocations performed since the last mg_fault_fail_at call. */
long mg_fault_count(void);

typedef struct mg_arena_block mg_arena_block;
typedef struct mg_arena {
  mg_arena_block *head;   /* newest block first; older blocks are full */
  size_t block_size;      /* size of each ordinary block; big requests get their own */
  size_t total;           /* bytes requested from the system, for reporting */
} mg_arena;

void mg_arena_init(mg_arena *a, size_t block_size);
/* Zeroed memory aligned to 16 bytes, or NULL when allocation fails. */
void *mg_arena_alloc(mg_arena *a, size_t n);
/* Copies of a string and a byte range; NULL when s is NULL or allocation fails. */
char *mg_arena_strdup(mg_arena *a, const char *s);
char *mg_arena_strndup(mg_arena *a, const char *s, size_t n);
void *mg_arena_memdup(mg_arena *a, const void *p, size_t n);
/* printf into the arena. */
char *mg_arena_printf(mg_arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void mg_arena_destroy(mg_arena *a);

/* Overflow-checked size arithmetic: return 0 on overflow, else 1 and the result. */
int mg_mul_size(size_t a, size_t b, size_t *out);
int mg_mul_i64(int64_t a, int64_t b, int64_t *out); /* non-negative operands only */
/* Signed arithmetic that reports overflow instead of invoking undefined behaviour. */
static inline int mg_add_ovf(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline int mg_sub_ovf(int64_t a, int64_t b, int64_t *out) { return !__builtin_sub_overflow(a, b, out); }
static inline int mg_mul_ovf(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
/* double -> int64 that saturates (NaN gives 0) instead of invoking undefined behaviour. */
static inline int64_t mg_f2i(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}
#endif
