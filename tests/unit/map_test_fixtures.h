/* Shared by test_map_plan.c and test_map_lower.c: the two rule sets and the
 * one-node fixture models of tests/fixtures/make_map_models.py.
 * Env: MIGC_MAP_FIXTURES (the models), MIGC_RULES_DIR (rules/). */
#ifndef MAP_TEST_FIXTURES_H
#define MAP_TEST_FIXTURES_H
#include <stdio.h>
#include <stdlib.h>

#include "mapping.h"
#include "onnx_import.h"
#include "passes.h"

static rule_set *g_ms, *g_acl;

static rule_set *load_rules(const char *target, const char *file) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", getenv("MIGC_RULES_DIR"), file);
  rule_set *rs = rules_new(target);
  mg_diags d;
  mg_diags_init(&d);
  assert_int_equal(rules_load(rs, path, &d), 0);
  mg_diags_free(&d);
  return rs;
}

/* Group setup: both rule sets; fails when the environment is missing. */
static int setup(void **state) {
  (void)state;
  if (!getenv("MIGC_MAP_FIXTURES") || !getenv("MIGC_RULES_DIR")) return -1;
  g_ms = load_rules("mindspore", "mindspore.xml");
  g_acl = load_rules("ascend", "aclnn.xml");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  rules_free(g_ms);
  rules_free(g_acl);
  return 0;
}

static void print_diags(const char *what, const mg_diags *d) {
  for (size_t i = 0; i < d->count; i++) fprintf(stderr, "%s: %s\n", what, d->items[i].message);
}

/* The fixture model `name`, imported and prepared (the test fails otherwise). */
static mg_model *load(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s.onnx", getenv("MIGC_MAP_FIXTURES"), name);
  mg_model *m = NULL;
  mg_diags d;
  mg_diags_init(&d);
  if (onnx_import(path, &d, &m) || mg_prepare(m, NULL, 0, &d)) print_diags(name, &d), fail();
  mg_diags_free(&d);
  return m;
}
#endif
