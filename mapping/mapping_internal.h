/* Shared by mapping/ files. */
#ifndef MG_MAPPING_INTERNAL_H
#define MG_MAPPING_INTERNAL_H
#include "mapping.h"

typedef enum { REQ_ATTR, REQ_DTYPE, REQ_RANK, REQ_STATIC, REQ_PRESENT } req_kind;

typedef struct {
  req_kind kind;
  const char *attr;     /* REQ_ATTR */
  int input;            /* REQ_PRESENT: the input's index; values[0] required|optional|absent */
  const char **values;  /* allowed values */
  int n_values;
} requirement;

/* One <arg> of a <call>: the API parameter and its value expression (checked
 * against values.def at load). pos is -1 when the file gives none. */
typedef struct {
  const char *name, *value;
  int pos;
} rule_arg;

typedef struct {
  mg_op op;
  int64_t opset_lo, opset_hi;
  const char *kind;       /* <call kind>: cell, function, ... (NULL: none given) */
  rule_arg *args;
  int n_args;
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
