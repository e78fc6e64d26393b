"""More mindspore.ops functions: the elementwise, comparison, reduction and indexing
APIs the rules for ONNX's node tests use (issue 12 acceptance 2).

As in _ops.py, each function cites its table entry (../shared/mindspore-api.json),
its argument binding comes from that entry, and what the entry's notes leave open
(a dtype they do not name, an argument value they do not settle) raises
NotImplementedError rather than guessing. Where MindSpore and torch differ, the
function computes MindSpore's result: reductions keep the input's dtype (torch's
sum/prod/cumsum widen integers to int64), leaky_relu's alpha is the caller's, selu
uses MindSpore's own constants.
"""
import math

import torch
import torch.nn.functional as F

from . import _dtype
from ._ops import _binary_operands, _float_only, _int_tuple, _is_num
from ._table import implements, not_in_facts
from ._tensor import T, Tensor, wrap

_FLOATS = (torch.float16, torch.float32, torch.float64)


def _floats(api, t, allowed=_FLOATS):
    if t.dtype not in allowed:
        raise TypeError("%s: dtype %s is not one of %s" % (api, _dtype.from_torch(t.dtype),
                                                           [str(_dtype.from_torch(d)) for d in allowed]))


def _unary_float(api, input, fn):
    t = T(api, input)
    _float_only(api, t)
    return wrap(fn(t))


# mindspore.ops.abs: 'Elementwise |x|. No dtype restriction stated in this doc version.'
@implements("mindspore.ops.abs")
def abs(input):
    t = T("mindspore.ops.abs", input)
    if t.dtype == torch.bool:
        raise not_in_facts("mindspore.ops.abs", "a bool input")
    return wrap(torch.abs(t))


# mindspore.ops.neg: 'Elementwise negation -input. Doc gives no dtype restriction.'
@implements("mindspore.ops.neg")
def neg(input):
    t = T("mindspore.ops.neg", input)
    if t.dtype == torch.bool:
        raise not_in_facts("mindspore.ops.neg", "a bool input")
    return wrap(torch.neg(t))


# mindspore.ops.exp (no notes: float inputs)
@implements("mindspore.ops.exp")
def exp(input):
    return _unary_float("mindspore.ops.exp", input, torch.exp)


# mindspore.ops.log: natural logarithm (float inputs)
@implements("mindspore.ops.log")
def log(input):
    return _unary_float("mindspore.ops.log", input, torch.log)


# mindspore.ops.sqrt: argument named x (float inputs)
@implements("mindspore.ops.sqrt")
def sqrt(x):
    return _unary_float("mindspore.ops.sqrt", x, torch.sqrt)


# mindspore.ops.reciprocal: 'Elementwise 1/x ... Doc states no integer-input rule'
@implements("mindspore.ops.reciprocal")
def reciprocal(input):
    return _unary_float("mindspore.ops.reciprocal", input, torch.reciprocal)


# mindspore.ops.floor: 'GPU/CPU float16/float32/float64 only (TypeError for ints there)'
@implements("mindspore.ops.floor")
def floor(input):
    t = T("mindspore.ops.floor", input)
    _floats("mindspore.ops.floor", t)
    return wrap(torch.floor(t))


# mindspore.ops.ceil: 'Float-only: ... GPU/CPU float16/float32/float64 (TypeError otherwise)'
@implements("mindspore.ops.ceil")
def ceil(input):
    t = T("mindspore.ops.ceil", input)
    _floats("mindspore.ops.ceil", t)
    return wrap(torch.ceil(t))


# mindspore.ops.cos, sin, acos, asin, atan, cosh, acosh, asinh: 'Unary elementwise, output
# shape = input shape.' (float inputs)
@implements("mindspore.ops.cos")
def cos(input):
    return _unary_float("mindspore.ops.cos", input, torch.cos)


@implements("mindspore.ops.sin")
def sin(input):
    return _unary_float("mindspore.ops.sin", input, torch.sin)


@implements("mindspore.ops.acos")
def acos(input):
    return _unary_float("mindspore.ops.acos", input, torch.acos)


@implements("mindspore.ops.asin")
def asin(input):
    return _unary_float("mindspore.ops.asin", input, torch.asin)


@implements("mindspore.ops.atan")
def atan(input):
    return _unary_float("mindspore.ops.atan", input, torch.atan)


@implements("mindspore.ops.cosh")
def cosh(input):
    return _unary_float("mindspore.ops.cosh", input, torch.cosh)


@implements("mindspore.ops.acosh")
def acosh(input):
    return _unary_float("mindspore.ops.acosh", input, torch.acosh)


@implements("mindspore.ops.asinh")
def asinh(input):
    return _unary_float("mindspore.ops.asinh", input, torch.asinh)


def _promote_int(api, input, fn):
    """'Integer/bool inputs ... are promoted: result dtype float32; otherwise result keeps
    input dtype' (tan, sinh, atanh)."""
    t = T(api, input)
    if not t.dtype.is_floating_point:
        t = t.to(torch.float32)
    return wrap(fn(t))


# mindspore.ops.tan: 'Integer/bool inputs ... are promoted: result dtype float32'
@implements("mindspore.ops.tan")
def tan(input):
    return _promote_int("mindspore.ops.tan", input, torch.tan)


# mindspore.ops.sinh: 'GPU/CPU float16/float32/float64/complex64/complex128 only; ...
# Integer/bool inputs return float32' (the latter on Ascend): the CPU set is checked.
@implements("mindspore.ops.sinh")
def sinh(input):
    t = T("mindspore.ops.sinh", input)
    _floats("mindspore.ops.sinh", t)
    return wrap(torch.sinh(t))


# mindspore.ops.atanh: 'Integer/bool inputs return float32; else same dtype.'
@implements("mindspore.ops.atanh")
def atanh(input):
    return _promote_int("mindspore.ops.atanh", input, torch.atanh)


# mindspore.ops.sign: 'Returns -1/0/+1. ... NaN input gives NaN only when dtype is float64
# (other float dtypes: result for NaN not guaranteed)'
@implements("mindspore.ops.sign")
def sign(input):
    api = "mindspore.ops.sign"
    t = T(api, input)
    if t.dtype == torch.bool:
        raise not_in_facts(api, "a bool input")
    if t.dtype.is_floating_point and t.dtype != torch.float64 and bool(torch.isnan(t).any()):
        raise not_in_facts(api, "NaN in a %s input" % _dtype.from_torch(t.dtype))
    if t.dtype == torch.float64:  # NaN stays NaN (torch.sign would give 0)
        return wrap(torch.where(torch.isnan(t), t, torch.sign(t)))
    return wrap(torch.sign(t))


# mindspore.ops.round: 'Rounding is HALF-TO-EVEN ... decimals is keyword-only (signature
# default None, treated as 0); negative decimals round left of the decimal point'
@implements("mindspore.ops.round")
def round(input, *, decimals):
    api = "mindspore.ops.round"
    t = T(api, input)
    if decimals is None:
        decimals = 0
    if not isinstance(decimals, int) or isinstance(decimals, bool):
        raise not_in_facts(api, "decimals %r" % (decimals,))
    if not t.dtype.is_floating_point:
        if t.dtype not in (torch.int32, torch.int64):
            raise TypeError("%s: dtype %s is not supported" % (api, _dtype.from_torch(t.dtype)))
        if decimals < 0:
            raise not_in_facts(api, "negative decimals for an integer input")
        return wrap(t.clone())
    if decimals == 0:
        return wrap(torch.round(t))  # torch.round is half to even, as the notes say
    s = 10.0 ** decimals
    return wrap((torch.round(t.double() * s) / s).to(t.dtype))


# mindspore.ops.isnan: 'Returns bool tensor, same shape.'
@implements("mindspore.ops.isnan")
def isnan(input):
    return wrap(torch.isnan(T("mindspore.ops.isnan", input)))


# mindspore.ops.isinf: 'Returns bool tensor True for +inf and -inf ... Doc warnings in this
# version: experimental API; 'currently only supported on Atlas A2 training series products''
# The stand-in emulates the CPU device, where the notes say it is not supported.
@implements("mindspore.ops.isinf")
def isinf(input):
    api = "mindspore.ops.isinf"
    t = T(api, input)
    from . import _context
    dev = _context.STATE.get("device")
    if not dev or dev[0] != "Ascend":
        raise RuntimeError("%s: currently only supported on Atlas A2 training series products (the table's "
                           "notes); the device is %s" % (api, dev[0] if dev else "unset (CPU)"))
    return wrap(torch.isinf(t))


# mindspore.ops.softsign: 'x / (1 + |x|). Argument named x. float16/float32 only (TypeError
# otherwise).'
@implements("mindspore.ops.softsign")
def softsign(x):
    api = "mindspore.ops.softsign"
    t = T(api, x, "x")
    _floats(api, t, (torch.float16, torch.float32))
    return wrap(t / (1 + torch.abs(t)))


# mindspore.ops.mish: 'x * tanh(softplus(x)) = ONNX Mish. Argument named x. dtypes GPU/CPU
# float16/float32/float64'
@implements("mindspore.ops.mish")
def mish(x):
    api = "mindspore.ops.mish"
    t = T(api, x, "x")
    _floats(api, t)
    return wrap(t * torch.tanh(torch.log1p(torch.exp(t))))


# mindspore.ops.selu: 'Fixed constants alpha=1.67326324, scale=1.05070098 ... dtypes int8,
# int32, float16, float32, float64'
@implements("mindspore.ops.selu")
def selu(input_x):
    api = "mindspore.ops.selu"
    t = T(api, input_x, "input_x")
    _floats(api, t)  # the notes give no rule for the integer result
    alpha, scale = 1.67326324, 1.05070098
    d = t.double()
    return wrap((scale * torch.where(d > 0, d, alpha * (torch.exp(d) - 1))).to(t.dtype))


# mindspore.ops.elu: '!! alpha must be exactly 1.0: ValueError for any other value;
# TypeError if alpha is not a float. ... Input float16/float32 only.'
@implements("mindspore.ops.elu")
def elu(input_x, alpha):
    api = "mindspore.ops.elu"
    t = T(api, input_x, "input_x")
    if not isinstance(alpha, float):
        raise TypeError("%s: alpha must be a float, got %r" % (api, alpha))
    if alpha != 1.0:
        raise ValueError("%s: alpha must be 1.0 (currently only 1.0 supported), got %r" % (api, alpha))
    _floats(api, t, (torch.float16, torch.float32))
    return wrap(F.elu(t, alpha=1.0))


# mindspore.ops.celu: 'max(0,x) + min(0, alpha*(exp(x/alpha)-1)) ... x float16/float32
# only; alpha must be float and != 0 (ValueError).'
@implements("mindspore.ops.celu")
def celu(x, alpha):
    api = "mindspore.ops.celu"
    t = T(api, x, "x")
    _floats(api, t, (torch.float16, torch.float32))
    if not isinstance(alpha, float):
        raise TypeError("%s: alpha must be a float, got %r" % (api, alpha))
    if alpha == 0:
        raise ValueError("%s: alpha must not be 0" % api)
    d = t.double()
    return wrap((torch.clamp(d, min=0) + torch.clamp(alpha * (torch.exp(d / alpha) - 1), max=0)).to(t.dtype))


# mindspore.ops.leaky_relu: '!! DEFAULT alpha=0.2 ... alpha int or float.'
@implements("mindspore.ops.leaky_relu")
def leaky_relu(input, alpha):
    api = "mindspore.ops.leaky_relu"
    t = T(api, input)
    _float_only(api, t)
    if not _is_num(alpha):
        raise TypeError("%s: alpha must be an int or a float" % api)
    return wrap(torch.where(t >= 0, t, t * alpha))


# mindspore.ops.softplus: 'out = log(1 + exp(beta*x)) / beta; switches to the linear
# function x when input*beta > threshold ... dtypes: GPU/CPU float16/float32/float64'
@implements("mindspore.ops.softplus")
def softplus(input, beta, threshold):
    api = "mindspore.ops.softplus"
    t = T(api, input)
    _floats(api, t)
    if not _is_num(beta) or not _is_num(threshold) or beta == 0:
        raise not_in_facts(api, "beta %r, threshold %r" % (beta, threshold))
    d = t.double()
    soft = torch.log1p(torch.exp(beta * d)) / beta
    return wrap(torch.where(d * beta > threshold, d, soft).to(t.dtype))


# mindspore.ops.log_softmax: 'fp16/fp32 only; first arg named logits.'
@implements("mindspore.ops.log_softmax")
def log_softmax(logits, axis):
    api = "mindspore.ops.log_softmax"
    t = T(api, logits, "logits")
    _floats(api, t, (torch.float16, torch.float32))
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError("%s: axis must be an int" % api)
    return wrap(torch.log_softmax(t, dim=axis))


def _compare(api, input, other, fn):
    # 'Returns bool tensor of the broadcast shape'; ONNX gives both operands one dtype
    a, b = _binary_operands(api, input, other, allow_bool=True)
    return wrap(fn(a, b))


# mindspore.ops.greater / less / greater_equal / less_equal: 'Returns bool tensor of the
# broadcast shape'
@implements("mindspore.ops.greater")
def greater(input, other):
    return _compare("mindspore.ops.greater", input, other, torch.gt)


@implements("mindspore.ops.less")
def less(input, other):
    return _compare("mindspore.ops.less", input, other, torch.lt)


@implements("mindspore.ops.greater_equal")
def greater_equal(input, other):
    return _compare("mindspore.ops.greater_equal", input, other, torch.ge)


@implements("mindspore.ops.less_equal")
def less_equal(input, other):
    return _compare("mindspore.ops.less_equal", input, other, torch.le)


def _logical(api, input, other, fn):
    # 'Output bool, broadcast shape. Non-bool tensors are implicitly converted to bool'
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        raise TypeError("%s: at least one operand must be a Tensor" % api)

    def as_bool(v, what):
        if isinstance(v, Tensor):
            return v._t.to(torch.bool)
        if isinstance(v, bool):
            return torch.tensor(v)
        raise TypeError("%s: %s must be a Tensor or a constant bool" % (api, what))
    return wrap(fn(as_bool(input, "input"), as_bool(other, "other")))


@implements("mindspore.ops.logical_and")
def logical_and(input, other):
    return _logical("mindspore.ops.logical_and", input, other, torch.logical_and)


@implements("mindspore.ops.logical_or")
def logical_or(input, other):
    return _logical("mindspore.ops.logical_or", input, other, torch.logical_or)


# mindspore.ops.logical_xor: 'Both operands documented as Tensors.'
@implements("mindspore.ops.logical_xor")
def logical_xor(input, other):
    api = "mindspore.ops.logical_xor"
    T(api, input), T(api, other, "other")
    return _logical(api, input, other, torch.logical_xor)


# mindspore.ops.fmod: 'C-style remainder: out = input - trunc(input/other)*other; result has
# the SIGN OF THE DIVIDEND (input).'
@implements("mindspore.ops.fmod")
def fmod(input, other):
    a, b = _binary_operands("mindspore.ops.fmod", input, other)
    if not a.dtype.is_floating_point and bool((b == 0).any()):
        raise not_in_facts("mindspore.ops.fmod", "an integer division by zero")
    return wrap(torch.fmod(a, b))


# mindspore.ops.remainder: 'Python-style modulo: input - div(input, other,
# rounding_mode='floor')*other; result has the SIGN OF THE DIVISOR ... total element count
# <= 1,000,000 and rank <= 8'
@implements("mindspore.ops.remainder")
def remainder(input, other):
    api = "mindspore.ops.remainder"
    a, b = _binary_operands(api, input, other)
    if max(a.dim(), b.dim()) > 8 or torch.broadcast_shapes(a.shape, b.shape).numel() > 1000000:
        raise ValueError("%s: at most 1,000,000 elements and rank 8" % api)
    if not a.dtype.is_floating_point and bool((b == 0).any()):
        raise not_in_facts(api, "an integer division by zero")
    return wrap(torch.remainder(a, b))


def _minmax(api, input, other, fn):
    # 'Broadcasting + implicit promotion; not both bool; NaN propagates'
    a, b = _binary_operands(api, input, other)
    return wrap(fn(a, b))


@implements("mindspore.ops.maximum")
def maximum(input, other):
    return _minmax("mindspore.ops.maximum", input, other, torch.maximum)


@implements("mindspore.ops.minimum")
def minimum(input, other):
    return _minmax("mindspore.ops.minimum", input, other, torch.minimum)


def _axes(api, t, axis, what="axis"):
    """An axis argument as a tuple of non-negative dims; None: every dim."""
    if axis is None:
        return tuple(range(t.dim()))
    dims = _int_tuple(api, list(axis) if isinstance(axis, list) else axis, what)
    if not dims:
        raise not_in_facts(api, "an empty %s tuple" % what)
    out = []
    for d in dims:
        if not -max(t.dim(), 1) <= d < max(t.dim(), 1):
            raise ValueError("%s: %s %d out of range for rank %d" % (api, what, d, t.dim()))
        out.append(d % max(t.dim(), 1))
    if len(set(out)) != len(out):
        raise ValueError("%s: repeated %s in %s" % (api, what, dims))
    return tuple(out)


def _reduce(t, dims, keep, fn):
    """fn(tensor, dim, keepdim) applied over each dim, highest first; a 0-D input is
    returned as it is."""
    if t.dim() == 0:
        return t.clone()
    out = t
    for d in sorted(dims, reverse=True):
        out = fn(out, d, True)
    if not keep:
        for d in sorted(dims, reverse=True):
            out = out.squeeze(d)
    return out


# mindspore.ops.sum: 'Names dim/keepdim ... dim None/int/tuple/list.' The sum keeps the
# input's dtype unless dtype is given (torch.sum would widen integers to int64).
@implements("mindspore.ops.sum")
def sum(input, dim, keepdim, *, dtype):
    api = "mindspore.ops.sum"
    t = T(api, input)
    if t.dtype == torch.bool:
        raise not_in_facts(api, "a bool input")
    out_dt = _dtype.check(api, dtype) if dtype is not None else t.dtype
    r = _reduce(t.to(torch.float64) if t.dtype.is_floating_point else t, _axes(api, t, dim, "dim"), bool(keepdim),
                lambda x, d, k: torch.sum(x, dim=d, keepdim=k, dtype=x.dtype))
    return wrap(r.to(out_dt))


def _amaxmin(api, input, axis, keepdims, initial, where, fn):
    t = T(api, input)
    if initial is not None or where is not None:
        raise not_in_facts(api, "initial/where")
    if t.numel() == 0:
        raise ValueError("%s: initial is required for an empty input" % api)
    return wrap(_reduce(t, _axes(api, t, axis), bool(keepdims), lambda x, d, k: fn(x, dim=d, keepdim=k)))


# mindspore.ops.amax: 'Values only; axis int/tuple/list (constant).'
@implements("mindspore.ops.amax")
def amax(input, axis, keepdims, *, initial, where):
    return _amaxmin("mindspore.ops.amax", input, axis, keepdims, initial, where, torch.amax)


# mindspore.ops.amin: 'ONNX ReduceMin counterpart (returns values only ...). axis None =
# reduce all; ... initial required for empty input'
@implements("mindspore.ops.amin")
def amin(input, axis, keepdims, *, initial, where):
    return _amaxmin("mindspore.ops.amin", input, axis, keepdims, initial, where, torch.amin)


# mindspore.ops.prod: 'Names axis/keep_dims ... axis None = all elements; int/tuple/list/
# Tensor. dtype casts the result.' The product keeps the input's dtype.
@implements("mindspore.ops.prod")
def prod(input, axis, keep_dims, dtype):
    api = "mindspore.ops.prod"
    t = T(api, input)
    if isinstance(axis, Tensor):
        axis = tuple(int(v) for v in axis._t.reshape(-1).tolist())
    out_dt = _dtype.check(api, dtype) if dtype is not None else t.dtype
    r = _reduce(t.to(torch.float64) if t.dtype.is_floating_point else t, _axes(api, t, axis), bool(keep_dims),
                lambda x, d, k: torch.prod(x, dim=d, keepdim=k, dtype=x.dtype))
    return wrap(r.to(out_dt))


# mindspore.ops.logsumexp: 'Names dim/keepdim. dim is REQUIRED (no default); dim=() reduces
# all elements. Computed stably as log(sum(exp(x - max))) + max.'
@implements("mindspore.ops.logsumexp")
def logsumexp(input, dim, keepdim):
    api = "mindspore.ops.logsumexp"
    t = T(api, input)
    _float_only(api, t)
    if dim is None:
        raise TypeError("%s: dim is required" % api)
    dims = tuple(range(t.dim())) if dim == () else _axes(api, t, dim, "dim")
    d = t.double()
    m = _reduce(d, dims, True, lambda x, a, k: torch.amax(x, dim=a, keepdim=k))
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    s = _reduce(torch.exp(d - m), dims, True, lambda x, a, k: torch.sum(x, dim=a, keepdim=k))
    out = torch.log(s) + m
    if not keepdim and t.dim():
        for a in sorted(dims, reverse=True):
            out = out.squeeze(a)
    return wrap(out.to(t.dtype))


def _arg(api, input, axis, keep, fn):
    t = T(api, input)
    if t.dtype == torch.bool:
        raise not_in_facts(api, "a bool input")
    if axis is None:
        if keep:
            raise not_in_facts(api, "keepdim with no axis")
        return wrap(fn(t.reshape(-1), 0, False))
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError("%s: the axis must be an int" % api)
    return wrap(fn(t, axis, bool(keep)))


def _first_index(reduce_fn):
    """The index of the first extreme element along dim, as int64: MindSpore's ops.argmax/
    ops.argmin return int64 indices (mindspore/ops/function/array_func.py builds them with
    mstype.int64); NaN compares as in torch."""
    def f(t, dim, keep):
        return reduce_fn(t, dim=dim, keepdim=keep).to(torch.int64)
    return f


# mindspore.ops.argmax: 'Names dim/keepdim (argmin uses axis/keepdims!). keepdim default
# False. No select_last_index.'
@implements("mindspore.ops.argmax")
def argmax(input, dim, keepdim):
    return _arg("mindspore.ops.argmax", input, dim, keepdim, _first_index(torch.argmax))


# mindspore.ops.argmin: 'Names axis/keepdims (inconsistent with argmax dim/keepdim) ...
# keepdims default False.'
@implements("mindspore.ops.argmin")
def argmin(input, axis, keepdims):
    return _arg("mindspore.ops.argmin", input, axis, keepdims, _first_index(torch.argmin))


def _index(api, t, what):
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError("%s: %s must be int32 or int64" % (api, what))
    return t.long()


# mindspore.ops.gather_elements: 'Argument ORDER (input, dim, index) like torch.gather ...
# Ascend forward: index outside [-shape[dim], shape[dim]) is unpredictable.' Negative
# indices are not settled (only the Ascend case is named).
@implements("mindspore.ops.gather_elements")
def gather_elements(input, dim, index):
    api = "mindspore.ops.gather_elements"
    t, i = T(api, input), _index(api, T(api, index, "index"), "index")
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError("%s: dim must be an int" % api)
    d = dim % max(t.dim(), 1)
    if i.numel() and (int(i.min()) < 0 or int(i.max()) >= t.shape[d]):
        raise not_in_facts(api, "an index outside [0, %d)" % t.shape[d])
    return wrap(torch.gather(t, d, i))


# mindspore.ops.gather_nd: 'output[i0..iK-2] = input_x[indices[i0..iK-2]]; indices.shape[-1]
# <= rank(input_x).'
@implements("mindspore.ops.gather_nd")
def gather_nd(input_x, indices):
    api = "mindspore.ops.gather_nd"
    t, i = T(api, input_x, "input_x"), _index(api, T(api, indices, "indices"), "indices")
    k = i.shape[-1] if i.dim() else 0
    if i.dim() < 1 or k > t.dim():
        raise ValueError("%s: indices.shape[-1] must be <= rank(input_x)" % api)
    flat = i.reshape(-1, k)
    for a in range(k):
        if flat.numel() and (int(flat[:, a].min()) < 0 or int(flat[:, a].max()) >= t.shape[a]):
            raise not_in_facts(api, "an index outside [0, %d) on axis %d" % (t.shape[a], a))
    out = t[tuple(flat[:, a] for a in range(k))]
    return wrap(out.reshape(tuple(i.shape[:-1]) + tuple(t.shape[k:])))


# mindspore.ops.tensor_scatter_elements: 'same arg order data, indices, updates, axis.
# reduction 'none' or 'add' only ... No implicit type conversion. Warnings: duplicate
# indices -> value undefined ... Out-of-range indices are silently skipped (no error).'
@implements("mindspore.ops.tensor_scatter_elements")
def tensor_scatter_elements(input_x, indices, updates, axis, reduction):
    api = "mindspore.ops.tensor_scatter_elements"
    t = T(api, input_x, "input_x")
    i = _index(api, T(api, indices, "indices"), "indices")
    u = T(api, updates, "updates")
    if u.dtype != t.dtype:
        raise TypeError("%s: updates must have input_x's dtype (no implicit conversion)" % api)
    if reduction not in ("none", "add"):
        raise ValueError("%s: reduction must be 'none' or 'add', got %r" % (api, reduction))
    if tuple(i.shape) != tuple(u.shape) or i.dim() != t.dim():
        raise not_in_facts(api, "indices and updates of different shapes or ranks")
    ax = axis % max(t.dim(), 1)
    if i.numel() and int(i.min()) < 0:
        raise not_in_facts(api, "negative indices")
    keep = i < t.shape[ax]  # out-of-range ones are skipped
    if reduction == "none":
        pos = torch.stack(torch.meshgrid(*[torch.arange(s) for s in i.shape], indexing="ij"), 0)
        pos[ax] = i
        flat = [tuple(p) for p in pos.reshape(t.dim(), -1)[:, keep.reshape(-1)].t().tolist()]
        if len(set(flat)) != len(flat):
            raise not_in_facts(api, "duplicate indices (the value is undefined)")
    i2 = torch.where(keep, i, torch.zeros_like(i))
    src = torch.where(keep, u, torch.zeros_like(u)) if reduction == "add" else u
    out = t.clone()
    if reduction == "add":
        return wrap(out.scatter_add(ax, i2, src))
    # only the kept positions are written
    mask = torch.zeros_like(t, dtype=torch.bool).scatter(ax, i2, keep)
    written = out.scatter(ax, i2, src)
    return wrap(torch.where(mask, written, out))


# mindspore.ops.cumsum: 'axis has no default. No exclusive/reverse arguments'. The sum keeps
# the input's dtype unless dtype is given.
@implements("mindspore.ops.cumsum")
def cumsum(x, axis, dtype):
    api = "mindspore.ops.cumsum"
    t = T(api, x, "x")
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError("%s: axis must be an int" % api)
    out_dt = _dtype.check(api, dtype) if dtype is not None else t.dtype
    return wrap(torch.cumsum(t, dim=axis, dtype=t.dtype).to(out_dt))


# mindspore.ops.tile: 'dims: constant tuple of ints (>=0); shorter dims are left-padded with 1.'
@implements("mindspore.ops.tile")
def tile(input, dims):
    api = "mindspore.ops.tile"
    t = T(api, input)
    dims = _int_tuple(api, dims, "dims")
    if any(d < 0 for d in dims):
        raise ValueError("%s: dims must be >= 0" % api)
    if len(dims) < t.dim():
        dims = (1,) * (t.dim() - len(dims)) + dims
    return wrap(t.reshape((1,) * (len(dims) - t.dim()) + tuple(t.shape)).repeat(dims))


def _window(api, v, what, n=2):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * n
    v = _int_tuple(api, v, what)
    if len(v) == n:
        return v
    if len(v) == 2 * n and what in ("stride", "dilation"):
        return v[2:]  # the 4-tuple form (1, 1, h, w)
    raise ValueError("%s: %s must be an int or a %d-tuple, got %r" % (api, what, n, v))


# mindspore.ops.conv2d: '!! Functional conv defaults differ from nn.Conv*d: pad_mode='valid'
# ... and arg is groups. pad_mode 'pad' is required for non-zero padding (ValueError
# otherwise); padding is SYMMETRIC per spatial dim only ... 'same' puts the odd extra padding
# at the end (= ONNX SAME_UPPER). bias None -> no bias; bias shape (C_out,). weight (C_out,
# C_in/groups, kh, kw). padding int or 2-tuple ... NOT the 4-tuple of nn.Conv2d. stride int
# or 2/4-tuple.'
@implements("mindspore.ops.conv2d")
def conv2d(input, weight, bias, stride, pad_mode, padding, dilation, groups):
    api = "mindspore.ops.conv2d"
    x, w = T(api, input), T(api, weight, "weight")
    _float_only(api, x)
    if x.dim() != 4 or w.dim() != 4:
        raise ValueError("%s: input and weight must be 4-D" % api)
    if w.dtype != x.dtype:
        raise TypeError("%s: weight's dtype differs from the input's" % api)
    b = None
    if bias is not None:
        b = T(api, bias, "bias")
        if tuple(b.shape) != (w.shape[0],):
            raise ValueError("%s: bias shape must be (C_out,)" % api)
    if pad_mode not in ("valid", "same", "pad"):
        raise ValueError("%s: pad_mode must be 'valid', 'same' or 'pad', got %r" % (api, pad_mode))
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        raise ValueError("%s: padding is an int or a 2-tuple (not nn.Conv2d's 4-tuple)" % api)
    pad = _window(api, padding, "padding")
    if pad_mode != "pad" and any(pad):
        raise ValueError("%s: non-zero padding needs pad_mode='pad'" % api)
    st, dil = _window(api, stride, "stride"), _window(api, dilation, "dilation")
    if not isinstance(groups, int) or groups < 1 or x.shape[1] % groups or w.shape[1] * groups != x.shape[1]:
        raise ValueError("%s: groups %r does not fit C_in %d and weight %s" % (api, groups, x.shape[1], tuple(w.shape)))
    if pad_mode == "same":
        pads = []
        for k in range(2):
            n, s, eff = x.shape[2 + k], st[k], (w.shape[2 + k] - 1) * dil[k] + 1
            total = max((math.ceil(n / s) - 1) * s + eff - n, 0)
            pads.append((total // 2, total - total // 2))  # the odd one at the end
        x = F.pad(x, (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
        pad = (0, 0)
    y = F.conv2d(x.double(), w.double(), b.double() if b is not None else None, st, pad, dil, groups)
    return wrap(y.to(x.dtype))


IMPLEMENTED = [abs, neg, exp, log, sqrt, reciprocal, floor, ceil, cos, sin, acos, asin, atan, cosh, acosh, asinh,
               tan, sinh, atanh, sign, round, isnan, isinf, softsign, mish, selu, elu, celu, leaky_relu, softplus,
               log_softmax, greater, less, greater_equal, less_equal, logical_and, logical_or, logical_xor, fmod,
               remainder, maximum, minimum, sum, amax, amin, prod, logsumexp, argmax, argmin, gather_elements,
               gather_nd, tensor_scatter_elements, cumsum, tile, conv2d]


# mindspore.ops.group_norm: 'torch F.group_norm signature. weight/bias shape (C,) (per-CHANNEL
# ...). C must be divisible by num_groups; eps must be float.'
@implements("mindspore.ops.group_norm")
def group_norm(input, num_groups, weight, bias, eps):
    api = "mindspore.ops.group_norm"
    t = T(api, input)
    _floats(api, t)
    if t.dim() < 2:
        raise ValueError("%s: the input needs a channel dim" % api)
    c = t.shape[1]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ValueError("%s: C=%d is not divisible by num_groups %r" % (api, c, num_groups))
    if not isinstance(eps, float):
        raise TypeError("%s: eps must be a float" % api)
    w = b = None
    if weight is not None:
        w = T(api, weight, "weight")
        if tuple(w.shape) != (c,):
            raise ValueError("%s: weight must have shape (C,)" % api)
    if bias is not None:
        b = T(api, bias, "bias")
        if tuple(b.shape) != (c,):
            raise ValueError("%s: bias must have shape (C,)" % api)
    y = F.group_norm(t.double(), num_groups, w.double() if w is not None else None,
                     b.double() if b is not None else None, eps)
    return wrap(y.to(t.dtype))


# mindspore.mint.nn.functional.conv_transpose2d: 'torch signature and torch arg ORDER ...
# weight (in_channels, out_channels/groups, kH, kW). padding int or (padH, padW): implicit
# zero padding of dilation*(k-1)-padding per side (torch semantics); output_padding adds size
# on one side. oH = (iH-1)*sH - 2*padH + dH*(kH-1) + out_padH + 1. Accepts 3-D (unbatched) or
# 4-D input.'
@implements("mindspore.mint.nn.functional.conv_transpose2d")
def conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation):
    api = "mindspore.mint.nn.functional.conv_transpose2d"
    x, w = T(api, input), T(api, weight, "weight")
    _float_only(api, x)
    if x.dim() not in (3, 4) or w.dim() != 4:
        raise ValueError("%s: input must be 3-D or 4-D and weight 4-D" % api)
    if w.dtype != x.dtype:
        raise TypeError("%s: weight's dtype differs from the input's" % api)
    b = T(api, bias, "bias").double() if bias is not None else None
    st, pad, opad, dil = (_window(api, v, what) for v, what in ((stride, "stride"), (padding, "padding"),
                                                               (output_padding, "output_padding"),
                                                               (dilation, "dilation")))
    if not isinstance(groups, int) or groups < 1:
        raise ValueError("%s: groups must be a positive int" % api)
    y = F.conv_transpose2d(x.double(), w.double(), b, st, pad, opad, groups, dil)
    return wrap(y.to(x.dtype))


IMPLEMENTED += [group_norm, conv_transpose2d]
