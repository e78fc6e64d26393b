/* Shared by mapping/ files. */
#ifndef MG_MAPPING_INTERNAL_H
#define MG_MAPPING_INTERNAL_H
#include "mapping.h"

typedef enum { REQ_ATTR, REQ_DTYPE, REQ_RANK, REQ_STATIC, REQ_PRESENT, REQ_OUTPUT } req_kind;

typedef struct {
  req_kind kind;
  const char *attr;     /* REQ_ATTR */
  int input;            /* REQ_PRESENT: the input's index; values[0] required|optional|absent;
                           REQ_DTYPE: the input whose dtype is checked (0 unless given);
                           REQ_OUTPUT: the output's index (values[0] unused) */
  const char **values;  /* allowed values */
  int n_values;
} requirement;

/* One <arg> of a <call>: the API parameter and its value expression (checked
 * against values.def at load). pos is -1 when the file gives none. */
typedef struct {
  const char *name, *value;
  int pos;
} rule_arg;

struct rule {
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
  int removed;            /* replaced by a later file, or hidden (rules_hide) */
  int hidden_by;          /* 1 + the rules_hide call that hid it, or 0 */
};

/* The rule that maps n for rs (NULL: none), with map_node's status and detail;
 * a decomposition's rule is returned only when every op it names has a rule. */
const rule *map_match(const mg_node *n, const rule_set *rs, map_status *status, char *detail, size_t dn);

/* One sliced axis of a Slice node after ONNX clamping: indices start, start+step,
 * ... (count of them), all in [0, dim). */
typedef struct {
  int axis;
  int64_t start, step, count;
} slice_range;

/* Slice's ranges, one per axis its axes input names (starts, ends, axes and steps
 * constant; the sliced dims static). 0, or -1 with the status and reason. */
int slice_ranges(const mg_node *n, slice_range *out, int *n_out, map_status *st, char *why, size_t wn);

struct rule_set {
  mg_arena arena;
  const char *target;
  rule *rules;
  int n, cap;
  const char *hidden[16]; /* rules_hide's names, for the reason map_match gives */
  int n_hidden;
  int oom; /* an allocation failed while loading: rules_load fails, whatever it found */
};
#endif
