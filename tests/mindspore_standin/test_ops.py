"""ops functions against hand-translated torch calls (names, defaults and semantics of
mindspore-api.json: axis/keep_dims, chunk-size split, torch-order pad, gelu default, ...)."""
import math
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import ops

rng = np.random.default_rng(1)


def arr(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def T(a):
    return ms.Tensor(a)


def close(tc, got, want, tol=1e-6):
    got = got.asnumpy() if isinstance(got, ms.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    tc.assertEqual(got.shape, want.shape)
    tc.assertEqual(got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


class TestCreation(unittest.TestCase):
    def test_arange(self):
        close(self, ops.arange(5), torch.arange(5))  # all-int -> int64
        self.assertEqual(ops.arange(5).dtype, ms.int64)
        self.assertEqual(ops.arange(0, 1, 0.25).dtype, ms.float32)  # any float -> float32
        close(self, ops.arange(0, 1, 0.25), np.array([0, 0.25, 0.5, 0.75], np.float32))
        close(self, ops.arange(T(np.int64(2)), T(np.int64(8)), T(np.int64(3)), dtype=ms.int32),
              np.array([2, 5], np.int32))

    def test_ones_zeros(self):
        close(self, ops.ones((2, 3), ms.float16), np.ones((2, 3), np.float16))
        close(self, ops.zeros(4, ms.int32), np.zeros(4, np.int32))
        with self.assertRaises(TypeError):
            ops.zeros(shape=(2,), dtype=ms.float32)  # ops.zeros names it size
        with self.assertRaises(TypeError):
            ops.ones(size=(2,), dtype=ms.float32)  # ops.ones names it shape


class TestShape(unittest.TestCase):
    def test_broadcast_to(self):
        x = arr(3, 1)
        close(self, ops.broadcast_to(T(x), (2, -1, 4)), torch.from_numpy(x).expand(2, 3, 4))
        with self.assertRaises(ValueError):
            ops.broadcast_to(T(x), (-1, 3, 4))  # -1 in a new leading dim
        with self.assertRaises(ValueError):
            ops.broadcast_to(T(x), (4,))

    def test_reshape(self):
        x = arr(2, 3, 4)
        close(self, ops.reshape(T(x), (4, -1)), torch.from_numpy(x).reshape(4, 6))
        close(self, ops.reshape(T(x), T(np.array([6, 4], np.int64))), torch.from_numpy(x).reshape(6, 4))
        with self.assertRaises(ValueError):
            ops.reshape(T(x), (-1, -1))
        with self.assertRaises(ValueError):
            ops.reshape(T(x), (-2, 12))
        with self.assertRaises(NotImplementedError):
            ops.reshape(T(x), (0, 12))  # ONNX '0 = copy' is not documented

    def test_transpose(self):
        x = arr(2, 3, 4)
        close(self, ops.transpose(T(x), (2, 0, 1)), torch.from_numpy(x).permute(2, 0, 1))
        close(self, ops.transpose(T(x), (-1, 0, 1)), torch.from_numpy(x).permute(2, 0, 1))
        with self.assertRaises(ValueError):
            ops.transpose(T(x), (0, 0, 1))

    def test_concat_split(self):
        a, b = arr(2, 3), arr(2, 2)
        close(self, ops.concat((T(a), T(b)), 1), torch.cat([torch.from_numpy(a), torch.from_numpy(b)], 1))
        with self.assertRaises(NotImplementedError):
            ops.concat((T(a), T(a.astype(np.float64))))
        x = arr(7, 2)
        parts = ops.split(T(x), 3)  # int = chunk SIZE: 3, 3, 1
        self.assertIsInstance(parts, tuple)
        self.assertEqual([p.shape for p in parts], [(3, 2), (3, 2), (1, 2)])
        for got, want in zip(parts, torch.split(torch.from_numpy(x), 3)):
            close(self, got, want)
        parts = ops.split(T(x), [2, 5], axis=0)
        self.assertEqual([p.shape for p in parts], [(2, 2), (5, 2)])
        with self.assertRaises(ValueError):
            ops.split(T(x), [2, 2])

    def test_gather(self):
        x = arr(4, 5)
        i = np.array([[3, 0], [1, 1]], np.int64)
        close(self, ops.gather(T(x), T(i), 1), torch.from_numpy(x)[:, torch.from_numpy(i)])
        close(self, ops.gather(T(x), T(i.astype(np.int32)), 0), torch.from_numpy(x)[torch.from_numpy(i)])
        with self.assertRaises(ValueError):
            ops.gather(T(x), T(np.array([-1], np.int64)), 0)  # negative indices unsupported
        with self.assertRaises(ValueError):
            ops.gather(T(x), T(np.array([4], np.int64)), 0)

    def test_pad_torch_order(self):
        x = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
        # padding (left, right, top, bottom) = (1, 0, 0, 2) on the last two dims, built by hand
        want = np.full((1, 4, 4), 9, np.float32)
        want[:, 0:2, 1:4] = x
        close(self, ops.pad(T(x), (1, 0, 0, 2), value=9.0), want)
        close(self, ops.pad(T(x), (1, 1), mode="reflect"), F.pad(torch.from_numpy(x), (1, 1), mode="reflect"))
        close(self, ops.pad(T(x), (2, 1), mode="replicate"), F.pad(torch.from_numpy(x), (2, 1), mode="replicate"))
        close(self, ops.pad(T(x), (1, 1), mode="circular"), F.pad(torch.from_numpy(x), (1, 1), mode="circular"))
        close(self, ops.pad(T(x), (-1, 0)), torch.from_numpy(x)[..., 1:])
        with self.assertRaises(ValueError):
            ops.pad(T(x), (1, 1), mode="reflect", value=0.0)  # value only with 'constant'
        with self.assertRaises(ValueError):
            ops.pad(T(arr(1, 1, 1, 1)), (1,) * 8)  # > 6
        with self.assertRaises(ValueError):
            ops.pad(T(x), (1, 1, 1))


class TestMath(unittest.TestCase):
    def test_unary(self):
        x = arr(3, 4)
        xt = torch.from_numpy(x)
        close(self, ops.erf(T(x)), torch.erf(xt))
        close(self, ops.sigmoid(T(x)), 1 / (1 + torch.exp(-xt)))
        close(self, ops.tanh(T(x)), torch.tanh(xt))
        close(self, ops.relu(T(x)), torch.clamp(xt, min=0))
        with self.assertRaises(TypeError):
            ops.sigmoid(T(np.array([1, 2], np.int32)))

    def test_gelu_default_exact(self):
        x = np.linspace(-4, 4, 101).astype(np.float32)
        xt = torch.from_numpy(x)
        exact = 0.5 * xt * (1 + torch.erf(xt / math.sqrt(2)))
        tanh_form = 0.5 * xt * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xt + 0.044715 * xt ** 3)))
        got = ops.gelu(T(x))
        close(self, got, exact, tol=1e-6)
        self.assertGreater(np.abs(got.asnumpy() - tanh_form.numpy()).max(), 1e-4)
        close(self, ops.gelu(T(x), approximate="tanh"), tanh_form, tol=1e-6)
        with self.assertRaises(ValueError):
            ops.gelu(T(x), approximate=True)

    def test_clamp(self):
        x = arr(10)
        xt = torch.from_numpy(x)
        close(self, ops.clamp(T(x), -0.5, 0.5), torch.clamp(xt, -0.5, 0.5))
        close(self, ops.clamp(T(x), min=T(np.float32(0))), torch.clamp(xt, min=0))
        close(self, ops.clamp(T(x), 1.0, -1.0), np.full(10, -1, np.float32))  # min > max -> max
        with self.assertRaises(ValueError):
            ops.clamp(T(x))

    def test_pow(self):
        x = np.abs(arr(5)) + 0.1
        close(self, ops.pow(T(x), 2.0), torch.from_numpy(x) ** 2, tol=1e-5)
        close(self, ops.pow(T(x), T(x)), torch.from_numpy(x) ** torch.from_numpy(x), tol=1e-5)
        with self.assertRaises(NotImplementedError):
            ops.pow(T(x), T(x.astype(np.float64)))

    def test_softmax(self):
        x = arr(3, 5)
        close(self, ops.softmax(T(x)), torch.softmax(torch.from_numpy(x), -1))
        close(self, ops.softmax(T(x), 0), torch.softmax(torch.from_numpy(x), 0))
        with self.assertRaises(TypeError):
            ops.softmax(T(x), (0, 1))  # 'TypeError for tuple'

    def test_mean(self):
        x = arr(2, 3, 4, 5)
        xt = torch.from_numpy(x)
        close(self, ops.mean(T(x)), xt.mean())
        close(self, ops.mean(T(x), (2, 3), True), xt.mean(dim=(2, 3), keepdim=True))
        close(self, ops.mean(T(x), 1), xt.mean(dim=1))

    def test_matmul_einsum(self):
        a, b = arr(2, 3, 4), arr(4, 5)
        close(self, ops.matmul(T(a), T(b)), torch.from_numpy(a) @ torch.from_numpy(b), tol=1e-5)
        with self.assertRaises(TypeError):
            ops.matmul(T(a), T(b.astype(np.float64)))
        close(self, ops.einsum("bij,jk->bik", T(a), T(b)),
              torch.einsum("bij,jk->bik", torch.from_numpy(a), torch.from_numpy(b)), tol=1e-5)
        with self.assertRaises(TypeError):
            ops.einsum("ij,jk->ik", T(b.T.copy()), T(b.astype(np.float64)))

    def test_where_cast(self):
        c = np.array([True, False, True])
        a, b = arr(3), arr(3)
        close(self, ops.where(T(c), T(a), T(b)), np.where(c, a, b))
        close(self, ops.where(T(c), T(a), 0.0), np.where(c, a, 0).astype(np.float32))
        with self.assertRaises(TypeError):
            ops.where(T(c), 1.0, 0.0)
        close(self, ops.cast(T(a), ms.float16), a.astype(np.float16))
        with self.assertRaises(TypeError):
            ops.cast(T(a), np.float16)  # must be a mindspore dtype


class TestInterpolate(unittest.TestCase):
    def test_bilinear(self):
        x = arr(1, 2, 4, 5)
        xt = torch.from_numpy(x)
        # align_corners False -> half-pixel mapping; True -> corner mapping
        close(self, ops.interpolate(T(x), size=(7, 3), mode="bilinear", align_corners=False),
              F.interpolate(xt, size=(7, 3), mode="bilinear", align_corners=False), tol=1e-5)
        close(self, ops.interpolate(T(x), size=(8, 10), mode="bilinear", align_corners=True),
              F.interpolate(xt, size=(8, 10), mode="bilinear", align_corners=True), tol=1e-5)
        close(self, ops.interpolate(T(x), size=(8, 10), mode="bilinear"),  # None -> False
              F.interpolate(xt, size=(8, 10), mode="bilinear", align_corners=False), tol=1e-5)

    def test_half_pixel_by_hand(self):
        # 1-D linear, in 2 -> out 4, half-pixel: src = (i + 0.5) * 2/4 - 0.5, clamped at 0
        x = np.array([[[0.0, 4.0]]], np.float32)
        close(self, ops.interpolate(T(x), size=(4,), mode="linear", align_corners=False),
              np.array([[[0.0, 1.0, 3.0, 4.0]]], np.float32))

    def test_nearest(self):
        x = arr(1, 1, 3, 3)
        # asymmetric + floor: src = floor(i * in / out)
        idx = np.floor(np.arange(5) * 3 / 5).astype(int)
        close(self, ops.interpolate(T(x), size=(5, 5)), x[:, :, idx][:, :, :, idx])
        with self.assertRaises(ValueError):
            ops.interpolate(T(x), size=(5, 5), align_corners=False)

    def test_scale_factor_rules(self):
        x = arr(1, 1, 3, 3)
        with self.assertRaises(ValueError):
            ops.interpolate(T(x), scale_factor=2.0, mode="bilinear")
        close(self, ops.interpolate(T(x), scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
              F.interpolate(torch.from_numpy(x), size=(5, 5), mode="bilinear", align_corners=False), tol=1e-5)
        with self.assertRaises(ValueError):
            ops.interpolate(T(x), size=(2, 2), scale_factor=2.0)
        with self.assertRaises(NotImplementedError):
            ops.interpolate(T(x), size=(5, 5), mode="bicubic")
        with self.assertRaises(ValueError):
            ops.interpolate(T(x), size=(5,), mode="linear")  # linear is 3-D only


class TestStopGradient(unittest.TestCase):
    def test_identity_forward(self):
        x = arr(3)
        close(self, ops.stop_gradient(T(x)), x)
        self.assertEqual(ops.stop_gradient(3), 3)


if __name__ == "__main__":
    unittest.main()


class TestArithmetic(unittest.TestCase):
    """ops.add/sub/mul/div/equal/logical_not: numpy broadcasting; div's rounding_mode
    (None true division, 'trunc' toward zero as ONNX integer Div, 'floor' down)."""

    def test_broadcasting(self):
        a, b = arr(2, 3), arr(3)
        close(self, ops.add(T(a), T(b)), a + b)
        close(self, ops.sub(T(a), T(b)), a - b)
        close(self, ops.mul(T(a), T(b)), a * b)
        close(self, ops.div(T(a), T(b) , rounding_mode=None), a / b, 1e-5)

    def test_integer_division_rounding(self):
        a, b = np.array([-7, 7, -8], np.int64), np.array([2, -2, 3], np.int64)
        self.assertEqual(ops.div(T(a), T(b), rounding_mode="trunc").asnumpy().tolist(), [-3, -3, -2])
        self.assertEqual(ops.div(T(a), T(b), rounding_mode="floor").asnumpy().tolist(), [-4, -4, -3])
        with self.assertRaises(ValueError):
            ops.div(T(a), T(b), rounding_mode="round")
        with self.assertRaises(TypeError):  # rounding_mode is keyword-only
            ops.div(T(a), T(b), "trunc")

    def test_equal_and_not(self):
        a, b = np.array([1, 2, 3], np.int32), np.array([1, 0, 3], np.int32)
        self.assertEqual(ops.equal(T(a), T(b)).asnumpy().tolist(), [True, False, True])
        self.assertEqual(ops.logical_not(ops.equal(T(a), T(b))).asnumpy().tolist(), [False, True, False])

    def test_strict(self):
        with self.assertRaises(TypeError):
            ops.add(1, 2)  # at least one Tensor
        with self.assertRaises(NotImplementedError):
            ops.add(T(arr(2)), T(np.array([1, 2], np.int64)))  # promotion is not in the notes
