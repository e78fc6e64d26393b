"""MindSpore dtypes.

The set is the checkpoint's tensor_type list (DESIGN.md "Facts worth having at hand",
.ckpt format: Float32 Float16 BFloat16 Float64 Int8 Int16 Int32 Int64 UInt8 UInt16
UInt32 UInt64 Bool); the Python names (mindspore.float32, ..., mindspore.bool_) are the
ones the table's notes and defaults use ('mstype.float32' defaults, ops.cast notes
"ms.float32 etc."). The lower-case string of each dtype is what ops.Custom aot passes
to a kernel (facts.md section 5: dtype strings "float32", "float16", ...).
"""
import numpy as np
import torch

from . import _table


class DType:
    __slots__ = ("name", "ckpt", "torch", "numpy", "aot")

    def __init__(self, name, ckpt, tdt, ndt, aot):
        self.name, self.ckpt, self.torch, self.numpy, self.aot = name, ckpt, tdt, ndt, aot

    def __repr__(self):
        return self.ckpt

    __str__ = __repr__

    def __reduce__(self):
        return (from_name, (self.name,))

    @property
    def is_float(self):
        return self.torch.is_floating_point

    @property
    def is_int(self):
        return not self.torch.is_floating_point and self.torch is not torch.bool


_ALL = [
    # python name, ckpt tensor_type, torch, numpy (None: no numpy type), aot dtype string
    ("float16", "Float16", torch.float16, np.float16, "float16"),
    ("float32", "Float32", torch.float32, np.float32, "float32"),
    ("float64", "Float64", torch.float64, np.float64, "float64"),
    ("bfloat16", "BFloat16", torch.bfloat16, None, None),
    ("int8", "Int8", torch.int8, np.int8, "int8"),
    ("int16", "Int16", torch.int16, np.int16, "int16"),
    ("int32", "Int32", torch.int32, np.int32, "int32"),
    ("int64", "Int64", torch.int64, np.int64, "int64"),
    ("uint8", "UInt8", torch.uint8, np.uint8, "uint8"),
    # torch 1.13 has no uint16/32/64 tensors: these load from a checkpoint only if
    # they can be held; see from_ckpt_type.
    ("uint16", "UInt16", None, np.uint16, "uint16"),
    ("uint32", "UInt32", None, np.uint32, "uint32"),
    ("uint64", "UInt64", None, np.uint64, "uint64"),
    ("bool_", "Bool", torch.bool, np.bool_, "bool"),
]

DTYPES = {}
for _n, _c, _t, _np, _a in _ALL:
    DTYPES[_n] = DType(_n, _c, _t, _np, _a)
del _n, _c, _t, _np, _a

_BY_TORCH = {d.torch: d for d in DTYPES.values() if d.torch is not None}
_BY_CKPT = {d.ckpt: d for d in DTYPES.values()}
_BY_NUMPY = {np.dtype(d.numpy): d for d in DTYPES.values() if d.numpy is not None}


def from_name(name):
    return DTYPES.get(name)


def from_torch(tdt):
    d = _BY_TORCH.get(tdt)
    if d is None:
        raise TypeError("mindspore stand-in: torch dtype %s has no MindSpore dtype" % tdt)
    return d


def from_ckpt_type(s):
    return _BY_CKPT.get(s)


def from_numpy(ndt):
    d = _BY_NUMPY.get(np.dtype(ndt))
    if d is None:
        raise TypeError("mindspore stand-in: numpy dtype %s has no MindSpore dtype" % ndt)
    return d


def check(api, dtype, what="dtype"):
    if not isinstance(dtype, DType):
        raise TypeError("%s: %s must be a mindspore dtype (mindspore.float32, ...), got %r"
                        % (api, what, dtype))
    if dtype.torch is None:
        raise NotImplementedError("%s: dtype %s cannot be held by the stand-in (torch 1.13 has "
                                  "no such tensor type)" % (api, dtype))
    return dtype.torch


_table._dtype_resolver = from_name
