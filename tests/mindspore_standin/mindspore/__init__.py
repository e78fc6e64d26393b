"""A strict MindSpore stand-in for migc's tests (issue 12 item 5; docs/mindspore-standin.md).

It implements the APIs of ../shared/mindspore-api.json that migc's rules use, with
MindSpore's semantics as the table's notes and ../shared/targets/facts.md give them, on
Debian's torch. Every other API of the table exists and raises NotImplementedError;
a name the table does not list is an AttributeError.
"""
import sys as _sys

from . import _dtype, _tensor, _cell, _ops, _ops_more, _nn, _custom, _ckpt, _grad, _context, _amp
from . import _namespace

_IMPLEMENTED = (
    [_tensor.Tensor, _tensor.Parameter, _cell.Cell, _cell.SequentialCell, _cell.CellList,
     _custom.Custom, _ckpt.load_checkpoint, _ckpt.load_param_into_net, _ckpt.save_checkpoint,
     _grad.grad, _grad.value_and_grad, _context.set_context, _context.set_device,
     _context.set_seed]
    + _amp.IMPLEMENTED + _ops.IMPLEMENTED + _ops_more.IMPLEMENTED + _nn.IMPLEMENTED)

# Names the generated scripts need that are not table entries; each with its source.
_FRAMEWORK = {
    "mindspore.GRAPH_MODE": (_context.GRAPH_MODE, "mindspore.set_context notes"),
    "mindspore.PYNATIVE_MODE": (_context.PYNATIVE_MODE, "mindspore.set_context notes"),
}
for _n, _d in _dtype.DTYPES.items():
    # DESIGN.md .ckpt tensor_type list; 'mstype.float32' defaults; ops.cast notes 'ms.float32 etc.'
    _FRAMEWORK["mindspore." + _n] = (_d, "DESIGN.md .ckpt tensor_type list")

_namespace.build(_sys.modules[__name__], _IMPLEMENTED, _FRAMEWORK)
_sys.modules[__name__].__class__ = _namespace.StrictModule

# Leave only the public names (and dunders) in the package's namespace.
for _k in [k for k in list(globals()) if k.startswith("_") and not (k.startswith("__") and k.endswith("__"))]:
    del globals()[_k]
del _k
