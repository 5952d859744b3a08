"""Host context in a trace window (--activities cpu,sched): gpuctld samples
the traced process and its helper with perf events during the window, and
the stored trace shows where each thread spent CPU time and how long it was
off the CPU. Without the privilege the trace still succeeds and says why.
Its protobuf merge carries the samples as Perfetto callstack samples."""

import collections
import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

from conftest import LineReader, build_output
from e2e_util import load_trace, preload_value, timestamp_ns, wait_until

NOBODY = 65534
SETPRIV = shutil.which("setpriv")
BLOCK_MS = 300
HOT = "gpuctl_e2e_hot_loop"
HELPER = "gpuctl_e2e_helper_loop"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (perf events on any process)")


@pytest.fixture
def host_workload(build_dir, lib_path, workdir):
    """Starts the host-context workload under libgpuctl.so (job "hc");
    returns (Popen, helper pid). Killed with its session at teardown."""
    procs = []

    def start(*extra):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUCTL_") and k not in ("RANK", "LD_PRELOAD")}
        env.update({"GPUCTL_SOCKET": str(workdir / "gpuctl.sock"), "GPUCTL_JOB_ID": "hc",
                    "RANK": "0", "WORLD_SIZE": "1", "LD_PRELOAD": preload_value(lib_path)})
        proc = subprocess.Popen(
            [str(build_output(build_dir, "bin/gpuctl_e2e_host_context_workload")),
             "--block-ms", str(BLOCK_MS), *extra],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True)
        procs.append(proc)
        reader = LineReader(proc.stdout)
        lines = wait_until(lambda: (lambda got: got if "ready" in got else None)(
            reader.snapshot()), what="the workload ready")
        helper = int(next(line.split()[1] for line in lines if line.startswith("helper ")))
        return proc, helper

    yield start
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def _events(doc, cat):
    return [e for e in doc["traceEvents"] if e.get("cat") == cat]


def _thread_ids(doc, pid):
    """{thread name: tid} of `pid` from the trace's thread_name metadata."""
    return {e["args"]["name"]: e["tid"] for e in doc["traceEvents"]
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("pid") == pid}


def test_cpu_and_sched_show_the_hot_function_the_blocking_calls_and_the_helper(
        cli, host_workload):
    proc, helper = host_workload()
    cli.wait_attached([proc.pid])

    result, trace = cli.trace("--job", "hc", "--duration", "1s", "--activities", "cpu,sched")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(proc.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    host = res["host_context"]
    assert host["state"] == "STATE_RECORDED", host
    assert int(host.get("samples", 0)) > 0 and int(host.get("off_cpu_intervals", 0)) > 0, host
    assert int(host["processes"]) == 2, host  # the workload and its helper
    assert "host context:" in result.stdout, result.stdout

    _, doc = load_trace(trace.path / res["file"])
    base = doc["baseTimeNanoseconds"]
    window = (timestamp_ns(res["window_start"]), timestamp_ns(res["window_end"]))
    samples = _events(doc, "cpu_sample")
    assert len(samples) == int(host["samples"])
    # Every sample lies inside the process's window, on the trace's clock.
    for sample in samples:
        at = base + round(sample["ts"] * 1000)
        assert window[0] - 1000 <= at <= window[1] + 1000, (sample, window)

    # The spinning main thread: its samples' top frame is the hot function.
    main = [s for s in samples if s["pid"] == proc.pid and s["tid"] == proc.pid]
    assert len(main) >= 10, f"{len(main)} samples of the main thread"
    hot = [s for s in main if s["name"] == HOT]
    assert len(hot) >= 0.8 * len(main), [s["name"] for s in main][:20]
    assert hot[0]["args"]["stack"][0] == HOT

    # The helper is sampled on a track of its own, named by its process.
    helper_samples = [s for s in samples if s["pid"] == helper]
    assert helper_samples, "no sample of the helper process"
    assert any(s["name"] == HELPER for s in helper_samples), \
        [s["name"] for s in helper_samples][:20]
    names = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert names.get(helper) == "helper", names

    # The blocking read and the nanosleep: off-CPU slices of BLOCK_MS (±10 %).
    threads = _thread_ids(doc, proc.pid)
    off_cpu = _events(doc, "off_cpu")
    for name in ("blocker", "sleeper"):
        assert name in threads, threads
        mine = [e for e in off_cpu if e["tid"] == threads[name]]
        full = [e for e in mine if e["name"] == "off_cpu (blocked)" and
                abs(e["dur"] - BLOCK_MS * 1000) <= BLOCK_MS * 100]
        assert full, f"{name}: no off-CPU slice of {BLOCK_MS} ms: " + \
            str([(e["name"], e["dur"]) for e in mine])
        # Slices of one thread never overlap.
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in mine)
        assert all(a[1] <= b[0] + 0.001 for a, b in zip(spans, spans[1:])), spans
    # A blocked slice carries the stack its thread left the CPU with: the
    # system call's wrapper, then the workload's function that called it.
    stacks = [e["args"]["stack"] for e in off_cpu
              if e["tid"] == threads["blocker"] and "stack" in e["args"]]
    assert stacks and all(len(s) >= 2 for s in stacks), stacks[:3]
    assert sum(s[1] == "blocker" for s in stacks) * 10 >= len(stacks) * 9, stacks[:5]

    # gpuctl analyze reads it back: the blocker thread's time goes to its
    # blocking read, named with its caller.
    analyzed = subprocess.run([cli.binary, "analyze", "--json", str(trace.path / res["file"])],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert analyzed.returncode in (0, 1), analyzed.stdout + analyzed.stderr
    (report,) = json.loads(analyzed.stdout)["traces"]
    host_context = report["host_context"]
    assert host_context["samples"] == len(samples), host_context
    by_tid = {t["tid"]: t for t in host_context["threads"]}
    blocker = by_tid[threads["blocker"]]
    assert blocker["name"] == "blocker", blocker
    assert blocker["blocked_in"][0]["name"].endswith(" <- blocker"), blocker["blocked_in"]
    # Off the CPU nearly all the window: blocked, or `unknown` while already
    # blocked when its recording began.
    assert blocker["blocked_ns"] + blocker["unknown_ns"] >= 0.9 * blocker["total_ns"], blocker
    assert blocker["blocked_ns"] >= BLOCK_MS * 1_000_000, blocker
    hot = by_tid[proc.pid]
    assert hot["on_cpu"][0]["name"] == HOT, hot["on_cpu"]
    assert proc.poll() is None


def test_short_lived_workers_keep_their_names_after_they_exit_or_exec(cli, host_workload):
    """Workers of 150 ms (forked every 200 ms by a thread of the traced
    process; every other one then execs another program) are followed from
    their fork and named from what the capture kept, though each is gone
    when the window's frames are named."""
    proc, helper = host_workload("--short-workers")
    cli.wait_attached([proc.pid])
    result, trace = cli.trace("--job", "hc", "--duration", "1s", "--activities", "cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(proc.pid)
    host = res["host_context"]
    assert host["state"] == "STATE_RECORDED", host
    _, doc = load_trace(trace.path / res["file"])
    workers = collections.defaultdict(list)
    for sample in _events(doc, "cpu_sample"):
        if sample["pid"] not in (proc.pid, helper):
            workers[sample["pid"]].append(sample["name"])
    assert len(workers) >= 3, dict(workers)
    names = collections.Counter(name for got in workers.values() for name in got)
    assert names["gpuctl_e2e_short_worker_loop"] >= 3, names
    assert names["gpuctl_e2e_execed_loop"] >= 3, names
    # Unnamed frames are addresses ("0x...") or module offsets ("...+0x...").
    unnamed = sum(n for name, n in names.items() if "0x" in name)
    assert unnamed * 5 <= sum(names.values()), names


# A real-time process that wakes every 2 ms on one CPU and spins half a
# millisecond: it takes that CPU from whatever runs there at each wake-up.
COMPETITOR = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
with open("/proc/self/comm", "w") as comm:
    comm.write("competitor")
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
print("ready", flush=True)
while True:
    time.sleep(0.002)
    end = time.monotonic() + 0.0005
    while time.monotonic() < end:
        pass
"""


def test_a_preempted_thread_names_the_process_that_took_its_cpu(cli, host_workload):
    proc, helper = host_workload()
    cli.wait_attached([proc.pid])
    # The workload's threads and its helper on one CPU, with the competitor.
    cpu = min(os.sched_getaffinity(0))
    for pid in (proc.pid, helper):
        for tid in os.listdir(f"/proc/{pid}/task"):
            os.sched_setaffinity(int(tid), {cpu})
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR, str(cpu)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL)
    try:
        reader = LineReader(competitor.stdout)
        wait_until(lambda: "ready" in reader.snapshot(), what="the competitor ready")
        result, trace = cli.trace("--job", "hc", "--duration", "1s", "--activities", "cpu,sched")
    finally:
        competitor.kill()
        competitor.wait()
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(proc.pid)
    host = res["host_context"]
    assert host["state"] == "STATE_RECORDED", host
    assert "not named" not in host.get("reason", ""), host

    _, doc = load_trace(trace.path / res["file"])
    preempted = [e for e in _events(doc, "off_cpu")
                 if e["tid"] == proc.pid and e["name"] == "off_cpu (preempted)"]
    by = collections.Counter(e["args"].get("preempted_by") for e in preempted)
    # Named by comm and the daemon's pid; the competitor most often.
    assert by.most_common(1)[0][0] == f"competitor (pid {competitor.pid})", by
    assert by[f"competitor (pid {competitor.pid})"] >= 20, by
    assert by[None] * 10 <= len(preempted), by

    # gpuctl analyze: the main thread's preemptions go to their takers, the
    # competitor among them (by time the helper, on the same CPU, may lead).
    analyzed = subprocess.run([cli.binary, "analyze", "--json", str(trace.path / res["file"])],
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert analyzed.returncode in (0, 1), analyzed.stdout + analyzed.stderr
    (report,) = json.loads(analyzed.stdout)["traces"]
    main = next(t for t in report["host_context"]["threads"] if t["tid"] == proc.pid)
    assert f"competitor (pid {competitor.pid})" in [p["name"] for p in main["preempted_by"]], main
    assert proc.poll() is None


@pytest.mark.skipif(SETPRIV is None, reason="needs setpriv (util-linux)")
def test_without_perf_privileges_the_trace_still_succeeds_and_says_why(
        start_daemon, cli_for, workdir, host_workload):
    # gpuctld as nobody without capabilities: perf events on the root-owned
    # workload are refused. Its socket and store under a sticky directory it
    # may write to.
    os.chmod(workdir, 0o1777)
    daemon = start_daemon("--socket-mode", "0666", wrapper=[
        SETPRIV, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
        "--inh-caps=-all", "--bounding-set=-all"])
    cli = cli_for(daemon)
    proc, _ = host_workload()
    cli.wait_attached([proc.pid])

    result, trace = cli.trace("--job", "hc", "--duration", "1s", "--activities", "cpu,sched")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(proc.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    host = res["host_context"]
    assert host["state"] == "STATE_UNAVAILABLE", host
    assert "CAP_PERFMON" in host["reason"], host
    assert "host context unavailable" in result.stdout, result.stdout
    # The process's own trace is stored, without host events.
    _, doc = load_trace(trace.path / res["file"])
    assert doc["traceEvents"], doc
    assert not _events(doc, "cpu_sample") and not _events(doc, "off_cpu")
    assert proc.poll() is None


def test_an_iteration_window_gets_the_host_context_of_its_steps(cli, start_workload):
    # The sample workload spins through 20 ms steps; the window is 10 of them.
    workload = start_workload(job="hc-iter", rank=0, world_size=1, step_ms=20)
    cli.wait_attached([workload.pid])
    result, trace = cli.trace("--job", "hc-iter", "--iterations", "10", "--duration", "60s",
                              "--activities", "cpu", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    assert int(res["steps"]) == 10, res
    host = res["host_context"]
    assert host["state"] == "STATE_RECORDED", host
    assert int(host.get("samples", 0)) > 0, host
    assert int(host.get("off_cpu_intervals", 0)) == 0, host  # sched was not asked for
    _, doc = load_trace(trace.path / res["file"])
    base = doc["baseTimeNanoseconds"]
    window = (timestamp_ns(res["window_start"]), timestamp_ns(res["window_end"]))
    samples = _events(doc, "cpu_sample")
    assert len(samples) == int(host["samples"]) and not _events(doc, "off_cpu")
    # Only the steps' stretch, though recording began at the request.
    for sample in samples:
        at = base + round(sample["ts"] * 1000)
        assert window[0] - 1000 <= at <= window[1] + 1000, (sample, window)


def test_a_protobuf_merge_carries_the_samples_as_perfetto_callstacks(
        cli, host_workload, build_dir, workdir):
    proc, _ = host_workload()
    cli.wait_attached([proc.pid])
    result, trace = cli.trace("--job", "hc", "--duration", "1s", "--activities", "kernel,cpu")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(proc.pid)
    assert int(res["host_context"].get("samples", 0)) > 0, res
    _, doc = load_trace(trace.path / res["file"])
    stacks = collections.Counter(tuple(e["args"]["stack"]) for e in _events(doc, "cpu_sample")
                                 if e["args"].get("stack"))

    out = workdir / "merged.pftrace"
    merged = subprocess.run([str(build_dir / "bin" / "gpuctl"), "analyze", str(trace.path),
                             "--merge", str(out)], capture_output=True, text=True, timeout=120,
                            stdin=subprocess.DEVNULL)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    decoded = pb.Trace()
    decoded.ParseFromString(out.read_bytes())
    names, frames, callstacks, samples = {}, {}, {}, []
    for packet in decoded.packet:
        data = packet.interned_data
        names.update((s.iid, s.str.decode()) for s in data.function_names)
        frames.update((f.iid, f.function_name_id) for f in data.frames)
        callstacks.update((c.iid, list(c.frame_ids)) for c in data.callstacks)
        if packet.HasField("perf_sample"):
            assert packet.perf_sample.callstack_iid in callstacks, "used before it is interned"
            samples.append(packet)
    # One perf sample per sample with a stack, its frames root first.
    assert len(samples) == sum(stacks.values())
    resolved = collections.Counter(
        tuple(reversed([names[frames[f]] for f in callstacks[s.perf_sample.callstack_iid]]))
        for s in samples)
    assert resolved == stacks
    assert len(callstacks) == len(stacks)
    hot = [s for s in samples if names[frames[callstacks[s.perf_sample.callstack_iid][-1]]] == HOT]
    assert len(hot) >= 10, f"{len(hot)} perf samples in {HOT}"
