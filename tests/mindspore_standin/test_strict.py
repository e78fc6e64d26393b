"""Strictness: bindings come from mindspore-api.json; unknown keywords, missing required
arguments, unimplemented entries and unlisted names are errors."""
import inspect
import json
import os
import sys
import unittest

import numpy as np

import standin_path
import mindspore as ms
from mindspore import nn, ops

TABLE = json.load(open(os.path.join(standin_path.SHARED, "mindspore-api.json")))
ENTRIES = {e["api"]: e for e in TABLE}

# the APIs the rules use (rules/mindspore.xml) plus the framework the scripts need
EXPECTED_IMPLEMENTED = {
    "mindspore." + n for n in """Tensor Parameter amp.auto_mixed_precision grad value_and_grad load_checkpoint
    load_param_into_net save_checkpoint set_context set_device set_seed nn.Cell nn.SequentialCell
    nn.CellList nn.AvgPool2d nn.BatchNorm1d nn.BatchNorm2d nn.BatchNorm3d nn.Conv1d nn.Conv2d nn.Dense
    nn.Dropout nn.Flatten nn.GELU nn.HSigmoid nn.HSwish nn.Identity nn.LSTM nn.LayerNorm
    nn.MaxPool2d ops.Custom ops.stop_gradient ops.arange ops.broadcast_to ops.cast ops.clamp
    ops.concat ops.einsum ops.erf ops.gather ops.gelu ops.interpolate ops.matmul ops.mean ops.ones
    ops.pad ops.pow ops.relu ops.reshape ops.sigmoid ops.softmax ops.split ops.tanh ops.transpose
    ops.where ops.zeros ops.add ops.sub ops.mul ops.div ops.equal ops.logical_not""".split()} | {
    # the node-test rules (_ops_more.py)
    "mindspore." + n for n in """ops.abs ops.neg ops.exp ops.log ops.sqrt ops.reciprocal ops.floor ops.ceil
    ops.cos ops.sin ops.tan ops.acos ops.asin ops.atan ops.cosh ops.sinh ops.acosh ops.asinh ops.atanh
    ops.sign ops.round ops.isnan ops.isinf ops.softsign ops.mish ops.selu ops.elu ops.celu ops.leaky_relu
    ops.softplus ops.log_softmax ops.greater ops.less ops.greater_equal ops.less_equal ops.logical_and
    ops.logical_or ops.logical_xor ops.fmod ops.remainder ops.maximum ops.minimum ops.sum ops.amax
    ops.amin ops.prod ops.logsumexp ops.argmax ops.argmin ops.gather_elements ops.gather_nd
    ops.tensor_scatter_elements ops.cumsum ops.tile ops.conv2d ops.group_norm
    mint.nn.functional.conv_transpose2d""".split()}
FRAMEWORK = {"GRAPH_MODE", "PYNATIVE_MODE", "float16", "float32", "float64", "bfloat16", "int8",
             "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool_"}


def resolve(api):
    obj = ms
    for part in api.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def x(*shape):
    return ms.Tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))


class TestNamespace(unittest.TestCase):
    def test_every_table_entry_exists(self):
        for api in ENTRIES:
            self.assertTrue(callable(resolve(api)), api)

    def test_implemented_set(self):
        impl = {api for api in ENTRIES if not getattr(resolve(api), "_ms_unimplemented", False)}
        self.assertEqual(impl, EXPECTED_IMPLEMENTED)

    def test_unimplemented_raise_naming_the_api(self):
        n = 0
        for api in ENTRIES:
            obj = resolve(api)
            if getattr(obj, "_ms_unimplemented", False):
                with self.assertRaisesRegex(NotImplementedError, api.replace(".", r"\.")):
                    obj()
                n += 1
        self.assertEqual(n, len(ENTRIES) - len(EXPECTED_IMPLEMENTED))

    def test_examples_of_unimplemented(self):
        with self.assertRaises(NotImplementedError):
            nn.ReLU()
        with self.assertRaises(NotImplementedError):
            ops.square(x(2))
        with self.assertRaises(NotImplementedError):
            ms.jit(None)
        with self.assertRaises(NotImplementedError):
            ops.flip(x(2), (0,))

    def test_unlisted_names(self):
        for mod, name in ((ms, "torch"), (ms, "numpy"), (ms, "Model"), (ms, "common"), (nn, "Linear"),
                          (nn, "Conv2dExt"), (ops, "view"), (ops, "add_n"), (ops, "F"), (ops, "torch"),
                          (nn, "torch"), (nn, "math"), (ms.mint, "nn_functional"), (ms, "dtype")):
            with self.assertRaises(AttributeError, msg="%s.%s" % (mod.__name__, name)):
                getattr(mod, name)
        with self.assertRaises(ImportError):
            from mindspore import Model  # noqa: F401
        with self.assertRaises(ImportError):
            import mindspore.train  # noqa: F401

    def test_namespaces_hold_only_table_and_framework_names(self):
        for mod_name in ("mindspore", "mindspore.nn", "mindspore.ops", "mindspore.amp", "mindspore.mint",
                         "mindspore.mint.nn", "mindspore.mint.nn.functional"):
            mod = sys.modules[mod_name]
            for k, v in vars(mod).items():
                if k.startswith("__") and k.endswith("__"):
                    continue
                full = mod_name + "." + k
                ok = full in ENTRIES or (mod_name == "mindspore" and k in FRAMEWORK) or \
                    any(api.startswith(full + ".") for api in ENTRIES)
                self.assertTrue(ok, "%s leaks into the namespace" % full)

    def test_private_package_names_are_gone(self):
        for k in vars(ms):
            if k.startswith("_"):
                self.assertTrue(k.startswith("__") and k.endswith("__"), k)

    def test_tensor_has_no_torch_methods(self):
        t = x(2, 3)
        for name in ("view", "numpy", "size", "backward", "grad", "float", "T", "sum"):
            with self.assertRaises(AttributeError, msg=name):
                getattr(t, name)
        with self.assertRaises(TypeError):
            t + t
        with self.assertRaises(TypeError):
            t[0]
        with self.assertRaises(NotImplementedError):
            bool(t)


class TestBinding(unittest.TestCase):
    def test_signatures_are_the_table(self):
        for api in EXPECTED_IMPLEMENTED:
            obj = resolve(api)
            sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
            params = [p for p in sig.parameters.values() if p.name != "self"]
            want = [s for s in ENTRIES[api]["signature"] if s[1] != "<kwonly-marker>"]
            self.assertEqual([p.name for p in params], [n.lstrip("*") for n, _ in want], api)
            for p, (n, d) in zip(params, want):
                if d == "<required>":
                    self.assertIs(p.default, inspect.Parameter.empty, api + " " + n)
                elif d in ("<varargs>", "<varkw>"):
                    self.assertIn(p.kind, (p.VAR_POSITIONAL, p.VAR_KEYWORD))
                elif isinstance(d, str) and d.startswith("mstype."):
                    self.assertIs(p.default, getattr(ms, d[len("mstype."):]), api + " " + n)
                else:
                    self.assertEqual(p.default, d, api + " " + n)

    def test_unknown_keyword(self):
        with self.assertRaisesRegex(TypeError, "mindspore.nn.Conv2d"):
            nn.Conv2d(1, 1, 3, bias=True)  # torch's name; MindSpore says has_bias
        with self.assertRaises(TypeError):
            nn.Conv2d(1, 1, 3, padding_mode="zeros")
        with self.assertRaises(TypeError):
            ops.softmax(x(2, 2), dim=1)  # MindSpore says axis
        with self.assertRaises(TypeError):
            ops.mean(x(2, 2), axis=1, keepdim=True)  # keep_dims
        with self.assertRaises(TypeError):
            nn.LayerNorm((2,), eps=1e-5)  # epsilon
        with self.assertRaises(TypeError):
            nn.BatchNorm3d(2, data_format="NCHW")  # 'NO data_format arg'
        with self.assertRaises(TypeError):
            ms.load_checkpoint("x.ckpt", weights_only=True)
        with self.assertRaises(TypeError):
            nn.HSwish(inplace=True)

    def test_missing_required(self):
        with self.assertRaisesRegex(TypeError, "mindspore.nn.Conv2d"):
            nn.Conv2d(1, 1)
        with self.assertRaises(TypeError):
            ops.gather(x(3), ms.Tensor(np.array([0])))  # 'axis has NO default'
        with self.assertRaises(TypeError):
            ms.Parameter()
        with self.assertRaises(TypeError):
            ms.set_device()
        with self.assertRaises(TypeError):
            ops.cast(x(2))

    def test_too_many_positional_and_keyword_only(self):
        with self.assertRaises(TypeError):
            ops.softmax(x(2, 2), -1, ms.float32)  # dtype is keyword-only
        with self.assertRaises(TypeError):
            ops.arange(0, 3, 1, ms.int64)
        with self.assertRaises(TypeError):
            nn.HSigmoid(1)
        self.assertEqual(ops.softmax(x(2, 2), -1, dtype=ms.float64).dtype, ms.float64)

    def test_table_drift_is_an_import_error(self):
        table = sys.modules["mindspore._table"]
        with self.assertRaises(ImportError):
            table.implements("mindspore.ops.erf")(lambda x: x)  # the table names it 'input'
        with self.assertRaises(ImportError):
            def erf(input=None):
                return input
            table.implements("mindspore.ops.erf")(erf)  # own default

    def test_not_in_facts_values(self):
        with self.assertRaises(NotImplementedError):
            ops.ones((2,), None)  # the default dtype is not in the notes
        with self.assertRaises(NotImplementedError):
            ops.relu(x(2), inplace=True)
        with self.assertRaises(NotImplementedError):
            nn.Conv2d(1, 1, 3, data_format="NHWC")
        with self.assertRaises(NotImplementedError):
            ms.Tensor([1.0, 2.0])  # only 'tuple of ints -> Int64' is in the notes
        self.assertEqual(ms.Tensor([1.0, 2.0], ms.float32).dtype, ms.float32)


class TestTensor(unittest.TestCase):
    def test_dtype_inference(self):
        # Tensor notes: Python float -> Float32, int / tuple of ints -> Int64, numpy keeps dtype
        self.assertEqual(ms.Tensor(0.1).dtype, ms.float32)
        self.assertEqual(ms.Tensor(3).dtype, ms.int64)
        self.assertEqual(ms.Tensor((1, 2)).dtype, ms.int64)
        self.assertEqual(ms.Tensor(np.zeros(2)).dtype, ms.float64)
        self.assertEqual(ms.Tensor(np.zeros(2), ms.float32).dtype, ms.float32)
        self.assertEqual(ms.Tensor(np.zeros((2, 3), np.int32)).shape, (2, 3))
        with self.assertRaises(ValueError):
            ms.Tensor()
        a = ms.Tensor(np.array([1.5, 2.5], np.float32))
        np.testing.assert_array_equal(a.asnumpy(), [1.5, 2.5])
        self.assertEqual(a.astype(ms.int32).dtype, ms.int32)

    def test_parameter(self):
        p = ms.Parameter(ms.Tensor(np.ones((2, 2), np.float32)), requires_grad=False)
        self.assertEqual(p.name, "Parameter")
        self.assertFalse(p.requires_grad)
        p.set_data(ms.Tensor(np.zeros((2, 2), np.float32)))
        np.testing.assert_array_equal(p.asnumpy(), np.zeros((2, 2)))
        with self.assertRaises(ValueError):
            p.set_data(ms.Tensor(np.zeros((3,), np.float32)))
        with self.assertRaises(NotImplementedError):
            ms.Parameter(ms.Tensor(1.0), storage_format="FRACTAL_NZ")


class TestContext(unittest.TestCase):
    def test_set_context_and_device(self):
        ms.set_context(mode=ms.GRAPH_MODE)
        ms.set_context(mode=ms.PYNATIVE_MODE, jit_syntax_level=0)
        with self.assertRaises(ValueError):
            ms.set_context(mode=2)
        with self.assertRaises(NotImplementedError):
            ms.set_context(enable_graph_kernel=True)
        with self.assertRaises(ValueError):
            ms.set_device("TPU")
        state = sys.modules["mindspore._context"].STATE
        saved = state["device"]
        try:
            state["device"] = None
            ms.set_device("CPU")
            self.assertEqual(state["device"], ("CPU", 0))
            ms.set_device("CPU", 0)
            with self.assertRaises(RuntimeError):
                ms.set_device("Ascend")
        finally:
            state["device"] = saved

    def test_set_seed(self):
        with self.assertRaises(ValueError):
            ms.set_seed(-1)
        with self.assertRaises(TypeError):
            ms.set_seed(1.5)
        ms.set_seed(3)
        a = nn.Dense(3, 2).weight.asnumpy()
        ms.set_seed(3)
        np.testing.assert_array_equal(a, nn.Dense(3, 2).weight.asnumpy())


if __name__ == "__main__":
    unittest.main()
