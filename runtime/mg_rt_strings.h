/* migc CPU runtime: string tensors (runtime/strings.c). See mg_runtime.h for the
 * rules every kernel keeps: C99, no allocation, no mutable globals.
 *
 * A string tensor is an array of `const char *`, each NUL-terminated UTF-8. A
 * kernel's output strings either point at strings that already exist (its
 * inputs', static constants) or are written into the instance's string pool,
 * a fixed buffer that the generated model_run empties at the start of each run;
 * so a model's output strings stay valid until its next run and as long as its
 * input strings do. Case mapping is ASCII only (the C locale): bytes outside
 * 'A'..'Z' / 'a'..'z', and so every byte of a multi-byte UTF-8 sequence, are
 * kept as they are. */
#ifndef MG_RT_STRINGS_H
#define MG_RT_STRINGS_H
#include "mg_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where run-time strings are written: cap bytes at base, used of them taken. */
typedef struct {
  char *base;
  size_t cap, used;
} mg_rt_string_pool;

/* A copy of s (n bytes, then a NUL) in the pool, or NULL when it does not fit. */
char *mg_rt_pool_put(mg_rt_string_pool *pool, const char *s, size_t n);

typedef enum { MG_CASE_NONE = 0, MG_CASE_LOWER, MG_CASE_UPPER } mg_case_change;

/* ONNX StringNormalizer on `count` strings (the last axis of [C] or [1, C]). */
typedef struct {
  int64_t count;                    /* input strings, C */
  mg_case_change case_change;       /* applied to the strings kept */
  int case_sensitive;               /* stopword matching: byte-exact, else ASCII case-insensitive */
  int n_stopwords;
  const char *const *stopwords;     /* n_stopwords strings (may be NULL when 0) */
} mg_string_normalizer_params;

/* y[0 .. *kept) = the strings of x that are not stopwords, in order, case-changed
 * (into the pool; unchanged strings are not copied); when none is kept, y[0] = ""
 * and *kept = 1, as ONNX specifies. y[*kept .. max(count, 1)) are set to "", so
 * the whole buffer is always valid. y must hold max(count, 1) pointers and may
 * equal x. Returns MG_RT_OK, or MG_RT_ENOMEM when the pool is too small. */
int mg_string_normalizer(const mg_string_normalizer_params *p, const char *const *x, const char **y, int64_t *kept,
                         mg_rt_string_pool *pool);

#ifdef __cplusplus
}
#endif
#endif /* MG_RT_STRINGS_H */
