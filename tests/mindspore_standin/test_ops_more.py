"""The node-test functions (_ops_more.py) against hand-written torch translations of
their table entries' notes, and the pitfalls those notes record."""
import unittest

import numpy as np
import torch

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import ops


def t(a, dtype=np.float32):
    return ms.Tensor(np.asarray(a, dtype=dtype))


def n(x):
    return x.asnumpy()


class TestElementwise(unittest.TestCase):
    def test_elu_alpha_must_be_one(self):
        # 'alpha must be exactly 1.0: ValueError for any other value; TypeError if not a float'
        with self.assertRaises(ValueError):
            ops.elu(t([1.0]), alpha=2.0)
        with self.assertRaises(TypeError):
            ops.elu(t([1.0]), alpha=1)
        np.testing.assert_allclose(n(ops.elu(t([-1.0, 2.0]), alpha=1.0)), [np.expm1(-1.0), 2.0], rtol=1e-6)

    def test_leaky_relu_default_is_mindsporeS(self):
        # 'DEFAULT alpha=0.2 (ONNX 0.01)'
        np.testing.assert_allclose(n(ops.leaky_relu(t([-1.0, 3.0]))), [-0.2, 3.0], rtol=1e-6)

    def test_selu_constants(self):
        # 'Fixed constants alpha=1.67326324, scale=1.05070098'
        want = 1.05070098 * 1.67326324 * np.expm1(-1.0)
        np.testing.assert_allclose(n(ops.selu(t([-1.0]))), [want], rtol=1e-7)

    def test_softsign_float16_32_only(self):
        with self.assertRaises(TypeError):
            ops.softsign(t([1.0], np.float64))
        np.testing.assert_allclose(n(ops.softsign(t([-3.0]))), [-0.75])

    def test_floor_ceil_float_only_on_cpu(self):
        with self.assertRaises(TypeError):
            ops.floor(t([1], np.int32))
        with self.assertRaises(TypeError):
            ops.ceil(t([1], np.int64))

    def test_tan_promotes_integers(self):
        self.assertEqual(ops.tan(t([1], np.int32)).dtype, ms.float32)

    def test_round_half_to_even(self):
        # notes' example [0.8,1.5,2.3,2.5,-4.5] -> [1,2,2,2,-4]
        np.testing.assert_array_equal(n(ops.round(t([0.8, 1.5, 2.3, 2.5, -4.5]))), [1, 2, 2, 2, -4])

    def test_fmod_and_remainder_signs(self):
        a, b = t([-7.0, 7.0]), t([3.0, -3.0])
        np.testing.assert_array_equal(n(ops.fmod(a, b)), np.fmod([-7.0, 7.0], [3.0, -3.0]))  # dividend's sign
        np.testing.assert_array_equal(n(ops.remainder(t([-7, 7], np.int64), t([3, -3], np.int64))), [2, -2])

    def test_softplus_threshold(self):
        np.testing.assert_allclose(n(ops.softplus(t([0.0, 30.0]), beta=1, threshold=20)), [np.log(2.0), 30.0],
                                   rtol=1e-6)

    def test_sign_nan_only_float64(self):
        with self.assertRaises(NotImplementedError):
            ops.sign(t([np.nan]))
        self.assertTrue(np.isnan(n(ops.sign(t([np.nan], np.float64)))[0]))

    def test_isinf_only_on_atlas_a2(self):
        with self.assertRaises(RuntimeError):
            ops.isinf(t([1.0]))

    def test_log_softmax_fp16_fp32(self):
        with self.assertRaises(TypeError):
            ops.log_softmax(t([1.0, 2.0], np.float64), axis=-1)
        x = np.array([[1.0, 2.0, 3.0]], np.float32)
        np.testing.assert_allclose(n(ops.log_softmax(t(x), axis=1)), torch.log_softmax(torch.tensor(x), 1).numpy(),
                                   rtol=1e-6)


class TestReductions(unittest.TestCase):
    def test_sum_keeps_integer_dtype_and_names(self):
        y = ops.sum(t([[1, 2], [3, 4]], np.int32), dim=(1,), keepdim=True)
        self.assertEqual(y.dtype, ms.int32)
        np.testing.assert_array_equal(n(y), [[3], [7]])
        with self.assertRaises(TypeError):
            ops.sum(t([1.0]), axis=0)  # ops.sum names dim/keepdim

    def test_amax_amin_tuple_axis(self):
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        np.testing.assert_array_equal(n(ops.amax(t(x), axis=(0, 2), keepdims=True)), x.max((0, 2), keepdims=True))
        np.testing.assert_array_equal(n(ops.amin(t(x), axis=None, keepdims=False)), x.min())

    def test_prod_names_keep_dims(self):
        np.testing.assert_array_equal(n(ops.prod(t([[1, 2], [3, 4]], np.int64), axis=0, keep_dims=False)), [3, 8])

    def test_logsumexp_dim_required(self):
        with self.assertRaises(TypeError):
            ops.logsumexp(t([1.0]))
        x = np.array([[1.0, 2.0], [3.0, 1000.0]], np.float32)
        np.testing.assert_allclose(n(ops.logsumexp(t(x), dim=(1,), keepdim=False)),
                                   torch.logsumexp(torch.tensor(x), 1).numpy(), rtol=1e-6)

    def test_argmax_argmin_names_and_int64(self):
        x = t([[1.0, 5.0, 5.0], [7.0, 0.0, 7.0]])
        self.assertEqual(ops.argmax(x, dim=1, keepdim=False).dtype, ms.int64)
        np.testing.assert_array_equal(n(ops.argmax(x, dim=1, keepdim=False)), [1, 0])
        np.testing.assert_array_equal(n(ops.argmin(x, axis=1, keepdims=True)), [[0], [1]])
        with self.assertRaises(TypeError):
            ops.argmin(x, dim=1)  # argmin names axis/keepdims

    def test_cumsum_keeps_dtype(self):
        y = ops.cumsum(t([1, 2, 3], np.int32), axis=0)
        self.assertEqual(y.dtype, ms.int32)
        np.testing.assert_array_equal(n(y), [1, 3, 6])


class TestIndexing(unittest.TestCase):
    def test_gather_elements_order_and_negative(self):
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        i = np.array([[2, 0], [1, 1]], np.int64)
        np.testing.assert_array_equal(n(ops.gather_elements(t(x), 1, t(i, np.int64))), np.take_along_axis(x, i, 1))
        with self.assertRaises(NotImplementedError):
            ops.gather_elements(t(x), 1, t([[-1, 0], [0, 0]], np.int64))

    def test_gather_nd(self):
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        np.testing.assert_array_equal(n(ops.gather_nd(t(x), t([[0, 1], [2, 3]], np.int64))), [1, 11])

    def test_scatter_elements_reductions(self):
        x = np.zeros((2, 3), np.float32)
        i, u = np.array([[1, 0]], np.int64), np.array([[5.0, 6.0]], np.float32)
        np.testing.assert_array_equal(n(ops.tensor_scatter_elements(t(x), t(i, np.int64), t(u), axis=0)),
                                      [[0, 6, 0], [5, 0, 0]])
        with self.assertRaises(ValueError):
            ops.tensor_scatter_elements(t(x), t(i, np.int64), t(u), axis=0, reduction="mul")
        with self.assertRaises(NotImplementedError):  # duplicates: the value is undefined
            ops.tensor_scatter_elements(t(x), t([[1, 1]], np.int64), t(u), axis=1)

    def test_tile_left_pads(self):
        np.testing.assert_array_equal(n(ops.tile(t([[1, 2]], np.int64), (2, 1, 2))), np.tile([[1, 2]], (2, 1, 2)))


class TestConv(unittest.TestCase):
    def test_conv2d_pitfalls(self):
        x, w = t(np.ones((1, 1, 4, 4))), t(np.ones((1, 1, 3, 3)))
        with self.assertRaises(ValueError):  # padding needs pad_mode='pad'
            ops.conv2d(x, w, padding=1)
        with self.assertRaises(ValueError):  # not nn.Conv2d's 4-tuple
            ops.conv2d(x, w, pad_mode="pad", padding=(1, 1, 1, 1))
        y = ops.conv2d(x, w, None, 1, "pad", (1, 1), 1, 1)
        want = torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 3, 3), padding=1)
        np.testing.assert_allclose(n(y), want.numpy())
        self.assertEqual(ops.conv2d(x, w).shape, (1, 1, 2, 2))  # 'valid' by default

    def test_conv_transpose2d_torch_order(self):
        x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
        w = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
        y = ms.mint.nn.functional.conv_transpose2d(t(x), t(w), None, 2, 0, 1, 1, 1)
        want = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), None, 2, 0, 1, 1, 1)
        np.testing.assert_allclose(n(y), want.numpy())

    def test_group_norm_per_channel(self):
        x = np.random.default_rng(1).standard_normal((2, 4, 3)).astype(np.float32)
        wt, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
        y = ops.group_norm(t(x), 4, t(wt), t(b), eps=1e-5)
        want = torch.nn.functional.group_norm(torch.tensor(x), 4, torch.tensor(wt), torch.tensor(b), 1e-5)
        np.testing.assert_allclose(n(y), want.numpy(), rtol=1e-5, atol=1e-6)
        with self.assertRaises(ValueError):
            ops.group_norm(t(x), 3)


if __name__ == "__main__":
    unittest.main()
