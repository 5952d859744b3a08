"""What gpuctl prints when something is wrong or done: real gpuctld, real CLI."""

import json
import os
import re
import signal
import subprocess

from e2e_util import wait_until


def test_get_of_an_unknown_trace_says_so_without_the_daemons_paths(cli, daemon, start_workload,
                                                                   workdir):
    unknown = "0190c3a2-7b1e-7c4d-9a2b-3c4d5e6f7a8b"
    got = cli.run("get", unknown, "-o", str(workdir / "fetched"))
    assert got.returncode == 3, got.stdout + got.stderr
    assert got.stderr == f"gpuctl: no trace {unknown} on {daemon.address}\n", got.stderr
    assert str(daemon.store) not in got.stderr

    # A malformed id never reaches the daemon.
    bad = cli.run("get", "not-a-trace-id", "-o", str(workdir / "fetched"))
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "is not a lowercase UUIDv7" in bad.stderr, bad.stderr

    # A file the trace does not have: the files it has are listed.
    workload = start_workload(job=42, rank=0, world_size=1)
    cli.wait_attached([workload.pid])
    result, trace = cli.trace("--job", "42", "--duration", "1s", "--no-download")
    assert result.returncode == 0, result.stdout + result.stderr
    trace_id = re.search(r"gpuctl get (\S+)", result.stdout + result.stderr).group(1)
    missing = cli.run("get", trace_id, "--file", "rank7.json.gz", "-o", str(workdir / "fetched"))
    assert missing.returncode == 3, missing.stdout + missing.stderr
    assert missing.stderr.startswith(
        f'gpuctl: trace {trace_id} on {daemon.address} has no file "rank7.json.gz"; '
        f"its files: _gpuctl/{daemon.host_name}.json, "), missing.stderr
    assert f"pid{workload.pid}.json.gz" in missing.stderr, missing.stderr
    assert str(daemon.store) not in missing.stderr


def test_flags_say_what_they_accept_and_suggest_the_nearest(cli_for):
    cli = cli_for("127.0.0.1:1")  # never contacted: every case is a usage error
    cases = [
        (("traces", "--limit", "0"),
         'gpuctl: --limit: expected a number of traces, a positive integer, got "0"'),
        (("trace", "--pid", "abc", "--duration", "1s"),
         'gpuctl: --pid: expected a process id, a positive integer, got "abc"'),
        (("trace", "--job", "1", "--iterations", "abc"),
         'gpuctl: --iterations: expected a number of steps, an integer from 1 to 1000000, '
         'got "abc"'),
        (("trace", "--job", "1", "--durration", "5s"),
         "gpuctl: trace: unknown flag --durration; did you mean --duration?"),
        (("trace", "--job", "1", "--duration", "5sec"),
         'unknown unit "sec" (units: h, m, s, ms, us, ns)'),
    ]
    for args, message in cases:
        result = cli.run(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Could not convert" not in result.stderr and "not in range" not in result.stderr

    helped = subprocess.run([cli.binary, "help", "trace"], capture_output=True, text=True,
                            timeout=60)
    dashed = subprocess.run([cli.binary, "trace", "--help"], capture_output=True, text=True,
                            timeout=60)
    assert helped.returncode == 0 and dashed.returncode == 0, helped.stderr + dashed.stderr
    assert helped.stdout == dashed.stdout
    assert "--duration" in helped.stdout


def _assert_keys_sorted(node, where="$"):
    if isinstance(node, list):
        for i, item in enumerate(node):
            _assert_keys_sorted(item, f"{where}[{i}]")
    elif isinstance(node, tuple):  # (key, value) pairs of an object, in printed order
        keys = [k for k, _ in node]
        assert keys == sorted(keys), f"{where}: keys not sorted: {keys}"
        for key, value in node:
            _assert_keys_sorted(value, f"{where}.{key}")


def test_trace_ends_with_how_to_open_the_files_and_json_keys_are_sorted(cli, start_workload):
    workload = start_workload(job=42, rank=0, world_size=1, env={"GPUCTL_LABELS": "zz=1,aa=2"})
    cli.wait_attached([workload.pid])
    result, trace = cli.trace("--job", "42", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert trace is not None
    assert result.stdout.endswith(
        "open a file in https://ui.perfetto.dev (Open trace file) or chrome://tracing (Load)\n"
    ), result.stdout

    for args in (("ps", "--json"), ("traces", "--json"), ("status", "--json")):
        listed = cli.run(*args)
        assert listed.returncode == 0, listed.stderr
        _assert_keys_sorted(json.loads(listed.stdout, object_pairs_hook=tuple))
    result, _ = cli.trace("--job", "42", "--duration", "1s", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    _assert_keys_sorted(json.loads(result.stdout, object_pairs_hook=tuple))


def test_a_cancelled_trace_says_so_in_its_manifest_the_listing_and_get(cli, start_workload,
                                                                        workdir):
    workload = start_workload(job="cancel", rank=0, world_size=1)
    cli.wait_attached([workload.pid])
    tracer = subprocess.Popen(cli.args("trace", "--job", "cancel", "--duration", "10m",
                                       "--no-download"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    wait_until(lambda: any(p["pid"] == workload.pid
                           and p.get("capture_state") == "CAPTURE_STATE_CAPTURING"
                           for p in cli.processes()), what="the process capturing")
    tracer.send_signal(signal.SIGINT)
    stdout, stderr = tracer.communicate(timeout=60)
    assert tracer.returncode == 130, stdout + stderr

    def listed():
        result = cli.run("traces", "--json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout).get("traces") or None

    traces = wait_until(listed, what="the cancelled trace listed")
    manifest = traces[0]
    trace_id = manifest["traceId"]
    assert manifest["status"] == "TRACE_STATUS_CANCELLED", manifest
    cancellation = manifest["cancellation"]
    assert cancellation["cancelledBy"].startswith("ipv4:127.0.0.1:"), cancellation
    assert "cancelled its Trace call" in cancellation["reason"], cancellation
    assert cancellation["cancelledAt"], cancellation

    table = cli.run("traces")
    assert table.returncode == 0, table.stderr
    assert re.search(r"\n    cancelled at .* by ipv4:127\.0\.0\.1:\d+: the caller cancelled",
                     table.stdout), table.stdout

    got = cli.run("get", trace_id, "-o", str(workdir / "fetched"))
    assert got.returncode == 1, got.stdout + got.stderr
    assert f"gpuctl: trace {trace_id} was cancelled at " in got.stderr, got.stderr
    assert f"saved to {workdir / 'fetched' / trace_id}" in got.stdout, got.stdout


def test_a_pid_reaching_several_jobs_is_refused_unless_all_jobs_is_asked(cli, start_workload):
    # This test's process started both workloads and is not attached: a
    # common ancestor of two jobs, as a login shell would be.
    a = start_workload(job="a", rank=0, world_size=1)
    b = start_workload(job="b", rank=0, world_size=1)
    cli.wait_attached([a.pid, b.pid])
    me = str(os.getpid())

    result, trace = cli.trace("--pid", me, "--duration", "1s")
    assert result.returncode == 4, result.stdout + result.stderr
    assert trace is None
    assert (f"pid {me} is not an attached process; as an ancestor it reaches processes of 2 jobs"
            in result.stderr), result.stderr
    assert "--all-jobs" in result.stderr and "--job ID" in result.stderr, result.stderr

    listed = cli.run("ps", "--pid", me)
    assert listed.returncode == 4, listed.stdout + listed.stderr

    for args in (("--pid", "1"), ("--pid", "1", "--all-jobs"), ("--pid", "1", "--job", "a")):
        result, trace = cli.trace(*args, "--duration", "1s")
        assert result.returncode == 4, (args, result.stdout + result.stderr)
        assert "pid 1 is not an attached process, and every process descends from it" in \
            result.stderr, result.stderr

    # Asked for explicitly, or narrowed to one job, it traces.
    result, trace = cli.trace("--pid", me, "--all-jobs", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {int(r["pid"]) for r in trace.results} == {a.pid, b.pid}
    result, trace = cli.trace("--pid", me, "--job", "a", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    assert {int(r["pid"]) for r in trace.results} == {a.pid}
