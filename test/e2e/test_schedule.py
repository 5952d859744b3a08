"""Scheduled sampling with the real gpuctld: daemons with the same schedule
and no link between them trace the ranks of a job in the same windows under
one trace id, the one a reimplementation of the documented hash gives."""

import hashlib
import json
import struct

from e2e_util import manifest_paths, wait_until

SEED = "e2e-fleet"
RULE = "frequent"
JOB = "sched-e2e"
PERIOD_MS = 4000
WINDOW_MS = 500


def schedule_config(path):
    path.write_text(
        "schedule:\n"
        f"  seed: {SEED}\n"
        "  max_duty_cycle: 0.5\n"
        "  rules:\n"
        f"    - name: {RULE}\n"
        f"      selector: {{job: \"{JOB}\"}}\n"
        f"      period: {PERIOD_MS}ms\n"
        f"      window: {WINDOW_MS}ms\n"
        "      probability: 1\n")
    return path


def expected_trace_id(slot):
    """daemon/scheduler/schedule_hash.h's layout and slot_decision.cc's id."""
    data = b"gpuctl-schedule-v1\0t"
    for field in (SEED, RULE, JOB):
        raw = field.encode()
        data += struct.pack(">I", len(raw)) + raw
    data += struct.pack(">q", slot)
    digest = hashlib.sha256(data).digest()
    offset_ms = int.from_bytes(digest[8:16], "big") % (PERIOD_MS - WINDOW_MS + 1)
    start_ms = slot * PERIOD_MS + offset_ms
    raw = bytearray(start_ms.to_bytes(6, "big") + digest[16:26])
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def completed_traces(daemon):
    """{trace id: [trace files]} of the traces whose manifest is written."""
    out = {}
    if not daemon.store.exists():
        return out
    for trace_dir in daemon.store.iterdir():
        if trace_dir.is_dir() and manifest_paths(trace_dir):
            out[trace_dir.name] = sorted(p.name for p in trace_dir.glob("*.json.gz"))
    return out


def test_two_hosts_capture_a_job_under_the_same_scheduled_trace_id(
        start_daemon, cli_for, start_workload, workdir):
    config = schedule_config(workdir / "schedule.yaml")
    hosts = [start_daemon("--config", str(config), name=name) for name in ("host-a", "host-b")]
    workloads = []
    for rank, daemon in enumerate(hosts):
        workload = start_workload(job=JOB, rank=rank, world_size=2, socket=daemon.socket)
        cli_for(daemon).wait_attached([workload.pid])
        workloads.append(workload)

    # Slots fall every 4 s; wait for a trace id both hosts completed.
    def common_trace():
        a, b = completed_traces(hosts[0]), completed_traces(hosts[1])
        shared = sorted(set(a) & set(b))
        return shared[-1] if shared else None

    trace_id = wait_until(common_trace, timeout=60.0, what="a trace id stored by both hosts")
    for rank, (daemon, workload) in enumerate(zip(hosts, workloads)):
        files = completed_traces(daemon)[trace_id]
        assert files == [f"{daemon.host_name}-rank{rank}-pid{workload.pid}.json.gz"], files
        manifest = json.loads(manifest_paths(daemon.store / trace_id)[0].read_text())
        assert manifest.get("selector", "").startswith(f'job "{JOB}"'), manifest
        assert "scheduled trace" in daemon.log(), daemon.log()

    # The id is the documented function of the slot its start falls in.
    start_ms = int(trace_id.replace("-", "")[:12], 16)
    assert trace_id == expected_trace_id(start_ms // PERIOD_MS)
