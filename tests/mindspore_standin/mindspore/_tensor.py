"""mindspore.Tensor and mindspore.Parameter: thin wrappers over a torch tensor.

A Tensor is NOT a torch.Tensor: it has only what the table's notes name (asnumpy(),
shape, dtype, astype(); Parameter adds name, requires_grad, set_data()), so torch
methods and operators cannot leak into a generated script by accident.
"""
import numbers

import numpy as np
import torch

from . import _amp, _dtype
from ._table import implements, not_in_facts


def _infer_list(api, data):
    """Nested list/tuple -> torch tensor. The notes settle tuples of ints (-> Int64) only."""
    flat = []

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        else:
            flat.append(x)
    walk(data)
    if flat and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in flat):
        return torch.tensor(data, dtype=torch.int64)
    raise not_in_facts(api, "a list/tuple that is not all Python ints, with dtype=None")


# mindspore.Tensor (table entry 'mindspore.Tensor')
@implements("mindspore.Tensor")
class Tensor:
    __slots__ = ("_t", "__weakref__")

    def __init__(self, input_data, dtype, shape, init, const_arg, device):
        api = "mindspore.Tensor"
        if init is not None:
            raise not_in_facts(api, "init= (deferred Initializer data)")
        if device is not None:
            raise not_in_facts(api, "device= (reserved)")
        if input_data is None:
            # 'input_data=None is only a placeholder (no NoneType tensor)'
            if shape is None:
                raise ValueError("%s: input_data=None is only a placeholder; give input_data" % api)
            raise not_in_facts(api, "a placeholder Tensor (input_data=None, shape=...)")
        if shape is not None:
            raise not_in_facts(api, "shape= together with input_data")
        if isinstance(input_data, Tensor):
            t = input_data._t.detach().clone()
        elif isinstance(input_data, np.ndarray) or isinstance(input_data, np.generic):
            arr = np.asarray(input_data)
            # TypeError for a numpy dtype MindSpore lacks; NotImplementedError for one
            # torch 1.13 cannot hold (uint16/32/64)
            _dtype.check(api, _dtype.from_numpy(arr.dtype))
            t = torch.from_numpy(np.array(arr, copy=True, order="C"))  # numpy arrays keep their dtype
        elif isinstance(input_data, bool):
            if dtype is None:
                raise not_in_facts(api, "a Python bool with dtype=None")
            t = torch.tensor(input_data)
        elif isinstance(input_data, numbers.Integral):
            t = torch.tensor(int(input_data), dtype=torch.int64)  # Python int -> Int64
        elif isinstance(input_data, numbers.Real):
            t = torch.tensor(float(input_data), dtype=torch.float32)  # Python float -> Float32
        elif isinstance(input_data, (list, tuple)):
            if dtype is None:
                t = _infer_list(api, input_data)
            else:
                t = torch.tensor(input_data, dtype=_dtype.check(api, dtype))
        else:
            raise TypeError("%s: input_data of type %s is not a Tensor, numpy array, number, list "
                            "or tuple" % (api, type(input_data).__name__))
        if dtype is not None:
            t = t.to(_dtype.check(api, dtype))
        self._t = t

    @classmethod
    def _wrap(cls, t):
        if not isinstance(t, torch.Tensor):
            raise TypeError("internal: _wrap of %r" % (t,))
        obj = object.__new__(Tensor)
        obj._t = t
        return obj

    @property
    def shape(self):
        return tuple(int(s) for s in self._t.shape)

    @property
    def dtype(self):
        return _dtype.from_torch(self._t.dtype)

    def asnumpy(self):
        # Parameter notes: 'Printing does not show values -> use .asnumpy()'
        if self._t.dtype == torch.bfloat16:
            raise not_in_facts("mindspore.Tensor", "asnumpy() of a BFloat16 tensor")
        return self._t.detach().cpu().numpy().copy()

    def astype(self, dtype):
        # Tensor notes: 'to convert dtype use Tensor.astype()'
        return Tensor._wrap(self._t.to(_dtype.check("mindspore.Tensor.astype", dtype)))

    def __repr__(self):
        return "Tensor(shape=%s, dtype=%s)" % (list(self.shape), self.dtype)

    # Tensors are hashed by identity (sets of Parameters in Cell); value equality,
    # arithmetic operators and indexing are not in the table.
    __hash__ = object.__hash__

    def __eq__(self, other):
        raise not_in_facts("mindspore.Tensor", "the == operator")

    def __bool__(self):
        raise not_in_facts("mindspore.Tensor", "truth value of a Tensor")


def T(api, x, what="input"):
    """The torch tensor of a Tensor argument; anything else is a TypeError."""
    if isinstance(x, Tensor):
        return _amp.operand(x._t)  # as the running cell reads it under AMP (_amp.py)
    raise TypeError("%s: %s must be a mindspore.Tensor, got %s" % (api, what, type(x).__name__))


def wrap(t):
    """An operation's result; under AMP rounded to the running cell's dtype (_amp.py)."""
    return Tensor._wrap(_amp.result(t))


PARAMETER_NAME_DEFAULT = "Parameter"


# mindspore.Parameter (table entry 'mindspore.Parameter'): a Tensor subclass.
@implements("mindspore.Parameter")
class Parameter(Tensor):
    __slots__ = ("_name", "requires_grad", "layerwise_parallel", "parallel_optimizer")

    def __init__(self, default_input, name, requires_grad, layerwise_parallel, parallel_optimizer,
                 storage_format, device):
        api = "mindspore.Parameter"
        if storage_format != "":
            raise not_in_facts(api, "storage_format (Ascend only)")
        if device is not None:
            raise not_in_facts(api, "device (Ascend only offload)")
        if isinstance(default_input, Tensor):
            t = default_input._t.detach().clone()
        elif isinstance(default_input, (np.ndarray, np.generic)):
            arr = np.asarray(default_input)
            _dtype.from_numpy(arr.dtype)
            t = torch.from_numpy(np.array(arr, copy=True, order="C"))
        elif isinstance(default_input, numbers.Real) and not isinstance(default_input, bool):
            t = Tensor(default_input)._t
        else:
            raise TypeError("%s: default_input must be a Tensor, numpy array or number, got %s"
                            % (api, type(default_input).__name__))
        if name is not None and not isinstance(name, str):
            raise TypeError("%s: name must be a str or None" % api)
        if not isinstance(requires_grad, bool):
            raise TypeError("%s: requires_grad must be a bool" % api)
        self._t = t
        # name None -> the attribute name once assigned to a Cell (Parameter notes)
        self._name = name
        self.requires_grad = requires_grad
        self.layerwise_parallel = layerwise_parallel
        self.parallel_optimizer = parallel_optimizer

    @property
    def name(self):
        return PARAMETER_NAME_DEFAULT if self._name is None else self._name

    @name.setter
    def name(self, v):
        if not isinstance(v, str):
            raise TypeError("mindspore.Parameter: name must be a str")
        self._name = v

    def set_data(self, data, slice_shape=False):
        # Parameter notes: 'set_data(data, slice_shape=False) replaces data (shape-checked
        # unless slice_shape=True)'
        api = "mindspore.Parameter.set_data"
        src = T(api, data, "data")
        if not slice_shape and tuple(src.shape) != tuple(self._t.shape):
            raise ValueError("%s: shape %s does not match the parameter %s's shape %s"
                             % (api, tuple(src.shape), self.name, tuple(self._t.shape)))
        if src.dtype != self._t.dtype:
            raise not_in_facts(api, "set_data with a different dtype (%s -> %s)"
                               % (_dtype.from_torch(src.dtype), self.dtype))
        self._t = src.detach().clone()
        return self

    def __repr__(self):
        return "Parameter (name=%s, shape=%s, dtype=%s, requires_grad=%s)" % (
            self.name, self.shape, self.dtype, self.requires_grad)


def new_parameter(t, name=None, requires_grad=True):
    """Internal constructor for layer parameters (bypasses argument binding)."""
    p = object.__new__(Parameter)
    p._t = t.detach()
    p._name = name
    p.requires_grad = requires_grad
    p.layerwise_parallel = False
    p.parallel_optimizer = True
    return p
