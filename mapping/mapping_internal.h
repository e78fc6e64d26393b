/* Shared by mapping/ files. */
#ifndef MG_MAPPING_INTERNAL_H
#define MG_MAPPING_INTERNAL_H
#include "mapping.h"

typedef enum { REQ_ATTR, REQ_DTYPE, REQ_RANK, REQ_STATIC } req_kind;

typedef struct {
  req_kind kind;
  const char *attr;     /* REQ_ATTR */
  const char **values;  /* allowed values */
  int n_values;
} requirement;

typedef struct {
  mg_op op;
  int64_t opset_lo, opset_hi;
  requirement *reqs;
  int n_reqs;
  const char *call;       /* api or fn */
  const char **decompose;
  int n_decompose;
  const char *file;
  int line;
  int removed;            /* replaced by a later file */
} rule;

struct rule_set {
  mg_arena arena;
  const char *target;
  rule *rules;
  int n, cap;
};
#endif
