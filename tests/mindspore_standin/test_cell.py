"""Cell attribute registration and naming (table entries mindspore.nn.Cell,
SequentialCell, CellList, Parameter; DESIGN.md naming contract)."""
import collections
import unittest

import numpy as np

import standin_path  # noqa: F401
import mindspore as ms
from mindspore import nn


def param(*shape, name=None, requires_grad=True):
    return ms.Parameter(ms.Tensor(np.zeros(shape, np.float32)), name=name, requires_grad=requires_grad)


class Block(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, has_bias=True)
        self.bn = nn.BatchNorm2d(2)

    def construct(self, x):
        return self.bn(self.conv(x))


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.scale = param(2, name="my_scale")  # top-level: name= survives
        self.offset = param(2)  # unnamed: the attribute name
        self.stem = Block()
        self.layers = nn.SequentialCell(Block(), nn.SequentialCell([nn.Dense(2, 2)]))
        self.heads = nn.CellList([nn.Dense(2, 1), nn.Dense(2, 1, has_bias=False)])
        self.norm = nn.LayerNorm((2,))

    def construct(self, x):
        return self.layers(self.stem(x))


EXPECTED_PATHS = [
    "scale", "offset",
    "stem.conv.weight", "stem.conv.bias",
    "stem.bn.moving_mean", "stem.bn.moving_variance", "stem.bn.gamma", "stem.bn.beta",
    "layers.0.conv.weight", "layers.0.conv.bias",
    "layers.0.bn.moving_mean", "layers.0.bn.moving_variance", "layers.0.bn.gamma", "layers.0.bn.beta",
    "layers.1.0.weight", "layers.1.0.bias",
    "heads.0.weight", "heads.0.bias", "heads.1.weight",
    "norm.gamma", "norm.beta",
]


class TestNaming(unittest.TestCase):
    def test_parameters_and_names(self):
        net = Net()
        self.assertEqual([n for n, _ in net.parameters_and_names()], EXPECTED_PATHS)
        names = [p.name for p in net.get_parameters()]
        self.assertEqual(names, ["my_scale"] + EXPECTED_PATHS[1:])  # Parameter(name=) at top level
        self.assertEqual(list(net.parameters_dict()), names)

    def test_nesting_again_renames_to_the_path(self):
        class Outer(nn.Cell):
            def __init__(self):
                super().__init__()
                self.net = Net()
        o = Outer()
        # 'Parameter(..., name=...) only survives for top-level params'
        self.assertEqual([p.name for p in o.get_parameters()], ["net." + n for n in EXPECTED_PATHS])

    def test_cells_and_names(self):
        net = Net()
        self.assertEqual([n for n, _ in net.cells_and_names()],
                         ["", "stem", "stem.conv", "stem.bn", "layers", "layers.0", "layers.0.conv",
                          "layers.0.bn", "layers.1", "layers.1.0", "heads", "heads.0", "heads.1", "norm"])

    def test_trainable_params(self):
        net = Net()
        tr = [p.name for p in net.trainable_params()]
        self.assertNotIn("stem.bn.moving_mean", tr)  # requires_grad=False
        self.assertIn("stem.bn.gamma", tr)
        self.assertEqual(len(tr), len(EXPECTED_PATHS) - 4)

    def test_set_train_propagates(self):
        net = Net()
        self.assertFalse(net.training)
        self.assertIs(net.set_train(), net)
        self.assertTrue(all(c.training for _, c in net.cells_and_names()))
        net.set_train(False)
        self.assertFalse(any(c.training for _, c in net.cells_and_names()))

    def test_sequential_cell_forms(self):
        s = nn.SequentialCell(collections.OrderedDict([("conv", nn.Conv2d(1, 1, 1)), ("act", nn.HSwish())]))
        self.assertEqual([n for n, _ in s.parameters_and_names()], ["conv.weight"])
        s2 = nn.SequentialCell(nn.Dense(2, 2), nn.Flatten())
        s2.append(nn.Dense(2, 3))
        self.assertEqual([p.name for p in s2.get_parameters()], ["0.weight", "0.bias", "2.weight", "2.bias"])
        self.assertEqual(len(s2), 3)
        self.assertIsInstance(s2[1], type(nn.Flatten()))
        x = ms.Tensor(np.ones((1, 2), np.float32))
        want = s2[2](s2[1](s2[0](x)))
        np.testing.assert_array_equal(s2(x).asnumpy(), want.asnumpy())
        with self.assertRaises(TypeError):
            nn.SequentialCell(nn.Dense(2, 2), 3)

    def test_cell_list(self):
        cl = nn.CellList([nn.Dense(2, 2)])
        cl.append(nn.Dense(2, 1))
        cl.insert(0, nn.Flatten())
        self.assertEqual([p.name for p in cl.get_parameters()], ["1.weight", "1.bias", "2.weight", "2.bias"])
        self.assertEqual(len(list(cl)), 3)
        no_prefix = nn.CellList([nn.Dense(2, 2)], auto_prefix=False)
        self.assertEqual([p.name for p in no_prefix.get_parameters()], ["weight", "bias"])
        with self.assertRaises(TypeError):
            nn.CellList([], prefix=True)
        with self.assertRaises(NotImplementedError):
            cl(ms.Tensor(np.ones(2, np.float32)))

    def test_insert_child_to_cell(self):
        c = nn.Cell()
        c.insert_child_to_cell("fc", nn.Dense(2, 2))
        self.assertEqual([n for n, _ in c.parameters_and_names()], ["fc.weight", "fc.bias"])
        self.assertIs(c.fc, c.name_cells()["fc"])
        with self.assertRaises(KeyError):
            c.insert_child_to_cell("a.b", nn.Dense(2, 2))
        with self.assertRaises(TypeError):
            c.insert_child_to_cell("x", 3)

    def test_registration_errors(self):
        class Early(nn.Cell):
            def __init__(self):
                self.fc = nn.Dense(2, 2)
                super().__init__()
        with self.assertRaises(AttributeError):
            Early()

        class ListAttr(nn.Cell):
            def __init__(self):
                super().__init__()
                self.blocks = [nn.Dense(2, 2)]
        with self.assertRaises(NotImplementedError):
            ListAttr()
        with self.assertRaises(AttributeError):
            nn.Cell()(1)  # base construct raises
        d = nn.Dense(2, 2)
        with self.assertRaises(TypeError):
            d.weight = 3
        d.bias = None
        self.assertEqual([n for n, _ in d.parameters_and_names()], ["weight"])
        with self.assertRaises(AttributeError):
            d.no_such_attribute

    def test_shared_parameter_listed_once(self):
        class Shared(nn.Cell):
            def __init__(self):
                super().__init__()
                self.a = nn.Dense(2, 2)
                self.b = self.a
        self.assertEqual(len(list(Shared().get_parameters())), 2)


if __name__ == "__main__":
    unittest.main()
