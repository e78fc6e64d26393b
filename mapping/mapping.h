/* Mapping: the op-equivalence rules (rules/mindspore.xml, rules/aclnn.xml) and the
 * status of every node for every target, from which the coverage report is built.
 * docs/rules-schema.md describes the rules files. */
#ifndef MG_MAPPING_H
#define MG_MAPPING_H
#include "ir.h"

typedef enum {
  MAP_SUPPORTED,
  MAP_DECOMPOSED,
  MAP_UNSUPPORTED_OP,
  MAP_UNSUPPORTED_ATTR,
  MAP_UNSUPPORTED_DTYPE,
  MAP_DYNAMIC_SHAPE,
  MAP_STATUS_COUNT
} map_status;

const char *map_status_name(map_status s); /* "supported", "unsupported-attribute", ... */

typedef struct rule_set rule_set;

/* An empty rule set for target `target` ("mindspore", "ascend"); NULL on OOM. */
rule_set *rules_new(const char *target);
/* Loads a rules file into rs. Rules for an op in a later file replace that op's
 * earlier rules (user files override built-in ones). Malformed XML, a rule for an
 * op ops.def does not know, a duplicate (op, opset) key, or a bad element is an
 * error naming file:line and the reason. 0 on success. */
int rules_load(rule_set *rs, const char *path, mg_diags *d);
void rules_free(rule_set *rs);
const char *rules_target(const rule_set *rs);
/* Whether id is in the value vocabulary of rules files (mapping/values.def). */
int rules_value_known(const char *id);
/* Checks one value expression of a rule for op: quotes and parentheses balanced,
 * every identifier in the vocabulary (or an aclnn enum name, ACL_..., when
 * acl_enums), every attr(NAME) a canonical attribute of op. 0, or -1 with the
 * reason in why. */
int rules_check_value(const char *v, mg_op op, int acl_enums, char *why, size_t wn);
/* Whether op has a rule (any opset). */
int rules_has_op(const rule_set *rs, mg_op op);

typedef struct {
  map_status status;
  char *detail;     /* the call ("mindspore.nn.Conv2d"), the decomposition, or the
                       reason ("attribute auto_pad=SAME_LOWER; allowed NOTSET SAME_UPPER") */
} node_map;

/* The targets mapped. CPU support comes from ops.def and the runtime kernels. */
enum { MAP_TARGET_CPU, MAP_TARGET_ASCEND, MAP_TARGET_MINDSPORE, MAP_TARGET_COUNT };
const char *map_target_name(int t);

/* Maps one node for a rules target (rs; NULL gives MAP_UNSUPPORTED_OP: the CPU
 * target has no rules, its emitter's check decides, see coverage_cpu). The detail
 * string is mg_malloc'd. Precondition: shapes were inferred. */
node_map map_node(const mg_node *n, const rule_set *rs);
void node_map_free(node_map *m);
#endif
