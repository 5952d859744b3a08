"""Unmodified PyTorch jobs traced through libkineto's daemon protocol: the
real PyTorch from PyPI runs a small CPU training loop with
KINETO_USE_DAEMON=1 and no gpuctl library, and `gpuctl trace` captures
PyTorch's own trace, stored and fetched like any other.

Registered under the CTest label `torch` (test/CMakeLists.txt). Most loops
poll every FAST_POLL_SECS through KINETO_CONFIG; one keeps kineto's default
period.
"""

import collections
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

from dyno_client import gputrace
from e2e_util import (TraceDir, load_trace, manifest_paths, metrics_address, scrape, snake_keys,
                      timestamp_ns, trace_results, wait_until)
from torch_fixtures import (KINETO_DEADLINE_S, TRAIN_LOOP, kineto_daemon, kineto_socket_dir,  # noqa: F401
                            start_torch, steps_printed, torch_python)

JOB = "kineto-e2e"
# How far an event may sit outside the result's window: kineto's clock and
# the daemon's are the same (CLOCK_REALTIME), its window edges are not.
EDGE_NS = 200_000_000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_kineto_attached(cli, pids):
    cli.wait_attached(pids, timeout=KINETO_DEADLINE_S)


def trace_ok(cli, *args, expect_pids):
    result, trace = cli.trace(*args, timeout=KINETO_DEADLINE_S + 60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None, result.stdout + result.stderr
    assert {int(r["pid"]) for r in trace.results} == set(expect_pids), trace.results
    for r in trace.results:
        assert r["status"] == "CAPTURE_STATUS_OK", r
    return trace


def kineto_events(trace, pid):
    """The stored file of `pid` as a document, checked for gpuctl's tag."""
    result = trace.result_for(pid)
    text, doc = load_trace(trace.path / result["file"])
    assert doc["gpuctl"]["trace_id"] == trace.trace_id
    assert doc["gpuctl"]["pid"] == pid
    rank = int(result.get("rank", -1))
    if rank >= 0:
        assert doc["gpuctl"]["rank"] == rank
        assert f'"rank": {rank}' in text.splitlines()[0]  # where HTA looks first
    return result, doc


def check_loop_operators(result, doc, step_ms, max_steps=None):
    """The loop's operators are there, consistent with its steps and inside
    the result's window; returns the number of train_step ranges."""
    events = doc["traceEvents"]
    names = collections.Counter(e["name"] for e in events if e.get("cat") == "cpu_op")
    ranges = [e for e in events if e.get("cat") == "user_annotation"]
    steps = sum(1 for e in ranges if e["name"] == "train_step")
    assert steps >= 1, collections.Counter(e["name"] for e in ranges)
    # Three linear layers: three addmm forward per step (the edges may cut one).
    assert abs(names["aten::addmm"] - 3 * steps) <= 6, (names["aten::addmm"], steps)
    assert names["aten::mse_loss"] + names["aten::cross_entropy_loss"] >= steps - 2
    assert abs(sum(1 for e in ranges if e["name"].startswith("Optimizer.step")) - steps) <= 2
    start = timestamp_ns(result["window_start"])
    end = timestamp_ns(result["window_end"])
    window_ms = (end - start) / 1e6
    # A step takes at least step_ms: no more steps than the window holds.
    assert steps <= window_ms / step_ms + 2, (steps, window_ms)
    if max_steps is not None:
        assert steps <= max_steps
    base = doc["baseTimeNanoseconds"]
    for e in ranges:
        ts = base + int(e["ts"] * 1000)
        assert start - EDGE_NS <= ts <= end + EDGE_NS, (e, start, end)
    return steps


def run_hta(trace_dir):
    script = ("import json, sys\nfrom hta.trace_analysis import TraceAnalysis\n"
              "a = TraceAnalysis(trace_dir=sys.argv[1])\n"
              "print(json.dumps(sorted(int(r) for r in a.t.traces.keys())))\n")
    out = subprocess.run([sys.executable, "-c", script, str(trace_dir)], capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_two_ranks_traced_for_two_seconds_hold_the_loops_operators(kineto_daemon, cli_for,
                                                                   start_torch):
    cli = cli_for(kineto_daemon)
    ranks = [start_torch(job=JOB, rank=r, world_size=2) for r in (0, 1)]
    wait_kineto_attached(cli, [w.pid for w in ranks])
    listed = {p["pid"]: p for p in cli.processes()}
    for w in ranks:
        assert "kineto" in json.dumps(listed[w.pid]).lower(), listed[w.pid]

    trace = trace_ok(cli, "--job", JOB, "--duration", "2s", expect_pids=[w.pid for w in ranks])
    for w in ranks:
        result, doc = kineto_events(trace, w.pid)
        check_loop_operators(result, doc, step_ms=10)
        # The trace id kineto echoes is gpuctl's: the file is this trace's.
        assert doc.get("trace_id") == trace.trace_id
    assert len(manifest_paths(trace.path)) == 1
    assert run_hta(trace.path) == [0, 1]
    # Listed and fetched like any trace.
    assert trace.trace_id in cli.run("traces").stdout


def test_kinetos_default_poll_period_still_traces(kineto_daemon, cli_for, start_torch):
    cli = cli_for(kineto_daemon)
    loop = start_torch(job=JOB, rank=0, poll_secs=None)
    wait_kineto_attached(cli, [loop.pid])
    trace = trace_ok(cli, "--job", JOB, "--duration", "1s", expect_pids=[loop.pid])
    result, doc = kineto_events(trace, loop.pid)
    check_loop_operators(result, doc, step_ms=10)


def test_an_iteration_window_holds_that_many_steps(kineto_daemon, cli_for, start_torch):
    cli = cli_for(kineto_daemon)
    loop = start_torch(job=JOB, rank=0, step_ms=50)
    wait_kineto_attached(cli, [loop.pid])
    # kineto honours iteration keys only once it has counted steps of its
    # own; a process seconds old takes the time window gpuctld sends beside
    # them (docs/pytorch.md, "Iteration windows").
    wait_until(lambda: steps_printed(loop) >= 60, timeout=KINETO_DEADLINE_S,
               what="the loop running for a while")
    trace = trace_ok(cli, "--job", JOB, "--iterations", "3", expect_pids=[loop.pid])
    result, doc = kineto_events(trace, loop.pid)
    steps = check_loop_operators(result, doc, step_ms=50, max_steps=5)
    # kineto counts optimizer.step() calls and stops on its own thread: the
    # three asked, or one more when a step ends while it stops (a loaded
    # host). The result says how many it recorded, and each is whole: inside
    # a train_step range the window holds from its start. One more
    # train_step, cut by the window's edge, may hold none.
    ranges = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    optimizers = [e for e in ranges if e["name"].startswith("Optimizer.step#")]
    assert len(optimizers) in (3, 4), len(optimizers)
    assert int(result["steps"]) == len(optimizers), result
    whole = [s for s in ranges if s["name"] == "train_step" and any(
        s["ts"] <= o["ts"] and o["ts"] + o["dur"] <= s["ts"] + s["dur"] for o in optimizers)]
    assert len(whole) == len(optimizers), (whole, optimizers)
    assert steps <= len(optimizers) + 1, steps


def test_a_rank_killed_mid_window_ends_as_exited_and_the_other_is_ok(kineto_daemon, cli_for,
                                                                    start_torch):
    cli = cli_for(kineto_daemon)
    ranks = [start_torch(job=JOB, rank=r, world_size=2) for r in (0, 1)]
    wait_kineto_attached(cli, [w.pid for w in ranks])
    run = cli.popen("trace", "--job", JOB, "--duration", "6s", "--json", "-o",
                    str(cli.workdir / "killed"))
    # Once the window is open (its steps flow into the trace), rank 1 dies.
    wait_until(lambda: any(p.get("capture_state", "").endswith("CAPTURING")
                           for p in cli.processes() if p["pid"] == ranks[1].pid),
               timeout=KINETO_DEADLINE_S, what="rank 1 capturing")
    os.killpg(ranks[1].pid, signal.SIGKILL)
    out, err = run.communicate(timeout=KINETO_DEADLINE_S + 60)
    results = {int(r["pid"]): r for r in _json_results(out)}
    assert results[ranks[0].pid]["status"] == "CAPTURE_STATUS_OK", results
    gone = results[ranks[1].pid]
    assert gone["status"] in ("CAPTURE_STATUS_EXITED", "CAPTURE_STATUS_LOST"), gone
    assert gone.get("message"), gone


def _json_results(text):
    return trace_results(json.loads(text))


def test_a_job_with_its_own_profiler_active_is_busy(kineto_daemon, cli_for, start_torch):
    cli = cli_for(kineto_daemon)
    loop = start_torch(job=JOB, rank=0, own_profiler=True)
    wait_until(lambda: "own profiler active" in loop.lines(), timeout=KINETO_DEADLINE_S,
               what="the loop's own profiler")
    wait_kineto_attached(cli, [loop.pid])
    result, _ = cli.trace("--job", JOB, "--duration", "1s", "--json",
                          timeout=KINETO_DEADLINE_S + 60)
    (busy,) = _json_results(result.stdout)
    assert busy["status"] == "CAPTURE_STATUS_BUSY", busy
    assert busy.get("message"), busy
    # The job goes on, untouched.
    before = steps_printed(loop)
    wait_until(lambda: steps_printed(loop) > before + 5, what="more steps")


def test_a_mixed_job_traces_library_and_kineto_ranks_together(kineto_daemon, cli_for,
                                                             start_torch, start_workload):
    cli = cli_for(kineto_daemon)
    library = start_workload(job=JOB, rank=0, world_size=2)
    kineto = start_torch(job=JOB, rank=1, world_size=2)
    wait_kineto_attached(cli, [library.pid, kineto.pid])
    # Each kind counted apart in the metrics operators watch.
    metrics = scrape(metrics_address(kineto_daemon))
    assert re.search(r'^gpuctld_attached_processes\{[^}]*kind="kineto"[^}]*\} 1$', metrics,
                     re.M), metrics
    assert re.search(r'^gpuctld_attached_processes\{[^}]*kind="library"[^}]*\} 1$', metrics,
                     re.M), metrics
    trace = trace_ok(cli, "--job", JOB, "--duration", "2s", expect_pids=[library.pid, kineto.pid])
    result, doc = kineto_events(trace, kineto.pid)
    check_loop_operators(result, doc, step_ms=10)
    # Both windows opened at the common instant the kineto rank could make.
    starts = [timestamp_ns(r["window_start"]) for r in trace.results]
    assert max(starts) - min(starts) < EDGE_NS, trace.results
    assert run_hta(trace.path) == [0, 1]


def test_a_process_with_a_private_tmp_in_its_own_mount_namespace(kineto_daemon, cli_for,
                                                                  start_torch, workdir):
    cli = cli_for(kineto_daemon)
    # Its /tmp is a tmpfs no other process sees: kineto writes the trace
    # there. The test's directory (kineto's config, the socket directory)
    # and the loop's script (the checkout may itself be under /tmp) are
    # mounted back into it.
    private_tmp = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                   'k0=$(mktemp -d /run/gpuctl-keep-XXXXXX) && '
                   'k1=$(mktemp -d /run/gpuctl-keep-XXXXXX) && '
                   'mount --bind "$0" "$k0" && mount --bind "$1" "$k1" && '
                   'mount -t tmpfs tmpfs /tmp && mkdir -p "$0" "$1" && '
                   'mount --move "$k0" "$0" && mount --move "$k1" "$1" && rmdir "$k0" "$k1" && '
                   'shift && exec "$@"', str(workdir), str(TRAIN_LOOP.parent)]
    loop = start_torch(job=JOB, rank=0, wrapper=private_tmp)
    wait_until(lambda: any(line.startswith("pid ") for line in loop.lines()),
               timeout=KINETO_DEADLINE_S, what="the loop's first line")
    pid = int(next(line for line in loop.lines() if line.startswith("pid ")).split()[1])
    wait_kineto_attached(cli, [pid])
    trace = trace_ok(cli, "--job", JOB, "--duration", "1s", expect_pids=[pid])
    result, doc = kineto_events(trace, pid)
    check_loop_operators(result, doc, step_ms=10)
    # Nothing of it on the host's /tmp.
    assert not [p for p in os.listdir("/tmp") if p.endswith(f"_{pid}.json")]


def test_a_process_in_its_own_network_namespace_reaches_the_path_socket(kineto_daemon, cli_for,
                                                                        start_torch):
    cli = cli_for(kineto_daemon)
    # Abstract names are per network namespace: only the path socket in
    # KINETO_IPC_SOCKET_DIR reaches the daemon from here.
    loop = start_torch(job=JOB, rank=0, wrapper=["unshare", "--net", "--"])
    wait_kineto_attached(cli, [loop.pid])
    trace = trace_ok(cli, "--job", JOB, "--duration", "1s", expect_pids=[loop.pid])
    check_loop_operators(*kineto_events(trace, loop.pid), step_ms=10)


def _datagram(kind, payload):
    return struct.pack("=Q32s", len(payload), kind) + payload


def test_malformed_datagrams_and_a_heartbeat_flood_do_not_disturb_the_job(
        kineto_daemon, cli_for, start_torch, kineto_socket_dir):
    cli = cli_for(kineto_daemon)
    loop = start_torch(job=JOB, rank=0)
    wait_kineto_attached(cli, [loop.pid])
    sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sender.bind(str(kineto_socket_dir / "dynoconfigclientfake"))
    daemon_socket = str(kineto_socket_dir / "dynolog")
    malformed = [
        b"", b"\x00", b"x" * 39,
        _datagram(b"req", b""),                                    # no request
        _datagram(b"req", struct.pack("=iiq", 2, 1000000, 0)),     # n far too large
        _datagram(b"req", struct.pack("=iiq", 2, -1, 0)),          # n negative
        _datagram(b"req", struct.pack("=iiq", 2, 2, 0) + b"\x01"),  # pids cut short
        struct.pack("=Q32s", 1 << 40, b"req"),                     # size says 1 TiB
        _datagram(b"nope", b"\x00" * 16),                          # unknown type
        _datagram(b"ctxt", b"\x00" * 3),
        _datagram(b"r" * 32, b"\x00" * 16),                        # no NUL in the type
        os.urandom(4096),
    ]
    for datagram in malformed:
        sender.sendto(datagram, daemon_socket)
    # Fake heartbeats, from pids that are not the sender, as fast as they go
    # (those a full queue refuses are dropped: the test never waits on it).
    sender.setblocking(False)
    for i in range(20000):
        fake = _datagram(b"req", struct.pack("=iiqi", 2, 1, 7, 100000 + i))
        try:
            sender.sendto(fake, daemon_socket)
        except (BlockingIOError, ConnectionRefusedError):
            pass
    assert kineto_daemon.alive()
    # The real job keeps stepping and is traced as usual.
    before = steps_printed(loop)
    wait_until(lambda: steps_printed(loop) > before + 10, what="the loop's steps")
    trace = trace_ok(cli, "--job", JOB, "--duration", "1s", expect_pids=[loop.pid])
    check_loop_operators(*kineto_events(trace, loop.pid), step_ms=10)
    assert loop.proc.poll() is None
    # None of the fakes were registered.
    assert {p["pid"] for p in cli.processes()} == {loop.pid}


def _kineto_config(workdir, kineto_socket_dir, name, extra=""):
    config = workdir / name
    config.write_text(f"kineto:\n  mode: auto\n  socket_dir: {kineto_socket_dir}\n{extra}")
    return config


def test_a_file_over_the_cap_is_rejected_removed_and_never_stored(start_daemon, workdir,
                                                                  kineto_socket_dir, cli_for,
                                                                  start_torch):
    # Python stacks make a 2 s window of the loop several MiB of JSON.
    config = _kineto_config(workdir, kineto_socket_dir, "capped.yaml",
                            "  max_trace_bytes: 1MiB\n")
    daemon = start_daemon("--config", str(config))
    cli = cli_for(daemon)
    loop = start_torch(job=JOB, rank=0)
    wait_kineto_attached(cli, [loop.pid])
    result, _ = cli.trace("--job", JOB, "--duration", "2s", "--kineto", "with_stack,record_shapes",
                          "--json", timeout=KINETO_DEADLINE_S + 60)
    doc = json.loads(result.stdout)
    (refused,) = trace_results(doc)
    assert refused["status"] == "CAPTURE_STATUS_REJECTED", refused
    assert "1048576 bytes (kineto.max_trace_bytes)" in refused["message"], refused
    assert not refused.get("file"), refused
    # kineto's own file is gone from the process's /tmp (here the host's).
    trace_id = snake_keys(doc)["trace_id"]
    assert not list(Path("/tmp").glob(f"gpuctl-kineto-{trace_id}*")), trace_id
    # The job goes on.
    before = steps_printed(loop)
    wait_until(lambda: steps_printed(loop) > before + 5, what="more steps")


def test_dyno_gputrace_traces_a_pytorch_job_through_gpuctld(start_daemon, workdir,
                                                            kineto_socket_dir, cli_for,
                                                            start_torch):
    """dynolog's own CLI request (`dyno gputrace --job-id`), answered by
    gpuctld: the PyTorch job's operators are stored under the trace id the
    reply gives, not in the log file dyno names."""
    port = free_port()
    config = _kineto_config(workdir, kineto_socket_dir, "dyno.yaml",
                            f"  dyno_rpc_listen: 127.0.0.1:{port}\n")
    daemon = start_daemon("--config", str(config))
    cli = cli_for(daemon)
    loop = start_torch(job="4243", rank=0)
    wait_kineto_attached(cli, [loop.pid])
    wait_until(lambda: "serving dynolog's RPC" in daemon.log(), what="the dyno RPC listener")
    answer = gputrace(port, job_id=4243, log_file="/tmp/dyno_trace.json", duration_ms=1500)
    assert answer["processesMatched"] == [loop.pid], answer
    assert answer["activityProfilersTriggered"] == [loop.pid], answer
    assert answer["activityProfilersBusy"] == 0, answer
    trace_id = answer["traceId"]
    out = workdir / "dyno-fetched"

    def fetched():
        got = cli.run("get", trace_id, "-o", str(out))
        return out / trace_id if got.returncode == 0 else None

    trace = TraceDir(wait_until(fetched, timeout=KINETO_DEADLINE_S, what=f"gpuctl get {trace_id}"))
    (result,) = trace.results
    assert result["status"] == "CAPTURE_STATUS_OK", result
    result, doc = kineto_events(trace, loop.pid)
    check_loop_operators(result, doc, step_ms=10)
    assert not Path("/tmp/dyno_trace.json").exists()


def test_kinetos_default_abstract_name_reaches_gpuctld(start_daemon, workdir, cli_for,
                                                       start_torch):
    """No KINETO_IPC_SOCKET_DIR: libkineto sends to `\\0dynolog\\0`, as on a
    host where nobody configured anything. gpuctld and the loop share a
    network namespace of their own (abstract names live in one), so no
    other test's daemon can hold the name; the CLI reaches gpuctld by its
    Unix socket, which crosses network namespaces."""
    config = workdir / "abstract.yaml"
    config.write_text("kineto:\n  mode: on\n  socket_dir: \"\"\n")
    daemon = start_daemon("--config", str(config), wrapper=["unshare", "--net", "--"],
                          listen=f"unix:{workdir / 'api.sock'}")
    cli = cli_for(daemon)
    status = json.loads(cli.run("status", "--json").stdout)
    assert status["kineto"]["abstractSocket"] is True, status
    loop = start_torch(job=JOB, rank=0, socket_dir=None,
                       wrapper=["nsenter", f"--net=/proc/{daemon.proc.pid}/ns/net", "--"])
    wait_kineto_attached(cli, [loop.pid])
    trace = trace_ok(cli, "--job", JOB, "--duration", "1s", expect_pids=[loop.pid])
    check_loop_operators(*kineto_events(trace, loop.pid), step_ms=10)


def test_torchrun_workers_are_the_job_and_their_launcher_is_listed_as_such(
        kineto_daemon, cli_for, start_torch, torch_python):
    """torchrun as users run it, every process under KINETO_USE_DAEMON=1:
    the launcher polls too, and is told apart from its workers by ancestry,
    as library processes are; a job's trace takes the two ranks."""
    cli = cli_for(kineto_daemon)
    torchrun = torch_python.parent / "torchrun"
    launcher = start_torch(job=JOB, wrapper=[torchrun, "--standalone", "--nproc-per-node", "2",
                                             "--no-python"])

    def listed():
        found = [p for p in cli.processes() if p.get("job_id") == JOB]
        return found if len(found) == 3 else None

    processes = wait_until(listed, timeout=KINETO_DEADLINE_S,
                           what="torchrun's launcher and its two workers in gpuctl ps")
    roles = {p["pid"]: p["role"] for p in processes}
    assert roles.pop(launcher.pid) == "PROCESS_ROLE_LAUNCHER", processes
    assert set(roles.values()) == {"PROCESS_ROLE_WORKER"}, processes
    ranks = {int(p["rank"]): p["pid"] for p in processes if p["pid"] in roles}
    assert sorted(ranks) == [0, 1], processes
    trace = trace_ok(cli, "--job", JOB, "--duration", "2s", expect_pids=list(ranks.values()))
    for rank, pid in ranks.items():
        result, doc = kineto_events(trace, pid)
        assert int(result["rank"]) == rank
        check_loop_operators(result, doc, step_ms=10)
