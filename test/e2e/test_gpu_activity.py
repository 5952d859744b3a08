"""GPU activity through the whole path: the preloaded library loads CUPTI
with dlopen (here the fake CUPTI library, which delivers real CUPTI record
structs), gpuctld validates and converts the records, the CLI downloads a
kineto-compatible trace."""

import json
import subprocess

from conftest import build_output
from e2e_util import load_trace, trace_results


def _fake_cupti_env(build_dir, scenario="multi_device"):
    return {"GPUCTL_CUPTI_PATH": str(build_output(build_dir, "lib/libcupti_fake.so")),
            "GPUCTL_FAKE_CUPTI_SCENARIO": scenario}


def _trace_one(cli, workload, *extra):
    result, trace = cli.trace("--pid", str(workload.pid), "--duration", "1s", *extra)
    assert trace is not None, result.stdout + result.stderr
    return result, trace, trace.result_for(workload.pid)


def test_kernels_copies_and_flows_reach_the_stored_trace(cli, start_workload, build_dir):
    workload = start_workload(job=42, rank=0, world_size=1, env=_fake_cupti_env(build_dir))
    cli.wait_attached([workload.pid])

    result, trace, res = _trace_one(cli, workload)
    assert result.returncode == 0, result.stdout + result.stderr
    assert res["status"] == "CAPTURE_STATUS_OK", res
    assert not res.get("host_only", False), res
    _, doc = load_trace(trace.path / res["file"])
    events = doc["traceEvents"]

    kernels = [e for e in events if e.get("cat") == "kernel"]
    names = {e["name"] for e in kernels}
    assert {"fake_kernel_a", "fake_kernel_b", "graph_kernel"} <= names, names
    # Records wholly outside the window are clipped away.
    assert not names & {"early_kernel", "late_kernel"}, names
    devices = {e["pid"] for e in kernels}
    assert devices == {0, 1}, devices
    for k in kernels:
        for arg in ("device", "stream", "correlation", "grid", "block", "registers per thread"):
            assert arg in k["args"], (arg, k)
    graph = next(e for e in kernels if e["name"] == "graph_kernel")
    assert graph["args"]["graph id"] == 5 and graph["args"]["graph node id"] == 77, graph

    assert any(e.get("cat") == "gpu_memcpy" for e in events)
    assert any(e.get("cat") == "cuda_runtime" for e in events)
    flows = [e for e in events if e.get("cat") == "ac2g"]
    assert {e["ph"] for e in flows} >= {"s", "f"}, flows[:4]
    assert doc["deviceProperties"], "no deviceProperties"
    # The host ranges of the same process are in the same file.
    assert any(e.get("cat") == "user_annotation" and e["name"] == "forward" for e in events)
    assert workload.proc.poll() is None


def test_activities_flag_limits_what_is_captured(cli, start_workload, build_dir):
    workload = start_workload(job=42, env=_fake_cupti_env(build_dir, "basic"))
    cli.wait_attached([workload.pid])
    result, trace, res = _trace_one(cli, workload, "--activities", "kernel")
    assert result.returncode == 0, result.stdout + result.stderr
    _, doc = load_trace(trace.path / res["file"])
    cats = {e.get("cat") for e in doc["traceEvents"]}
    assert "kernel" in cats
    assert not cats & {"gpu_memcpy", "cuda_runtime", "cuda_driver"}, cats
    assert trace.manifest.get("activities") == ["kernel"], trace.manifest

    bad = cli.run("trace", "--pid", str(workload.pid), "--duration", "1s",
                  "--activities", "kernel,bogus")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "bogus" in bad.stderr


def _trace_without_file(cli, workload):
    """A capture that stores nothing: returns (exit code, the CLI's output)."""
    result = cli.run("trace", "--pid", str(workload.pid), "--duration", "1s", "--no-download")
    return result.returncode, result.stdout + result.stderr


def test_cupti_owned_by_another_tool_reports_busy_and_the_job_goes_on(
        cli, start_workload, build_dir):
    workload = start_workload(job=42, env=_fake_cupti_env(build_dir, "subscriber_conflict"))
    cli.wait_attached([workload.pid])
    code, output = _trace_without_file(cli, workload)
    assert code == 1, output
    row = next(line for line in output.splitlines() if str(workload.pid) in line.split())
    assert "busy" in row.split(), output
    # CUPTI's own word for it reaches the user.
    assert "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED" in output, output
    assert workload.proc.poll() is None
    # The process took nothing: a later capture on a free CUPTI still works
    # in the same job (here: another process of it, with the fake free).
    again = start_workload(job=42, env=_fake_cupti_env(build_dir, "basic"))
    cli.wait_attached([again.pid])
    result, _, res = _trace_one(cli, again)
    assert result.returncode == 0 and res["status"] == "CAPTURE_STATUS_OK", res


def test_cupti_unusable_says_why_and_the_job_goes_on(cli, start_workload, workdir):
    # No loadable CUPTI at the given path; whatever the search finds next
    # (a toolkit's libcupti without a GPU, or nothing) must end in a clear
    # status, never a crash or a hang.
    workload = start_workload(job=42, env={
        "GPUCTL_CUPTI_PATH": str(workdir / "no-such-libcupti.so"),
        "CUDA_HOME": str(workdir / "no-cuda")})
    cli.wait_attached([workload.pid])
    result = cli.run("trace", "--pid", str(workload.pid), "--duration", "1s",
                     "--no-download", "--json")
    output = result.stdout + result.stderr
    res = next(r for r in trace_results(json.loads(result.stdout))
               if int(r["pid"]) == workload.pid)
    assert res["status"] in ("CAPTURE_STATUS_UNAVAILABLE", "CAPTURE_STATUS_OK"), res
    if res["status"] == "CAPTURE_STATUS_OK":
        # A libcupti found elsewhere, and no driver: a host-only trace.
        assert res.get("host_only") is True, res
        assert res["message"].startswith("host-only trace: "), res
    else:
        assert "CUPTI" in res["message"], res
    assert result.returncode == (0 if res["status"] == "CAPTURE_STATUS_OK" else 1), output
    assert workload.proc.poll() is None
    # The library still answers the next request.
    code, output = _trace_without_file(cli, workload)
    assert str(workload.pid) in output and code in (0, 1), output


def test_the_manifest_summary_is_what_gpuctl_analyze_finds(cli, start_workload, build_dir):
    """gpuctld summarizes each process while converting its records: the
    manifest's summary equals `gpuctl analyze --json` on the downloaded
    file, and `gpuctl traces` prints it under the trace's row."""
    workload = start_workload(job=43, rank=0, world_size=1, env=_fake_cupti_env(build_dir))
    cli.wait_attached([workload.pid])
    result, trace, res = _trace_one(cli, workload)
    assert result.returncode == 0, result.stdout + result.stderr
    stored = res["summary"]
    analyzed = subprocess.run(
        [cli.binary, "analyze", "--json", str(trace.path / res["file"])],
        capture_output=True, text=True, timeout=60)
    assert analyzed.returncode == 0, analyzed.stdout + analyzed.stderr
    summary = json.loads(analyzed.stdout)["traces"][0]["summary"]
    assert summary["gpu_span_ns"] > 0 and summary["top_kernel"], summary
    for key, value in summary.items():
        if key == "busy_ns":
            got = sum(int(stored.get(k, 0)) for k in ("compute_ns", "communication_ns",
                                                       "memory_ns"))
        elif key == "top_kernel":
            got = stored.get(key, "")
        else:
            got = int(stored.get(key, 0))  # int64 as a string; zero left out
        assert got == value, (key, stored, summary)

    listed = cli.run("traces")
    assert listed.returncode == 0, listed.stderr
    busy = f'{100 * summary["busy_ns"] / summary["gpu_span_ns"]:.0f}'
    line = [l for l in listed.stdout.splitlines() if l.startswith("    GPU busy")]
    assert len(line) == 1, listed.stdout
    assert line[0].startswith(f"    GPU busy {busy}%"), line
    assert f"top {summary['top_kernel']} " in line[0], line
    assert len(line[0]) <= 100, line
