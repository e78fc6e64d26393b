"""mindspore.set_context, set_device, set_seed: recorded; only the CPU is real.

Every construct runs eagerly on torch's CPU whatever mode and device are recorded.
"""
import random

import numpy as np
import torch

from ._table import implements, not_in_facts

# set_context notes: 'mode=mindspore.GRAPH_MODE (0) or PYNATIVE_MODE (1); default PYNATIVE_MODE'
GRAPH_MODE = 0
PYNATIVE_MODE = 1
_DEVICES = ("CPU", "GPU", "Ascend")
# the keys the set_context notes name
_CONTEXT_KEYS = ("mode", "device_id", "device_target", "max_device_memory", "deterministic",
                 "save_graphs", "jit_config", "jit_syntax_level")

STATE = {"context": {"mode": PYNATIVE_MODE}, "device": None, "seed": None}


# mindspore.set_context (table entry): **kwargs; the notes name the keys above.
@implements("mindspore.set_context")
def set_context(**kwargs):
    api = "mindspore.set_context"
    for k, v in kwargs.items():
        if k not in _CONTEXT_KEYS:
            raise not_in_facts(api, "the key %r" % k)
        if k == "mode" and v not in (GRAPH_MODE, PYNATIVE_MODE):
            raise ValueError("%s: mode must be GRAPH_MODE (0) or PYNATIVE_MODE (1), got %r" % (api, v))
        if k == "device_target" and v not in _DEVICES:
            raise ValueError("%s: device_target must be one of %s" % (api, list(_DEVICES)))
    STATE["context"].update(kwargs)


# mindspore.set_device (table entry): 'device_target 'CPU' | 'GPU' | 'Ascend' (required, no
# default; ValueError otherwise). device_id None -> 0 for single card ... Raises RuntimeError
# if called again with different values'
@implements("mindspore.set_device")
def set_device(device_target, device_id):
    api = "mindspore.set_device"
    if device_target not in _DEVICES:
        raise ValueError("%s: device_target must be one of %s, got %r" % (api, list(_DEVICES), device_target))
    if device_id is None:
        device_id = 0
    if not isinstance(device_id, int) or device_id < 0:
        raise ValueError("%s: device_id must be a non-negative int" % api)
    if STATE["device"] is not None and STATE["device"] != (device_target, device_id):
        raise RuntimeError("%s: already set to %s, cannot change to %s"
                           % (api, STATE["device"], (device_target, device_id)))
    STATE["device"] = (device_target, device_id)


# mindspore.set_seed (table entry): 'seed int >= 0 (ValueError if negative, TypeError if not int)'
@implements("mindspore.set_seed")
def set_seed(seed):
    api = "mindspore.set_seed"
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError("%s: seed must be an int" % api)
    if seed < 0:
        raise ValueError("%s: seed must be >= 0" % api)
    STATE["seed"] = seed
    np.random.seed(seed)
    random.seed(seed)
    torch.manual_seed(seed)
