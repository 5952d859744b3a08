"""No usable GPU: a process that has CUDA libraries loaded but no working
driver or device gets a host-only trace that says why GPU activity is
absent, with its host ranges, instead of an `unavailable` capture that
loses them. Neither the capture nor the job breaks."""

import ctypes
import os
from pathlib import Path

import pytest

from conftest import build_output
from e2e_util import load_trace

CUDA_LIB = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda") / "lib64"
CUDART = CUDA_LIB / "libcudart.so.13"
STUB_DRIVER = CUDA_LIB / "stubs" / "libcuda.so"


def _driver_installed():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def _need_toolkit_without_driver(*paths):
    for path in paths:
        if not path.exists():
            pytest.skip(f"needs the CUDA 13 toolkit ({path})")
    if _driver_installed():
        pytest.skip("a CUDA driver is installed: this machine may have a GPU")


def _preload(lib_path, *more):
    """LD_PRELOAD for the workload: the sanitizer runtime first (sanitized
    builds), libgpuctl.so, then `more`."""
    first = os.environ.get("GPUCTL_E2E_PRELOAD_FIRST")
    return ":".join(str(p) for p in ([first] if first else []) + [lib_path, *more])


def _loaded(pid, name):
    return name in Path(f"/proc/{pid}/maps").read_text()


def _host_only_trace(cli, workload):
    """Traces the workload; asserts a stored host-only trace with its host
    ranges; returns (result, the trace's gpuctl metadata)."""
    result, trace = cli.trace("--pid", str(workload.pid), "--duration", "1s")
    assert trace is not None, result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    assert res.get("host_only") is True, res
    _, doc = load_trace(trace.path / res["file"])
    ranges = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"}
    assert {"forward", "backward"} <= ranges, ranges
    assert not any(e.get("cat") == "kernel" for e in doc["traceEvents"])
    meta = doc["gpuctl"]
    assert meta["host_only"] is True, meta
    assert meta["cupti_active"] is False, meta
    # The reason reaches both the result and the trace's metadata.
    assert meta["host_only_reason"] and meta["host_only_reason"] in res["message"], (meta, res)
    assert res["message"].startswith("host-only trace: "), res
    # The table says so too, under the process's row.
    assert res["message"] in result.stdout, result.stdout
    assert workload.proc.poll() is None
    return res, meta


def test_real_cupti_without_a_driver_gives_a_host_only_trace(cli, start_workload, lib_path):
    # The toolkit's libcudart in the process, no libcuda anywhere: CUPTI is
    # never loaded (some builds crash on their first call without a driver).
    _need_toolkit_without_driver(CUDART)
    workload = start_workload(job="nodrv", env={"LD_PRELOAD": _preload(lib_path, CUDART)})
    cli.wait_attached([workload.pid])
    res, meta = _host_only_trace(cli, workload)
    reason = meta["host_only_reason"]
    assert reason == ("no CUDA driver on this host (libcuda.so.1 cannot be loaded); CUPTI needs "
                      "one and was not loaded"), reason
    assert not _loaded(workload.pid, "libcupti")
    # The next window does the same: nothing was left subscribed.
    _host_only_trace(cli, workload)


def test_stub_driver_gives_a_host_only_trace_without_loading_cupti(
        cli, start_workload, lib_path, workdir):
    # The toolkit's stub libcuda loaded under its soname, as on a build
    # machine whose loader path has the stubs: the driver itself says so.
    _need_toolkit_without_driver(CUDART, STUB_DRIVER)
    stub_dir = workdir / "stub-driver"
    stub_dir.mkdir()
    (stub_dir / "libcuda.so.1").symlink_to(STUB_DRIVER)
    workload = start_workload(job="stub", env={
        "LD_PRELOAD": _preload(lib_path, CUDART, stub_dir / "libcuda.so.1"),
        "CUDA_HOME": str(workdir / "no-cuda")})
    cli.wait_attached([workload.pid])
    _, meta = _host_only_trace(cli, workload)
    assert meta["host_only_reason"] == \
        "no usable CUDA device (cuDeviceGetCount: CUDA_ERROR_STUB_LIBRARY (34))", meta
    assert meta["cupti_path"] == "", meta
    # Decided before CUPTI: it was never loaded.
    assert not _loaded(workload.pid, "libcupti")


def test_cupti_failing_without_a_driver_keeps_the_host_ranges(cli, start_workload, build_dir):
    # The fake CUPTI fails cuptiSubscribe the way the real one does without
    # a driver; no libcuda is loaded in the workload.
    workload = start_workload(job="fake", env={
        "GPUCTL_CUPTI_PATH": str(build_output(build_dir, "lib/libcupti_fake.so")),
        "GPUCTL_FAKE_CUPTI_SCENARIO": "subscribe_unknown"})
    cli.wait_attached([workload.pid])
    _, meta = _host_only_trace(cli, workload)
    assert meta["host_only_reason"] == (
        "no CUDA driver in this process (libcuda.so.1 is not loaded; "
        "cuptiSubscribe: CUPTI_ERROR_UNKNOWN)"), meta
    _host_only_trace(cli, workload)
