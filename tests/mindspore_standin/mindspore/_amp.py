"""mindspore.amp.auto_mixed_precision and Cell.to_float, as the table entry
'mindspore.amp.auto_mixed_precision' (notes) and ../shared/targets/facts.md section 6
describe them:

  O0  the network unchanged.
  O1  only WHITE-list cells run in low precision: their inputs and parameters are cast
      down, their outputs cast back to float32 (MindSpore inserts the cast pairs by graph
      rewrite). White-list cells this stand-in has: nn.Conv1d, nn.Conv2d, nn.Dense. The
      list's P.* entries (P.ReLU, P.MatMul, ...) are Primitive instances, which migc's
      nets never hold (they call functional mindspore.ops), so they are not cast here.
  O2  network.to_float(dtype), except BLACK-list cells (nn.BatchNorm1d/2d/3d,
      nn.LayerNorm) kept float32 with their outputs cast back to dtype; the network's
      output cast to float32.
  O3  network.to_float(dtype) for every cell, BatchNorm and LayerNorm included; the
      output cast to float32.
  'auto' is not emulated (NotImplementedError).

What a cell that runs in dtype does (to_float): its floating inputs are cast to dtype,
and every floating operand its operations read (its parameters, Tensors and the results
of earlier operations) is in dtype; the Parameters themselves keep their dtype (what
loads from and saves to a checkpoint does not change). Children without a setting of
their own inherit the parent's.

How low-precision compute is modelled: torch 1.13 on CPU has no float16 kernel for
conv, matmul, relu, batch_norm, layer_norm, softmax, ... So inside a low-precision cell
every floating operand is rounded to dtype at its cast point and handed to the float32
kernel, and every floating result is rounded back to dtype (and held as a torch float16
/ bfloat16 tensor, so Tensor.dtype says Float16). That is exactly the value a kernel
whose inputs and output are float16 produces when it accumulates in float32 (as Ascend's
cube unit and GPU tensor cores do); what it does not model is a kernel that keeps float16
intermediates inside one operation (e.g. a float16 variance overflowing inside
LayerNorm). Values beyond the dtype's range become inf at the cast point, as in MindSpore.
"""
import torch

from . import _dtype
from ._table import implements

# The compute dtype (a torch dtype) of the innermost running cell that has an AMP
# setting; empty outside any.
_STACK = []

# amp.py AMP_WHITE_LIST cells the stand-in implements, and AMP_BLACK_LIST (table notes).
WHITE_CELLS = ("mindspore.nn.Conv1d", "mindspore.nn.Conv2d", "mindspore.nn.Conv3d",
               "mindspore.nn.Conv1dTranspose", "mindspore.nn.Conv2dTranspose",
               "mindspore.nn.Conv3dTranspose", "mindspore.nn.Dense", "mindspore.nn.LSTMCell",
               "mindspore.nn.RNNCell", "mindspore.nn.GRUCell")
BLACK_CELLS = ("mindspore.nn.BatchNorm1d", "mindspore.nn.BatchNorm2d", "mindspore.nn.BatchNorm3d",
               "mindspore.nn.LayerNorm")

_LOW = (torch.float16, torch.bfloat16)


def operand(t):
    """A floating torch tensor as the current cell's operations read it: rounded to its
    low-precision dtype and held in float32 for the CPU kernel, or float32 in a cell
    kept float32; anything else as it is."""
    if not _STACK or not t.is_floating_point():
        return t
    dt = _STACK[-1]
    return t.to(dt).to(torch.float32) if dt in _LOW else t.to(dt)


def result(t):
    """A floating result of an operation in the current cell: rounded to its dtype."""
    if not _STACK or not t.is_floating_point():
        return t
    return t.to(_STACK[-1])


def _cast_tree(x, tdt, wrap):
    from ._tensor import Tensor
    if isinstance(x, Tensor) and x._t.is_floating_point():
        return wrap(x._t.to(tdt))
    if isinstance(x, tuple):
        return tuple(_cast_tree(y, tdt, wrap) for y in x)
    if isinstance(x, list):
        return [_cast_tree(y, tdt, wrap) for y in x]
    return x


def call(cell, args, kwargs):
    """Cell.__call__ for a cell with an AMP setting (compute dtype, output dtype or None)."""
    from ._tensor import Tensor
    dt, out = cell.__dict__["_amp"]

    def raw(t):
        return Tensor._wrap(t)
    args = _cast_tree(tuple(args), dt, raw)
    kwargs = {k: _cast_tree(v, dt, raw) for k, v in kwargs.items()}
    # the cell's own parameters, as its operations read them (they are read as ._t)
    swapped = []
    for p in cell._params.values():
        if p is not None and p._t.is_floating_point():
            _STACK.append(dt)
            try:
                cast = operand(p._t)
            finally:
                _STACK.pop()
            swapped.append((p, p._t, cast))
            p._t = cast
    _STACK.append(dt)
    try:
        y = cell.construct(*args, **kwargs)
    finally:
        _STACK.pop()
        for p, orig, cast in swapped:
            if p._t is cast:
                p._t = orig
            else:  # the construct assigned new data (BatchNorm's moving statistics in training)
                p._t = p._t.to(orig.dtype)
    return _cast_tree(y, out, raw) if out is not None else y


def _set(cell, setting, recurse):
    for _, c in (cell.cells_and_names() if recurse else [("", cell)]):
        c.__dict__["_amp"] = setting


def to_float(cell, dst_type):
    """Cell.to_float(dst_type): the cell and every cell under it run in dst_type
    (the mechanism the auto_mixed_precision notes name for O2 and O3)."""
    if dst_type not in (_dtype.DTYPES["float16"], _dtype.DTYPES["float32"], _dtype.DTYPES["bfloat16"]):
        raise ValueError("mindspore.nn.Cell.to_float: dst_type must be mindspore.float16, bfloat16 or "
                         "float32, got %r" % (dst_type,))
    _set(cell, (dst_type.torch, None), True)
    return cell


class _OutputTo32:
    """Built lazily as a Cell subclass (avoids the import cycle with _cell)."""


def _output_to_32(network):
    from ._cell import Cell

    class OutputTo32(Cell):
        # 'O2/O3 wrap the net so the output is cast to fp32' (facts.md section 6);
        # auto_prefix=False: the wrapped net's parameter names do not change.
        def __init__(self, backbone):
            Cell.__init__(self, auto_prefix=False, flags=None)
            self._backbone = backbone

        def construct(self, *inputs):
            from ._tensor import Tensor
            return _cast_tree(self._backbone(*inputs), torch.float32, Tensor._wrap)
    return OutputTo32(network)


# mindspore.amp.auto_mixed_precision (table entry; facts.md section 6)
@implements("mindspore.amp.auto_mixed_precision")
def auto_mixed_precision(network, amp_level, dtype):
    api = "mindspore.amp.auto_mixed_precision"
    from ._cell import Cell
    if not isinstance(network, Cell):
        raise TypeError("%s: network must be a Cell, got %s" % (api, type(network).__name__))
    # 'dtype float16 or bfloat16 (ValueError otherwise)'
    if dtype not in (_dtype.DTYPES["float16"], _dtype.DTYPES["bfloat16"]):
        raise ValueError("%s: dtype must be mindspore.float16 or mindspore.bfloat16, got %r" % (api, dtype))
    low = dtype.torch
    if amp_level == "O0":
        return network
    if amp_level == "O1":
        for _, c in network.cells_and_names():
            if getattr(type(c), "_ms_api", None) in WHITE_CELLS:
                c.__dict__["_amp"] = (low, torch.float32)  # outputs cast back to float32
        return network
    if amp_level in ("O2", "O3"):
        to_float(network, dtype)
        if amp_level == "O2":
            for _, c in network.cells_and_names():
                if getattr(type(c), "_ms_api", None) in BLACK_CELLS:
                    c.__dict__["_amp"] = (torch.float32, low)  # kept float32, output cast back
        return _output_to_32(network)
    if amp_level == "auto":
        raise NotImplementedError("%s: amp_level 'auto' (experimental, per-primitive lists) is not "
                                  "emulated by the MindSpore stand-in" % api)
    raise ValueError("%s: amp_level must be 'O0', 'O1', 'O2', 'O3' or 'auto', got %r" % (api, amp_level))


IMPLEMENTED = [auto_mixed_precision]
