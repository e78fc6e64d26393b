#!/usr/bin/python3
"""Peer for bench/weights_speed.sh: the Python path a user would otherwise take —
torch.load, then MindSpore's checkpoint.proto serialised with Debian's
python3-protobuf (the schema is built at run time; no MindSpore needed).

usage: /usr/bin/python3 bench/py_ckpt.py STATE.pth OUT.ckpt
"""
import sys

import torch
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

TYPES = {torch.float32: "Float32", torch.float16: "Float16", torch.bfloat16: "BFloat16",
         torch.float64: "Float64", torch.int64: "Int64", torch.int32: "Int32", torch.int8: "Int8",
         torch.uint8: "UInt8", torch.bool: "Bool", torch.int16: "Int16"}


def checkpoint_class():
    f = descriptor_pb2.FileDescriptorProto(name="checkpoint.proto", syntax="proto2")
    t = f.message_type.add(name="TensorProto")
    t.field.add(name="dims", number=1, type=3, label=3)
    t.field.add(name="tensor_type", number=2, type=9, label=2)
    t.field.add(name="tensor_content", number=3, type=12, label=2)
    v = f.message_type.add(name="Value")
    v.field.add(name="tag", number=1, type=9, label=2)
    v.field.add(name="tensor", number=2, type=11, label=1, type_name=".TensorProto")
    c = f.message_type.add(name="Checkpoint")
    c.field.add(name="value", number=1, type=11, label=3, type_name=".Value")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(pool.FindMessageTypeByName("Checkpoint"))


def main():
    sd = torch.load(sys.argv[1], map_location="cpu")
    ckpt = checkpoint_class()()
    for name, t in sd.items():
        v = ckpt.value.add(tag=name)
        v.tensor.dims.extend(t.shape)
        v.tensor.tensor_type = TYPES[t.dtype]
        t = t.contiguous()
        v.tensor.tensor_content = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
    with open(sys.argv[2], "wb") as f:
        f.write(ckpt.SerializeToString())


if __name__ == "__main__":
    main()
