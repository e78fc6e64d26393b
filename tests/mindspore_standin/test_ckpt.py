"""The stand-in's .ckpt decoder and load_param_into_net, against independent readings:
torch's r18.pth with the naming contract's renames, and check-ckpt.py's own decoder."""
import binascii
import importlib.util
import os
import shutil
import tempfile
import unittest
import warnings

import numpy as np
import torch

import standin_path
import mindspore as ms
from mindspore import nn

ACC = os.path.join(standin_path.SHARED, "acceptance")
R18_CKPT = os.path.join(ACC, "r18.ckpt")
R18_PTH = os.path.join(ACC, "r18.pth")


def load_check_ckpt():
    warnings.filterwarnings("ignore", category=ResourceWarning)  # check-ckpt.py's open()
    spec = importlib.util.spec_from_file_location("check_ckpt", os.path.join(ACC, "check-ckpt.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def contract(sd):
    """torch state_dict -> MindSpore names, by the naming contract (DESIGN.md), written out
    here: BatchNorm weight/bias/running_mean/running_var -> gamma/beta/moving_mean/
    moving_variance, num_batches_tracked dropped. A module is a BatchNorm when it has a
    running_mean (resnet18 has no other renamed layer)."""
    bn = {k.rsplit(".", 1)[0] for k in sd if k.endswith(".running_mean")}
    ren = {"weight": "gamma", "bias": "beta", "running_mean": "moving_mean", "running_var": "moving_variance"}
    out = {}
    for k, v in sd.items():
        prefix, leaf = k.rsplit(".", 1)
        if prefix in bn:
            if leaf == "num_batches_tracked":
                continue
            k = prefix + "." + ren[leaf]
        out[k] = v
    return out


def varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def fld(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def value(tag, dims, ttype, content, packed=False):
    if packed:
        tp = fld(1, b"".join(varint(d) for d in dims))
    else:
        tp = b"".join(varint(1 << 3) + varint(d) for d in dims)
    tp += fld(2, ttype.encode()) + fld(3, content)
    return fld(1, fld(1, tag.encode()) + fld(2, tp))


class TestR18(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.got = ms.load_checkpoint(R18_CKPT)

    def test_against_torch_pth(self):
        want = contract(torch.load(R18_PTH, map_location="cpu"))
        self.assertEqual(len(self.got), len(want))
        self.assertEqual(sorted(self.got), sorted(want))
        for k, t in want.items():
            p = self.got[k]
            self.assertIsInstance(p, ms.Parameter)
            self.assertEqual(p.name, k)
            self.assertEqual(p.shape, tuple(t.shape), k)
            self.assertEqual(str(p.dtype), {torch.float32: "Float32", torch.int64: "Int64"}[t.dtype], k)
            np.testing.assert_array_equal(p.asnumpy(), t.numpy(), err_msg=k)

    def test_against_check_ckpt_decoder(self):
        ref = load_check_ckpt().read_ckpt(R18_CKPT)
        self.assertEqual(list(ref), list(self.got))  # same order too
        for k, (dims, ttype, content) in ref.items():
            p = self.got[k]
            self.assertEqual(list(p.shape), dims)
            self.assertEqual(str(p.dtype), ttype)
            self.assertEqual(p.asnumpy().astype("<f4").tobytes(), content)

    def test_choice_func(self):
        d = ms.load_checkpoint(R18_CKPT, choice_func=lambda n: n.startswith("fc."))
        self.assertEqual(sorted(d), ["fc.bias", "fc.weight"])
        with self.assertRaises(ValueError):  # 'ValueError if nothing loaded'
            ms.load_checkpoint(R18_CKPT, choice_func=lambda n: False)


class TestMalformed(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def write(self, data, name="x.ckpt"):
        p = os.path.join(self.dir, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_truncated(self):
        with open(R18_CKPT, "rb") as f:
            data = f.read()
        with self.assertRaisesRegex(ValueError, "malformed checkpoint.*(runs past the end|truncated)"):
            ms.load_checkpoint(self.write(data[:len(data) // 2]))

    def test_garbage(self):
        with self.assertRaisesRegex(ValueError, "malformed checkpoint"):
            ms.load_checkpoint(self.write(b"\xff" * 64))
        with self.assertRaisesRegex(ValueError, "malformed checkpoint"):
            ms.load_checkpoint(self.write(b"PK\x03\x04 this is a zip, not a ckpt"))

    def test_wrong_content_length(self):
        data = value("w", [2, 3], "Float32", b"\0" * 20)
        with self.assertRaisesRegex(ValueError, "20 content bytes"):
            ms.load_checkpoint(self.write(data))

    def test_unknown_type_and_missing_fields(self):
        with self.assertRaisesRegex(ValueError, "unknown tensor_type"):
            ms.load_checkpoint(self.write(value("w", [1], "Float8", b"\0")))
        no_tag = fld(1, fld(2, fld(2, b"Float32") + fld(3, b"\0" * 4)))
        with self.assertRaisesRegex(ValueError, "tag missing"):
            ms.load_checkpoint(self.write(no_tag))
        no_content = fld(1, fld(1, b"w") + fld(2, fld(2, b"Float32")))
        with self.assertRaisesRegex(ValueError, "tensor_content missing"):
            ms.load_checkpoint(self.write(no_content))

    def test_empty_file(self):
        with self.assertRaisesRegex(ValueError, "nothing was loaded"):
            ms.load_checkpoint(self.write(b""))

    def test_crc(self):
        payload = value("w", [2], "Float32", np.array([1, 2], "<f4").tobytes())
        good = payload + b"crc_num" + (binascii.crc32(payload)).to_bytes(10, "big")
        d = ms.load_checkpoint(self.write(good), crc_check=True)
        np.testing.assert_array_equal(d["w"].asnumpy(), [1, 2])
        bad = bytearray(good)
        bad[-20] ^= 1  # a payload byte
        with self.assertRaisesRegex(ValueError, "CRC mismatch"):
            ms.load_checkpoint(self.write(bytes(bad)))
        with self.assertRaisesRegex(ValueError, "no CRC trailer"):
            ms.load_checkpoint(self.write(payload), crc_check=True)

    def test_chunks_packed_scalars_and_types(self):
        a = np.arange(6, dtype="<i8")
        data = value("big", [2, 3], "Int64", a[:4].tobytes()) + value("big", [2, 3], "Int64", a[4:].tobytes())
        data += value("s", [], "Float16", np.array(1.5, "<f2").tobytes(), packed=True)
        data += value("u", [3], "Uint8", bytes([1, 2, 3]))  # old spelling (facts.md)
        data += value("b", [2], "Bool", bytes([1, 0]))
        bf = torch.tensor([1.5, -2.0], dtype=torch.bfloat16)
        data += value("bf", [2], "BFloat16", bf.view(torch.int16).numpy().astype("<i2").tobytes())
        d = ms.load_checkpoint(self.write(data))
        np.testing.assert_array_equal(d["big"].asnumpy(), a.reshape(2, 3))
        self.assertEqual(d["s"].shape, ())
        self.assertEqual(d["s"].dtype, ms.float16)
        self.assertEqual(d["u"].dtype, ms.uint8)
        self.assertEqual(d["b"].asnumpy().tolist(), [True, False])
        self.assertEqual(d["bf"].dtype, ms.bfloat16)
        with self.assertRaisesRegex(ValueError, "appears twice, not adjacent"):
            ms.load_checkpoint(self.write(value("a", [1], "Int8", b"\1") + value("b", [1], "Int8", b"\1")
                                          + value("a", [1], "Int8", b"\1")))

    def test_maptensor_not_implemented(self):
        with self.assertRaises(NotImplementedError):
            ms.load_checkpoint(self.write(fld(1, fld(1, b"m") + fld(3, b""))))


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.fc = nn.Dense(3, 2)
        self.bn = nn.BatchNorm1d(2)


class TestLoadParamIntoNet(unittest.TestCase):
    def params(self, **arrays):
        return {k: ms.Parameter(ms.Tensor(v), name=k) for k, v in arrays.items()}

    def test_missing_and_unused(self):
        net = Net()
        w = np.ones((2, 3), np.float32)
        d = self.params(**{"fc.weight": w, "fc.bias": np.zeros(2, np.float32), "bn.gamma": np.full(2, 3, np.float32),
                           "extra.weight": np.zeros(1, np.float32)})
        not_loaded, unused = ms.load_param_into_net(net, d)
        self.assertEqual(not_loaded, ["bn.moving_mean", "bn.moving_variance", "bn.beta"])
        self.assertEqual(unused, ["extra.weight"])
        np.testing.assert_array_equal(net.fc.weight.asnumpy(), w)
        np.testing.assert_array_equal(net.bn.gamma.asnumpy(), [3, 3])

    def test_shape_mismatch_is_an_error(self):
        net = Net()
        d = self.params(**{"fc.weight": np.ones((3, 2), np.float32)})  # transposed
        with self.assertRaisesRegex(RuntimeError, "shape of 'fc.weight'"):
            ms.load_param_into_net(net, d)

    def test_dtype(self):
        net = Net()
        d = self.params(**{"fc.bias": np.ones(2, np.float64)})
        with self.assertRaises(RuntimeError):
            ms.load_param_into_net(net, d, strict_load=True)
        ms.load_param_into_net(net, d)  # strict_load=False casts precision
        self.assertEqual(net.fc.bias.dtype, ms.float32)
        np.testing.assert_array_equal(net.fc.bias.asnumpy(), [1, 1])
        with self.assertRaises(RuntimeError):
            ms.load_param_into_net(net, self.params(**{"fc.bias": np.ones(2, np.int32)}))

    def test_suffix_matching_only_when_not_strict(self):
        d = self.params(**{"backbone.fc.weight": np.ones((2, 3), np.float32),
                           "backbone.fc.bias": np.ones(2, np.float32)})
        net = Net()
        not_loaded, unused = ms.load_param_into_net(net, d, strict_load=True)
        self.assertEqual(len(not_loaded), 6)
        self.assertEqual(len(unused), 2)
        not_loaded, unused = ms.load_param_into_net(net, d)
        self.assertEqual(unused, [])
        self.assertNotIn("fc.weight", not_loaded)
        np.testing.assert_array_equal(net.fc.weight.asnumpy(), np.ones((2, 3)))

    def test_values_must_be_parameters(self):
        with self.assertRaises(TypeError):
            ms.load_param_into_net(Net(), {"fc.bias": ms.Tensor(np.ones(2, np.float32))})

    def test_r18_into_a_resnet18_cell(self):
        """a resnet18-shaped Cell tree (attribute paths as the generated script writes them)
        takes every tensor of r18.ckpt, none left over."""
        def bn(c):
            return nn.BatchNorm2d(c)

        class Block(nn.Cell):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, pad_mode="pad", padding=1)
                self.bn1 = bn(cout)
                self.conv2 = nn.Conv2d(cout, cout, 3, pad_mode="pad", padding=1)
                self.bn2 = bn(cout)
                if stride != 1 or cin != cout:
                    self.downsample = nn.SequentialCell(nn.Conv2d(cin, cout, 1, stride=stride), bn(cout))

        class R18(nn.Cell):
            def __init__(self):
                super().__init__()
                self.conv1 = nn.Conv2d(3, 64, 7, stride=2, pad_mode="pad", padding=3)
                self.bn1 = bn(64)
                chans = [(64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)]
                for i, (a, b, s) in enumerate(chans):
                    setattr(self, "layer%d" % (i + 1), nn.SequentialCell(Block(a, b, s), Block(b, b, 1)))
                self.fc = nn.Dense(512, 1000)
        net = R18()
        not_loaded, unused = ms.load_param_into_net(net, ms.load_checkpoint(R18_CKPT), strict_load=True)
        self.assertEqual((not_loaded, unused), ([], []))
        sd = torch.load(R18_PTH, map_location="cpu")
        np.testing.assert_array_equal(net.layer3[0].downsample[1].moving_variance.asnumpy(),
                                      sd["layer3.0.downsample.1.running_var"].numpy())


class TestSave(unittest.TestCase):
    def test_roundtrip_read_by_check_ckpt(self):
        d = tempfile.mkdtemp()
        try:
            net = Net()
            p = os.path.join(d, "n.ckpt")
            ms.save_checkpoint(net, p, crc_check=True)
            ref = load_check_ckpt().read_ckpt(p)  # independent decoder, checks the CRC too
            self.assertEqual(list(ref), [q.name for q in net.get_parameters()])
            self.assertEqual(ref["fc.weight"][0], [2, 3])
            back = ms.load_checkpoint(p)
            for q in net.get_parameters():
                np.testing.assert_array_equal(back[q.name].asnumpy(), q.asnumpy())
            ms.save_checkpoint([{"name": "a", "data": ms.Tensor(np.ones(2, np.float32))}], p)
            self.assertEqual(list(ms.load_checkpoint(p)), ["a"])
            with self.assertRaises(NotImplementedError):
                ms.save_checkpoint(net, os.path.join(d, "n"))  # suffix appending not in the facts
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
