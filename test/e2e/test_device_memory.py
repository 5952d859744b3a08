"""Device memory through the whole path: with the memory activity the fake
CUPTI's allocation, release and pool records (CUpti_ActivityMemory4,
CUpti_ActivityMemoryPool3) reach gpuctld, become a counter track per GPU in
the stored trace, and `gpuctl analyze` reads the growth across the steps."""

import json
import subprocess
import tempfile
from pathlib import Path

from conftest import build_output
from e2e_util import TraceDir, load_trace

MIB = 1 << 20


def _fake_cupti_env(build_dir):
    return {"GPUCTL_CUPTI_PATH": str(build_output(build_dir, "lib/libcupti_fake.so")),
            "GPUCTL_FAKE_CUPTI_SCENARIO": "basic"}


def _trace_steps(cli, job, activities=None):
    """Eight 50 ms steps of `job` with `activities` (None: the default set):
    the stored trace and its one result."""
    out = Path(tempfile.mkdtemp(prefix="mem-", dir=cli.workdir))
    chosen = ["--activities", activities] if activities else []
    result = cli.run("trace", "--job", job, "--iterations", "8", "--step-roundup", "10",
                     "--duration", "60s", *chosen, "-o", str(out), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    trace = TraceDir.find(out)
    assert len(trace.results) == 1, trace.results
    return trace, trace.results[0]


def test_memory_activity_gives_a_counter_track_that_analyze_reads(cli, start_workload, build_dir):
    workload = start_workload(job="mem", rank=0, world_size=1, step_ms=50,
                              env=_fake_cupti_env(build_dir))
    cli.wait_attached([workload.pid])
    trace, res = _trace_steps(cli, "mem", "kernel,runtime,memory")
    assert res["status"] == "CAPTURE_STATUS_OK", res
    path = trace.path / res["file"]
    _, doc = load_trace(path)
    meta = doc["gpuctl"]
    assert meta["activities"] == ["kernel", "runtime", "memory"], meta
    assert meta["memory_counter_baseline"] == "window_start", meta
    assert meta["memory_records_skipped"] == 0, meta

    events = doc["traceEvents"]
    counter = sorted((e for e in events if e.get("ph") == "C"
                      and e.get("name") == "Device memory allocated (GPU 0)"),
                     key=lambda e: e["ts"])
    assert {e["pid"] for e in counter} == {0}
    # 0 at the window's start; +1 MiB from the pool, +4 MiB, the 1 MiB freed,
    # then fourteen 1 MiB allocations. The 64 MiB allocated before the
    # window is not there.
    assert [e["args"]["bytes"] for e in counter] == \
        [0, 1 * MIB, 5 * MIB, 4 * MIB] + [(5 + i) * MIB for i in range(14)]
    instants = [e for e in events if e.get("cat") == "gpu_memory" and e.get("ph") == "i"]
    names = [e["name"] for e in instants]
    assert names.count("Memory Allocation") == 16 and names.count("Memory Release") == 1, names
    assert {"Memory Pool Created", "Memory Pool Trimmed"} <= set(names), names
    pooled = next(e for e in instants if e["name"] == "Memory Allocation" and e["args"]["async"])
    assert pooled["args"]["stream"] == 7 and pooled["args"]["pool size"] == 2 * MIB, pooled

    analyzed = subprocess.run(
        [cli.binary, "analyze", "--json", "--memory-peak-pct", "0.02", str(path)],
        capture_output=True, text=True, timeout=60)
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    report = json.loads(analyzed.stdout)
    assert report["options"]["memory_peak_share"] == 0.0002
    (device,) = report["traces"][0]["device_memory"]
    assert device["device"] == 0 and device["source"] == "cupti", device
    assert device["samples"] == 18 and device["peak_bytes"] == 18 * MIB, device
    assert device["total_bytes"] == 80 << 30, device
    # Every decrease happens within the first step: the value at the step
    # boundaries only grows, and the last whole steps' growth is the rate.
    steps = len(device["step_numbers"])
    assert steps >= 3, device
    assert device["growing"], device
    first, last = device["step_bytes"][0], device["step_bytes"][-1]
    assert first == 0 and 4 * MIB <= last <= 18 * MIB, device
    assert device["growth_bytes_per_step"] * steps == last - first, device

    findings = {f["id"]: f for f in report["findings"]}
    growth = findings["memory_growth"]["numbers"]
    assert growth["growth_bytes_per_step"] == device["growth_bytes_per_step"], growth
    assert growth["steps_until_full"] == device["steps_until_full"] > 0, growth
    peak = findings["memory_peak"]["numbers"]
    assert peak["peak_bytes"] == 18 * MIB and peak["total_bytes"] == 80 << 30, peak
    assert workload.proc.poll() is None


def test_memory_is_off_by_default(cli, start_workload, build_dir):
    workload = start_workload(job="nomem", rank=0, world_size=1, step_ms=50,
                              env=_fake_cupti_env(build_dir))
    cli.wait_attached([workload.pid])
    trace, res = _trace_steps(cli, "nomem")
    _, doc = load_trace(trace.path / res["file"])
    assert not [e for e in doc["traceEvents"] if e.get("cat") == "gpu_memory"]
    assert "memory_counter_baseline" not in doc["gpuctl"]
    assert any(e.get("cat") == "kernel" for e in doc["traceEvents"])
