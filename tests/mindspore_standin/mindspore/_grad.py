"""mindspore.grad and mindspore.value_and_grad over torch autograd.

Table entries 'mindspore.grad' / 'mindspore.value_and_grad': three modes: grad_position set
& weights None -> input grads; grad_position None & weights set -> parameter grads; both
set -> (input_grads, weight_grads); ValueError if both are None; default grad_position=0
differentiates ONLY the first input; has_aux=True: fn must return >1 outputs, only the
first is differentiated; value_and_grad's function gives (outputs, gradient); grad with
has_aux gives (gradient, aux_outputs).
"""
import torch

from ._table import implements, not_in_facts
from ._tensor import Parameter, Tensor, wrap


def _positions(api, grad_position):
    if grad_position is None:
        return None, None
    if isinstance(grad_position, int) and not isinstance(grad_position, bool):
        return (grad_position,), True
    if isinstance(grad_position, tuple) and grad_position and \
            all(isinstance(v, int) and not isinstance(v, bool) for v in grad_position):
        return grad_position, False
    raise TypeError("%s: grad_position must be an int, a non-empty tuple of ints or None" % api)


def _weights(api, weights):
    if weights is None:
        return None, None
    if isinstance(weights, Parameter):
        return [weights], True
    if isinstance(weights, (list, tuple)) and all(isinstance(w, Parameter) for w in weights):
        return list(weights), False
    raise TypeError("%s: weights must be a Parameter or a list/tuple of Parameters" % api)


def _detach(v):
    if isinstance(v, Tensor):
        return wrap(v._t.detach())
    if isinstance(v, tuple):
        return tuple(_detach(x) for x in v)
    if isinstance(v, list):
        return [_detach(x) for x in v]
    return v


def _make(api, fn, grad_position, weights, has_aux, return_ids, with_value):
    if not callable(fn):
        raise TypeError("%s: fn must be callable" % api)
    pos, pos_single = _positions(api, grad_position)
    ws, w_single = _weights(api, weights)
    if pos is None and ws is None:
        raise ValueError("%s: grad_position and weights cannot both be None" % api)
    if return_ids:
        raise not_in_facts(api, "return_ids=True (the id of each gradient)")
    if not isinstance(has_aux, bool):
        raise TypeError("%s: has_aux must be a bool" % api)

    def run(*args, **kwargs):
        args = list(args)
        leaves = []
        for p in pos or ():
            if not -len(args) <= p < len(args):
                raise IndexError("%s: grad_position %d but only %d inputs" % (api, p, len(args)))
            a = args[p]
            if not isinstance(a, Tensor) or not a._t.dtype.is_floating_point:
                raise TypeError("%s: input %d to differentiate must be a float Tensor" % (api, p))
            leaf = a._t.detach().clone().requires_grad_(True)
            args[p] = wrap(leaf)
            leaves.append(leaf)
        wl = []
        try:
            for w in ws or ():
                w._t = w._t.detach().requires_grad_(True)
                wl.append(w._t)
            with torch.enable_grad():
                out = fn(*args, **kwargs)
                if has_aux:
                    if not isinstance(out, tuple) or len(out) < 2:
                        raise TypeError("%s: has_aux=True needs fn to return more than one output" % api)
                    target = out[0]
                elif isinstance(out, tuple):
                    raise not_in_facts(api, "several outputs without has_aux (the sens of each)")
                else:
                    target = out
                if not isinstance(target, Tensor):
                    raise TypeError("%s: the output to differentiate must be a Tensor" % api)
                if target._t.numel() != 1:
                    raise not_in_facts(api, "the gradient of a non-scalar output (the sens)")
                if not target._t.requires_grad:
                    raise not_in_facts(api, "an output that depends on none of the differentiated values")
                grads = torch.autograd.grad(target._t, leaves + wl, allow_unused=True)
        finally:
            for w in ws or ():
                w._t = w._t.detach()
        if any(g is None for g in grads):
            raise not_in_facts(api, "the gradient of a value the output does not depend on")
        gi = [wrap(g) for g in grads[:len(leaves)]]
        gw = [wrap(g) for g in grads[len(leaves):]]
        res_i = None if pos is None else (gi[0] if pos_single else tuple(gi))
        res_w = None if ws is None else (gw[0] if w_single else tuple(gw))
        if res_i is not None and res_w is not None:
            g = (res_i, res_w)
        else:
            g = res_i if res_i is not None else res_w
        if with_value:
            return _detach(out), g
        if has_aux:
            return g, _detach(tuple(out[1:]))
        return g
    return run


# mindspore.grad (table entry)
@implements("mindspore.grad")
def grad(fn, grad_position, weights, has_aux, return_ids):
    return _make("mindspore.grad", fn, grad_position, weights, has_aux, return_ids, False)


# mindspore.value_and_grad (table entry): 'Returned function gives ((out1, out2, ...), gradient)'
@implements("mindspore.value_and_grad")
def value_and_grad(fn, grad_position, weights, has_aux, return_ids):
    return _make("mindspore.value_and_grad", fn, grad_position, weights, has_aux, return_ids, True)
