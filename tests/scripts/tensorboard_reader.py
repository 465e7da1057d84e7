#!/usr/bin/python3
"""An independent reader of TensorBoard event files (Debian's python3-protobuf).

Usage: tensorboard_reader.py EVENTS_FILE METRICS_JSONL

Reads the TFRecord framing (checking both masked CRC32Cs of every record,
with a CRC32C written here from its definition), decodes each record as a
tensorflow.Event built from its field numbers with protobuf's descriptor
API (no TensorFlow), and checks it against the run's --metrics-file: the
first event is file_version "brain.Event:2", every step has "lm loss",
"learning-rate" and "grad-norm" equal (as float32) to the metrics line of
that step, "lm loss validation" appears exactly at the evaluated steps,
"memory-bytes" once, and wall times are Unix seconds of today.
Exits nonzero with a line per problem.
"""
import json
import struct
import sys
import time

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def event_class():
    f = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tbtest", syntax="proto3")
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tbtest.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tbtest.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    descriptor = pool.FindMessageTypeByName("tbtest.Event")
    # protobuf >= 4.22 has GetMessageClass; Debian 12's 4.21 has MessageFactory.
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    raw = open(path, "rb").read()
    pos = 0
    while pos < len(raw):
        header = raw[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", raw[pos + 8:pos + 12])
        data = raw[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack("<I", raw[pos + 12 + length:pos + 16 + length])
        if hcrc != masked(header) or dcrc != masked(data) or len(data) != length:
            raise SystemExit(f"{path}: bad record at byte {pos}")
        yield data
        pos += 16 + length


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    events_path, metrics_path = sys.argv[1], sys.argv[2]
    Event = event_class()
    events = []
    for data in records(events_path):
        e = Event()
        e.ParseFromString(data)
        events.append(e)
    problems = []
    if not events or events[0].file_version != "brain.Event:2":
        problems.append("the first event is not file_version brain.Event:2")
    now = time.time()
    scalars = {}  # step -> {tag: value}
    for e in events:
        if not now - 86400 < e.wall_time <= now + 1:
            problems.append(f"step {e.step}: wall time {e.wall_time} is not Unix seconds of today")
        for v in e.summary.value:
            scalars.setdefault(e.step, {})[v.tag] = v.simple_value
    steps = [json.loads(l) for l in open(metrics_path) if '"step"' in l]
    memory = sum("memory-bytes" in s for s in scalars.values())
    if memory != 1:
        problems.append(f"memory-bytes written {memory} times, want once")
    for m in steps:
        got = scalars.get(m["step"], {})
        for tag, key in (("lm loss", "loss"), ("learning-rate", "lr"), ("grad-norm", "grad_norm")):
            if tag not in got or got[tag] != f32(m[key]):
                problems.append(f"step {m['step']}: {tag} {got.get(tag)} != metrics {key} {m[key]}")
        if ("valid_loss" in m) != ("lm loss validation" in got):
            problems.append(f"step {m['step']}: validation loss in one file only")
        elif "valid_loss" in m and got["lm loss validation"] != f32(m["valid_loss"]):
            problems.append(f"step {m['step']}: validation loss differs")
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"tensorboard_reader: {len(events)} events, {len(steps)} steps agree with the metrics file")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
