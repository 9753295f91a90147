"""The Caffe2 messages aiot writes (``NetDef``, ``OperatorDef``, ``Argument``), built at run time.

Caffe2 is gone from PyTorch and no ``caffe2_pb2`` module can be installed, so the messages are
declared here from the field numbers of the public ``caffe2.proto`` schema (proto2, package
``caffe2``) and turned into classes with protobuf's descriptor API: no protoc, no generated
file. Only the fields aiot uses are declared; a parser that meets others (``device_option``,
``TensorProto`` arguments) keeps them as unknown fields, so files from real Caffe2 still load.

Repeated scalars are declared unpacked, as proto2 does by default, so the bytes are those
Caffe2's own C++ serializer produced.
"""

from __future__ import annotations

import functools

PACKAGE = "caffe2"

# (field name, number, label, type, message type name or None), per message.
_OPTIONAL, _REPEATED = "LABEL_OPTIONAL", "LABEL_REPEATED"
_SCHEMA = {
    "Argument": [
        ("name", 1, _OPTIONAL, "TYPE_STRING", None),
        ("f", 2, _OPTIONAL, "TYPE_FLOAT", None),
        ("i", 3, _OPTIONAL, "TYPE_INT64", None),
        ("s", 4, _OPTIONAL, "TYPE_BYTES", None),
        ("floats", 5, _REPEATED, "TYPE_FLOAT", None),
        ("ints", 6, _REPEATED, "TYPE_INT64", None),
        ("strings", 7, _REPEATED, "TYPE_BYTES", None),
    ],
    "OperatorDef": [
        ("input", 1, _REPEATED, "TYPE_STRING", None),
        ("output", 2, _REPEATED, "TYPE_STRING", None),
        ("name", 3, _OPTIONAL, "TYPE_STRING", None),
        ("type", 4, _OPTIONAL, "TYPE_STRING", None),
        ("arg", 5, _REPEATED, "TYPE_MESSAGE", "Argument"),
        ("engine", 7, _OPTIONAL, "TYPE_STRING", None),
    ],
    "NetDef": [
        ("name", 1, _OPTIONAL, "TYPE_STRING", None),
        ("op", 2, _REPEATED, "TYPE_MESSAGE", "OperatorDef"),
        ("type", 3, _OPTIONAL, "TYPE_STRING", None),
        ("arg", 6, _REPEATED, "TYPE_MESSAGE", "Argument"),
        ("external_input", 7, _REPEATED, "TYPE_STRING", None),
        ("external_output", 8, _REPEATED, "TYPE_STRING", None),
    ],
}


def _file_descriptor():
    """The schema above as a ``FileDescriptorProto`` (what protoc would have produced)."""
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="aiot/caffe2_subset.proto", package=PACKAGE,
                                               syntax="proto2")
    for message_name, fields in _SCHEMA.items():
        message = proto.message_type.add(name=message_name)
        for name, number, label, kind, type_name in fields:
            field = message.field.add(name=name, number=number,
                                       label=getattr(descriptor_pb2.FieldDescriptorProto, label),
                                       type=getattr(descriptor_pb2.FieldDescriptorProto, kind))
            if type_name:
                field.type_name = f".{PACKAGE}.{type_name}"
    return proto


@functools.cache
def messages() -> dict[str, type]:
    """``{"NetDef": cls, "OperatorDef": cls, "Argument": cls}``, built once per process.

    A private descriptor pool keeps these names out of protobuf's default pool, where another
    package declaring ``caffe2.NetDef`` would clash with them.
    """
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file_descriptor())
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PACKAGE}.{name}"))
            for name in _SCHEMA}


def net_def():
    """A new, empty ``caffe2.NetDef``."""
    return messages()["NetDef"]()


def parse_net(data: bytes):
    """``data`` parsed as a ``caffe2.NetDef``.

    Raises:
        google.protobuf.message.DecodeError: the bytes are not a valid message.
    """
    net = net_def()
    net.ParseFromString(data)
    return net
