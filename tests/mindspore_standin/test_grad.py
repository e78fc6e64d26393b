"""mindspore.grad / value_and_grad through torch autograd, against torch autograd on a
hand-translated torch module with the same weights."""
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import nn, ops

rng = np.random.default_rng(2)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


class Tiny(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, pad_mode="pad", padding=(1, 0, 0, 1), has_bias=True)
        self.bn = nn.BatchNorm2d(3, use_batch_statistics=False)
        self.fc = nn.Dense(3, 2)

    def construct(self, x):
        y = ops.relu(self.bn(self.conv(x)))
        y = ops.mean(y, (2, 3), False)
        return ops.gelu(self.fc(y))


def torch_tiny(net, x):
    """the same computation in torch, translated by hand: padding (top, bottom, left, right)
    = (1, 0, 0, 1) -> F.pad (left, right, top, bottom) = (0, 1, 1, 0); BatchNorm with moving
    statistics (eps 1e-5); Dense = linear; ops.gelu default exact."""
    P = {n: torch.tensor(p.asnumpy(), requires_grad=p.requires_grad) for n, p in net.parameters_and_names()}
    y = F.conv2d(F.pad(x, (0, 1, 1, 0)), P["conv.weight"], P["conv.bias"])
    y = F.batch_norm(y, P["bn.moving_mean"], P["bn.moving_variance"], P["bn.gamma"], P["bn.beta"],
                     training=False, eps=1e-5)
    y = F.relu(y).mean(dim=(2, 3))
    return F.gelu(F.linear(y, P["fc.weight"], P["fc.bias"]), approximate="none"), P


def loss_ms(net):
    def f(x, target):
        d = ops.pow(net(x), 2.0)
        return ops.mean(ops.where(target, d, ops.zeros(d.shape, ms.float32)), None, False)
    return f


class TestValueAndGrad(unittest.TestCase):
    def setUp(self):
        ms.set_seed(5)
        self.net = Tiny()
        self.x = arr(2, 2, 5, 4)
        self.mask = np.array([[True, False], [True, True]])

    def torch_loss(self):
        xt = torch.tensor(self.x, requires_grad=True)
        out, P = torch_tiny(self.net, xt)
        d = out ** 2
        loss = torch.where(torch.from_numpy(self.mask), d, torch.zeros_like(d)).mean()
        return loss, xt, P

    def test_weights(self):
        f = loss_ms(self.net)
        vg = ms.value_and_grad(f, None, self.net.trainable_params())
        value, grads = vg(ms.Tensor(self.x), ms.Tensor(self.mask))
        loss, xt, P = self.torch_loss()
        names = [p.name for p in self.net.trainable_params()]
        want = torch.autograd.grad(loss, [P[n] for n in names])
        np.testing.assert_allclose(value.asnumpy(), loss.detach().numpy(), rtol=1e-5)
        self.assertEqual(len(grads), len(names))
        for n, g, w in zip(names, grads, want):
            np.testing.assert_allclose(g.asnumpy(), w.numpy(), rtol=1e-4, atol=1e-6, err_msg=n)
        self.assertNotIn("bn.moving_mean", names)

    def test_default_grad_position_is_first_input_only(self):
        f = loss_ms(self.net)
        g = ms.grad(f)(ms.Tensor(self.x), ms.Tensor(self.mask))
        loss, xt, _ = self.torch_loss()
        (want,) = torch.autograd.grad(loss, [xt])
        self.assertIsInstance(g, ms.Tensor)  # one gradient, not a tuple
        np.testing.assert_allclose(g.asnumpy(), want.numpy(), rtol=1e-4, atol=1e-7)

    def test_both(self):
        f = loss_ms(self.net)
        w = self.net.trainable_params()
        (gx,), gw = ms.grad(f, (0,), w)(ms.Tensor(self.x), ms.Tensor(self.mask))
        self.assertEqual(gx.shape, self.x.shape)
        self.assertEqual(len(gw), len(w))
        with self.assertRaises(ValueError):
            ms.grad(f, None, None)
        with self.assertRaises(NotImplementedError):
            ms.grad(f, return_ids=True)

    def test_two_inputs_and_has_aux(self):
        def f(a, b):
            p = ops.matmul(a, b)
            return ops.mean(ops.pow(p, 2.0), None, False), p
        a, b = arr(2, 3), arr(3, 2)
        at, bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
        lt = ((at @ bt) ** 2).mean()
        wa, wb = torch.autograd.grad(lt, [at, bt])
        (ga, gb), aux = ms.grad(f, (0, 1), has_aux=True)(ms.Tensor(a), ms.Tensor(b))
        np.testing.assert_allclose(ga.asnumpy(), wa.numpy(), rtol=1e-5)
        np.testing.assert_allclose(gb.asnumpy(), wb.numpy(), rtol=1e-5)
        self.assertEqual(aux[0].shape, (2, 2))
        (out, p), (ga2, gb2) = ms.value_and_grad(f, (0, 1), has_aux=True)(ms.Tensor(a), ms.Tensor(b))
        np.testing.assert_allclose(out.asnumpy(), lt.detach().numpy(), rtol=1e-6)
        with self.assertRaises(NotImplementedError):  # several outputs without has_aux
            ms.grad(f, (0, 1))(ms.Tensor(a), ms.Tensor(b))

    def test_stop_gradient(self):
        def f(x):
            return ops.mean(ops.concat((x, ops.stop_gradient(x)), 0), None, False)
        x = arr(3)
        g = ms.grad(f)(ms.Tensor(x))
        np.testing.assert_allclose(g.asnumpy(), np.full(3, 1 / 6, np.float32), rtol=1e-6)

    def test_non_scalar_output_not_emulated(self):
        with self.assertRaises(NotImplementedError):
            ms.grad(lambda x: ops.relu(x))(ms.Tensor(arr(3)))

    def test_params_are_plain_after(self):
        f = loss_ms(self.net)
        ms.value_and_grad(f, None, self.net.trainable_params())(ms.Tensor(self.x), ms.Tensor(self.mask))
        self.assertFalse(any(p._t.requires_grad for p in self.net.get_parameters()))


if __name__ == "__main__":
    unittest.main()
