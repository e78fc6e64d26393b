/* Unit tests for core/: dtype conversions, the op table, shapes, arenas. Expected
 * values come from the IEEE 754 and ONNX specifications, not from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arena.h"
#include "diag.h"
#include "ir.h"

static float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_f16_encoding(void **state) {
  (void)state;
  assert_int_equal(mg_f32_to_f16(1.0f), 0x3C00);
  assert_int_equal(mg_f32_to_f16(-2.0f), 0xC000);
  assert_int_equal(mg_f32_to_f16(65504.0f), 0x7BFF);       /* largest normal half */
  assert_int_equal(mg_f32_to_f16(65520.0f), 0x7C00);       /* rounds up to inf */
  assert_int_equal(mg_f32_to_f16(5.9604644775390625e-8f), 0x0001); /* 2^-24 */
  assert_int_equal(mg_f32_to_f16(6.103515625e-05f), 0x0400);       /* 2^-14 */
  assert_int_equal(mg_f32_to_f16(0.1f), 0x2E66);
  assert_int_equal(mg_f32_to_f16(1.0f + 1.0f / 2048), 0x3C00); /* tie -> even */
  assert_int_equal(mg_f32_to_f16(1.0f + 3.0f / 2048), 0x3C02); /* tie -> even (up) */
  assert_true((mg_f32_to_f16(bits_f32(0x7FC00000)) & 0x7C00) == 0x7C00);
  assert_true((mg_f32_to_f16(bits_f32(0x7FC00000)) & 0x03FF) != 0);
}

static void test_f16_decoding(void **state) {
  (void)state;
  assert_true(mg_f16_to_f32(0x3C00) == 1.0f);
  assert_true(mg_f16_to_f32(0x7BFF) == 65504.0f);
  assert_true(mg_f16_to_f32(0x0001) == 5.9604644775390625e-8f);
  assert_true(mg_f16_to_f32(0x8000) == 0.0f);
  /* every finite half survives f16 -> f32 -> f16 */
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7C00) == 0x7C00) continue;
    assert_int_equal(mg_f32_to_f16(mg_f16_to_f32((uint16_t)h)), h);
  }
}

static void test_bf16(void **state) {
  (void)state;
  assert_int_equal(mg_f32_to_bf16(1.0f), 0x3F80);
  assert_int_equal(mg_f32_to_bf16(bits_f32(0x3F808000)), 0x3F80); /* tie -> even */
  assert_int_equal(mg_f32_to_bf16(bits_f32(0x3F818000)), 0x3F82); /* tie -> even (up) */
  assert_int_equal(mg_f32_to_bf16(bits_f32(0x3F808001)), 0x3F81);
  assert_true(mg_bf16_to_f32(0x4049) == bits_f32(0x40490000));
}

static void test_dtype_table(void **state) {
  (void)state;
  assert_int_equal(mg_dtype_size(MG_F32), 4);
  assert_int_equal(mg_dtype_size(MG_BF16), 2);
  assert_int_equal(mg_dtype_size(MG_I64), 8);
  assert_int_equal(MG_F16, 10); /* ONNX TensorProto.DataType numbering */
  assert_int_equal(MG_BF16, 16);
  assert_int_equal(mg_dtype_parse("float32"), MG_F32);
  assert_int_equal(mg_dtype_parse("bf16"), MG_BF16);
  assert_int_equal(mg_dtype_parse("nonsense"), MG_UNDEFINED);
}

/* Every row of ops.def has a well-formed attribute spec with parseable defaults. */
static void test_op_table(void **state) {
  (void)state;
  for (int op = 1; op < MG_OP_COUNT; op++) {
    const mg_op_info *info = mg_op_get((mg_op)op);
    /* migc's internal ops cannot be named by a model */
    assert_int_equal(mg_op_lookup(info->name), strncmp(info->name, "Migc", 4) ? op : MG_OP_UNKNOWN);
    assert_true(info->max_in < 0 || info->min_in <= info->max_in);
    const char *p = info->attrs;
    while (*p) {
      while (*p == ' ') p++;
      char name[64];
      size_t len = strcspn(p, ":");
      assert_true(len > 0 && len < sizeof name);
      memcpy(name, p, len);
      name[len] = 0;
      mg_attr_kind kind;
      int has_default;
      const char *dflt;
      assert_true(mg_op_attr_spec((mg_op)op, name, &kind, &has_default, &dflt));
      if (has_default) assert_true(kind == MG_ATTR_INT || kind == MG_ATTR_FLOAT || kind == MG_ATTR_STRING);
      p += strcspn(p, " ");
    }
  }
  assert_int_equal(mg_op_lookup("NoSuchOp"), MG_OP_UNKNOWN);
  mg_attr_kind kind;
  int hd;
  const char *dflt;
  assert_true(mg_op_attr_spec(MG_OP_Conv, "group", &kind, &hd, &dflt));
  assert_int_equal(kind, MG_ATTR_INT);
  assert_true(hd && !strncmp(dflt, "1", 1));
  assert_false(mg_op_attr_spec(MG_OP_Conv, "grou", &kind, &hd, &dflt));
  assert_true(mg_op_attr_spec(MG_OP_LeakyRelu, "alpha", &kind, &hd, &dflt));
  assert_true(hd && !strncmp(dflt, "0.01", 4)); /* ONNX default */
}

/* The flags column: a view keeps its input's elements, so it has one output and
 * is not random; the random ops produce new values (never a view). */
static void test_op_flags(void **state) {
  (void)state;
  int views = 0, randoms = 0;
  for (int op = 1; op < MG_OP_COUNT; op++) {
    const mg_op_info *info = mg_op_get((mg_op)op);
    if (info->flags & MG_OPF_VIEW) {
      views++;
      assert_int_equal(info->min_out, 1);
      assert_int_equal(info->max_out, 1);
      assert_true(info->min_in >= 1);
      assert_false(info->flags & MG_OPF_RANDOM);
    }
    if (info->flags & MG_OPF_RANDOM) randoms++;
    assert_false(info->flags & ~(MG_OPF_VIEW | MG_OPF_INFER_VIEW | MG_OPF_RANDOM));
  }
  assert_true(mg_op_is_view(MG_OP_Reshape) && mg_op_is_view(MG_OP_Identity) && !mg_op_is_view(MG_OP_Transpose));
  assert_true(mg_op_is_random(MG_OP_RandomNormal) && mg_op_is_random(MG_OP_Dropout) && !mg_op_is_random(MG_OP_Relu));
  assert_int_equal(views, 5);   /* Reshape Flatten Squeeze Unsqueeze Identity */
  assert_int_equal(randoms, 7); /* four Random*, Bernoulli, Multinomial, Dropout */
}

/* Reading an attribute that the op's row does not declare would silently give the
 * caller's default: debug builds abort, release builds return the default. */
static void test_undeclared_attr_lookup(void **state) {
  (void)state;
  mg_node conv = {.op = MG_OP_Conv};
  assert_int_equal(mg_attr_int(&conv, "group", 7), 7); /* declared, absent: the default */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    (void)!freopen("/dev/null", "w", stderr);
    _exit((int)mg_attr_int(&conv, "ceil_mode", 3)); /* pools have it, Conv does not */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
#ifdef NDEBUG
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 3);
#else
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#endif
}

static void test_shapes(void **state) {
  (void)state;
  mg_shape s;
  char buf[64];
  assert_int_equal(mg_shape_parse("1x3x224x224", &s), 0);
  assert_int_equal(s.rank, 4);
  assert_int_equal(mg_shape_numel(&s), 150528);
  assert_string_equal(mg_shape_str(&s, buf, sizeof buf), "1x3x224x224");
  assert_int_equal(mg_shape_parse("2,9,16", &s), 0);
  assert_int_equal(s.rank, 3);
  assert_int_not_equal(mg_shape_parse("1x", &s), 0);
  assert_int_not_equal(mg_shape_parse("ax3", &s), 0);
  assert_int_not_equal(mg_shape_parse("", &s), 0);
  assert_int_equal(mg_shape_parse("2x9x16", &s), 0);
  s.d[1] = (mg_dim){-1, "batch"};
  assert_false(mg_shape_is_static(&s));
  assert_int_equal(mg_shape_numel(&s), -1);
  int64_t big;
  assert_false(mg_mul_i64(INT64_MAX / 2, 3, &big));
}

static void test_arena(void **state) {
  (void)state;
  mg_arena a;
  mg_arena_init(&a, 256);
  for (int i = 0; i < 100; i++) {
    unsigned char *p = mg_arena_alloc(&a, (size_t)(i * 7 + 1));
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 16, 0);
    for (int k = 0; k < i * 7 + 1; k++) assert_int_equal(p[k], 0);
    memset(p, 0xAB, (size_t)(i * 7 + 1));
  }
  assert_non_null(mg_arena_alloc(&a, 100000)); /* larger than a block */
  assert_string_equal(mg_arena_printf(&a, "%s-%d", "x", 42), "x-42");
  mg_arena_destroy(&a);
}

static void test_fault_injection_hook(void **state) {
  (void)state;
  mg_fault_fail_at(2, 0);
  void *a = mg_malloc(8), *b = mg_malloc(8), *c = mg_malloc(8);
  assert_non_null(a);
  assert_null(b);
  assert_non_null(c); /* not sticky */
  mg_free(a);
  mg_free(c);
  mg_fault_fail_at(0, 0);
}

static void test_diags(void **state) {
  (void)state;
  mg_diags d;
  mg_diags_init(&d);
  d.file = "m.onnx";
  mg_error(&d, GRAPH, "conv1", "Conv", "reads '%s'", "x");
  mg_warn(&d, SHAPE, NULL, NULL, "odd");
  assert_int_equal(d.errors, 1);
  assert_int_equal(d.warnings, 1);
  char line[256];
  mg_diag_format(&d.items[0], line, sizeof line);
  assert_string_equal(line, "m.onnx: error[graph]: node 'conv1' (Conv): reads 'x'");
  /* allocation failure while recording still counts the error */
  mg_fault_fail_at(1, 1);
  mg_error(&d, IO, NULL, NULL, "lost");
  mg_fault_fail_at(0, 0);
  assert_int_equal(d.errors, 2);
  assert_int_equal(d.dropped, 1);
  mg_diags_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_encoding), cmocka_unit_test(test_f16_decoding),
      cmocka_unit_test(test_bf16),         cmocka_unit_test(test_dtype_table),
      cmocka_unit_test(test_op_table),     cmocka_unit_test(test_op_flags),
      cmocka_unit_test(test_undeclared_attr_lookup), cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_arena),        cmocka_unit_test(test_fault_injection_hook),
      cmocka_unit_test(test_diags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
