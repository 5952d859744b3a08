"""Helpers shared by the end-to-end tests: waiting, parsing CLI output,
reading downloaded traces, and hand-encoding the IPC protobuf messages."""

import gzip
import json
import os
import re
import time
import urllib.request
from pathlib import Path

# Generous: the suite also runs under ASan/UBSan on a loaded 2-core machine.
DEFAULT_DEADLINE_S = 30.0


def preload_value(lib_path):
    """LD_PRELOAD for a process with the library: in sanitized builds CTest
    sets GPUCTL_E2E_PRELOAD_FIRST, the runtime that must load first."""
    first = os.environ.get("GPUCTL_E2E_PRELOAD_FIRST")
    return f"{first}:{lib_path}" if first else str(lib_path)


def wait_until(predicate, timeout=DEFAULT_DEADLINE_S, interval=0.02, what="condition"):
    """Polls predicate() until it returns a truthy value; fails after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {what}")
        time.sleep(interval)


def snake_keys(node):
    """A protobuf JSON document with every key in its proto (snake_case) form:
    parsers accept both the lowerCamelCase and the original names, so
    producers may use either."""
    if isinstance(node, list):
        return [snake_keys(item) for item in node]
    if isinstance(node, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key):
                snake_keys(value) for key, value in node.items()}
    return node


def parse_processes(text):
    """Processes from `gpuctl ps --json`: a list, {"processes": [...]} or a
    per-host list of such objects; pids normalised to int."""
    doc = snake_keys(json.loads(text))
    found = []

    def visit(node):
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if "pid" in node and not isinstance(node["pid"], (dict, list)):
                item = dict(node)
                item["pid"] = int(item["pid"])
                found.append(item)
                return
            for value in node.values():
                if isinstance(value, (list, dict)):
                    visit(value)

    visit(doc)
    return found


def manifest_paths(trace_dir):
    """The per-host manifests of a trace directory: _gpuctl/<host>.json."""
    return sorted((trace_dir / "_gpuctl").glob("*.json"))


class TraceDir:
    """One downloaded trace: DIR/<trace-id>/{_gpuctl/<host>.json, *.json.gz}."""

    def __init__(self, path):
        self.path = path
        self.trace_id = path.name
        manifests = manifest_paths(path)
        assert len(manifests) == 1, f"expected one host's manifest in {path}: {manifests}"
        self.manifest = snake_keys(json.loads(manifests[0].read_text()))

    @staticmethod
    def find(out):
        dirs = [d for d in out.iterdir() if d.is_dir()] if out.exists() else []
        assert len(dirs) <= 1, f"more than one trace downloaded into {out}: {dirs}"
        if not dirs or not manifest_paths(dirs[0]):
            return None
        return TraceDir(dirs[0])

    @property
    def results(self):
        return self.manifest.get("results", [])

    def result_for(self, pid):
        matches = [r for r in self.results if int(r["pid"]) == pid]
        assert len(matches) == 1, f"expected one result for pid {pid}: {self.results}"
        return matches[0]

    def files(self):
        return sorted(p for p in self.path.iterdir() if p.name.endswith(".json.gz"))



SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                     "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")


def sanitizer_report(text):
    return any(marker in text for marker in SANITIZER_MARKERS)


def load_trace(path):
    """Parses one stored trace (.json.gz); returns (raw_text, document)."""
    raw = Path(path).read_bytes()
    assert raw[:2] == b"\x1f\x8b", f"{path} is not gzip"
    text = gzip.decompress(raw).decode("utf-8")
    return text, json.loads(text)


def check_workload_trace(path, pid, rank):
    """Asserts what the sample workload's trace must hold; returns the document."""
    text, doc = load_trace(path)
    events = doc["traceEvents"]
    assert isinstance(events, list) and events, f"{path}: no traceEvents"
    # Holistic Trace Analysis reads the rank with the regex "rank":\s+(\d+).
    assert f'"rank": {rank}' in text, f'{path}: no "rank": {rank}'
    assert doc["distributedInfo"]["rank"] == rank
    assert "baseTimeNanoseconds" in doc
    assert int(doc["gpuctl"]["pid"]) == pid

    ranges = [e for e in events
              if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    names = {e["name"] for e in ranges}
    for name in ("forward", "backward", "optimizer"):
        assert name in names, f"{path}: no {name!r} range among {sorted(names)[:20]}"
    steps = [e for e in ranges if e["name"].startswith("ProfilerStep#")]
    assert steps, f"{path}: no ProfilerStep# annotation"
    for e in ranges:
        assert e["pid"] == pid, f"{path}: event of pid {e['pid']}, expected {pid}: {e}"
        assert e["dur"] >= 0 and e["ts"] >= 0, e
    meta = {e["name"] for e in events if e.get("ph") == "M"}
    assert "process_name" in meta and "thread_name" in meta, meta
    return doc


# --- Hand-made protobuf encoding of the IPC messages (proto/gpuctl/v1/ipc.proto)
# Only what the tests send: varints, length-delimited fields, nesting.

def varint(value):
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, data):
    if isinstance(data, str):
        data = data.encode()
    return varint(number << 3 | 2) + varint(len(data)) + data


def encode_hello(pid, job_id, rank=0, world_size=1, major=1, minor=0, capabilities=3):
    hello = (field_varint(1, major) + field_varint(2, minor) + field_bytes(3, "0.1.0")
             + field_varint(4, pid) + field_varint(5, 1) + field_bytes(6, job_id)
             + field_varint(7, rank) + field_varint(8, rank) + field_varint(9, world_size)
             + field_bytes(10, "e2e-host") + field_bytes(11, "fake-client")
             + field_varint(12, capabilities))
    return field_bytes(1, hello)  # ClientMessage.hello


def encode_capture_result(trace_id, status, transport, payload_size, event_count=1):
    result = (field_bytes(1, trace_id) + field_varint(2, status) + field_varint(4, transport)
              + field_varint(5, payload_size) + field_varint(6, event_count))
    return field_bytes(3, result)  # ClientMessage.capture_result


def encode_payload_chunk(trace_id, offset, data):
    chunk = field_bytes(1, trace_id) + field_varint(2, offset) + field_bytes(3, data)
    return field_bytes(4, chunk)  # ClientMessage.payload_chunk


def decode_fields(data):
    """{field number: [values]}: ints for varints, bytes for length-delimited."""
    fields = {}
    pos = 0

    def read_varint():
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while pos < len(data):
        tag = read_varint()
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value = read_varint()
        elif wire_type == 2:
            length = read_varint()
            value = bytes(data[pos:pos + length])
            pos += length
        elif wire_type == 1:
            value = bytes(data[pos:pos + 8])
            pos += 8
        elif wire_type == 5:
            value = bytes(data[pos:pos + 4])
            pos += 4
        else:
            raise ValueError(f"wire type {wire_type}")
        fields.setdefault(number, []).append(value)
    return fields


# --- Times in protobuf JSON (RFC 3339 timestamps, "1.5s" durations) --------

def timestamp_ns(text):
    """Nanoseconds since the epoch of an RFC 3339 UTC timestamp such as
    2026-11-29T10:00:00.123456789Z (what protobuf's JSON mapping writes)."""
    import calendar
    m = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z", text)
    assert m, f"not an RFC 3339 UTC timestamp: {text!r}"
    seconds = calendar.timegm(tuple(int(g) for g in m.groups()[:6]))
    return seconds * 1_000_000_000 + int((m.group(7) or "0").ljust(9, "0"))


def duration_ns(text):
    """Nanoseconds of a protobuf JSON duration such as "0.000120s" or "-1.5s"."""
    m = re.fullmatch(r"(-?)(\d+)(?:\.(\d{1,9}))?s", text)
    assert m, f"not a protobuf duration: {text!r}"
    value = int(m.group(2)) * 1_000_000_000 + int((m.group(3) or "0").ljust(9, "0"))
    return -value if m.group(1) else value


def trace_results(doc):
    """Per-process results of `gpuctl trace --json`, from every host."""
    doc = snake_keys(doc)
    results = list(doc.get("results", []))
    for host in doc.get("hosts", []):
        results += host.get("results", [])
    return results


def step_marks(path):
    """Step numbers of the ProfilerStep#N annotations in a stored trace."""
    _, doc = load_trace(path)
    steps = []
    for e in doc["traceEvents"]:
        name = e.get("name", "")
        if e.get("cat") == "user_annotation" and name.startswith("ProfilerStep#"):
            steps.append(int(name[len("ProfilerStep#"):]))
    return sorted(steps)


def metrics_address(daemon):
    """The bound metrics address, as the ready line logs it."""
    found = re.search(r'msg="gpuctld ready".* metrics=(\S+)', daemon.log())
    assert found, daemon.log()
    return found.group(1)


def scrape(address):
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
        assert response.status == 200
        return response.read().decode()
