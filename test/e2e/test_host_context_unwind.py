"""Host context's call chains through code built without frame pointers
(as Debian's packages and PyTorch's wheels are): the kernel's
frame-pointer walk loses the callers, `gpuctl trace --unwind dwarf` finds
them from a copy of each sample's stack and the modules' call-frame
information."""

import os
import signal
import subprocess

import pytest

from conftest import LineReader, build_output
from e2e_util import load_trace, preload_value, wait_until

HOT = "gpuctl_e2e_hot_loop"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (perf events on any process)")


@pytest.fixture
def nofp_workload(build_dir, lib_path, workdir):
    """The host-context workload built without frame pointers, under
    libgpuctl.so (job "nofp"); killed with its session at teardown."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GPUCTL_") and k not in ("RANK", "LD_PRELOAD")}
    env.update({"GPUCTL_SOCKET": str(workdir / "gpuctl.sock"), "GPUCTL_JOB_ID": "nofp",
                "RANK": "0", "WORLD_SIZE": "1", "LD_PRELOAD": preload_value(lib_path)})
    proc = subprocess.Popen(
        [str(build_output(build_dir, "bin/gpuctl_e2e_host_context_workload_nofp"))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True)
    reader = LineReader(proc.stdout)
    wait_until(lambda: "ready" in reader.snapshot(), what="the workload ready")
    yield proc
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _main_thread_stacks(trace, pid):
    res = trace.result_for(pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    _, doc = load_trace(trace.path / res["file"])
    stacks = [e["args"]["stack"] for e in doc["traceEvents"]
              if e.get("cat") == "cpu_sample" and e["pid"] == pid and e["tid"] == pid
              and e["name"] == HOT]
    assert len(stacks) >= 10, f"{len(stacks)} samples in {HOT}"
    return res["host_context"], stacks


def test_dwarf_unwinding_finds_the_callers_frame_pointers_lose(cli, nofp_workload):
    pid = nofp_workload.pid
    cli.wait_attached([pid])

    result, trace = cli.trace("--job", "nofp", "--duration", "1s", "--activities", "cpu",
                              "--unwind", "dwarf")
    assert result.returncode == 0, result.stdout + result.stderr
    host, stacks = _main_thread_stacks(trace, pid)
    assert host["unwind"] == "HOST_UNWIND_DWARF", host
    assert int(host.get("dwarf_unwound", 0)) > 0, host
    assert "unwound with DWARF" in result.stdout, result.stdout
    through_main = [s for s in stacks if len(s) > 1 and s[1] == "main"]
    assert len(through_main) >= 0.8 * len(stacks), stacks[:5]

    # The same process with frame pointers only: the walk does not reach
    # main (rbp is an ordinary register in this build).
    result, trace = cli.trace("--job", "nofp", "--duration", "1s", "--activities", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    host, stacks = _main_thread_stacks(trace, pid)
    assert host.get("unwind", "HOST_UNWIND_UNSPECIFIED") == "HOST_UNWIND_UNSPECIFIED", host
    walked_to_main = [s for s in stacks if "main" in s]
    assert len(walked_to_main) < 0.5 * len(stacks), stacks[:5]
