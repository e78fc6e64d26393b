"""mindspore.amp.auto_mixed_precision O0-O3 and Cell.to_float (table entry
'mindspore.amp.auto_mixed_precision' notes; ../shared/targets/facts.md section 6):
which cells run in float16, which stay float32, what their outputs are cast to, and
that the float16 values are torch's float32 results rounded at each cast point."""
import unittest

import numpy as np
import torch

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import nn, ops


class Probe(nn.Cell):
    """Records the dtype of its input and of its parameter as its operation reads them."""

    def __init__(self, log, key):
        super().__init__()
        self.w = ms.Parameter(ms.Tensor(np.full((4,), 1.0001, np.float32)))
        self.log, self.key = log, key

    def construct(self, x):
        y = ops.mul(x, self.w)
        self.log[self.key] = (x.dtype, y.dtype)
        return y


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 1, has_bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.ln = nn.LayerNorm((4,), -1, -1, epsilon=1e-5)
        self.fc = nn.Dense(4, 3)
        self.log = {}
        self.probe = Probe(self.log, "probe")

    def construct(self, x):
        a = self.conv(x)
        b = self.bn(a)
        c = ops.relu(b)
        self.log["conv"], self.log["bn"], self.log["relu"] = a.dtype, b.dtype, c.dtype
        d = self.ln(ops.reshape(ops.mean(c, (2, 3), False), (2, 4)))
        self.log["ln"] = d.dtype
        e = self.probe(d)
        f = self.fc(e)
        self.log["fc"] = f.dtype
        return f


def seeded(seed=0):
    torch.manual_seed(seed)
    net = Net()
    rng = np.random.RandomState(seed)
    for _, p in net.parameters_and_names():
        p.set_data(ms.Tensor(rng.uniform(0.5, 1.5, p.shape).astype(np.float32)))
    return net, ms.Tensor(rng.randn(2, 4, 3, 3).astype(np.float32))


F16, F32 = ms.float16, ms.float32


class TestLevels(unittest.TestCase):
    def test_o0_unchanged(self):
        net, x = seeded()
        ref = net(x).asnumpy()
        out = ms.amp.auto_mixed_precision(net, "O0")
        self.assertIs(out, net)
        np.testing.assert_array_equal(out(x).asnumpy(), ref)
        self.assertEqual(set(net.log.values()) - {(F32, F32)}, {F32})

    def test_o1_white_list_only(self):
        ref = seeded()[0](seeded()[1]).asnumpy()
        net, x = seeded()
        y = ms.amp.auto_mixed_precision(net, "O1")(x)
        # the white-list cells did run in float16: the output moved, by float16's error
        diff = np.abs(y.asnumpy() - ref).max()
        self.assertTrue(0 < diff < 1e-2 * np.abs(ref).max(), diff)
        # white-list cells (nn.Conv2d, nn.Dense): outputs cast back to float32
        self.assertEqual((net.log["conv"], net.log["fc"], y.dtype), (F32, F32, F32))
        # everything else runs in its input dtype
        self.assertEqual((net.log["bn"], net.log["relu"], net.log["ln"]), (F32, F32, F32))
        self.assertEqual(net.log["probe"], (F32, F32))

    def test_o2_black_list_fp32(self):
        net, x = seeded()
        y = ms.amp.auto_mixed_precision(net, "O2")(x)
        self.assertEqual(y.dtype, F32)                    # final output cast to float32
        self.assertEqual(net.log["conv"], F16)
        self.assertEqual(net.log["bn"], F16)              # kept fp32, its output cast back
        self.assertEqual(net.log["ln"], F16)
        self.assertEqual(net.log["probe"], (F16, F16))
        self.assertEqual(net.log["fc"], F16)

    def test_o3_all_fp16(self):
        net, x = seeded()
        y = ms.amp.auto_mixed_precision(net, "O3")(x)
        self.assertEqual(y.dtype, F32)
        self.assertEqual((net.log["conv"], net.log["bn"], net.log["ln"], net.log["fc"]), (F16,) * 4)

    def test_parameters_keep_their_dtype(self):
        net, x = seeded()
        amp = ms.amp.auto_mixed_precision(net, "O3")
        amp(x)
        self.assertEqual({p.dtype for _, p in net.parameters_and_names()}, {F32})
        self.assertEqual(sorted(n for n, _ in net.parameters_and_names()),
                         sorted(p.name for p in amp.get_parameters()))

    def test_bad_arguments(self):
        net, _ = seeded()
        with self.assertRaises(ValueError):
            ms.amp.auto_mixed_precision(net, "O4")
        with self.assertRaises(ValueError):
            ms.amp.auto_mixed_precision(net, "O2", ms.float32)  # 'float16 or bfloat16'
        with self.assertRaises(NotImplementedError):
            ms.amp.auto_mixed_precision(net, "auto")


def fp16(a):
    return torch.tensor(a, dtype=torch.float32).half().float()


class TestValues(unittest.TestCase):
    """BatchNorm as the level runs it, against torch float32 with the casts written out."""

    def bn_net(self, var):
        class N(nn.Cell):
            def __init__(self):
                super().__init__()
                self.bn = nn.BatchNorm2d(2, eps=1e-5)

            def construct(self, x):
                return self.bn(x)
        n = N()
        n.bn.moving_variance.set_data(ms.Tensor(np.array(var, np.float32)))
        n.bn.moving_mean.set_data(ms.Tensor(np.array([0.1, -0.2], np.float32)))
        n.bn.gamma.set_data(ms.Tensor(np.array([1.0001, 0.3], np.float32)))
        return n

    def torch_bn(self, x, var, cast_params, cast_out):
        m, g, b = torch.tensor([0.1, -0.2]), torch.tensor([1.0001, 0.3]), torch.zeros(2)
        v = torch.tensor(var, dtype=torch.float32)
        if cast_params:
            m, v, g, b = (fp16(t.numpy()) for t in (m, v, g, b))
        y = torch.nn.functional.batch_norm(fp16(x), m, v, g, b, False, 0.0, 1e-5)
        return y.half().float() if cast_out else y

    def test_o2_keeps_batchnorm_parameters_float32_and_o3_does_not(self):
        rng = np.random.RandomState(1)
        var = [1e6, 4.0]  # a running variance beyond float16's range (65504)
        x = (rng.randn(1, 2, 3, 3) * 1000).astype(np.float32)
        o2 = ms.amp.auto_mixed_precision(self.bn_net(var), "O2")(ms.Tensor(x)).asnumpy()
        o3 = ms.amp.auto_mixed_precision(self.bn_net(var), "O3")(ms.Tensor(x)).asnumpy()
        np.testing.assert_array_equal(o2, self.torch_bn(x, var, False, True).numpy())
        np.testing.assert_array_equal(o3, self.torch_bn(x, var, True, True).numpy())
        # O3 holds the variance as inf: channel 0 collapses to beta (0); O2 keeps it
        self.assertTrue(np.all(o3[0, 0] == 0) and np.all(np.abs(o2[0, 0]) > 0))

    def test_to_float_rounds_at_cast_points(self):
        class D(nn.Cell):
            def __init__(self):
                super().__init__()
                self.fc = nn.Dense(3, 2, has_bias=True)

            def construct(self, x):
                return self.fc(x)
        d = D()
        rng = np.random.RandomState(2)
        w, b = rng.randn(2, 3).astype(np.float32), rng.randn(2).astype(np.float32)
        x = rng.randn(4, 3).astype(np.float32)
        d.fc.weight.set_data(ms.Tensor(w))
        d.fc.bias.set_data(ms.Tensor(b))
        y = d.to_float(ms.float16)(ms.Tensor(x))
        self.assertEqual(y.dtype, ms.float16)
        want = (fp16(x) @ fp16(w).T + fp16(b)).half()
        np.testing.assert_array_equal(y.asnumpy(), want.numpy())
        self.assertNotEqual(float(np.abs(y.asnumpy().astype(np.float32) - (x @ w.T + b)).max()), 0.0)


if __name__ == "__main__":
    unittest.main()
