"""nn layers against hand-translated torch calls, on the pitfalls of mindspore-api.json.

Each expected value is computed with torch directly; the MindSpore -> torch translation
(padding order, epsilon, momentum, stride defaults, GELU form, ...) is written out here
by hand, not taken from the stand-in."""
import math
import unittest

import numpy as np
import torch
import torch.nn.functional as F

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import nn

rng = np.random.default_rng(0)


def arr(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def T(a):
    return ms.Tensor(a)


def close(tc, got, want, tol=1e-5):
    got = got.asnumpy() if isinstance(got, ms.Tensor) else got
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else want
    tc.assertEqual(got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


class TestConv2d(unittest.TestCase):
    def test_defaults_same_and_no_bias(self):
        # nn.Conv2d: pad_mode default 'same', has_bias default False
        w = arr(4, 3, 3, 3)
        conv = nn.Conv2d(3, 4, 3, weight_init=T(w))
        self.assertIsNone(conv.bias)
        self.assertEqual([n for n, _ in conv.parameters_and_names()], ["weight"])
        x = arr(2, 3, 7, 9)
        close(self, conv(T(x)), F.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1))

    def test_same_odd_padding_goes_bottom_right(self):
        # 'same', stride 2 on 8x8, k 3: total pad 1 -> top 0, bottom 1; left 0, right 1
        w = arr(2, 1, 3, 3)
        conv = nn.Conv2d(1, 2, 3, stride=2, weight_init=T(w))
        x = arr(1, 1, 8, 8)
        xt = torch.nn.functional.pad(torch.from_numpy(x), (0, 1, 0, 1))
        want = F.conv2d(xt, torch.from_numpy(w), stride=2)
        self.assertEqual(tuple(want.shape), (1, 2, 4, 4))
        close(self, conv(T(x)), want)

    def test_pad_order_top_bottom_left_right(self):
        # padding=(top, bottom, left, right) = (1, 2, 0, 3); torch F.pad takes (left, right, top, bottom)
        w, b = arr(3, 2, 3, 2), arr(3)
        conv = nn.Conv2d(2, 3, (3, 2), pad_mode="pad", padding=(1, 2, 0, 3), has_bias=True,
                         weight_init=T(w), bias_init=T(b))
        x = arr(1, 2, 5, 6)
        xt = torch.nn.functional.pad(torch.from_numpy(x), (0, 3, 1, 2))
        want = F.conv2d(xt, torch.from_numpy(w), torch.from_numpy(b))
        self.assertEqual(tuple(want.shape), (1, 3, 6, 8))
        got = conv(T(x))
        close(self, got, want)
        # the ONNX order (top, left, bottom, right) read as-is would give another result
        wrong = F.conv2d(torch.nn.functional.pad(torch.from_numpy(x), (2, 3, 1, 0)),
                         torch.from_numpy(w), torch.from_numpy(b))
        self.assertNotEqual(tuple(wrong.shape), got.shape)

    def test_padding_needs_pad_mode(self):
        with self.assertRaises(ValueError):
            nn.Conv2d(1, 1, 3, padding=1)  # pad_mode 'same' by default
        with self.assertRaises(ValueError):
            nn.Conv2d(1, 1, 3, pad_mode="valid", padding=(1, 1, 1, 1))
        with self.assertRaises(ValueError):
            nn.Conv2d(1, 1, 3, pad_mode="zeros")

    def test_valid_group_dilation_and_weight_shape(self):
        conv = nn.Conv2d(4, 6, 3, stride=1, pad_mode="valid", dilation=2, group=2, has_bias=True)
        self.assertEqual(conv.weight.shape, (6, 2, 3, 3))  # (out, in/group, kh, kw)
        self.assertEqual(conv.bias.shape, (6,))
        x = arr(1, 4, 9, 9)
        want = F.conv2d(torch.from_numpy(x), torch.from_numpy(conv.weight.asnumpy()),
                        torch.from_numpy(conv.bias.asnumpy()), dilation=2, groups=2)
        close(self, conv(T(x)), want)

    def test_default_init_bounds(self):
        # weight_init None -> HeUniform(sqrt(5)): bound 1/sqrt(fan_in); bias Uniform(1/sqrt(fan_in))
        conv = nn.Conv2d(8, 16, 3, has_bias=True)
        bound = 1 / math.sqrt(8 * 9)
        self.assertLessEqual(np.abs(conv.weight.asnumpy()).max(), bound)
        self.assertGreater(np.abs(conv.weight.asnumpy()).max(), bound * 0.8)
        self.assertLessEqual(np.abs(conv.bias.asnumpy()).max(), bound)


class TestConv1d(unittest.TestCase):
    def test_weight_is_4d_and_pad_symmetric(self):
        # nn.Conv1d: weight (out, in/group, 1, k); padding one int, both sides
        w, b = arr(4, 3, 1, 5), arr(4)
        conv = nn.Conv1d(3, 4, 5, stride=2, pad_mode="pad", padding=2, has_bias=True,
                         weight_init=T(w), bias_init=T(b))
        self.assertEqual(conv.weight.shape, (4, 3, 1, 5))
        x = arr(2, 3, 11)
        want = F.conv1d(torch.from_numpy(x), torch.from_numpy(w[:, :, 0, :]), torch.from_numpy(b),
                        stride=2, padding=2)
        close(self, conv(T(x)), want)

    def test_default_same_no_bias_and_3d_weight_init(self):
        # pad_mode default 'same' (the odd extra pad at the end), has_bias default False; a 3-D
        # weight_init Tensor is expanded to (out, in, 1, k)
        w = arr(2, 3, 4)
        conv = nn.Conv1d(3, 2, 4, weight_init=T(w))
        self.assertIsNone(conv.bias)
        self.assertEqual(conv.weight.shape, (2, 3, 1, 4))
        x = arr(1, 3, 9)
        want = F.conv1d(F.pad(torch.from_numpy(x), (1, 2)), torch.from_numpy(w))
        close(self, conv(T(x)), want)

    def test_plain_ints_and_3d_input(self):
        with self.assertRaises(TypeError):
            nn.Conv1d(3, 2, (3,))
        with self.assertRaises(ValueError):
            nn.Conv1d(3, 2, 3, padding=1)  # pad_mode 'same' by default
        conv = nn.Conv1d(3, 2, 3, pad_mode="valid")
        with self.assertRaises(ValueError):
            conv(T(arr(1, 3, 4, 4)))


class TestDense(unittest.TestCase):
    def test_weight_out_in_and_rank3(self):
        w, b = arr(5, 3), arr(5)
        d = nn.Dense(3, 5, weight_init=T(w), bias_init=T(b))
        self.assertEqual(d.weight.shape, (5, 3))
        x = arr(2, 4, 3)
        close(self, d(T(x)), F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)))
        x1 = arr(3)
        close(self, d(T(x1)), F.linear(torch.from_numpy(x1), torch.from_numpy(w), torch.from_numpy(b)))

    def test_no_bias_and_activation(self):
        w = arr(2, 3)
        d = nn.Dense(3, 2, weight_init=T(w), has_bias=False, activation=nn.HSwish())
        self.assertIsNone(d.bias)
        x = arr(4, 3)
        close(self, d(T(x)), F.hardswish(torch.from_numpy(x) @ torch.from_numpy(w).t()))
        with self.assertRaises(NotImplementedError):
            nn.Dense(3, 2, activation="relu")


class TestLayerNorm(unittest.TestCase):
    def test_default_epsilon_is_1e_7(self):
        # tiny variance: eps 1e-7 (MindSpore) and 1e-5 (torch's default) give visibly different results
        base = arr(3, 8) * 1e-3
        ln = nn.LayerNorm((8,))
        got = ln(T(base)).asnumpy()
        want = F.layer_norm(torch.from_numpy(base), (8,), eps=1e-7)
        torch_default = F.layer_norm(torch.from_numpy(base), (8,))  # eps=1e-5
        close(self, got, want, tol=2e-4)
        self.assertGreater(np.abs(got - torch_default.numpy()).max(), 0.1)

    def test_begin_axes_default_last_axis_only(self):
        x = arr(2, 3, 4)
        ln = nn.LayerNorm((4,))
        close(self, ln(T(x)), F.layer_norm(torch.from_numpy(x), (4,), eps=1e-7))
        g, b = arr(3, 4), arr(3, 4)
        ln2 = nn.LayerNorm((3, 4), begin_norm_axis=-2, begin_params_axis=-2, gamma_init=T(g),
                           beta_init=T(b), epsilon=1e-5)
        self.assertEqual([n for n, _ in ln2.parameters_and_names()], ["gamma", "beta"])
        close(self, ln2(T(x)), F.layer_norm(torch.from_numpy(x), (3, 4), torch.from_numpy(g),
                                            torch.from_numpy(b), eps=1e-5))
        with self.assertRaises(ValueError):
            nn.LayerNorm((3, 4))(T(x))  # default axes -1: gamma (3, 4) does not fit the last axis

    def test_normalized_shape_must_be_tuple(self):
        with self.assertRaises(TypeError):
            nn.LayerNorm(4)


class TestBatchNorm(unittest.TestCase):
    def test_eval_uses_moving_stats(self):
        mm, mv, g, b = arr(3), np.abs(arr(3)) + 0.5, arr(3), arr(3)
        bn = nn.BatchNorm2d(3, eps=1e-3, moving_mean_init=T(mm), moving_var_init=T(mv),
                            gamma_init=T(g), beta_init=T(b))
        self.assertFalse(bn.training)  # Cell.training defaults to False
        x = arr(2, 3, 4, 5)
        want = F.batch_norm(torch.from_numpy(x), torch.from_numpy(mm), torch.from_numpy(mv),
                            torch.from_numpy(g), torch.from_numpy(b), training=False, eps=1e-3)
        close(self, bn(T(x)), want)

    def test_momentum_convention_in_training(self):
        # MindSpore momentum 0.9: moving = 0.9*moving + 0.1*batch == torch momentum 0.1
        x = arr(4, 3, 5, 5) + 2.0
        bn = nn.BatchNorm2d(3, momentum=0.9)
        bn.set_train(True)
        got = bn(T(x))
        tbn = torch.nn.BatchNorm2d(3, momentum=1 - 0.9, eps=1e-5)
        tbn.train()
        want = tbn(torch.from_numpy(x))
        close(self, got, want, tol=1e-4)
        close(self, bn.moving_mean.asnumpy(), tbn.running_mean, tol=1e-5)
        # a second step accumulates the same way
        x2 = arr(4, 3, 5, 5) - 1.0
        bn(T(x2))
        tbn(torch.from_numpy(x2))
        close(self, bn.moving_mean.asnumpy(), tbn.running_mean, tol=1e-5)
        # torch's momentum value used as MindSpore's would be visibly different
        bn_wrong = nn.BatchNorm2d(3, momentum=0.1).set_train(True)
        bn_wrong(T(x))
        self.assertGreater(np.abs(bn_wrong.moving_mean.asnumpy() - tbn.running_mean.numpy()).max(), 0.5)

    def test_moving_variance_after_training_is_nan(self):
        # the notes give no moving_variance update: the stand-in does not guess one
        bn = nn.BatchNorm2d(2).set_train(True)
        bn(T(arr(2, 2, 3, 3)))
        self.assertTrue(np.isnan(bn.moving_variance.asnumpy()).all())

    def test_use_batch_statistics_false_keeps_moving_stats(self):
        bn = nn.BatchNorm2d(2, use_batch_statistics=False).set_train(True)
        x = arr(2, 2, 3, 3)
        close(self, bn(T(x)), F.batch_norm(torch.from_numpy(x), torch.zeros(2), torch.ones(2),
                                           torch.ones(2), torch.zeros(2), training=False))
        np.testing.assert_array_equal(bn.moving_mean.asnumpy(), np.zeros(2, np.float32))

    def test_parameters_and_ranks(self):
        bn = nn.BatchNorm2d(3, affine=False)
        # ctor names 'mean'/'variance' survive at top level; attribute paths are moving_*
        self.assertEqual([n for n, _ in bn.parameters_and_names()],
                         ["moving_mean", "moving_variance", "gamma", "beta"])
        self.assertEqual([p.name for p in bn.get_parameters()], ["mean", "variance", "gamma", "beta"])
        self.assertEqual(bn.trainable_params(), [])  # affine=False: requires_grad False only
        with self.assertRaises(ValueError):
            bn(T(arr(2, 3, 4)))
        b1 = nn.BatchNorm1d(3)
        for shape in ((4, 3), (4, 3, 5)):
            x = arr(*shape)
            close(self, b1(T(x)), F.batch_norm(torch.from_numpy(x), torch.zeros(3), torch.ones(3),
                                               torch.ones(3), torch.zeros(3), training=False))
        b3 = nn.BatchNorm3d(3)
        self.assertEqual([n for n, _ in b3.parameters_and_names()],
                         ["bn2d.moving_mean", "bn2d.moving_variance", "bn2d.gamma", "bn2d.beta"])
        x = arr(2, 3, 2, 3, 4)
        close(self, b3(T(x)), F.batch_norm(torch.from_numpy(x), torch.zeros(3), torch.ones(3),
                                           torch.ones(3), torch.zeros(3), training=False))


class TestPooling(unittest.TestCase):
    def test_stride_default_is_1(self):
        x = arr(1, 2, 6, 7)
        xt = torch.from_numpy(x)
        close(self, nn.MaxPool2d(kernel_size=2)(T(x)), F.max_pool2d(xt, 2, stride=1))
        close(self, nn.AvgPool2d(kernel_size=3)(T(x)), F.avg_pool2d(xt, 3, stride=1))
        # torch's default (stride = kernel) is not what MindSpore does
        self.assertNotEqual(nn.MaxPool2d(kernel_size=2)(T(x)).shape, tuple(F.max_pool2d(xt, 2).shape))

    def test_pad_mode(self):
        x = arr(1, 2, 7, 7)
        xt = torch.from_numpy(x)
        close(self, nn.MaxPool2d(3, 2, pad_mode="pad", padding=1)(T(x)), F.max_pool2d(xt, 3, 2, 1))
        close(self, nn.MaxPool2d(3, 1, pad_mode="SAME")(T(x)), F.max_pool2d(xt, 3, 1, 1))  # case-insensitive
        close(self, nn.AvgPool2d(3, 2, pad_mode="pad", padding=(1, 0), count_include_pad=False)(T(x)),
              F.avg_pool2d(xt, 3, 2, (1, 0), count_include_pad=False))
        close(self, nn.AvgPool2d(3, 2, pad_mode="pad", padding=1)(T(x)),
              F.avg_pool2d(xt, 3, 2, 1, count_include_pad=True))
        close(self, nn.MaxPool2d(2, 2)(T(x[0])), F.max_pool2d(xt[0], 2, 2))  # 3-D input

    def test_padding_only_with_pad_mode(self):
        with self.assertRaises(ValueError):
            nn.MaxPool2d(3, 1, padding=1)
        with self.assertRaises(ValueError):
            nn.MaxPool2d(3, 1, ceil_mode=True)
        with self.assertRaises(ValueError):
            nn.AvgPool2d(3, 1, count_include_pad=False)
        with self.assertRaises(ValueError):
            nn.AvgPool2d(3, 1, pad_mode="same", divisor_override=2)
        with self.assertRaises(NotImplementedError):  # ceil rule not in the notes
            nn.MaxPool2d(2, 2, pad_mode="pad", ceil_mode=True)(T(arr(1, 1, 5, 5)))
        x = arr(1, 1, 4, 4)  # exact division: ceil and floor agree, accepted
        close(self, nn.MaxPool2d(2, 2, pad_mode="pad", ceil_mode=True)(T(x)),
              F.max_pool2d(torch.from_numpy(x), 2, 2, ceil_mode=True))


class TestActivations(unittest.TestCase):
    def test_gelu_default_tanh(self):
        x = np.linspace(-4, 4, 101).astype(np.float32)
        xt = torch.from_numpy(x)
        tanh_form = 0.5 * xt * (1 + torch.tanh(math.sqrt(2 / math.pi) * (xt + 0.044715 * xt ** 3)))
        erf_form = 0.5 * xt * (1 + torch.erf(xt / math.sqrt(2)))
        got = nn.GELU()(T(x)).asnumpy()
        close(self, got, tanh_form, tol=1e-6)
        self.assertGreater(np.abs(got - erf_form.numpy()).max(), 1e-4)
        close(self, nn.GELU(approximate=False)(T(x)), erf_form, tol=1e-6)

    def test_hsigmoid_hswish(self):
        x = np.linspace(-5, 5, 41).astype(np.float32)
        xt = torch.from_numpy(x)
        close(self, nn.HSigmoid()(T(x)), torch.clamp(xt / 6 + 0.5, 0, 1))
        close(self, nn.HSwish()(T(x)), xt * torch.clamp(xt + 3, 0, 6) / 6)

    def test_flatten_identity(self):
        x = arr(2, 3, 4, 5)
        close(self, nn.Flatten()(T(x)), torch.from_numpy(x).reshape(2, 60))
        close(self, nn.Flatten(0, 1)(T(x)), torch.from_numpy(x).reshape(6, 4, 5))
        self.assertEqual(nn.Flatten()(T(np.float32(3))).shape, (1,))
        t = T(x)
        self.assertIs(nn.Identity()(t), t)
        self.assertIs(nn.Identity(1, 2, foo=3)(t), t)

    def test_dropout_keep_prob_vs_p(self):
        t = T(arr(3, 4))
        self.assertIs(nn.Dropout(p=0.5)(t), t)  # eval: identity
        self.assertIs(nn.Dropout(p=0.0).set_train(True)(t), t)
        self.assertIs(nn.Dropout(keep_prob=1.0).set_train(True)(t), t)  # keep 1 == drop 0
        self.assertIs(nn.Dropout(keep_prob=0.5, p=0.0).set_train(True)(t), t)  # p wins
        with self.assertRaises(NotImplementedError):
            nn.Dropout(keep_prob=0.5).set_train(True)(t)
        with self.assertRaises(ValueError):
            nn.Dropout(p=1.0)
        with self.assertRaises(ValueError):
            nn.Dropout(keep_prob=0.0)


class TestLSTM(unittest.TestCase):
    def _compare(self, bidirectional, batch_first, num_layers=1):
        H, I = 4, 3
        lstm = nn.LSTM(I, H, num_layers=num_layers, batch_first=batch_first, bidirectional=bidirectional)
        ref = torch.nn.LSTM(I, H, num_layers=num_layers, batch_first=batch_first, bidirectional=bidirectional)
        # same names, same gate order (i, f, g, o): a plain copy is the translation
        names = dict(lstm.parameters_and_names())
        self.assertEqual(sorted(names), sorted(n for n, _ in ref.named_parameters()))
        for n, p in ref.named_parameters():
            self.assertEqual(names[n].shape, tuple(p.shape))
            names[n].set_data(ms.Tensor(p.detach().numpy()))
        x = arr(2, 5, I) if batch_first else arr(5, 2, I)
        nd = 2 if bidirectional else 1
        h0, c0 = arr(nd * num_layers, 2, H), arr(nd * num_layers, 2, H)
        out, (hn, cn) = lstm(T(x), (T(h0), T(c0)))
        wout, (whn, wcn) = ref(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
        close(self, out, wout)
        close(self, hn, whn)
        close(self, cn, wcn)
        out2, _ = lstm(T(x))  # hx None
        wout2, _ = ref(torch.from_numpy(x))
        close(self, out2, wout2)

    def test_unidirectional(self):
        self._compare(False, False)

    def test_bidirectional_batch_first(self):
        self._compare(True, True)

    def test_two_layers(self):
        self._compare(True, False, num_layers=2)

    def test_names_and_nan_init(self):
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(3, 2, has_bias=False)
        net = Net()
        self.assertEqual([p.name for p in net.get_parameters()], ["rnn.weight_ih_l0", "rnn.weight_hh_l0"])
        self.assertTrue(np.isnan(net.rnn.w_ih_list[0].asnumpy()).all())
        with self.assertRaises(ValueError):
            nn.LSTM(3, 2, dropout=1)  # 'dropout must be a float in [0,1)'


if __name__ == "__main__":
    unittest.main()
