"""mindspore.ops.Custom, func_type='aot' on CPU: a compiled C kernel called through ctypes.

Table entry 'mindspore.ops.Custom' and facts.md section 5: CPU
  ops.Custom("./x.so:Func", out_shape=..., out_dtype=..., func_type="aot")
with the kernel
  extern "C" int Func(int nparam, void **params, int *ndims, int64_t **shapes,
                      const char **dtypes, void *stream, void *extra)
params = inputs then outputs, dtype strings "float32", "float16", ...; 0 on success.
out_shape/out_dtype may be values or callables over the input shapes/dtypes.
"""
import ctypes
import os

import torch

from . import _dtype
from ._table import implements, not_in_facts
from ._tensor import T, wrap

_FUNC_TYPES = ("hybrid", "akg", "tbe", "aicpu", "aot", "pyfunc", "julia")
_LIBS = {}


class _NoBprop(torch.autograd.Function):
    """The kernel's outputs: no gradient is defined without a bprop."""

    @staticmethod
    def forward(ctx, run, *inputs):
        return run()

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("mindspore.ops.Custom: no bprop was given, so the stand-in has no "
                                  "gradient for this aot kernel")


# mindspore.ops.Custom (table entry): func_type in ['hybrid','akg','tbe','aicpu','aot',
# 'pyfunc','julia']; 'aot': func='path/file.so:func_name' (.cu/.cc/.cpp auto-compiled;
# MS_CUSTOM_AOT_WHITE_LIST restricts paths); 'aicpu' requires reg_info.
@implements("mindspore.ops.Custom")
class Custom:
    def __init__(self, func, out_shape, out_dtype, func_type, bprop, reg_info):
        api = "mindspore.ops.Custom"
        if func_type not in _FUNC_TYPES:
            raise ValueError("%s: func_type must be one of %s, got %r" % (api, list(_FUNC_TYPES), func_type))
        if func_type != "aot":
            raise NotImplementedError("%s: func_type=%r is not implemented by the stand-in (only 'aot' "
                                      "with a CPU .so)" % (api, func_type))
        if bprop is not None:
            raise not_in_facts(api, "bprop")
        if reg_info is not None:
            raise not_in_facts(api, "reg_info")
        if not isinstance(func, str) or ":" not in func:
            raise not_in_facts(api, "func=%r (only 'path/file.so:func_name' for CPU)" % (func,))
        path, name = func.rsplit(":", 1)
        if not path.endswith(".so"):
            raise not_in_facts(api, "func %r: a source file to auto-compile, or an aclnn name" % func)
        if os.environ.get("MS_CUSTOM_AOT_WHITE_LIST"):
            raise not_in_facts(api, "MS_CUSTOM_AOT_WHITE_LIST (its format)")
        if out_shape is None or out_dtype is None:
            raise not_in_facts(api, "out_shape/out_dtype None (the C++ infer fallback)")
        full = os.path.abspath(path)
        if not os.path.isfile(full):
            raise ValueError("%s: %s does not exist" % (api, full))
        lib = _LIBS.get(full)
        if lib is None:
            lib = _LIBS[full] = ctypes.CDLL(full)
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ValueError("%s: %s has no symbol %r" % (api, full, name)) from None
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_int),
                       ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_char_p),
                       ctypes.c_void_p, ctypes.c_void_p]
        self._fn, self._func = fn, func
        self._out_shape, self._out_dtype = out_shape, out_dtype

    def __call__(self, *inputs):
        api = "mindspore.ops.Custom"
        ts = [T(api, x, "input %d" % i) for i, x in enumerate(inputs)]
        shapes = [list(t.shape) for t in ts]
        dtypes = [_dtype.from_torch(t.dtype) for t in ts]
        osh = self._out_shape(*shapes) if callable(self._out_shape) else self._out_shape
        odt = self._out_dtype(*dtypes) if callable(self._out_dtype) else self._out_dtype
        if isinstance(odt, (list, tuple)):
            if not isinstance(osh, (list, tuple)) or len(osh) != len(odt) or \
                    not all(isinstance(s, (list, tuple)) for s in osh):
                raise ValueError("%s: several out_dtype need as many out_shape lists" % api)
            out_specs, multi = list(zip(osh, odt)), True
        else:
            out_specs, multi = [(osh, odt)], False
        outs = []
        for shp, dt in out_specs:
            if not isinstance(shp, (list, tuple)) or not all(isinstance(v, int) and v >= 0 for v in shp):
                raise ValueError("%s: out_shape %r is not a list of non-negative ints" % (api, shp))
            tdt = _dtype.check(api, dt, "out_dtype")
            outs.append(torch.empty(tuple(shp), dtype=tdt))
        for d in dtypes + [_dtype.from_torch(o.dtype) for o in outs]:
            if d.aot is None:
                raise not_in_facts(api, "dtype %s for an aot kernel (its dtype string)" % d)

        def run():
            cins = [t.detach().contiguous() for t in ts]
            allt = cins + outs
            n = len(allt)
            params = (ctypes.c_void_p * n)(*[t.data_ptr() for t in allt])
            ndims = (ctypes.c_int * n)(*[t.dim() for t in allt])
            shp_arrays = [(ctypes.c_int64 * max(t.dim(), 1))(*t.shape) for t in allt]
            shapes_c = (ctypes.POINTER(ctypes.c_int64) * n)(
                *[ctypes.cast(a, ctypes.POINTER(ctypes.c_int64)) for a in shp_arrays])
            dts = (ctypes.c_char_p * n)(*[_dtype.from_torch(t.dtype).aot.encode() for t in allt])
            rc = self._fn(n, params, ndims, shapes_c, dts, None, None)
            if rc != 0:
                raise RuntimeError("%s: kernel %s returned %d" % (api, self._func, rc))
            return tuple(outs)

        res = _NoBprop.apply(run, *ts) if any(t.requires_grad for t in ts) else run()
        res = tuple(wrap(r) for r in res)
        return res if multi else res[0]
