"""The library must never change what the host program does without a daemon."""

import socket


def test_workload_without_daemon_runs_to_completion_unchanged(start_workload, workdir):
    missing_socket = workdir / "nobody-listens.sock"
    plain = start_workload(job=42, steps=30, step_ms=1, preload=False, socket=missing_socket)
    assert plain.wait() == 0, plain.lines()
    preloaded = start_workload(job=42, steps=30, step_ms=1, preload=True, socket=missing_socket)
    assert preloaded.wait() == 0, preloaded.lines()

    # Same output apart from the pid and whether the API was found.
    def normalise(workload):
        return [line.replace(str(workload.pid), "<pid>")
                .replace("libgpuctl=loaded", "libgpuctl=absent") for line in workload.lines()]

    assert any("libgpuctl=loaded" in line for line in preloaded.lines()), preloaded.lines()
    assert any("libgpuctl=absent" in line for line in plain.lines()), plain.lines()
    assert normalise(preloaded) == normalise(plain)


def test_workload_with_dangling_socket_file_runs_to_completion(start_workload, workdir):
    # A socket file nobody listens on (a daemon that died): connect is refused.
    path = workdir / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(str(path))
    s.close()
    workload = start_workload(job=42, steps=30, step_ms=1, socket=path)
    assert workload.wait() == 0, workload.lines()
    assert any("libgpuctl=loaded" in line for line in workload.lines()), workload.lines()
