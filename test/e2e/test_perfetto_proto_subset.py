"""The vendored subset of Perfetto's trace format (proto/perfetto/) against
upstream's: every message, field and enum value gpuctl declares must exist in
the descriptor the `perfetto` Python package ships (perfetto_trace_pb2), with
the same number, type, cardinality and message or enum type, so that the
protobuf `gpuctl analyze --merge` writes is what Perfetto reads."""

import shutil
import subprocess
from pathlib import Path

from google.protobuf import descriptor_pb2
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as upstream_pb2

REPO = Path(__file__).resolve().parents[2]
SUBSET = Path("protos/perfetto/trace/perfetto_trace.proto")
PROTO_ROOT = REPO / "proto" / "perfetto"


def vendored_file(tmp_path):
    protoc = shutil.which("protoc")
    assert protoc, "protoc (protobuf-compiler) builds gpuctl; it must be on PATH"
    out = tmp_path / "subset.pb"
    subprocess.run([protoc, f"-I{PROTO_ROOT}", f"--descriptor_set_out={out}", str(SUBSET)],
                   check=True, cwd=PROTO_ROOT)
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    assert len(files.file) == 1
    return files.file[0]


def walk(messages, prefix):
    for m in messages:
        name = f"{prefix}.{m.name}"
        yield name, m
        yield from walk(m.nested_type, name)


def upstream_message(full_name):
    return upstream_pb2.DESCRIPTOR.pool.FindMessageTypeByName(full_name)


def test_every_vendored_field_matches_upstream(tmp_path):
    vendored = vendored_file(tmp_path)
    assert vendored.package == "perfetto.protos"
    checked = 0
    for name, message in walk(vendored.message_type, vendored.package):
        theirs = upstream_message(name)
        for field in message.field:
            up = theirs.fields_by_name.get(field.name)
            assert up is not None, f"{name}.{field.name} is not upstream"
            assert up.number == field.number, f"{name}.{field.name}"
            assert up.type == field.type, f"{name}.{field.name}: type {field.type} vs {up.type}"
            repeated = field.label == descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
            assert up.is_repeated == repeated, f"{name}.{field.name}"
            if field.type_name:
                target = (up.message_type or up.enum_type).full_name
                assert field.type_name.lstrip(".") == target, f"{name}.{field.name}"
            if field.HasField("oneof_index"):
                oneof = message.oneof_decl[field.oneof_index].name
                assert up.containing_oneof is not None, f"{name}.{field.name}"
                assert up.containing_oneof.name == oneof, f"{name}.{field.name}"
            checked += 1
        for enum in message.enum_type:
            values = {v.name: v.number for v in theirs.enum_types_by_name[enum.name].values}
            for value in enum.value:
                assert values.get(value.name) == value.number, f"{name}.{enum.name}.{value.name}"
    # The messages the merge writes are all there (a subset that lost one
    # would check nothing for it).
    names = {name for name, _ in walk(vendored.message_type, vendored.package)}
    assert {"perfetto.protos.TracePacket", "perfetto.protos.TrackEvent",
            "perfetto.protos.TrackDescriptor", "perfetto.protos.DebugAnnotation",
            "perfetto.protos.InternedData"} <= names
    assert checked >= 40, checked
