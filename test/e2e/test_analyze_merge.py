"""`gpuctl analyze --merge OUT`: a real two-host trace (two gpuctld, each with
its own host name and a rank of the sample workload on the fake CUPTI) merged
into one file, as JSON and as Perfetto's protobuf format. The protobuf output
is decoded with the classes of the `perfetto` Python package, and every rank's
process track and events are checked against its input file: counts per kind
and timestamps moved onto the caller's clock by the host's manifest offset."""

import gzip
import json
import subprocess
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from e2e_util import duration_ns, manifest_paths, snake_keys

FAKE_SCENARIO = "multi_device"
SHIFT_NS = 2_500_000_000  # added to one host's manifest offset


def gpuctl(build_dir, *args, timeout=120):
    return subprocess.run([str(build_dir / "bin" / "gpuctl"), *args], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def micros_to_ns(value):
    """A trace's µs with three decimals as exact ns, from the JSON text."""
    text = str(value)
    whole, _, frac = text.partition(".")
    sign = -1 if whole.startswith("-") else 1
    return sign * (abs(int(whole)) * 1000 + int((frac + "000")[:3]))


def load(path):
    raw = Path(path).read_bytes()
    text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    # Floats as decimals, so that ts keeps its ns exactly.
    return json.loads(text, parse_float=Decimal)


def offset_ns(manifest, key="offset"):
    """A manifest's clock offset ("0.000123s") in ns: `offset` (at receipt)
    or `midpoint_offset` (the caller's probe)."""
    return duration_ns(snake_keys(json.loads(manifest.read_text()))["clock"][key])


def merge_offset_ns(manifest):
    """The offset the merge moves the host's times by: the measured midpoint
    when the manifest has a round trip, else the receipt offset."""
    clock = snake_keys(json.loads(manifest.read_text()))["clock"]
    if "round_trip" in clock:
        return duration_ns(clock["midpoint_offset"])
    return duration_ns(clock["offset"])


def expected_ranks(trace_dir):
    """Per process file: its name in the merged trace, and the aligned (Unix
    ns on the caller's clock) times of its events by phase."""
    offsets = {}
    for manifest in manifest_paths(trace_dir):
        doc = snake_keys(json.loads(manifest.read_text()))
        for result in doc["results"]:
            offsets[result["file"]] = (merge_offset_ns(manifest), doc["host"])
    ranks = {}
    for path in sorted(trace_dir.glob("*.json.gz")):
        doc = load(path)
        meta = doc["gpuctl"]
        offset, host = offsets[path.name]
        assert meta["host"] == host
        base = int(doc["baseTimeNanoseconds"])
        by_phase = defaultdict(list)
        for e in doc["traceEvents"]:
            if e["ph"] == "M" or "ts" not in e:
                continue
            start = base + micros_to_ns(e["ts"]) - offset
            extra = None
            if e["ph"] == "X":
                extra = micros_to_ns(e["dur"])
            elif e["ph"] == "C":  # one counter value per numeric arg
                extra = sum(1 for v in e.get("args", {}).values()
                            if isinstance(v, (int, Decimal)) and not isinstance(v, bool))
            by_phase[e["ph"]].append((e.get("name"), start, extra))
        name = f"{meta['host']} rank {meta['rank']} pid {meta['pid']}"
        ranks[name] = by_phase
    return ranks


def start_two_hosts(start_daemon, start_workload, cli_for, build_dir):
    env = {"GPUCTL_CUPTI_PATH": str(build_dir / "lib" / "libcupti_fake.so"),
           "GPUCTL_FAKE_CUPTI_SCENARIO": FAKE_SCENARIO}
    daemons, workloads = [], []
    for i, name in enumerate(["node-a", "node-b"]):  # hosts e2e-node-a, e2e-node-b
        daemon = start_daemon(name=name)
        daemons.append(daemon)
        workloads.append(start_workload(job="merge", rank=i, world_size=2,
                                        socket=daemon.socket, env=env))
    for daemon, workload in zip(daemons, workloads):
        cli_for(daemon).wait_attached([workload.pid])
    return daemons, workloads


def decode(path):
    """Track events of a protobuf trace by process name, names resolved."""
    trace = pb.Trace()
    trace.ParseFromString(Path(path).read_bytes())
    names, processes, track_process, thread_names = {}, {}, {}, {}
    events = defaultdict(list)
    pids = set()
    for packet in trace.packet:
        for n in packet.interned_data.event_names:
            names[n.iid] = n.name
        if packet.HasField("track_descriptor"):
            t = packet.track_descriptor
            if t.HasField("process"):
                processes[t.uuid] = t.process.process_name
                pids.add(t.process.pid)
            else:
                track_process[t.uuid] = processes[t.parent_uuid]
                if t.HasField("thread"):
                    thread_names[t.uuid] = t.thread.thread_name
        if packet.HasField("track_event"):
            e = packet.track_event
            name = names.get(e.name_iid, e.name) if e.HasField("name_iid") else e.name
            events[track_process[e.track_uuid]].append((e, name, packet.timestamp))
    assert len(pids) == len(processes), "two ranks share a pid"
    return events, thread_names


def test_merge_writes_every_rank_on_one_clock_as_json_and_protobuf(
        build_dir, start_daemon, start_workload, cli_for, workdir):
    daemons, workloads = start_two_hosts(start_daemon, start_workload, cli_for, build_dir)
    out = workdir / "dl"
    traced = gpuctl(build_dir, "trace", "--job", "merge", "--duration", "1s", "-o", str(out),
                    "--host", daemons[0].address, "--host", daemons[1].address)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    trace_dir = next(out.iterdir())
    assert len(manifest_paths(trace_dir)) == 2
    # Both daemons timed the CLI's clock probes: one clock on this machine,
    # so each midpoint is within half its round trip of zero.
    for manifest in manifest_paths(trace_dir):
        clock = snake_keys(json.loads(manifest.read_text()))["clock"]
        round_trip = duration_ns(clock["round_trip"])
        assert 0 < round_trip < 1_000_000_000, clock
        assert abs(duration_ns(clock["midpoint_offset"])) <= round_trip // 2 + 1, clock
    # One host's clock 2.5 s ahead: its ranks must come back by that much.
    manifest = next(m for m in manifest_paths(trace_dir) if "node-b" in m.name)
    doc = json.loads(manifest.read_text())
    doc["clock"]["offset"] = f"{(offset_ns(manifest) + SHIFT_NS) / 1e9:.9f}s"
    doc["clock"]["midpointOffset"] = \
        f"{(offset_ns(manifest, 'midpoint_offset') + SHIFT_NS) / 1e9:.9f}s"
    manifest.write_text(json.dumps(doc))
    expected = expected_ranks(trace_dir)
    assert sorted(expected) == sorted(
        f"e2e-node-{h} rank {r} pid {w.pid}" for h, r, w in zip("ab", (0, 1), workloads))

    # JSON: every rank its own process, every event on the merged ts axis.
    merged_json = workdir / "merged.json"
    result = gpuctl(build_dir, "analyze", str(trace_dir), "--merge", str(merged_json))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Merged 2 ranks" in result.stdout, result.stdout
    merged = load(merged_json)
    base = int(merged["baseTimeNanoseconds"])
    process_names = {e["pid"]: e["args"]["name"] for e in merged["traceEvents"]
                     if e["ph"] == "M" and e["name"] == "process_name"}
    assert sorted(process_names.values()) == sorted(expected)
    got = defaultdict(lambda: defaultdict(list))
    for e in merged["traceEvents"]:
        if e["ph"] != "M":
            extra = micros_to_ns(e["dur"]) if e["ph"] == "X" else None
            if e["ph"] == "C":
                extra = sum(1 for v in e.get("args", {}).values()
                            if isinstance(v, (int, Decimal)) and not isinstance(v, bool))
            got[process_names[e["pid"]]][e["ph"]].append(
                (e.get("name"), base + micros_to_ns(e["ts"]), extra))
    for name, by_phase in expected.items():
        assert set(by_phase) == set(got[name]), name
        for ph, items in by_phase.items():
            assert sorted(got[name][ph]) == sorted(items), (name, ph)
    ranks = {r["process_name"]: r for r in merged["gpuctlMerge"]["ranks"]}
    assert ranks["e2e-node-b rank 1 pid %d" % workloads[1].pid]["clock_offset_ns"] >= SHIFT_NS - 10**9
    for rank in ranks.values():
        assert rank["clock_round_trip_ns"] > 0, rank
        assert rank["clock_bound_ns"] * 2 >= rank["clock_round_trip_ns"], rank
    # Each rank's line states its bound, and the note says what it means.
    assert result.stdout.count(" ms +/-") == 2, result.stdout
    assert "plus the clocks' drift since" in result.stdout, result.stdout

    # Protobuf, fetched from both daemons by trace id.
    merged_proto = workdir / "merged.pftrace"
    result = gpuctl(build_dir, "analyze", "--trace-id", trace_dir.name, "--merge",
                    str(merged_proto), "--host", daemons[0].address, "--host",
                    daemons[1].address)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Perfetto protobuf" in result.stdout, result.stdout
    events, thread_names = decode(merged_proto)
    assert sorted(events) == sorted(expected)
    assert any(" / stream " in n for n in thread_names.values()), thread_names
    for name, by_phase in expected.items():
        kinds = Counter()
        begins, instants = [], []
        for e, event_name, ts in events[name]:
            kinds[e.type] += 1
            if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
                begins.append((event_name, ts))
            elif e.type == pb.TrackEvent.TYPE_INSTANT:
                instants.append((event_name, ts))
        slices = by_phase.get("X", [])
        assert kinds[pb.TrackEvent.TYPE_SLICE_BEGIN] == len(slices), name
        assert kinds[pb.TrackEvent.TYPE_SLICE_END] == len(slices), name
        # Fetched again from the daemons, node-b's manifest holds its
        # measured offset, not the shifted one: its times are SHIFT_NS later.
        shift = SHIFT_NS if name.startswith("e2e-node-b") else 0
        assert sorted(begins) == sorted((n, t + shift) for n, t, _ in slices), name
        points = [(n, t + shift) for ph in "iIstf" for n, t, _ in by_phase.get(ph, [])]
        assert sorted(instants) == sorted(points), name
        assert kinds[pb.TrackEvent.TYPE_COUNTER] == sum(c for _, _, c in by_phase.get("C", [])), name


def test_merge_usage_errors_and_a_bad_rank_leave_nothing_written(build_dir, workdir):
    trace_dir = workdir / "local"
    trace_dir.mkdir()
    kineto = {"distributedInfo": {"rank": 0}, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1700000000000001.5,
         "dur": 2},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}]}
    (trace_dir / "a.pt.trace.json").write_text(json.dumps(kineto))
    out = workdir / "m.json"
    for args, message in [
            (["--merge", str(out), "--json"], "without --json and --html"),
            (["--merge", str(out), "--merge-format", "xml"], "expected auto, json or proto"),
            (["--merge-format", "json"], "--merge-format goes with --merge OUT"),
            (["--merge", str(workdir / "nowhere" / "m.json")], "is not a directory"),
            (["--merge", str(workdir)], "expected the merged file's path")]:
        result = gpuctl(build_dir, "analyze", str(trace_dir), *args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
    assert not out.exists()

    # A kineto file without baseTimeNanoseconds: its ts is absolute, and no
    # manifest leaves it on its own clock.
    result = gpuctl(build_dir, "analyze", str(trace_dir), "--merge", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    merged = load(out)
    [kernel] = [e for e in merged["traceEvents"] if e["ph"] == "X"]
    assert int(merged["baseTimeNanoseconds"]) + micros_to_ns(kernel["ts"]) == \
        1700000000000001500
    assert merged["gpuctlMerge"]["ranks"][0]["clock_offset_ns"] is None

    (trace_dir / "b.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1,')
    before = out.read_bytes()
    result = gpuctl(build_dir, "analyze", str(trace_dir), "--merge", str(out))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "b.json: malformed JSON at byte" in result.stderr, result.stderr
    assert out.read_bytes() == before
    assert sorted(p.name for p in workdir.iterdir() if p.name.startswith(".gpuctl-merge")) == []


def test_merge_keeps_id2_and_object_events(build_dir, workdir):
    """id2 async slices and an object's N/O/D merged without a daemon: one
    `id` and no `id2` in JSON; in protobuf, local ids of two processes on two
    tracks and the object on a track of its own with its snapshot."""
    trace_dir = workdir / "ids"
    trace_dir.mkdir()
    base = 1_700_000_000_000_000_000
    events = [
        {"ph": "b", "cat": "io", "name": "load", "id2": {"local": 1}, "pid": 1, "tid": 1, "ts": 1},
        {"ph": "e", "cat": "io", "name": "load", "id2": {"local": 1}, "pid": 1, "tid": 1, "ts": 2},
        {"ph": "b", "cat": "io", "name": "load", "id2": {"local": 1}, "pid": 2, "tid": 2, "ts": 3},
        {"ph": "e", "cat": "io", "name": "load", "id2": {"local": 1}, "pid": 2, "tid": 2, "ts": 4},
        {"ph": "N", "cat": "cc", "name": "Layer", "id": "0x1", "pid": 1, "tid": 1, "ts": 5},
        {"ph": "O", "cat": "cc", "name": "Layer", "id": "0x1", "pid": 1, "tid": 1, "ts": 6,
         "args": {"snapshot": {"w": 2}}},
        {"ph": "D", "cat": "cc", "name": "Layer", "id": "0x1", "pid": 1, "tid": 1, "ts": 7}]
    (trace_dir / "r.json").write_text(
        json.dumps({"traceEvents": events, "baseTimeNanoseconds": base}))

    out_json = workdir / "ids.json"
    result = gpuctl(build_dir, "analyze", str(trace_dir), "--merge", str(out_json))
    assert result.returncode == 0, result.stdout + result.stderr
    kept = [e for e in load(out_json)["traceEvents"] if e["ph"] != "M"]
    assert len(kept) == len(events)
    assert all("id2" not in e and isinstance(e["id"], int) for e in kept), kept
    assert kept[0]["id"] == kept[1]["id"] != kept[2]["id"] == kept[3]["id"]
    assert kept[4]["id"] == kept[5]["id"] == kept[6]["id"]

    out_proto = workdir / "ids.pftrace"
    result = gpuctl(build_dir, "analyze", str(trace_dir), "--merge", str(out_proto))
    assert result.returncode == 0, result.stdout + result.stderr
    trace = pb.Trace()
    trace.ParseFromString(out_proto.read_bytes())
    tracks, on_track, annotation_names = {}, defaultdict(list), {}
    for packet in trace.packet:
        for n in packet.interned_data.debug_annotation_names:
            annotation_names[n.iid] = n.name
        t = packet.track_descriptor
        if packet.HasField("track_descriptor") and not (t.HasField("process") or
                                                        t.HasField("thread")):
            tracks[t.uuid] = t.name
        if packet.HasField("track_event") and packet.track_event.track_uuid in tracks:
            on_track[tracks[packet.track_event.track_uuid]].append(packet.track_event)
    assert sorted(tracks.values()) == ["Layer 0x1", "load", "load"]
    T = pb.TrackEvent
    assert [e.type for e in on_track["load"]] == [T.TYPE_SLICE_BEGIN, T.TYPE_SLICE_END] * 2
    layer = on_track["Layer 0x1"]
    assert [e.type for e in layer] == [T.TYPE_SLICE_BEGIN, T.TYPE_INSTANT, T.TYPE_SLICE_END]
    [snapshot] = layer[1].debug_annotations
    assert annotation_names[snapshot.name_iid] == "snapshot"
    assert [(d.name, d.uint_value) for d in snapshot.dict_entries] == [("w", 2)]
