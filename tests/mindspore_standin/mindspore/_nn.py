"""mindspore.nn layers the rules use, with the semantics of their table entries.

Each class cites its table entry; the constructor's binding comes from it. Parameter
names and shapes are the entry's "parameters". Initial values: the ones the notes
name ('ones'/'zeros' defaults, HeUniform(sqrt(5)) and Uniform(1/sqrt(fan_in)) for
Conv2d/Dense); a parameter whose initial value the notes do not give (nn.LSTM) starts
as NaN, so a net that was not given a checkpoint shows it instead of running on
invented numbers.
"""
import math

import torch
import torch.nn.functional as F

from . import _dtype
from ._cell import Cell, _ParameterTuple
from ._table import implements, not_in_facts
from ._tensor import Tensor, T, wrap, new_parameter


def _pair(api, v, what, allow4=False):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        if len(v) == 2:
            return tuple(v)
        if len(v) == 4 and allow4:
            raise not_in_facts(api, "a 4-tuple %s" % what)
    raise ValueError("%s: %s must be an int or a 2-tuple of ints, got %r" % (api, what, v))


def _positive(api, vals, what):
    if any(v <= 0 for v in vals):
        raise ValueError("%s: %s must be positive, got %s" % (api, what, vals))


def _init(api, init, shape, tdt, what, default=None):
    """An initial value for a parameter: the initializer names the table uses, or a Tensor."""
    if isinstance(init, Tensor):
        if tuple(init.shape) != tuple(shape):
            raise ValueError("%s: %s Tensor has shape %s, expected %s" % (api, what, init.shape, tuple(shape)))
        return init._t.detach().to(tdt).clone()
    if init is None and default is not None:
        return default()
    if init == "ones":
        return torch.ones(shape, dtype=tdt)
    if init == "zeros":
        return torch.zeros(shape, dtype=tdt)
    raise not_in_facts(api, "%s=%r" % (what, init))


def _he_uniform_sqrt5(shape, fan_in, tdt):
    # HeUniform(negative_slope=sqrt(5)), fan_in mode: gain = sqrt(2 / (1 + 5)),
    # bound = gain * sqrt(3 / fan_in) = 1 / sqrt(fan_in)
    b = 1.0 / math.sqrt(fan_in)
    return (torch.rand(shape, dtype=torch.float64) * 2 * b - b).to(tdt)


def _uniform(shape, scale, tdt):
    return (torch.rand(shape, dtype=torch.float64) * 2 * scale - scale).to(tdt)


def _check_input_dtype(api, x, w):
    if x.dtype != w.dtype:
        raise not_in_facts(api, "an input of dtype %s with parameters of dtype %s"
                           % (_dtype.from_torch(x.dtype), _dtype.from_torch(w.dtype)))


def _conv_parameters(cell, api, weight_init, bias_init, wshape, fan_in, has_bias, tdt):
    """A conv layer's weight and bias: weight_init None -> HeUniform(sqrt(5)), bias_init
    None -> Uniform(1/sqrt(fan_in)), no bias unless has_bias ('else self.bias=None')."""
    out_channels = wshape[0]
    cell.weight = new_parameter(_init(api, weight_init, wshape, tdt, "weight_init",
                                      lambda: _he_uniform_sqrt5(wshape, fan_in, tdt)))
    if has_bias:
        cell.bias = new_parameter(_init(api, bias_init, (out_channels,), tdt, "bias_init",
                                        lambda: _uniform((out_channels,), 1 / math.sqrt(fan_in), tdt)))
    else:
        cell.bias = None


def _conv_input(api, cell, x, rank, layout):
    t = T(api, x, "x")
    if t.dim() != rank:
        raise ValueError("%s: input must be %d-D (%s), got %d-D" % (api, rank, layout, t.dim()))
    if t.shape[1] != cell.in_channels:
        raise ValueError("%s: input has %d channels, in_channels is %d" % (api, t.shape[1], cell.in_channels))
    _check_input_dtype(api, t, cell.weight._t)
    return t


# mindspore.nn.Conv2d: weight (out, in/group, kh, kw); has_bias default False; pad_mode
# default 'same'; padding must be 0 unless pad_mode='pad'; padding int or 4-tuple ORDER
# (top, bottom, left, right); 'same': excess odd padding goes to right/bottom; stride and
# dilation int or 2-tuple; weight_init None -> HeUniform(math.sqrt(5)), bias_init None ->
# Uniform(1/sqrt(fan_in)); NHWC only on GPU; construct: P.Conv2D then P.BiasAdd.
@implements("mindspore.nn.Conv2d")
class Conv2d(Cell):
    def __init__(self, in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation,
                 group, has_bias, weight_init, bias_init, data_format, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.Conv2d"
        for n, v in (("in_channels", in_channels), ("out_channels", out_channels), ("group", group)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError("%s: %s must be a positive int, got %r" % (api, n, v))
        self.kernel_size = _pair(api, kernel_size, "kernel_size")
        self.stride = _pair(api, stride, "stride", allow4=True)
        self.dilation = _pair(api, dilation, "dilation", allow4=True)
        _positive(api, self.kernel_size + self.stride + self.dilation, "kernel_size/stride/dilation")
        if pad_mode not in ("same", "valid", "pad"):
            raise ValueError("%s: pad_mode must be 'same', 'valid' or 'pad', got %r" % (api, pad_mode))
        if isinstance(padding, int) and not isinstance(padding, bool):
            pads = (padding,) * 4
        elif isinstance(padding, (tuple, list)) and len(padding) == 4 and all(isinstance(p, int) for p in padding):
            pads = tuple(padding)
        else:
            raise ValueError("%s: padding must be an int or a 4-tuple (top, bottom, left, right)" % api)
        if any(p < 0 for p in pads):
            raise ValueError("%s: padding must be non-negative" % api)
        if pad_mode != "pad" and any(pads):
            raise ValueError("%s: padding must be 0 unless pad_mode='pad' (pad_mode=%r)" % (api, pad_mode))
        if in_channels % group or out_channels % group:
            raise ValueError("%s: in_channels and out_channels must be divisible by group" % api)
        if data_format == "NHWC":
            raise not_in_facts(api, "data_format='NHWC' (GPU only)")
        if data_format != "NCHW":
            raise ValueError("%s: data_format must be 'NCHW' or 'NHWC'" % api)
        if not isinstance(has_bias, bool):
            raise TypeError("%s: has_bias must be a bool" % api)
        tdt = _dtype.check(api, dtype)
        self.in_channels, self.out_channels, self.group = in_channels, out_channels, group
        self.pad_mode, self.padding, self.has_bias = pad_mode, pads, has_bias
        kh, kw = self.kernel_size
        wshape = (out_channels, in_channels // group, kh, kw)
        fan_in = in_channels // group * kh * kw
        _conv_parameters(self, api, weight_init, bias_init, wshape, fan_in, has_bias, tdt)

    def construct(self, x):
        api = "mindspore.nn.Conv2d"
        t = _conv_input(api, self, x, 4, "NCHW")
        w = self.weight._t
        if self.pad_mode == "pad":
            top, bottom, left, right = self.padding
        elif self.pad_mode == "valid":
            top = bottom = left = right = 0
        else:  # 'same': out = ceil(in / stride), the odd extra pad at the bottom/right
            pads = []
            for n, k, s, d in zip(t.shape[2:], self.kernel_size, self.stride, self.dilation):
                out = -(-n // s)
                total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
                pads.append((total // 2, total - total // 2))
            (top, bottom), (left, right) = pads
        if top or bottom or left or right:
            t = F.pad(t, (left, right, top, bottom))
        y = F.conv2d(t, w, None, self.stride, 0, self.dilation, self.group)
        if self.bias is not None:
            y = y + self.bias._t.reshape(1, -1, 1, 1)
        return wrap(y)


def _plain_int(api, v, what):
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("%s: %s must be an int, got %r" % (api, what, v))
    return v


# mindspore.nn.Conv1d: 'kernel_size/stride/padding/dilation must be plain int
# (check_value_type [int]); padding symmetric only (self.padding=(0,0,padding,padding))';
# pad_mode default 'same', padding must be 0 unless pad_mode='pad'; weight parameter 4-D
# (out, in/group, 1, k); 'construct: expand_dims(x,2) -> Conv2D -> BiasAdd -> squeeze(2);
# input must be 3-D'; weight_init None -> HeUniform(sqrt(5)), bias_init None ->
# Uniform(1/sqrt(fan_in)); has_bias default False.
@implements("mindspore.nn.Conv1d")
class Conv1d(Cell):
    def __init__(self, in_channels, out_channels, kernel_size, stride, pad_mode, padding, dilation,
                 group, has_bias, weight_init, bias_init, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.Conv1d"
        for n, v in (("in_channels", in_channels), ("out_channels", out_channels), ("group", group)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError("%s: %s must be a positive int, got %r" % (api, n, v))
        k = _plain_int(api, kernel_size, "kernel_size")
        st = _plain_int(api, stride, "stride")
        dil = _plain_int(api, dilation, "dilation")
        pad = _plain_int(api, padding, "padding")
        _positive(api, (k, st, dil), "kernel_size/stride/dilation")
        if pad_mode not in ("same", "valid", "pad"):
            raise ValueError("%s: pad_mode must be 'same', 'valid' or 'pad', got %r" % (api, pad_mode))
        if pad < 0:
            raise ValueError("%s: padding must be non-negative" % api)
        if pad_mode != "pad" and pad:
            raise ValueError("%s: padding must be 0 unless pad_mode='pad' (pad_mode=%r)" % (api, pad_mode))
        if in_channels % group or out_channels % group:
            raise ValueError("%s: in_channels and out_channels must be divisible by group" % api)
        if not isinstance(has_bias, bool):
            raise TypeError("%s: has_bias must be a bool" % api)
        tdt = _dtype.check(api, dtype)
        self.in_channels, self.out_channels, self.group = in_channels, out_channels, group
        self.kernel_size, self.stride, self.dilation = k, st, dil
        self.pad_mode, self.padding, self.has_bias = pad_mode, pad, has_bias
        wshape = (out_channels, in_channels // group, 1, k)
        fan_in = in_channels // group * k
        if isinstance(weight_init, Tensor) and len(weight_init.shape) == 3:
            weight_init = wrap(weight_init._t.unsqueeze(2))  # "a 3-D Tensor passed as weight_init is auto-expanded"
        _conv_parameters(self, api, weight_init, bias_init, wshape, fan_in, has_bias, tdt)

    def construct(self, x):
        api = "mindspore.nn.Conv1d"
        t = _conv_input(api, self, x, 3, "N, C, L")
        w = self.weight._t
        t = t.unsqueeze(2)  # expand_dims(x, 2): (N, C, 1, L) against the (out, in, 1, k) weight
        if self.pad_mode == "pad":
            left = right = self.padding
        elif self.pad_mode == "valid":
            left = right = 0
        else:  # 'same': out = ceil(in / stride), the odd extra pad at the end
            n = t.shape[3]
            out = -(-n // self.stride)
            total = max((out - 1) * self.stride + (self.kernel_size - 1) * self.dilation + 1 - n, 0)
            left, right = total // 2, total - total // 2
        if left or right:
            t = F.pad(t, (left, right, 0, 0))
        y = F.conv2d(t, w, None, (1, self.stride), 0, (1, self.dilation), self.group)
        if self.bias is not None:
            y = y + self.bias._t.reshape(1, -1, 1, 1)
        return wrap(y.squeeze(2))


# mindspore.nn.Dense: weight (out_channels, in_channels), bias (out_channels,); construct:
# inputs with rank != 2 reshaped to (-1, in_channels), MatMul(transpose_b=True), BiasAdd,
# optional activation (str via get_activation, Cell or Primitive), reshaped back;
# weight_init None -> HeUniform(sqrt(5)); bias_init None -> Uniform(1/sqrt(in_channels)).
@implements("mindspore.nn.Dense")
class Dense(Cell):
    def __init__(self, in_channels, out_channels, weight_init, bias_init, has_bias, activation, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.Dense"
        for n, v in (("in_channels", in_channels), ("out_channels", out_channels)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError("%s: %s must be a positive int, got %r" % (api, n, v))
        if not isinstance(has_bias, bool):
            raise TypeError("%s: has_bias must be a bool" % api)
        if activation is not None and not isinstance(activation, Cell):
            raise not_in_facts(api, "activation=%r (only None or a Cell)" % (activation,))
        tdt = _dtype.check(api, dtype)
        self.in_channels, self.out_channels, self.has_bias = in_channels, out_channels, has_bias
        ws = (out_channels, in_channels)
        self.weight = new_parameter(_init(api, weight_init, ws, tdt, "weight_init",
                                          lambda: _he_uniform_sqrt5(ws, in_channels, tdt)))
        if has_bias:
            self.bias = new_parameter(_init(api, bias_init, (out_channels,), tdt, "bias_init",
                                            lambda: _uniform((out_channels,), 1 / math.sqrt(in_channels), tdt)))
        else:
            self.bias = None
        self.activation = activation

    def construct(self, x):
        api = "mindspore.nn.Dense"
        t = T(api, x, "x")
        if t.dim() == 0 or t.shape[-1] != self.in_channels:
            raise ValueError("%s: input's last dimension must be in_channels=%d, got shape %s"
                             % (api, self.in_channels, tuple(t.shape)))
        w = self.weight._t
        _check_input_dtype(api, t, w)
        lead = tuple(t.shape[:-1])
        y = torch.matmul(t.reshape(-1, self.in_channels), w.t())
        if self.bias is not None:
            y = y + self.bias._t
        if t.dim() != 2:
            y = y.reshape(lead + (self.out_channels,))
        out = wrap(y)
        if self.activation is not None:
            out = self.activation(out)
        return out


# mindspore.nn.Dropout: 'p = DROP probability, range [0,1); keep_prob (deprecated) is the
# KEEP probability and is used only when p is None. Identity when not self.training
# (Cell.training defaults to False) or p == 0. dtype arg deprecated. Uses P.Dropout(1-p).'
@implements("mindspore.nn.Dropout")
class Dropout(Cell):
    def __init__(self, keep_prob, p, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.Dropout"
        if p is None:
            if not isinstance(keep_prob, (int, float)) or not 0 < keep_prob <= 1:
                raise ValueError("%s: keep_prob must be in (0, 1], got %r" % (api, keep_prob))
            p = 1.0 - keep_prob
        elif not isinstance(p, (int, float)) or isinstance(p, bool) or not 0 <= p < 1:
            raise ValueError("%s: p must be in [0, 1), got %r" % (api, p))
        _dtype.check(api, dtype)
        self.p = float(p)

    def construct(self, x):
        api = "mindspore.nn.Dropout"
        T(api, x, "x")
        if not self.training or self.p == 0:
            return x
        raise not_in_facts(api, "training-mode dropout with p > 0 (the mask and scaling of P.Dropout)")


# mindspore.nn.Flatten: 'construct -> F.flatten(x, start_dim, end_dim); 0-D input -> 1-D.'
@implements("mindspore.nn.Flatten")
class Flatten(Cell):
    def __init__(self, start_dim, end_dim):
        Cell.__init__(self)
        for n, v in (("start_dim", start_dim), ("end_dim", end_dim)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("mindspore.nn.Flatten: %s must be an int" % n)
        self.start_dim, self.end_dim = start_dim, end_dim

    def construct(self, x):
        t = T("mindspore.nn.Flatten", x, "x")
        if t.dim() == 0:
            return wrap(t.reshape(1))
        return wrap(torch.flatten(t, self.start_dim, self.end_dim))


# mindspore.nn.GELU: 'DEFAULT approximate=True => tanh approximation ... Maps bool ->
# ops.gelu(x, approximate='tanh'|'none').'
@implements("mindspore.nn.GELU")
class GELU(Cell):
    def __init__(self, approximate):
        Cell.__init__(self)
        if not isinstance(approximate, bool):
            raise TypeError("mindspore.nn.GELU: approximate must be a bool")
        self.approximate = approximate

    def construct(self, x):
        t = T("mindspore.nn.GELU", x, "x")
        if not t.dtype.is_floating_point:
            raise TypeError("mindspore.nn.GELU: input must be a float tensor")
        return wrap(F.gelu(t, approximate="tanh" if self.approximate else "none"))


# mindspore.nn.HSigmoid: 'P.HSigmoid(): x/6 + 1/2 clipped to [0,1]'
@implements("mindspore.nn.HSigmoid")
class HSigmoid(Cell):
    def __init__(self):
        Cell.__init__(self)

    def construct(self, x):
        t = T("mindspore.nn.HSigmoid", x, "x")
        return wrap(torch.clamp(t / 6 + 0.5, 0, 1))


# mindspore.nn.HSwish: 'P.HSwish(): x*(x+3)/6 clipped (0 for x<=-3, x for x>=3)'
@implements("mindspore.nn.HSwish")
class HSwish(Cell):
    def __init__(self):
        Cell.__init__(self)

    def construct(self, x):
        t = T("mindspore.nn.HSwish", x, "x")
        return wrap(torch.where(t <= -3, torch.zeros_like(t), torch.where(t >= 3, t, t * (t + 3) / 6)))


# mindspore.nn.Identity: 'construct(input) returns input unchanged.' The constructor takes
# *args/**kwargs (table) and keeps none of them.
@implements("mindspore.nn.Identity")
class Identity(Cell):
    def __init__(self, *args, **kwargs):
        Cell.__init__(self)

    def construct(self, input):
        return input


# mindspore.nn.LayerNorm: gamma/beta of shape normalized_shape; 'DEFAULT epsilon=1e-7';
# 'normalized_shape must be tuple/list (int raises TypeError)'; 'begin_norm_axis/
# begin_params_axis default -1 = normalize ONLY the last axis'; construct:
# P.LayerNorm(begin_norm_axis, begin_params_axis, epsilon)(x, gamma.astype(x.dtype),
# beta.astype(x.dtype))[0].
@implements("mindspore.nn.LayerNorm")
class LayerNorm(Cell):
    def __init__(self, normalized_shape, begin_norm_axis, begin_params_axis, gamma_init, beta_init,
                 epsilon, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.LayerNorm"
        if not isinstance(normalized_shape, (tuple, list)):
            raise TypeError("%s: normalized_shape must be a tuple or list, got %s"
                            % (api, type(normalized_shape).__name__))
        ns = tuple(normalized_shape)
        if not all(isinstance(v, int) and v > 0 for v in ns):
            raise ValueError("%s: normalized_shape must hold positive ints" % api)
        for n, v in (("begin_norm_axis", begin_norm_axis), ("begin_params_axis", begin_params_axis)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError("%s: %s must be an int" % (api, n))
        if not isinstance(epsilon, (int, float)) or epsilon <= 0:
            raise ValueError("%s: epsilon must be a positive float" % api)
        tdt = _dtype.check(api, dtype)
        self.normalized_shape = ns
        self.begin_norm_axis, self.begin_params_axis = begin_norm_axis, begin_params_axis
        self.epsilon = float(epsilon)
        self.gamma = new_parameter(_init(api, gamma_init, ns, tdt, "gamma_init"))
        self.beta = new_parameter(_init(api, beta_init, ns, tdt, "beta_init"))

    def construct(self, input_x):
        api = "mindspore.nn.LayerNorm"
        t = T(api, input_x, "input_x")
        if not t.dtype.is_floating_point:
            raise TypeError("%s: input must be a float tensor" % api)
        r = t.dim()
        bna = self.begin_norm_axis + r if self.begin_norm_axis < 0 else self.begin_norm_axis
        bpa = self.begin_params_axis + r if self.begin_params_axis < 0 else self.begin_params_axis
        if not (0 <= bna < r and 0 <= bpa < r):
            raise ValueError("%s: begin_norm_axis/begin_params_axis out of range for a %d-D input" % (api, r))
        if tuple(t.shape[bpa:]) != self.normalized_shape:
            raise ValueError("%s: input shape %s from begin_params_axis does not match gamma/beta %s"
                             % (api, tuple(t.shape), self.normalized_shape))
        dims = tuple(range(bna, r))
        mean = t.mean(dim=dims, keepdim=True)
        var = ((t - mean) ** 2).mean(dim=dims, keepdim=True)
        y = (t - mean) / torch.sqrt(var + self.epsilon)
        return wrap(y * self.gamma._t.to(t.dtype) + self.beta._t.to(t.dtype))


class _BatchNorm(Cell):
    """The shared body of nn.BatchNorm1d/2d (their table entries: signature inherited from
    _BatchNorm). momentum: 'stored self.momentum = 1 - momentum passed to P.BatchNorm;
    docstring formula moving_mean = moving_mean*momentum + batch_mean*(1-momentum)'.
    Parameters moving_mean (ctor name 'mean', requires_grad=False), moving_variance (ctor
    name 'variance', requires_grad=False), gamma, beta; 'affine=False still creates and USES
    gamma/beta (only requires_grad=False)'; 'Eval (training False, default) uses running
    stats'. eps default 1e-5. NHWC only on GPU."""
    _ranks = ()

    def _setup(self, api, num_features, eps, momentum, affine, gamma_init, beta_init,
               moving_mean_init, moving_var_init, use_batch_statistics, data_format, dtype):
        Cell.__init__(self)
        if not isinstance(num_features, int) or isinstance(num_features, bool) or num_features <= 0:
            raise ValueError("%s: num_features must be a positive int" % api)
        if not isinstance(momentum, (int, float)) or not 0 <= momentum <= 1:
            raise ValueError("%s: momentum must be in [0, 1], got %r" % (api, momentum))
        if not isinstance(eps, (int, float)) or eps <= 0:
            raise ValueError("%s: eps must be positive" % api)
        if use_batch_statistics not in (None, True, False):
            raise TypeError("%s: use_batch_statistics must be None or a bool" % api)
        if data_format == "NHWC":
            raise not_in_facts(api, "data_format='NHWC' (GPU only)")
        if data_format != "NCHW":
            raise ValueError("%s: data_format must be 'NCHW' or 'NHWC'" % api)
        tdt = _dtype.check(api, dtype)
        self._api = api
        self.num_features, self.eps, self.momentum = num_features, float(eps), float(momentum)
        self.use_batch_statistics = use_batch_statistics
        n = (num_features,)
        self.moving_mean = new_parameter(_init(api, moving_mean_init, n, tdt, "moving_mean_init"),
                                         name="mean", requires_grad=False)
        self.moving_variance = new_parameter(_init(api, moving_var_init, n, tdt, "moving_var_init"),
                                             name="variance", requires_grad=False)
        self.gamma = new_parameter(_init(api, gamma_init, n, tdt, "gamma_init"), name="gamma",
                                   requires_grad=bool(affine))
        self.beta = new_parameter(_init(api, beta_init, n, tdt, "beta_init"), name="beta",
                                  requires_grad=bool(affine))

    def construct(self, x):
        api = self._api
        t = T(api, x, "x")
        if t.dim() not in self._ranks:
            raise ValueError("%s: input must be %s-D, got %d-D" % (api, "/".join(map(str, self._ranks)), t.dim()))
        if t.shape[1] != self.num_features:
            raise ValueError("%s: input has %d channels, num_features is %d" % (api, t.shape[1], self.num_features))
        _check_input_dtype(api, t, self.gamma._t)
        # use_batch_statistics None: the mode decides (training -> batch statistics);
        # True/False: batch statistics always / never (plain reading of the name; the
        # rules emit False, i.e. moving statistics in both modes).
        batch = self.training if self.use_batch_statistics is None else self.use_batch_statistics
        shape = (1, -1) + (1,) * (t.dim() - 2)
        g, b = self.gamma._t.reshape(shape), self.beta._t.reshape(shape)
        if not batch:
            m, v = self.moving_mean._t.reshape(shape), self.moving_variance._t.reshape(shape)
            return wrap((t - m) / torch.sqrt(v + self.eps) * g + b)
        dims = (0,) + tuple(range(2, t.dim()))
        bm = t.mean(dim=dims)
        bv = ((t - bm.reshape(shape)) ** 2).mean(dim=dims)
        with torch.no_grad():
            # the docstring formula: moving_mean = moving_mean*momentum + batch_mean*(1-momentum)
            mm = self.moving_mean._t
            self.moving_mean._t = mm * self.momentum + bm.detach().to(mm.dtype) * (1 - self.momentum)
            # The notes give no formula for moving_variance (biased or unbiased batch
            # variance): it becomes NaN rather than a guess (docs/mindspore-standin.md).
            self.moving_variance._t = torch.full_like(self.moving_variance._t, float("nan"))
        return wrap((t - bm.reshape(shape)) / torch.sqrt(bv.reshape(shape) + self.eps) * g + b)


# mindspore.nn.BatchNorm1d: 'Input must be 2-D (N,C) or 3-D (N,C,L).'
@implements("mindspore.nn.BatchNorm1d")
class BatchNorm1d(_BatchNorm):
    _ranks = (2, 3)

    def __init__(self, num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                 moving_var_init, use_batch_statistics, data_format, dtype):
        self._setup("mindspore.nn.BatchNorm1d", num_features, eps, momentum, affine, gamma_init,
                    beta_init, moving_mean_init, moving_var_init, use_batch_statistics, data_format, dtype)


# mindspore.nn.BatchNorm2d: 'Input must be 4-D.'
@implements("mindspore.nn.BatchNorm2d")
class BatchNorm2d(_BatchNorm):
    _ranks = (4,)

    def __init__(self, num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                 moving_var_init, use_batch_statistics, data_format, dtype):
        self._setup("mindspore.nn.BatchNorm2d", num_features, eps, momentum, affine, gamma_init,
                    beta_init, moving_mean_init, moving_var_init, use_batch_statistics, data_format, dtype)


# mindspore.nn.BatchNorm3d: 'NO data_format arg. Implemented as a wrapped child self.bn2d =
# BatchNorm2d(...) => checkpoint keys get an extra segment '<name>.bn2d.gamma' etc. Input
# must be 5-D; reshaped (N,C,D,H,W)->(N,C,D*H,W).'
@implements("mindspore.nn.BatchNorm3d")
class BatchNorm3d(Cell):
    def __init__(self, num_features, eps, momentum, affine, gamma_init, beta_init, moving_mean_init,
                 moving_var_init, use_batch_statistics, dtype):
        Cell.__init__(self)
        self.bn2d = BatchNorm2d(num_features, eps=eps, momentum=momentum, affine=affine,
                                gamma_init=gamma_init, beta_init=beta_init,
                                moving_mean_init=moving_mean_init, moving_var_init=moving_var_init,
                                use_batch_statistics=use_batch_statistics, data_format="NCHW", dtype=dtype)
        self.bn2d._api = "mindspore.nn.BatchNorm3d"

    def construct(self, x):
        api = "mindspore.nn.BatchNorm3d"
        t = T(api, x, "x")
        if t.dim() != 5:
            raise ValueError("%s: input must be 5-D, got %d-D" % (api, t.dim()))
        n, c, d, h, w = t.shape
        y = self.bn2d(wrap(t.reshape(n, c, d * h, w)))
        return wrap(y._t.reshape(n, c, d, h, w))


def _pool_mode(api, pad_mode):
    # 'pad_mode default 'valid' (case-insensitive VALID/SAME/PAD)'
    if not isinstance(pad_mode, str) or pad_mode.upper() not in ("VALID", "SAME", "PAD"):
        raise ValueError("%s: pad_mode must be valid/same/pad, got %r" % (api, pad_mode))
    return pad_mode.upper()


def _pool_padding(api, padding):
    # 'Padding is symmetric per dim (int or per-dim tuple)'; MaxPool2d: 'padding int or (pad_h, pad_w)'
    if isinstance(padding, int) and not isinstance(padding, bool):
        p = (padding, padding)
    elif isinstance(padding, (tuple, list)) and len(padding) == 2 and all(isinstance(v, int) for v in padding):
        p = tuple(padding)
    else:
        raise ValueError("%s: padding must be an int or (pad_h, pad_w), got %r" % (api, padding))
    if any(v < 0 for v in p):
        raise ValueError("%s: padding must be non-negative" % api)
    return p


def _ceil_check(api, t, k, s, p, d):
    """ceil_mode=True: the notes do not give the ceil rule, so it is accepted only where
    ceil and floor give the same output size."""
    for n, kk, ss, pp, dd in zip(t.shape[2:], k, s, p, d):
        span = n + 2 * pp - dd * (kk - 1) - 1
        if span % ss:
            raise not_in_facts(api, "ceil_mode=True where ceil and floor output sizes differ")


def _same_pads(api, t, k, s):
    pads = []
    for n, kk, ss in zip(t.shape[2:], k, s):
        out = -(-n // ss)
        total = max((out - 1) * ss + kk - n, 0)
        pads.append(total)
    return pads


# mindspore.nn.MaxPool2d: 'stride DEFAULT 1'; 'pad_mode default 'valid' (case-insensitive
# VALID/SAME/PAD); padding/ceil_mode etc. only allowed with pad_mode='pad' (ValueError
# otherwise)'; 'padding int or (pad_h, pad_w)'; 'argmax int64. Input 3-D or 4-D.'
@implements("mindspore.nn.MaxPool2d")
class MaxPool2d(Cell):
    def __init__(self, kernel_size, stride, pad_mode, padding, dilation, return_indices, ceil_mode, data_format):
        Cell.__init__(self)
        api = "mindspore.nn.MaxPool2d"
        self.kernel_size = _pair(api, kernel_size, "kernel_size")
        self.stride = _pair(api, stride, "stride")
        self.dilation = _pair(api, dilation, "dilation")
        _positive(api, self.kernel_size + self.stride + self.dilation, "kernel_size/stride/dilation")
        self.pad_mode = _pool_mode(api, pad_mode)
        self.padding = _pool_padding(api, padding)
        if self.pad_mode != "PAD" and (any(self.padding) or self.dilation != (1, 1) or return_indices or ceil_mode):
            raise ValueError("%s: padding, dilation, return_indices and ceil_mode are only allowed with "
                             "pad_mode='pad'" % api)
        if return_indices:
            raise not_in_facts(api, "return_indices=True (the argmax layout)")
        if data_format == "NHWC":
            raise not_in_facts(api, "data_format='NHWC'")
        if data_format != "NCHW":
            raise ValueError("%s: data_format must be 'NCHW' or 'NHWC'" % api)
        self.ceil_mode = bool(ceil_mode)

    def construct(self, x):
        api = "mindspore.nn.MaxPool2d"
        t = T(api, x, "x")
        if t.dim() not in (3, 4):
            raise ValueError("%s: input must be 3-D or 4-D, got %d-D" % (api, t.dim()))
        if not t.dtype.is_floating_point:
            raise not_in_facts(api, "an integer input")
        squeeze = t.dim() == 3
        if squeeze:
            t = t.unsqueeze(0)
        k, s = self.kernel_size, self.stride
        if self.pad_mode == "VALID":
            y = F.max_pool2d(t, k, s)
        elif self.pad_mode == "SAME":
            ph, pw = _same_pads(api, t, k, s)
            if ph % 2 or pw % 2:
                raise not_in_facts(api, "pad_mode='same' with an odd total padding (where the extra goes)")
            if ph or pw:
                t = F.pad(t, (pw // 2, pw // 2, ph // 2, ph // 2), value=float("-inf"))
            y = F.max_pool2d(t, k, s)
        else:
            if self.ceil_mode:
                _ceil_check(api, t, k, s, self.padding, self.dilation)
            y = F.max_pool2d(t, k, s, self.padding, self.dilation)
        return wrap(y.squeeze(0) if squeeze else y)


# mindspore.nn.AvgPool2d: 'stride DEFAULT 1'; 'pad_mode default 'valid' (case-insensitive
# VALID/SAME/PAD); padding/ceil_mode etc. only allowed with pad_mode='pad' (ValueError
# otherwise). Padding is symmetric per dim (int or per-dim tuple)'; 'count_include_pad
# default True'.
@implements("mindspore.nn.AvgPool2d")
class AvgPool2d(Cell):
    def __init__(self, kernel_size, stride, pad_mode, padding, ceil_mode, count_include_pad,
                 divisor_override, data_format):
        Cell.__init__(self)
        api = "mindspore.nn.AvgPool2d"
        self.kernel_size = _pair(api, kernel_size, "kernel_size")
        self.stride = _pair(api, stride, "stride")
        _positive(api, self.kernel_size + self.stride, "kernel_size/stride")
        self.pad_mode = _pool_mode(api, pad_mode)
        self.padding = _pool_padding(api, padding)
        if self.pad_mode != "PAD" and (any(self.padding) or ceil_mode or not count_include_pad
                                       or divisor_override is not None):
            raise ValueError("%s: padding, ceil_mode, count_include_pad=False and divisor_override are "
                             "only allowed with pad_mode='pad'" % api)
        if divisor_override is not None and (not isinstance(divisor_override, int) or divisor_override <= 0):
            raise not_in_facts(api, "divisor_override=%r" % (divisor_override,))
        if data_format == "NHWC":
            raise not_in_facts(api, "data_format='NHWC'")
        if data_format != "NCHW":
            raise ValueError("%s: data_format must be 'NCHW' or 'NHWC'" % api)
        self.ceil_mode, self.count_include_pad = bool(ceil_mode), bool(count_include_pad)
        self.divisor_override = divisor_override

    def construct(self, x):
        api = "mindspore.nn.AvgPool2d"
        t = T(api, x, "x")
        if t.dim() != 4:
            raise not_in_facts(api, "a %d-D input (the notes give no input ranks; 4-D is taken)" % t.dim())
        if not t.dtype.is_floating_point:
            raise TypeError("%s: input must be a float tensor" % api)
        k, s = self.kernel_size, self.stride
        if self.pad_mode == "VALID":
            return wrap(F.avg_pool2d(t, k, s))
        if self.pad_mode == "SAME":
            if any(_same_pads(api, t, k, s)):
                raise not_in_facts(api, "pad_mode='same' with non-zero padding (the divisor at the border)")
            return wrap(F.avg_pool2d(t, k, s))
        if self.ceil_mode:
            _ceil_check(api, t, k, s, self.padding, (1, 1))
        return wrap(F.avg_pool2d(t, k, s, self.padding, False, self.count_include_pad,
                                 self.divisor_override))


# mindspore.nn.LSTM: 'gate_size = 4*hidden. Gate ORDER is PyTorch (i, f, g, o)'; 'hx is a
# tuple (h0, c0); returns (output, (h_n, c_n))'; 'CPU P.LSTM uses bias_ih+bias_hh';
# 'Parameters live in ParameterTuples w_ih_list/w_hh_list/b_ih_list/b_hh_list whose items
# keep their own names 'weight_ih_l{k}{_reverse}' etc.'; 'layer_input_size = input_size for
# layer 0 else hidden_size*num_directions'; 'construct(x, hx=None, seq_length=None); x
# (seq,batch,feat) unless batch_first; hx (num_directions*num_layers, batch, hidden)';
# 'dropout must be a float in [0,1)'.
@implements("mindspore.nn.LSTM")
class LSTM(Cell):
    def __init__(self, input_size, hidden_size, num_layers, has_bias, batch_first, dropout,
                 bidirectional, dtype):
        Cell.__init__(self)
        api = "mindspore.nn.LSTM"
        for n, v in (("input_size", input_size), ("hidden_size", hidden_size), ("num_layers", num_layers)):
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError("%s: %s must be a positive int" % (api, n))
        if not isinstance(dropout, float) or not 0 <= dropout < 1:
            raise ValueError("%s: dropout must be a float in [0, 1), got %r" % (api, dropout))
        for n, v in (("has_bias", has_bias), ("batch_first", batch_first), ("bidirectional", bidirectional)):
            if not isinstance(v, bool):
                raise TypeError("%s: %s must be a bool" % (api, n))
        tdt = _dtype.check(api, dtype)
        if tdt not in (torch.float16, torch.float32):
            raise TypeError("%s: dtype must be float16 or float32" % api)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.has_bias, self.batch_first, self.dropout = has_bias, batch_first, dropout
        self.bidirectional = bidirectional
        nd = 2 if bidirectional else 1
        g = 4 * hidden_size
        wi, wh, bi, bh = [], [], [], []
        nan = float("nan")  # initial values are not in the notes: NaN until a checkpoint is loaded
        for k in range(num_layers):
            lin = input_size if k == 0 else hidden_size * nd
            for d in range(nd):
                sfx = "_l%d%s" % (k, "_reverse" if d else "")
                wi.append(new_parameter(torch.full((g, lin), nan, dtype=tdt), name="weight_ih" + sfx))
                wh.append(new_parameter(torch.full((g, hidden_size), nan, dtype=tdt), name="weight_hh" + sfx))
                if has_bias:
                    bi.append(new_parameter(torch.full((g,), nan, dtype=tdt), name="bias_ih" + sfx))
                    bh.append(new_parameter(torch.full((g,), nan, dtype=tdt), name="bias_hh" + sfx))
        self.w_ih_list = _ParameterTuple(wi)
        self.w_hh_list = _ParameterTuple(wh)
        if has_bias:
            self.b_ih_list = _ParameterTuple(bi)
            self.b_hh_list = _ParameterTuple(bh)

    def construct(self, x, hx=None, seq_length=None):
        api = "mindspore.nn.LSTM"
        t = T(api, x, "x")
        if seq_length is not None:
            raise not_in_facts(api, "seq_length")
        if t.dim() != 3:
            raise ValueError("%s: x must be 3-D" % api)
        if t.dtype not in (torch.float16, torch.float32):
            raise TypeError("%s: x must be float16 or float32" % api)
        _check_input_dtype(api, t, self.w_ih_list[0]._t)
        if self.training and self.dropout > 0 and self.num_layers > 1:
            raise not_in_facts(api, "training-mode dropout between layers")
        if self.batch_first:
            t = t.transpose(0, 1)
        seq, batch, _ = t.shape
        if t.shape[2] != self.input_size:
            raise ValueError("%s: x has %d features, input_size is %d" % (api, t.shape[2], self.input_size))
        nd = 2 if self.bidirectional else 1
        H = self.hidden_size
        if hx is None:
            h0 = torch.zeros(nd * self.num_layers, batch, H, dtype=t.dtype)
            c0 = torch.zeros_like(h0)
        else:
            if not isinstance(hx, tuple) or len(hx) != 2:
                raise TypeError("%s: hx must be a tuple (h0, c0)" % api)
            h0, c0 = T(api, hx[0], "h0"), T(api, hx[1], "c0")
            want = (nd * self.num_layers, batch, H)
            if tuple(h0.shape) != want or tuple(c0.shape) != want:
                raise ValueError("%s: h0/c0 must have shape %s" % (api, want))
        layer_in = t
        hn, cn = [], []
        for k in range(self.num_layers):
            outs = []
            for d in range(nd):
                i = k * nd + d
                w_ih, w_hh = self.w_ih_list[i]._t, self.w_hh_list[i]._t
                b = (self.b_ih_list[i]._t + self.b_hh_list[i]._t) if self.has_bias else None
                h, c = h0[i], c0[i]
                steps = range(seq - 1, -1, -1) if d else range(seq)
                ys = [None] * seq
                for s_ in steps:
                    gates = layer_in[s_] @ w_ih.t() + h @ w_hh.t()
                    if b is not None:
                        gates = gates + b
                    ig, fg, gg, og = gates.chunk(4, dim=1)  # (i, f, g, o)
                    c = torch.sigmoid(fg) * c + torch.sigmoid(ig) * torch.tanh(gg)
                    h = torch.sigmoid(og) * torch.tanh(c)
                    ys[s_] = h
                outs.append(torch.stack(ys, 0))
                hn.append(h)
                cn.append(c)
            layer_in = torch.cat(outs, dim=2) if nd == 2 else outs[0]
        out = layer_in.transpose(0, 1) if self.batch_first else layer_in
        return wrap(out), (wrap(torch.stack(hn, 0)), wrap(torch.stack(cn, 0)))


IMPLEMENTED = [Conv1d, Conv2d, Dense, Dropout, Flatten, GELU, HSigmoid, HSwish, Identity, LayerNorm,
               BatchNorm1d, BatchNorm2d, BatchNorm3d, MaxPool2d, AvgPool2d, LSTM]
