"""mindspore.ops functions the rules use, with the semantics of their table entries.

Each function cites its table entry; its argument binding (order, defaults, keyword-only)
comes from that entry (see _table.implements). Where an entry's notes leave a case
open (dtype promotion, an unusual argument value), the function raises
NotImplementedError instead of guessing.
"""
import numbers

import torch
import torch.nn.functional as F

from . import _amp, _dtype
from ._table import implements, not_in_facts
from ._tensor import Tensor, T, wrap


def _is_num(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _int_tuple(api, v, what):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,)
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return tuple(v)
    raise TypeError("%s: %s must be an int or a tuple/list of ints, got %r" % (api, what, v))


def _same_dtype(api, ts):
    dts = {t.dtype for t in ts}
    if len(dts) > 1:
        raise not_in_facts(api, "operands of different dtypes %s (no promotion rule in the table)"
                           % sorted(str(_dtype.from_torch(d)) for d in dts))


def _float_only(api, t):
    if not t.dtype.is_floating_point:
        raise not_in_facts(api, "an input of dtype %s (the notes name no integer support)"
                           % _dtype.from_torch(t.dtype))


# mindspore.ops.arange: 'All-int inputs -> int64, any float -> float32; dtype keyword-only;
# scalar Tensors allowed.'
@implements("mindspore.ops.arange")
def arange(start, end, step, *, dtype):
    api = "mindspore.ops.arange"
    vals = []
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, Tensor):
            if v._t.dim() != 0:
                raise TypeError("%s: %s must be a scalar Tensor" % (api, name))
            v = v._t.item()
        elif v is not None and not _is_num(v):
            raise TypeError("%s: %s must be a number or a scalar Tensor" % (api, name))
        vals.append(v)
    start, end, step = vals
    if end is None:
        start, end = 0, start
    if dtype is None:
        tdt = torch.int64 if all(isinstance(v, int) for v in (start, end, step)) else torch.float32
    else:
        tdt = _dtype.check(api, dtype)
    if step == 0:
        raise ValueError("%s: step must not be 0" % api)
    return wrap(torch.arange(start, end, step, dtype=torch.float64 if tdt.is_floating_point else torch.int64).to(tdt))


# mindspore.ops.broadcast_to: 'Target rank must be >= input rank; -1 keeps the input dim;
# -1 in a new leading dim is an error.'
@implements("mindspore.ops.broadcast_to")
def broadcast_to(input, shape):
    api = "mindspore.ops.broadcast_to"
    t = T(api, input)
    shape = _int_tuple(api, shape, "shape")
    if len(shape) < t.dim():
        raise ValueError("%s: target rank %d is below the input rank %d" % (api, len(shape), t.dim()))
    lead = len(shape) - t.dim()
    out = []
    for i, s in enumerate(shape):
        if s == -1:
            if i < lead:
                raise ValueError("%s: -1 in a new leading dimension (%d)" % (api, i))
            s = t.shape[i - lead]
        elif s < 0:
            raise ValueError("%s: bad target dimension %d" % (api, s))
        if i >= lead and t.shape[i - lead] not in (1, s):
            raise ValueError("%s: cannot broadcast %s to %s" % (api, tuple(t.shape), shape))
        out.append(s)
    return wrap(torch.broadcast_to(t, tuple(out)))


# mindspore.ops.cast: 'dtype must be a constant mindspore dtype (ms.float32 etc.)'
@implements("mindspore.ops.cast")
def cast(input, dtype):
    api = "mindspore.ops.cast"
    return wrap(T(api, input).to(_dtype.check(api, dtype)))


def _bound(api, v, t, what):
    if isinstance(v, Tensor):
        if _amp.operand(v._t).dtype != t.dtype:
            raise not_in_facts(api, "%s of dtype %s for an input of dtype %s" % (what, v.dtype, _dtype.from_torch(t.dtype)))
        return _amp.operand(v._t)
    if _is_num(v):
        if isinstance(v, float) and not t.dtype.is_floating_point:
            raise not_in_facts(api, "a float %s for an integer input" % what)
        return torch.tensor(v, dtype=t.dtype)
    raise TypeError("%s: %s must be a Tensor, float, int or None" % (api, what))


# mindspore.ops.clamp: 'min/max: Tensor/float/int, not both None; if min > max everything
# becomes max.'
@implements("mindspore.ops.clamp")
def clamp(input, min, max):
    api = "mindspore.ops.clamp"
    t = T(api, input)
    if min is None and max is None:
        raise ValueError("%s: min and max cannot both be None" % api)
    if min is not None:
        t = torch.maximum(t, _bound(api, min, t, "min"))
    if max is not None:
        t = torch.minimum(t, _bound(api, max, t, "max"))  # applied last: min > max gives max
    return wrap(t)


# mindspore.ops.concat: 'Alias of ops.cat.' (ops.cat: tensors, axis=0)
@implements("mindspore.ops.concat")
def concat(tensors, axis):
    api = "mindspore.ops.concat"
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TypeError("%s: tensors must be a non-empty tuple/list of Tensors" % api)
    ts = [T(api, x, "tensors[%d]" % i) for i, x in enumerate(tensors)]
    _same_dtype(api, ts)
    if not isinstance(axis, int):
        raise TypeError("%s: axis must be an int" % api)
    return wrap(torch.cat(ts, dim=axis))


# mindspore.ops.einsum: 'Operands must share dtype; sublist mode supported.'
@implements("mindspore.ops.einsum")
def einsum(equation, *operands):
    api = "mindspore.ops.einsum"
    if not isinstance(equation, str):
        raise not_in_facts(api, "sublist mode")
    ts = [T(api, x, "operand %d" % i) for i, x in enumerate(operands)]
    if len({t.dtype for t in ts}) > 1:
        raise TypeError("%s: operands must share dtype" % api)
    return wrap(torch.einsum(equation, *ts))


# mindspore.ops.erf
@implements("mindspore.ops.erf")
def erf(input):
    api = "mindspore.ops.erf"
    t = T(api, input)
    _float_only(api, t)
    return wrap(torch.erf(t))


# mindspore.ops.gather: 'axis has NO default. Indices must lie in [0, shape[axis]): NEGATIVE
# indices unsupported (CPU/GPU raise ...). Output shape params.shape[:axis] +
# indices.shape[batch_dims:] + params.shape[axis+1:].'
@implements("mindspore.ops.gather")
def gather(input_params, input_indices, axis, batch_dims):
    api = "mindspore.ops.gather"
    p = T(api, input_params, "input_params")
    if isinstance(input_indices, int) and not isinstance(input_indices, bool):
        raise not_in_facts(api, "an int input_indices")
    i = T(api, input_indices, "input_indices")
    if i.dtype not in (torch.int32, torch.int64):
        raise TypeError("%s: input_indices must be int32 or int64" % api)
    if not isinstance(axis, int):
        raise not_in_facts(api, "a Tensor axis")
    if batch_dims != 0:
        raise not_in_facts(api, "batch_dims != 0")
    ax = axis + p.dim() if axis < 0 else axis
    if not 0 <= ax < p.dim():
        raise ValueError("%s: axis %d out of range for rank %d" % (api, axis, p.dim()))
    n = p.shape[ax]
    if i.numel() and (int(i.min()) < 0 or int(i.max()) >= n):
        raise ValueError("%s: indices must lie in [0, %d) (negative indices are unsupported); got "
                         "range [%d, %d]" % (api, n, int(i.min()), int(i.max())))
    out = torch.index_select(p, ax, i.reshape(-1).long())
    shape = tuple(p.shape[:ax]) + tuple(i.shape) + tuple(p.shape[ax + 1:])
    return wrap(out.reshape(shape))


# mindspore.ops.gelu: 'Functional default approximate='none' (exact erf) - OPPOSITE of
# nn.GELU ... Values 'none' | 'tanh'.'
@implements("mindspore.ops.gelu")
def gelu(input, approximate):
    api = "mindspore.ops.gelu"
    t = T(api, input)
    _float_only(api, t)
    if approximate not in ("none", "tanh"):
        raise ValueError("%s: approximate must be 'none' or 'tanh', got %r" % (api, approximate))
    return wrap(F.gelu(t, approximate=approximate))


_INTERP_RANKS = {"nearest": (3, 4, 5), "linear": (3,), "bilinear": (4,), "bicubic": (4,),
                 "trilinear": (5,), "area": (3, 4, 5), "nearest-exact": (3, 4)}


# mindspore.ops.interpolate: modes and ranks, size XOR scale_factor, scale_factor rejected
# (ValueError) for nearest 3-D/4-D, linear, bilinear, bicubic, nearest-exact unless
# recompute_scale_factor=True (then size = floor(in*scale)); align_corners only for
# linear/bilinear/bicubic/trilinear, None -> False; align_corners=True -> ori =
# new_i*(in-1)/(out-1); False -> (new_i+0.5)*in/out - 0.5; 'nearest' 3-D/4-D = asymmetric +
# floor; 'nearest-exact' = half-pixel centres; bicubic coefficient not shown.
@implements("mindspore.ops.interpolate")
def interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor):
    api = "mindspore.ops.interpolate"
    t = T(api, input)
    if mode not in _INTERP_RANKS:
        raise ValueError("%s: mode %r is not one of %s" % (api, mode, sorted(_INTERP_RANKS)))
    if t.dim() not in _INTERP_RANKS[mode]:
        raise ValueError("%s: mode %r takes a %s-D input, got %d-D"
                         % (api, mode, "/".join(map(str, _INTERP_RANKS[mode])), t.dim()))
    if (size is None) == (scale_factor is None):
        raise ValueError("%s: give exactly one of size and scale_factor" % api)
    if align_corners is not None and mode not in ("linear", "bilinear", "bicubic", "trilinear"):
        raise ValueError("%s: align_corners is only allowed for linear/bilinear/bicubic/trilinear" % api)
    align = bool(align_corners) if align_corners is not None else False
    if mode == "bicubic":
        raise not_in_facts(api, "mode 'bicubic' (the cubic coefficient is not in the notes)")
    if mode == "area":
        raise not_in_facts(api, "mode 'area'")
    if mode == "nearest" and t.dim() == 5:
        raise not_in_facts(api, "mode 'nearest' on a 5-D input (coordinate mapping not in the notes)")
    spatial = t.dim() - 2
    in_sizes = tuple(t.shape[2:])
    if scale_factor is not None:
        if recompute_scale_factor is not True:
            if mode in ("nearest", "linear", "bilinear", "bicubic", "nearest-exact"):
                raise ValueError("%s: scale_factor is rejected for mode %r unless "
                                 "recompute_scale_factor=True; pass size" % (api, mode))
            raise not_in_facts(api, "scale_factor without recompute_scale_factor for mode %r" % mode)
        sf = (scale_factor,) * spatial if _is_num(scale_factor) else tuple(scale_factor)
        if len(sf) != spatial:
            raise ValueError("%s: scale_factor needs %d values" % (api, spatial))
        import math
        out_sizes = tuple(int(math.floor(n * s)) for n, s in zip(in_sizes, sf))
    else:
        out_sizes = _int_tuple(api, size, "size")
        if len(out_sizes) == 1 and spatial > 1:
            raise not_in_facts(api, "a single int size for a %d-D input" % t.dim())
        if len(out_sizes) != spatial:
            raise ValueError("%s: size needs %d values" % (api, spatial))
    # The torch calls below are chosen so that their coordinate mappings are the ones the
    # notes give: torch 'nearest' = asymmetric + floor, 'nearest-exact' = half-pixel,
    # linear family align_corners True/False = the two formulas above.
    if mode in ("nearest", "nearest-exact"):
        out = F.interpolate(t, size=out_sizes, mode=mode)
    else:
        out = F.interpolate(t, size=out_sizes, mode=mode, align_corners=align)
    return wrap(out)


# mindspore.ops.matmul: 'Same dtype required (no scalar), broadcasting'
@implements("mindspore.ops.matmul")
def matmul(input, other):
    api = "mindspore.ops.matmul"
    a, b = T(api, input), T(api, other, "other")
    if a.dtype != b.dtype:
        raise TypeError("%s: input and other must have the same dtype (%s vs %s)"
                        % (api, _dtype.from_torch(a.dtype), _dtype.from_torch(b.dtype)))
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError("%s: scalars are not allowed" % api)
    return wrap(torch.matmul(a, b))


# mindspore.ops.mean: 'Names axis/keep_dims'
@implements("mindspore.ops.mean")
def mean(x, axis, keep_dims):
    api = "mindspore.ops.mean"
    t = T(api, x, "x")
    _float_only(api, t)
    if axis is None:
        dims = tuple(range(t.dim()))
    else:
        dims = _int_tuple(api, axis, "axis")
        if not dims:
            raise not_in_facts(api, "an empty axis tuple")
    if not dims:  # 0-D input
        return wrap(t.clone())
    return wrap(torch.mean(t, dim=dims, keepdim=bool(keep_dims)))


def _filled(api, shape, dtype, value):
    if isinstance(shape, Tensor):
        raise not_in_facts(api, "a Tensor shape")
    shape = _int_tuple(api, shape, "shape")
    if any(s < 0 for s in shape):
        raise ValueError("%s: negative dimension in %s" % (api, shape))
    if dtype is None:
        raise not_in_facts(api, "dtype=None (the default dtype is not in the notes)")
    return wrap(torch.full(shape, value, dtype=_dtype.check(api, dtype)))


# mindspore.ops.ones: 'First arg named shape (ops.zeros names it size).'
@implements("mindspore.ops.ones")
def ones(shape, dtype):
    return _filled("mindspore.ops.ones", shape, dtype, 1)


# mindspore.ops.zeros: 'First arg named size (ops.ones names it shape).'
@implements("mindspore.ops.zeros")
def zeros(size, dtype):
    return _filled("mindspore.ops.zeros", size, dtype, 0)


# mindspore.ops.pad: 'padding in TORCH order starting from the LAST dim: (left, right, top,
# bottom, front, back); len even and <= 6 (ValueError >6). modes 'constant' | 'reflect' |
# 'replicate' | 'circular'; value only valid with 'constant' (ValueError otherwise), None -> 0.'
@implements("mindspore.ops.pad")
def pad(input_x, padding, mode, value):
    api = "mindspore.ops.pad"
    t = T(api, input_x, "input_x")
    if isinstance(padding, Tensor):
        raise not_in_facts(api, "a Tensor padding")
    padding = _int_tuple(api, padding, "padding")
    if len(padding) % 2:
        raise ValueError("%s: padding length %d is odd" % (api, len(padding)))
    if len(padding) > 6:
        raise ValueError("%s: padding length %d > 6" % (api, len(padding)))
    if len(padding) // 2 > t.dim():
        raise ValueError("%s: padding covers %d dims of a %d-D input" % (api, len(padding) // 2, t.dim()))
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise ValueError("%s: mode %r is not constant/reflect/replicate/circular" % (api, mode))
    if mode != "constant":
        if value is not None:
            raise ValueError("%s: value is only valid with mode 'constant'" % api)
        if any(p < 0 for p in padding):
            raise not_in_facts(api, "negative padding with mode %r" % mode)
        if t.dtype.is_floating_point:
            return wrap(F.pad(t, padding, mode=mode))
        # torch's pad kernels take floats only; the notes name no dtype limit: the same
        # index maps (reflect without repeating the edge, replicate, circular) by gather
        out = t
        for k in range(len(padding) // 2):
            dim = t.dim() - 1 - k
            n, before, after = out.shape[dim], padding[2 * k], padding[2 * k + 1]
            if mode == "reflect" and (before >= n or after >= n):
                raise ValueError("%s: reflect padding must be below the dimension (%d)" % (api, n))
            if mode == "circular" and (before > n or after > n):
                raise ValueError("%s: circular padding must not exceed the dimension (%d)" % (api, n))
            pos = torch.arange(-before, n + after)
            if mode == "reflect":
                period = 2 * (n - 1) if n > 1 else 1
                pos = pos.remainder(period)
                idx = torch.where(pos >= n, period - pos, pos)
            elif mode == "replicate":
                idx = pos.clamp(0, n - 1)
            else:
                idx = pos.remainder(n)
            out = torch.index_select(out, dim, idx)
        return wrap(out)
    if value is None:
        value = 0
    elif isinstance(value, Tensor):
        if value._t.numel() != 1:
            raise TypeError("%s: value must be a scalar" % api)
        value = value._t.item()
    elif not _is_num(value):
        raise TypeError("%s: value must be a number" % api)
    # constant mode, written out (the order is the torch order the notes give)
    out = t
    for k in range(len(padding) // 2):
        dim = t.dim() - 1 - k
        before, after = padding[2 * k], padding[2 * k + 1]
        if before < 0:
            out = out.narrow(dim, -before, out.shape[dim] + before)
            before = 0
        if after < 0:
            out = out.narrow(dim, 0, out.shape[dim] + after)
            after = 0
        parts = []
        if before:
            s = list(out.shape); s[dim] = before
            parts.append(torch.full(s, value, dtype=out.dtype))
        parts.append(out)
        if after:
            s = list(out.shape); s[dim] = after
            parts.append(torch.full(s, value, dtype=out.dtype))
        out = torch.cat(parts, dim) if len(parts) > 1 else out
    return wrap(out)


# mindspore.ops.pow: 'Broadcasting with implicit type promotion; Tensor/Number/bool operands.'
@implements("mindspore.ops.pow")
def pow(input, exponent):
    a, b = _binary_operands("mindspore.ops.pow", input, exponent, ("input", "exponent"), allow_bool=True)
    return wrap(torch.pow(a, b))


# mindspore.ops.relu
@implements("mindspore.ops.relu")
def relu(input, inplace):
    api = "mindspore.ops.relu"
    t = T(api, input)
    if inplace:
        raise not_in_facts(api, "inplace=True")
    return wrap(torch.relu(t))


# mindspore.ops.reshape: 'shape: const tuple/list of ints or 1-D int32/int64 Tensor; at most
# one -1; values < -1 rejected. ONNX Reshape '0 = copy input dim' is not documented'
@implements("mindspore.ops.reshape")
def reshape(input, shape):
    api = "mindspore.ops.reshape"
    t = T(api, input)
    if isinstance(shape, Tensor):
        if shape._t.dim() != 1 or shape._t.dtype not in (torch.int32, torch.int64):
            raise TypeError("%s: a Tensor shape must be 1-D int32/int64" % api)
        shape = tuple(int(v) for v in shape._t.tolist())
    shape = _int_tuple(api, shape, "shape")
    if sum(1 for s in shape if s == -1) > 1:
        raise ValueError("%s: at most one -1 in shape %s" % (api, shape))
    if any(s < -1 for s in shape):
        raise ValueError("%s: values < -1 in shape %s" % (api, shape))
    if 0 in shape:
        raise not_in_facts(api, "a 0 in shape %s" % (shape,))
    return wrap(torch.reshape(t, shape))


# mindspore.ops.sigmoid: 'fp16/fp32/fp64/complex.'
@implements("mindspore.ops.sigmoid")
def sigmoid(input):
    api = "mindspore.ops.sigmoid"
    t = T(api, input)
    if t.dtype not in (torch.float16, torch.float32, torch.float64):
        raise TypeError("%s: dtype %s is not fp16/fp32/fp64" % (api, _dtype.from_torch(t.dtype)))
    return wrap(torch.sigmoid(t))


# mindspore.ops.softmax: 'axis must be a single int (TypeError for tuple); dtype keyword-only
# casts input first.'
@implements("mindspore.ops.softmax")
def softmax(input, axis, *, dtype):
    api = "mindspore.ops.softmax"
    t = T(api, input)
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError("%s: axis must be a single int, got %r" % (api, axis))
    if dtype is not None:
        t = t.to(_dtype.check(api, dtype))
    _float_only(api, t)
    return wrap(torch.softmax(t, dim=axis))


# mindspore.ops.split: 'int = chunk SIZE (torch semantics, last chunk = remainder), NOT number
# of outputs; tuple/list = explicit sizes. Returns tuple.'
@implements("mindspore.ops.split")
def split(tensor, split_size_or_sections, axis):
    api = "mindspore.ops.split"
    t = T(api, tensor, "tensor")
    if not isinstance(axis, int):
        raise TypeError("%s: axis must be an int" % api)
    n = t.shape[axis]
    s = split_size_or_sections
    if isinstance(s, int) and not isinstance(s, bool):
        if s <= 0:
            raise ValueError("%s: chunk size must be positive" % api)
        sizes = [s] * (n // s) + ([n % s] if n % s else [])
    else:
        sizes = list(_int_tuple(api, s, "split_size_or_sections"))
        if sum(sizes) != n or any(v < 0 for v in sizes):
            raise ValueError("%s: sections %s do not add up to dimension %d" % (api, sizes, n))
    out, start = [], 0
    for v in sizes:
        out.append(wrap(t.narrow(axis, start, v)))
        start += v
    return tuple(out)


# mindspore.ops.tanh
@implements("mindspore.ops.tanh")
def tanh(input):
    api = "mindspore.ops.tanh"
    t = T(api, input)
    _float_only(api, t)
    return wrap(torch.tanh(t))


# mindspore.ops.transpose: 'Ascend does NOT support negative values in dims (GPU/CPU
# normalize them)'. The stand-in is CPU, so negative values are normalised.
@implements("mindspore.ops.transpose")
def transpose(input, dims):
    api = "mindspore.ops.transpose"
    t = T(api, input)
    dims = _int_tuple(api, dims, "dims")
    norm = tuple(d + t.dim() if d < 0 else d for d in dims)
    if sorted(norm) != list(range(t.dim())):
        raise ValueError("%s: dims %s is not a permutation of %d axes" % (api, dims, t.dim()))
    return wrap(t.permute(norm))


# mindspore.ops.where: 'Broadcasting; input and other cannot both be Python scalars.'
@implements("mindspore.ops.where")
def where(condition, input, other):
    api = "mindspore.ops.where"
    c = T(api, condition, "condition")
    if c.dtype != torch.bool:
        raise TypeError("%s: condition must be bool" % api)
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("%s: input and other cannot both be Python scalars" % api)
    ref = _amp.operand(input._t if isinstance(input, Tensor) else other._t)

    def operand(v, what):
        if isinstance(v, Tensor):
            if _amp.operand(v._t).dtype != ref.dtype:
                raise not_in_facts(api, "input and other of different dtypes")
            return _amp.operand(v._t)
        if _is_num(v):
            if isinstance(v, float) and not ref.dtype.is_floating_point:
                raise not_in_facts(api, "a float scalar with an integer Tensor")
            return torch.tensor(v, dtype=ref.dtype)
        raise TypeError("%s: %s must be a Tensor or a number" % (api, what))
    return wrap(torch.where(c, operand(input, "input"), operand(other, "other")))


# mindspore.ops.stop_gradient: 'Identity in the forward pass that blocks gradient flow ...
# Accepts any value; returns the same value.'
@implements("mindspore.ops.stop_gradient")
def stop_gradient(value):
    if isinstance(value, Tensor):
        return wrap(value._t.detach())
    if isinstance(value, tuple):
        return tuple(stop_gradient(v) for v in value)
    if isinstance(value, list):
        return [stop_gradient(v) for v in value]
    return value


IMPLEMENTED = [arange, broadcast_to, cast, clamp, concat, einsum, erf, gather, gelu, interpolate,
               matmul, mean, ones, pad, pow, relu, reshape, sigmoid, softmax, split, tanh,
               transpose, where, zeros, stop_gradient]


def _binary_operands(api, input, other, names=("input", "other"), allow_bool=False):
    """The two operands of ops.add/sub/mul/div/equal as torch tensors of one dtype:
    'at least one arg must be a Tensor; scalar Number allowed for either arg'. Mixed
    Tensor dtypes would need the promotion table, which the notes do not give."""
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("%s: at least one operand must be a Tensor" % api)
    ref = _amp.operand(input._t if isinstance(input, Tensor) else other._t)

    def operand(v, what):
        if isinstance(v, Tensor):
            if _amp.operand(v._t).dtype != ref.dtype:
                raise not_in_facts(api, "operands of different dtypes (the promotion table is not in the notes)")
            return _amp.operand(v._t)
        if _is_num(v):
            if isinstance(v, float) and not ref.dtype.is_floating_point:
                raise not_in_facts(api, "a float %s with an integer Tensor" % what)
            return torch.tensor(v, dtype=ref.dtype)
        raise not_in_facts(api, "%s of type %s" % (what, type(v).__name__))
    a, b = operand(input, names[0]), operand(other, names[1])
    if a.dtype == torch.bool and not allow_bool and api != "mindspore.ops.equal":
        raise TypeError("%s: both args cannot be bool" % api)
    return a, b


# mindspore.ops.add: 'Broadcasting (numpy rules); ... no alpha argument.'
@implements("mindspore.ops.add")
def add(input, other):
    a, b = _binary_operands("mindspore.ops.add", input, other)
    return wrap(a + b)


# mindspore.ops.sub: 'Broadcasting (numpy rules); no alpha argument.'
@implements("mindspore.ops.sub")
def sub(input, other):
    a, b = _binary_operands("mindspore.ops.sub", input, other)
    return wrap(a - b)


# mindspore.ops.mul: 'Broadcasting (numpy rules); result dtype = higher-precision input dtype.'
@implements("mindspore.ops.mul")
def mul(input, other):
    a, b = _binary_operands("mindspore.ops.mul", input, other)
    return wrap(a * b)


# mindspore.ops.div: 'rounding_mode is KEYWORD-ONLY; None = true division, 'floor' =
# round down, 'trunc' = round toward zero. ValueError for other strings.'
@implements("mindspore.ops.div")
def div(input, other, *, rounding_mode):
    api = "mindspore.ops.div"
    a, b = _binary_operands(api, input, other)
    if rounding_mode not in (None, "floor", "trunc"):
        raise ValueError("%s: rounding_mode must be None, 'floor' or 'trunc', got %r" % (api, rounding_mode))
    if rounding_mode is None and not a.dtype.is_floating_point:
        raise not_in_facts(api, "true division of integer tensors (the result dtype is not in the notes)")
    return wrap(torch.div(a, b, rounding_mode=rounding_mode))


# mindspore.ops.equal: 'Returns bool tensor of the broadcast shape.'
@implements("mindspore.ops.equal")
def equal(input, other):
    a, b = _binary_operands("mindspore.ops.equal", input, other)
    return wrap(a == b)


# mindspore.ops.logical_not: 'Elementwise boolean NOT; output bool.'
@implements("mindspore.ops.logical_not")
def logical_not(input):
    t = T("mindspore.ops.logical_not", input)
    return wrap(torch.logical_not(t))

IMPLEMENTED += [add, sub, mul, div, equal, logical_not]
