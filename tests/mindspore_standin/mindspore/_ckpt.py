""".ckpt reading and writing with an own protobuf wire decoder, and parameter loading.

Format (DESIGN.md "Facts worth having at hand"; facts.md section 4):
  Checkpoint  { repeated Value value = 1; }
  Value       { required string tag = 1; oneof value { TensorProto tensor = 2; MapTensorProto maptensor = 3; } }
  TensorProto { repeated int64 dims = 1; required string tensor_type = 2; required bytes tensor_content = 3; }
The file is a plain concatenation of serialised Checkpoint messages, no header;
tensor_content is raw little-endian C-order bytes; a scalar has dims=[]; a tensor over
512 MiB is consecutive Values with the same tag and the full dims (the loader joins
adjacent chunks); the optional CRC trailer is the 7 bytes b'crc_num' then the CRC32 of
the payload as 10 big-endian bytes. Old versions spell "Uint8"/"Uint16" (facts.md).
"""
import binascii
import collections
import os

import numpy as np
import torch

from . import _dtype
from ._cell import Cell
from ._table import implements, not_in_facts
from ._tensor import Parameter, Tensor, new_parameter

_OLD_SPELLINGS = {"Uint8": "UInt8", "Uint16": "UInt16", "Uint32": "UInt32", "Uint64": "UInt64"}
_CHUNK_LIMIT = 512 * 1024 * 1024
_CRC_MAGIC = b"crc_num"


class CheckpointError(ValueError):
    """A malformed .ckpt file."""


class _Reader:
    def __init__(self, buf, where):
        self.b, self.i, self.where = buf, 0, where

    def fail(self, msg):
        raise CheckpointError("%s: malformed checkpoint at byte %d: %s" % (self.where, self.i, msg))

    def varint(self):
        r = s = 0
        for n in range(10):
            if self.i >= len(self.b):
                self.fail("truncated varint")
            c = self.b[self.i]
            self.i += 1
            r |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                if r >= 1 << 64:
                    self.fail("varint over 64 bits")
                return r
        self.fail("varint longer than 10 bytes")

    def fields(self):
        """(field number, wire type, value) until the end; value is an int or a memoryview."""
        while self.i < len(self.b):
            key = self.varint()
            f, wt = key >> 3, key & 7
            if f == 0:
                self.fail("field number 0")
            if wt == 0:
                v = self.varint()
            elif wt == 2:
                n = self.varint()
                if self.i + n > len(self.b):
                    self.fail("length %d runs past the end" % n)
                v = self.b[self.i:self.i + n]
                self.i += n
            elif wt in (1, 5):
                n = 8 if wt == 1 else 4
                if self.i + n > len(self.b):
                    self.fail("truncated fixed-width field")
                v = self.b[self.i:self.i + n]
                self.i += n
            else:
                self.fail("unsupported wire type %d" % wt)
            yield f, wt, v


def _text(r, v, what):
    try:
        return bytes(v).decode("utf-8")
    except UnicodeDecodeError:
        r.fail("%s is not UTF-8" % what)


def _tensor_proto(buf, where, tag):
    r = _Reader(buf, "%s (tensor %r)" % (where, tag))
    dims, ttype, content = [], None, None
    for f, wt, v in r.fields():
        if f == 1:
            if wt == 0:
                dims.append(v)
            elif wt == 2:  # packed
                pr = _Reader(v, r.where)
                while pr.i < len(pr.b):
                    dims.append(pr.varint())
            else:
                r.fail("dims has wire type %d" % wt)
        elif f == 2 and wt == 2:
            if ttype is not None:
                r.fail("tensor_type given twice")
            ttype = _text(r, v, "tensor_type")
        elif f == 3 and wt == 2:
            if content is not None:
                r.fail("tensor_content given twice")
            content = bytes(v)
        else:
            r.fail("unexpected field %d (wire type %d) in TensorProto" % (f, wt))
    for d in dims:
        if d >= 1 << 63:
            r.fail("negative dimension")
    if ttype is None:
        r.fail("required tensor_type missing")
    if content is None:
        r.fail("required tensor_content missing")
    return dims, _OLD_SPELLINGS.get(ttype, ttype), content


def decode(data, where="<bytes>"):
    """bytes of a .ckpt -> OrderedDict tag -> (dims, tensor_type, content)."""
    data = bytes(data)
    if len(data) >= 17 and data[-17:-10] == _CRC_MAGIC:
        want = int.from_bytes(data[-10:], "big")
        data = data[:-17]
        got = binascii.crc32(data) & 0xFFFFFFFF
        if got != want:
            raise CheckpointError("%s: CRC mismatch (trailer says %d, payload has %d)" % (where, want, got))
        has_crc = True
    else:
        has_crc = False
    out = collections.OrderedDict()
    last = None
    r = _Reader(memoryview(data), where)
    for f, wt, v in r.fields():
        if f != 1 or wt != 2:
            r.fail("unexpected field %d (wire type %d) in Checkpoint" % (f, wt))
        vr = _Reader(v, where)
        tag = tensor = None
        for f2, wt2, v2 in vr.fields():
            if f2 == 1 and wt2 == 2:
                if tag is not None:
                    vr.fail("tag given twice")
                tag = _text(vr, v2, "tag")
            elif f2 == 2 and wt2 == 2:
                if tensor is not None:
                    vr.fail("tensor given twice")
                tensor = v2
            elif f2 == 3 and wt2 == 2:
                raise not_in_facts("mindspore.load_checkpoint", "MapTensorProto values (maptensor)")
            else:
                vr.fail("unexpected field %d (wire type %d) in Value" % (f2, wt2))
        if tag is None:
            vr.fail("required tag missing")
        if tensor is None:
            vr.fail("Value %r has no tensor" % tag)
        dims, ttype, content = _tensor_proto(tensor, where, tag)
        if tag == last:  # a consecutive chunk of one tensor
            pd, pt, pc = out[tag]
            if pd != dims or pt != ttype:
                raise CheckpointError("%s: chunks of %r disagree on dims or type" % (where, tag))
            out[tag] = (pd, pt, pc + content)
        else:
            if tag in out:
                raise CheckpointError("%s: tag %r appears twice, not adjacent" % (where, tag))
            out[tag] = (dims, ttype, content)
        last = tag
    return out, has_crc


def to_torch(tag, dims, ttype, content, where):
    d = _dtype.from_ckpt_type(ttype)
    if d is None:
        raise CheckpointError("%s: tensor %r has unknown tensor_type %r" % (where, tag, ttype))
    n = 1
    for v in dims:
        n *= v
    item = 2 if d.name == "bfloat16" else np.dtype(d.numpy).itemsize
    if len(content) != n * item:
        raise CheckpointError("%s: tensor %r: %d content bytes for dims %s of %s (want %d)"
                              % (where, tag, len(content), dims, ttype, n * item))
    if d.torch is None:
        raise not_in_facts("mindspore.load_checkpoint", "tensor %r of type %s (torch has no such dtype)" % (tag, ttype))
    if d.name == "bfloat16":
        arr = np.frombuffer(content, dtype="<i2").reshape(dims)
        return torch.from_numpy(arr.copy()).view(torch.bfloat16)
    arr = np.frombuffer(content, dtype=np.dtype(d.numpy).newbyteorder("<")).reshape(dims)
    return torch.from_numpy(arr.astype(np.dtype(d.numpy), copy=True))


# mindspore.load_checkpoint: 'Returns dict {param_name: Parameter}; if net is given params are
# also loaded into it. format 'ckpt' | 'safetensors'. filter_prefix/specify_prefix deprecated
# in favour of choice_func(name)->bool. ValueError if nothing loaded.'
@implements("mindspore.load_checkpoint")
def load_checkpoint(ckpt_file_name, net, strict_load, filter_prefix, dec_key, dec_mode, specify_prefix,
                    choice_func, crc_check, remove_redundancy, format):
    api = "mindspore.load_checkpoint"
    if format == "safetensors":
        raise not_in_facts(api, "format='safetensors'")
    if format != "ckpt":
        raise ValueError("%s: format must be 'ckpt' or 'safetensors', got %r" % (api, format))
    if dec_key is not None:
        raise not_in_facts(api, "dec_key (encrypted checkpoints)")
    if filter_prefix is not None or specify_prefix is not None:
        raise not_in_facts(api, "filter_prefix/specify_prefix (deprecated; use choice_func)")
    if remove_redundancy:
        raise not_in_facts(api, "remove_redundancy=True")
    if choice_func is not None and not callable(choice_func):
        raise TypeError("%s: choice_func must be callable" % api)
    if net is not None and not isinstance(net, Cell):
        raise TypeError("%s: net must be a Cell" % api)
    if not isinstance(ckpt_file_name, str):
        raise TypeError("%s: ckpt_file_name must be a str" % api)
    if not os.path.isfile(ckpt_file_name):
        raise ValueError("%s: %s does not exist" % (api, ckpt_file_name))
    with open(ckpt_file_name, "rb") as f:
        data = f.read()
    raw, has_crc = decode(data, ckpt_file_name)
    if crc_check and not has_crc:
        raise CheckpointError("%s: crc_check=True but %s has no CRC trailer" % (api, ckpt_file_name))
    out = collections.OrderedDict()
    for tag, (dims, ttype, content) in raw.items():
        if choice_func is not None and not choice_func(tag):
            continue
        out[tag] = new_parameter(to_torch(tag, dims, ttype, content, ckpt_file_name), name=tag)
    if not out:
        raise ValueError("%s: nothing was loaded from %s" % (api, ckpt_file_name))
    if net is not None:
        load_param_into_net(net, out, strict_load=strict_load)
    return out


def _convertible(a, b):
    fa, fb = a.is_floating_point, b.is_floating_point
    ia = not fa and a is not torch.bool
    ib = not fb and b is not torch.bool
    return (fa and fb) or (ia and ib)


def _update(api, param, new, strict_load):
    if not isinstance(new, Parameter):
        raise TypeError("%s: parameter_dict[%r] must be a Parameter, got %s" % (api, param.name, type(new).__name__))
    src = new._t
    if tuple(src.shape) != tuple(param._t.shape):
        raise RuntimeError("%s: shape of %r in the checkpoint is %s, the net's parameter has %s"
                           % (api, param.name, tuple(src.shape), tuple(param._t.shape)))
    if src.dtype != param._t.dtype:
        # 'strict_load=False ... casts precision (e.g. float32->float16)'
        if strict_load or not _convertible(src.dtype, param._t.dtype):
            raise RuntimeError("%s: dtype of %r in the checkpoint is %s, the net's parameter has %s"
                               % (api, param.name, _dtype.from_torch(src.dtype), param.dtype))
        src = src.to(param._t.dtype)
    param._t = src.detach().clone()


# mindspore.load_param_into_net: 'Returns (param_not_load, ckpt_not_load) lists - check both
# are empty after conversion. strict_load=False matches by identical name SUFFIX and casts
# precision (e.g. float32->float16).' Names are matched as MindSpore does, by parameter
# name (the attribute path, DESIGN.md); a shape mismatch is an error (DESIGN.md).
@implements("mindspore.load_param_into_net")
def load_param_into_net(net, parameter_dict, strict_load, remove_redundancy):
    api = "mindspore.load_param_into_net"
    if not isinstance(net, Cell):
        raise TypeError("%s: net must be a Cell, got %s" % (api, type(net).__name__))
    if not isinstance(parameter_dict, dict):
        raise TypeError("%s: parameter_dict must be a dict, got %s" % (api, type(parameter_dict).__name__))
    if not isinstance(strict_load, bool):
        raise TypeError("%s: strict_load must be a bool" % api)
    if remove_redundancy:
        raise not_in_facts(api, "remove_redundancy=True")
    used = set()
    param_not_load = []
    params = [p for _, p in net.parameters_and_names()]
    for p in params:
        if p.name in parameter_dict:
            _update(api, p, parameter_dict[p.name], strict_load)
            used.add(p.name)
        else:
            param_not_load.append(p.name)
    if param_not_load and not strict_load:
        # Suffix matching: the checkpoint's names may carry one extra prefix. The prefix is
        # taken from the first unloaded parameter whose name ends a checkpoint key, and
        # applied to every unloaded parameter.
        prefix = None
        for name in param_not_load:
            for key in parameter_dict:
                if key not in used and key.endswith(name) and len(key) > len(name):
                    prefix = key[:-len(name)]
                    break
            if prefix is not None:
                break
        if prefix is not None:
            for p in params:
                if p.name in param_not_load and prefix + p.name in parameter_dict \
                        and prefix + p.name not in used:
                    _update(api, p, parameter_dict[prefix + p.name], strict_load)
                    used.add(prefix + p.name)
                    param_not_load.remove(p.name)
    ckpt_not_load = [k for k in parameter_dict if k not in used]
    return param_not_load, ckpt_not_load


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num, payload):
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def encode_value(tag, t):
    d = _dtype.from_torch(t.dtype)
    t = t.detach().contiguous()
    if d.name == "bfloat16":
        content = t.view(torch.int16).numpy().astype("<i2").tobytes()
    else:
        content = t.numpy().astype(np.dtype(d.numpy).newbyteorder("<")).tobytes()
    if len(content) > _CHUNK_LIMIT:
        raise not_in_facts("mindspore.save_checkpoint", "a tensor over 512 MiB (the chunk size)")
    tp = b"".join(_varint(1 << 3 | 0) + _varint(int(s)) for s in t.shape)
    tp += _field(2, d.ckpt.encode()) + _field(3, content)
    return _field(1, _field(1, tag.encode("utf-8")) + _field(2, tp))


def _items(api, save_obj):
    if isinstance(save_obj, Cell):
        return [(p.name, p) for p in save_obj.get_parameters()]
    if isinstance(save_obj, dict):
        return list(save_obj.items())
    if isinstance(save_obj, list):
        out = []
        for e in save_obj:
            if isinstance(e, Parameter):
                out.append((e.name, e))
            elif isinstance(e, dict) and set(e) == {"name", "data"}:
                out.append((e["name"], e["data"]))
            else:
                raise TypeError("%s: list items must be Parameters or {'name', 'data'} dicts" % api)
        return out
    raise TypeError("%s: save_obj must be a Cell, list or dict, got %s" % (api, type(save_obj).__name__))


# mindspore.save_checkpoint: 'save_obj: Cell, list (Cell.trainable_params() or [{'name': str,
# 'data': Parameter|Tensor}, ...]) or dict. Overwrites an existing file. format 'ckpt' |
# 'safetensors'. ... append_dict values int/float/bool/str/Parameter/Tensor. enc_mode only used
# with enc_key ... choice_func(name)->bool filters saved params.'
@implements("mindspore.save_checkpoint")
def save_checkpoint(save_obj, ckpt_file_name, integrated_save, async_save, append_dict, enc_key,
                    enc_mode, choice_func, crc_check, format, **kwargs):
    api = "mindspore.save_checkpoint"
    if kwargs:
        raise not_in_facts(api, "keyword(s) %s" % sorted(kwargs))
    if format == "safetensors":
        raise not_in_facts(api, "format='safetensors'")
    if format != "ckpt":
        raise ValueError("%s: format must be 'ckpt' or 'safetensors'" % api)
    if enc_key is not None:
        raise not_in_facts(api, "enc_key (encryption)")
    if async_save:
        raise not_in_facts(api, "async_save")
    if not isinstance(ckpt_file_name, str) or not ckpt_file_name.endswith(".ckpt"):
        raise not_in_facts(api, "a file name not ending in .ckpt (whether the suffix is appended)")
    items = _items(api, save_obj)
    if append_dict is not None:
        if not isinstance(append_dict, dict):
            raise TypeError("%s: append_dict must be a dict" % api)
        for k, v in append_dict.items():
            if not isinstance(v, Tensor):
                raise not_in_facts(api, "append_dict value of type %s (its encoding)" % type(v).__name__)
            items.append((k, v))
    blob = bytearray()
    seen = set()
    for name, v in items:
        if not isinstance(name, str):
            raise TypeError("%s: names must be str" % api)
        if not isinstance(v, Tensor):
            raise TypeError("%s: %r is not a Parameter or Tensor" % (api, name))
        if choice_func is not None and not choice_func(name):
            continue
        if name in seen:
            raise ValueError("%s: name %r appears twice" % (api, name))
        seen.add(name)
        blob += encode_value(name, v._t)
    if crc_check:
        blob += _CRC_MAGIC + (binascii.crc32(bytes(blob)) & 0xFFFFFFFF).to_bytes(10, "big")
    with open(ckpt_file_name, "wb") as f:  # 'Overwrites an existing file.'
        f.write(bytes(blob))
