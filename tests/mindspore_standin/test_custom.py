"""ops.Custom func_type='aot' on CPU (facts.md section 5): a tiny C kernel compiled with
cc -shared -fPIC, called with (nparam, params, ndims, shapes, dtypes, stream, extra),
params = inputs then outputs, dtype strings "float32", ...; non-zero return is an error."""
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import ops

KERNEL = r"""
#include <stdint.h>
#include <string.h>
int CustomAdd(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
              void *stream, void *extra) {
  if (nparam != 3 || stream || extra) return 1;
  for (int i = 0; i < 3; i++) {
    if (strcmp(dtypes[i], "float32")) return 2;
    if (ndims[i] != ndims[0]) return 3;
    for (int d = 0; d < ndims[0]; d++) if (shapes[i][d] != shapes[0][d]) return 3;
  }
  int64_t n = 1;
  for (int d = 0; d < ndims[0]; d++) n *= shapes[0][d];
  const float *a = params[0], *b = params[1];
  float *c = params[2];
  for (int64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
  return 0;
}
/* (m, n) float32 -> row sums (m,) float32 and the column count (1,) int64 */
int RowSum(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
           void *stream, void *extra) {
  if (nparam != 3 || ndims[0] != 2 || strcmp(dtypes[1], "float32") || strcmp(dtypes[2], "int64")) return 1;
  int64_t m = shapes[0][0], n = shapes[0][1];
  const float *a = params[0];
  float *s = params[1];
  for (int64_t i = 0; i < m; i++) { s[i] = 0; for (int64_t j = 0; j < n; j++) s[i] += a[i * n + j]; }
  ((int64_t *)params[2])[0] = n;
  return 0;
}
int Fail(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,
         void *stream, void *extra) { return 7; }
"""


class TestCustomAot(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        src = os.path.join(cls.dir, "k.c")
        with open(src, "w") as f:
            f.write(KERNEL)
        cls.so = os.path.join(cls.dir, "k.so")
        cc = shutil.which("cc") or shutil.which("gcc")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", cls.so, src], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def test_add(self):
        op = ops.Custom(self.so + ":CustomAdd", out_shape=lambda x, _: x, out_dtype=lambda x, _: x,
                        func_type="aot")
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        b = np.full((2, 3), 0.5, np.float32)
        out = op(ms.Tensor(a), ms.Tensor(b))
        self.assertEqual(out.dtype, ms.float32)
        np.testing.assert_array_equal(out.asnumpy(), a + b)
        # a non-contiguous input reaches the kernel as C-order data
        t = ops.transpose(ms.Tensor(a.T.copy()), (1, 0))
        np.testing.assert_array_equal(op(t, ms.Tensor(b)).asnumpy(), a + b)

    def test_values_and_several_outputs(self):
        op = ops.Custom(self.so + ":RowSum", out_shape=([2], [1]), out_dtype=(ms.float32, ms.int64),
                        func_type="aot")
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        s, n = op(ms.Tensor(a))
        np.testing.assert_array_equal(s.asnumpy(), a.sum(1))
        self.assertEqual(n.asnumpy().tolist(), [3])

    def test_kernel_error(self):
        op = ops.Custom(self.so + ":Fail", out_shape=[1], out_dtype=ms.float32, func_type="aot")
        with self.assertRaisesRegex(RuntimeError, "returned 7"):
            op(ms.Tensor(np.ones(1, np.float32)))
        add = ops.Custom(self.so + ":CustomAdd", out_shape=lambda x, _: x, out_dtype=lambda x, _: x,
                         func_type="aot")
        with self.assertRaisesRegex(RuntimeError, "returned 2"):  # the kernel checks "float32"
            add(ms.Tensor(np.ones(2, np.float64)), ms.Tensor(np.ones(2, np.float64)))

    def test_no_gradient_without_bprop(self):
        op = ops.Custom(self.so + ":CustomAdd", out_shape=lambda x, _: x, out_dtype=lambda x, _: x,
                        func_type="aot")

        def f(x):
            return ops.mean(op(x, x), None, False)
        with self.assertRaises(NotImplementedError):
            ms.grad(f)(ms.Tensor(np.ones(2, np.float32)))

    def test_rejected(self):
        with self.assertRaises(ValueError):
            ops.Custom(self.so + ":CustomAdd", [1], ms.float32, func_type="cuda")
        with self.assertRaises(NotImplementedError):
            ops.Custom(lambda x: x, [1], ms.float32, func_type="pyfunc")
        with self.assertRaises(NotImplementedError):
            ops.Custom(self.so + ":CustomAdd", [1], ms.float32)  # default func_type 'hybrid'
        with self.assertRaises(NotImplementedError):
            ops.Custom("aclnnAddCustom", [1], ms.float32, func_type="aot")  # Ascend aclnn
        with self.assertRaises(NotImplementedError):
            ops.Custom(os.path.join(self.dir, "k.c") + ":CustomAdd", [1], ms.float32, func_type="aot")
        with self.assertRaises(NotImplementedError):
            ops.Custom(self.so + ":CustomAdd", func_type="aot")  # C++ infer fallback
        with self.assertRaises(ValueError):
            ops.Custom(self.so + ":Missing", [1], ms.float32, func_type="aot")
        with self.assertRaises(TypeError):
            ops.Custom(self.so + ":CustomAdd", [1], ms.float32, func_type="aot", inputs=1)


if __name__ == "__main__":
    unittest.main()
