"""Requests the CLI or the daemon must refuse, with the documented exit codes."""

import socket

import pytest


@pytest.mark.parametrize("duration", ["0", "0s", "-1s", "abc", "5 parsecs", ""])
def test_bad_duration_is_a_usage_error(cli, start_workload, duration):
    workload = start_workload(job=42)
    cli.wait_attached([workload.pid])

    result, trace = cli.trace("--job", "42", "--duration", duration)
    assert result.returncode == 2, result.stdout + result.stderr
    assert trace is None
    assert "duration" in (result.stdout + result.stderr).lower()
    # Nothing was started on the process.
    assert workload.proc.poll() is None


def test_duration_above_daemon_maximum_is_refused_with_reason(start_daemon, cli_for,
                                                              start_workload):
    daemon = start_daemon("--max-duration", "2s")
    cli = cli_for(daemon)
    workload = start_workload(job=42)
    cli.wait_attached([workload.pid])

    result, trace = cli.trace("--job", "42", "--duration", "5s")
    assert result.returncode == 4, result.stdout + result.stderr
    assert trace is None
    message = (result.stdout + result.stderr).lower()
    assert "duration" in message and ("max" in message or "2s" in message), message

    # Within the maximum it works.
    result, trace = cli.trace("--job", "42", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr


def _unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_against_dead_port_exits_4(cli_for):
    cli = cli_for(f"127.0.0.1:{_unused_port()}")
    result = cli.run("status", timeout=60)
    assert result.returncode == 4, result.stdout + result.stderr
    assert result.stderr.strip(), "no message on stderr"


def test_status_reports_the_daemon(cli, daemon, start_workload):
    workload = start_workload(job=42)
    cli.wait_attached([workload.pid])
    result = cli.run("status")
    assert result.returncode == 0, result.stdout + result.stderr
    assert str(daemon.socket) in result.stdout, result.stdout
