"""Anomaly-triggered capture with the real gpuctld: a workload that stalls
once is traced while it stalls, under the trace id the documented hash of
(seed, rule, job, step bucket) gives, and the manifest says what was seen."""

import datetime
import hashlib
import json
import re
import struct

from e2e_util import load_trace, manifest_paths, wait_until

SEED = "e2e-anomaly"
RULE = "stalls"
JOB = "anomaly-e2e"
STEP_MS = 20
STALL_AT = 120
STALL_MS = 3000
STEP_BUCKET = 100


def anomaly_config(path):
    # Judging starts 20 steps before the stall, so a loaded machine's slow
    # step elsewhere is unlikely to take the cool-down first.
    path.write_text(
        "schedule:\n"
        f"  seed: {SEED}\n"
        "  max_duty_cycle: 0.5\n"
        "  rules:\n"
        f"    - name: {RULE}\n"
        f"      selector: {{job: \"{JOB}\"}}\n"
        "      window: 3s\n"
        "      min_step: 100\n"
        "      anomaly:\n"
        "        slow_factor: 20\n"
        "        cooldown: 10m\n"
        f"        step_bucket: {STEP_BUCKET}\n")
    return path


def expected_trace_id(bucket, detected_at):
    """slot_decision.cc's DecideAnomaly: domain 'a', the hour of detection."""
    data = b"gpuctl-schedule-v1\0a"
    for field in (SEED, RULE, JOB):
        raw = field.encode()
        data += struct.pack(">I", len(raw)) + raw
    data += struct.pack(">q", bucket)
    digest = hashlib.sha256(data).digest()
    hour_ms = int(detected_at.timestamp()) // 3600 * 3600 * 1000
    raw = bytearray(hour_ms.to_bytes(6, "big") + digest[16:26])
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def parse_time(text):
    # RFC 3339 with up to nanoseconds: keep microseconds for datetime.
    m = re.match(r"(.*T\d\d:\d\d:\d\d)(\.\d+)?Z$", text)
    frac = (m.group(2) or ".0")[:7]
    return datetime.datetime.fromisoformat(m.group(1) + frac + "+00:00")


def seconds(text):
    assert text.endswith("s"), text
    return float(text[:-1])


def test_a_stall_is_captured_with_the_slow_step_and_what_was_seen(
        start_daemon, cli_for, start_workload, workdir):
    daemon = start_daemon("--config", str(anomaly_config(workdir / "anomaly.yaml")))
    workload = start_workload(job=JOB, rank=0, world_size=1, step_ms=STEP_MS, socket=daemon.socket,
                              args=["--stall-at-step", STALL_AT, "--stall-ms", STALL_MS])
    cli = cli_for(daemon)
    cli.wait_attached([workload.pid])

    def stored():
        if not daemon.store.exists():
            return None
        done = [d for d in daemon.store.iterdir() if d.is_dir() and manifest_paths(d)]
        return done[0] if done else None

    trace_dir = wait_until(stored, timeout=60.0, what="an anomaly trace stored")
    stall_lines = [line for line in workload.lines() if line.startswith("stall step=")]
    assert stall_lines, workload.lines()
    stalled_step = int(stall_lines[0].split()[1].split("=")[1])

    manifest = json.loads(manifest_paths(trace_dir)[0].read_text())
    trigger = manifest["trigger"]
    assert trigger["kind"] == "TRIGGER_KIND_ANOMALY", trigger
    assert trigger["scheduled"]["rule"] == RULE
    anomaly = trigger["anomaly"]
    assert anomaly["kind"] == "ANOMALY_KIND_SLOW_STEP", anomaly
    assert anomaly["pid"] == workload.pid
    assert int(anomaly["step"]) == stalled_step, (anomaly, stalled_step)
    assert anomaly.get("inProgress") is True, anomaly
    median = seconds(anomaly["median"])
    assert 0.005 < median < 0.2, anomaly
    assert seconds(anomaly["stepTime"]) > 20 * median, anomaly
    assert int(anomaly["stepBucket"]) == stalled_step // STEP_BUCKET
    assert trace_dir.name == expected_trace_id(stalled_step // STEP_BUCKET,
                                               parse_time(anomaly["detectedAt"]))

    # The trace holds the slow step: its wait (the "stall" ranges) and the
    # mark of the step after it.
    files = sorted(trace_dir.glob("*.json.gz"))
    assert len(files) == 1, files
    _, doc = load_trace(files[0])
    names = [e.get("name", "") for e in doc["traceEvents"]]
    assert "stall" in names, sorted(set(names))
    assert f"ProfilerStep#{stalled_step + 1}" in names, sorted(set(names))

    # `gpuctl traces --trigger anomaly` finds it, and `gpuctl schedule`
    # shows the capture with what was seen.
    listed = json.loads(cli.run("traces", "--trigger", "anomaly", "--json").stdout)["traces"]
    assert [t["traceId"] for t in listed] == [trace_dir.name], listed
    assert cli.run("traces", "--trigger", "scheduled").stdout.count(trace_dir.name) == 0
    shown = cli.run("schedule")
    assert shown.returncode == 0, shown.stderr
    assert f"slow step {stalled_step} of pid {workload.pid}" in shown.stdout, shown.stdout
    assert "anomaly trace" in daemon.log()


def test_hosts_that_each_see_the_stall_store_it_under_one_trace_id(
        start_daemon, cli_for, start_workload, workdir):
    config = anomaly_config(workdir / "anomaly.yaml")
    hosts = [start_daemon("--config", str(config), name=name) for name in ("host-a", "host-b")]
    workloads = []
    for rank, daemon in enumerate(hosts):
        workload = start_workload(job=JOB, rank=rank, world_size=2, step_ms=STEP_MS,
                                  socket=daemon.socket,
                                  args=["--stall-at-step", STALL_AT, "--stall-ms", STALL_MS])
        cli_for(daemon).wait_attached([workload.pid])
        workloads.append(workload)

    def stored(daemon):
        if not daemon.store.exists():
            return None
        done = [d for d in daemon.store.iterdir() if d.is_dir() and manifest_paths(d)]
        return done[0] if done else None

    dirs = [wait_until(lambda d=d: stored(d), timeout=60.0,
                       what=f"an anomaly trace on {d.host_name}") for d in hosts]
    anomalies = [json.loads(manifest_paths(d)[0].read_text())["trigger"]["anomaly"] for d in dirs]
    # Each host saw its own rank's stall, in the same bucket.
    for anomaly, workload in zip(anomalies, workloads):
        assert anomaly["pid"] == workload.pid, anomaly
        assert int(anomaly["step"]) == STALL_AT, anomaly
    hours = {int(parse_time(a["detectedAt"]).timestamp()) // 3600 for a in anomalies}
    if len(hours) == 1:  # hosts deciding either side of an hour's start differ
        assert dirs[0].name == dirs[1].name, (dirs[0].name, dirs[1].name)
