"""Hostile or broken peers on the IPC socket. The daemon must drop what they
send, keep serving real workloads, and never store data it cannot trust.

Messages are encoded by hand (e2e_util) so the tests can send exactly the
bytes they want, valid or not; a valid client made the same way is traced
successfully first, which proves the encoding is right."""

import fcntl
import os
import socket
import struct
import time

import pytest

from e2e_util import (TraceDir, check_workload_trace, decode_fields, encode_capture_result,
                      encode_hello, encode_payload_chunk, load_trace, wait_until)

STATUS_OK = 1
TRANSPORT_MEMFD = 1
TRANSPORT_INLINE = 2
RECV_LIMIT = 1 << 17


class FakeClient:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
        self.sock.connect(str(path))

    def close(self):
        self.sock.close()

    def send(self, data, fds=()):
        if fds:
            socket.send_fds(self.sock, [data], list(fds))
        else:
            self.sock.send(data)

    def recv(self, timeout=30.0):
        """One DaemonMessage as {field: [values]}; None on EOF or reset."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(RECV_LIMIT)
        except ConnectionResetError:
            return None
        return decode_fields(data) if data else None

    def hello(self, pid=None, job="fake", rank=0):
        self.send(encode_hello(pid if pid is not None else os.getpid(), job, rank=rank,
                               world_size=max(1, rank + 1)))

    def expect_ack(self):
        message = self.recv()
        assert message is not None and 1 in message, f"no HelloAck: {message}"
        return decode_fields(message[1][0])

    def expect_closed(self, timeout=30.0):
        """The daemon drops the connection without sending anything useful."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, "the daemon kept the connection open"
            try:
                message = self.recv(timeout=left)
            except socket.timeout:
                continue
            if message is None:
                return
            assert 1 not in message and 2 not in message, \
                f"daemon answered a refused peer: {message}"

    def expect_start_capture(self):
        message = self.recv()
        assert message is not None and 2 in message, f"no StartCapture: {message}"
        start = decode_fields(message[2][0])
        return (start[1][0].decode(), start.get(2, [0])[0], start.get(3, [0])[0])


def records_payload(pid, start_ns, end_ns, range_name="fake_range"):
    """A valid GPCR payload (proto/gpuctl/v1/records.h): one thread name, one
    step and one range."""
    strings = [range_name.encode(), b"fake-thread"]
    events = (struct.pack("<HHIII", 3, 16, 1000, 1, 0)
              + struct.pack("<HHIqQ", 2, 24, 1000, start_ns + 1000, 1)
              + struct.pack("<HHIqqIIQ", 1, 40, 1000, start_ns + 2000, start_ns + 5000, 0, 0, 1))
    string_section = b""
    for s in strings:
        string_section += struct.pack("<I", len(s)) + s + b"\0" * (-len(s) % 4)
    events_offset = 96
    strings_offset = events_offset + len(events)
    header = struct.pack("<IHHIIQQQQQQQqqiI", 0x52435047, 1, 0, 96, 0, 3, events_offset,
                         len(events), strings_offset, len(string_section), len(strings), 0,
                         start_ns, end_ns, pid, 0)
    assert len(header) == 96
    return header + events + string_section


def sealed_memfd(data, seal=True):
    fd = os.memfd_create("fake-payload", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, data)
    if seal:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE)
    return fd


@pytest.fixture
def real_workload(cli, start_workload):
    workload = start_workload(job="real", rank=0, world_size=1)
    cli.wait_attached([workload.pid])
    return workload


def assert_real_workload_traced(cli, workload):
    result, trace = cli.trace("--job", "real", "--duration", "1s")
    assert result.returncode == 0, result.stdout + result.stderr
    res = trace.result_for(workload.pid)
    assert res["status"] == "CAPTURE_STATUS_OK", res
    check_workload_trace(trace.path / res["file"], workload.pid, 0)
    assert workload.proc.poll() is None


def test_valid_fake_client_registers(cli, daemon):
    client = FakeClient(daemon.socket)
    client.hello(job="fake")
    ack = client.expect_ack()
    assert ack.get(1) == [1], ack  # protocol_major
    cli.wait_attached([os.getpid()])
    client.close()
    wait_until(lambda: os.getpid() not in cli.attached_pids(), what="the fake client to detach")


@pytest.mark.parametrize("datagram", [
    pytest.param(b"\xff" * 64, id="garbage"),
    pytest.param(b"\x0a\x7f\x08", id="truncated-hello"),
    pytest.param(b"\x0a\x05" + b"\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", id="bad-varint"),
    pytest.param(b"\x12\x00", id="capture-started-before-hello"),
    pytest.param(b"x" * (200 * 1024), id="200KiB"),
])
def test_malformed_first_datagram_is_dropped(cli, daemon, real_workload, datagram):
    client = FakeClient(daemon.socket)
    client.send(datagram)
    client.expect_closed()
    assert os.getpid() not in cli.attached_pids()
    assert daemon.alive()
    assert_real_workload_traced(cli, real_workload)


def test_garbage_after_hello_drops_the_peer(cli, daemon, real_workload):
    client = FakeClient(daemon.socket)
    client.hello()
    client.expect_ack()
    cli.wait_attached([os.getpid()])
    client.send(b"\xff\xfe" * 100)
    client.expect_closed()
    wait_until(lambda: os.getpid() not in cli.attached_pids(), what="the peer to be dropped")
    assert_real_workload_traced(cli, real_workload)


@pytest.mark.parametrize("hello", [
    pytest.param(lambda: encode_hello(1, "liar"), id="pid-of-init"),
    pytest.param(lambda: encode_hello(os.getpid() + 1, "liar"), id="pid-of-other"),
    pytest.param(lambda: encode_hello(os.getpid(), "liar", major=99), id="protocol-major-99"),
])
def test_refused_hello(cli, daemon, real_workload, hello):
    client = FakeClient(daemon.socket)
    client.send(hello())
    client.expect_closed()
    assert not [p for p in cli.processes() if str(p.get("job_id")) == "liar"]
    assert_real_workload_traced(cli, real_workload)


def _open_regular_file(path, data):
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


# Each builds (fd or None, transport, declared size) from a valid payload.
BAD_DELIVERIES = {
    "regular-file": lambda payload, tmp: (
        _open_regular_file(tmp / "payload.bin", payload), TRANSPORT_MEMFD, len(payload)),
    "unsealed-memfd": lambda payload, tmp: (
        sealed_memfd(payload, seal=False), TRANSPORT_MEMFD, len(payload)),
    "size-mismatch": lambda payload, tmp: (
        sealed_memfd(payload), TRANSPORT_MEMFD, len(payload) + 4096),
    "bad-magic": lambda payload, tmp: (
        sealed_memfd(b"XXXX" + payload[4:]), TRANSPORT_MEMFD, len(payload)),
    "truncated-records": lambda payload, tmp: (
        sealed_memfd(payload[:100]), TRANSPORT_MEMFD, 100),
    "memfd-without-fd": lambda payload, tmp: (None, TRANSPORT_MEMFD, len(payload)),
}


def _trace_fake_and_real(cli, client, deliver):
    """Traces job "real" with the fake client in it; `deliver(trace_id, start,
    duration)` answers the StartCapture. Returns (CLI output, exit code,
    downloaded TraceDir or None)."""
    # This process (the fake client) is the real workload's parent, hence its
    # launcher: only --include-helpers selects it too.
    tracer = cli.popen("trace", "--job", "real", "--include-helpers", "--duration", "1s",
                       "-o", str(cli.workdir / "mixed"))
    try:
        trace_id, start_ns, duration_ns = client.expect_start_capture()
        deliver(trace_id, start_ns, duration_ns)
        out, err = tracer.communicate(timeout=60)
    finally:
        if tracer.poll() is None:
            tracer.kill()
            tracer.wait()
    return out + err, tracer.returncode, TraceDir.find(cli.workdir / "mixed")


def _wait_window_end(start_ns, duration_ns):
    # The result is only meaningful once the window the daemon asked for closed.
    end = (start_ns + duration_ns) / 1e9
    wait_until(lambda: time.time() >= end, timeout=30, interval=0.01, what="window end")


@pytest.mark.parametrize("transport", ["memfd", "inline"])
def test_valid_hand_made_payload_is_stored(cli, daemon, real_workload, transport):
    client = FakeClient(daemon.socket)
    client.hello(job="real", rank=1)
    client.expect_ack()
    cli.wait_attached([os.getpid()])

    def deliver(trace_id, start_ns, duration_ns):
        _wait_window_end(start_ns, duration_ns)
        payload = records_payload(os.getpid(), start_ns, start_ns + duration_ns)
        if transport == "memfd":
            fd = sealed_memfd(payload)
            client.send(encode_capture_result(trace_id, STATUS_OK, TRANSPORT_MEMFD,
                                              len(payload), 3), fds=[fd])
            os.close(fd)
        else:
            client.send(encode_capture_result(trace_id, STATUS_OK, TRANSPORT_INLINE,
                                              len(payload), 3))
            half = len(payload) // 2
            client.send(encode_payload_chunk(trace_id, 0, payload[:half]))
            client.send(encode_payload_chunk(trace_id, half, payload[half:]))

    output, code, trace = _trace_fake_and_real(cli, client, deliver)
    assert code == 0, output
    res = trace.result_for(os.getpid())
    assert res["status"] == "CAPTURE_STATUS_OK", res
    _, doc = load_trace(trace.path / res["file"])
    names = {e.get("name") for e in doc["traceEvents"]}
    assert "fake_range" in names, sorted(n for n in names if n)[:30]
    assert trace.result_for(real_workload.pid)["status"] == "CAPTURE_STATUS_OK"


@pytest.mark.parametrize("kind", sorted(BAD_DELIVERIES))
def test_untrusted_payload_is_refused(cli, daemon, real_workload, workdir, kind):
    client = FakeClient(daemon.socket)
    client.hello(job="real", rank=1)
    client.expect_ack()
    cli.wait_attached([os.getpid()])

    def deliver(trace_id, start_ns, duration_ns):
        _wait_window_end(start_ns, duration_ns)
        payload = records_payload(os.getpid(), start_ns, start_ns + duration_ns)
        fd, transport, size = BAD_DELIVERIES[kind](payload, workdir)
        message = encode_capture_result(trace_id, STATUS_OK, transport, size, 3)
        client.send(message, fds=[fd] if fd is not None else ())
        if fd is not None:
            os.close(fd)

    output, code, trace = _trace_fake_and_real(cli, client, deliver)
    assert code == 1, output
    res = trace.result_for(os.getpid())
    # Refused data is either reported as such, or its sender is disconnected
    # (LOST) when the transport itself was abused; never stored.
    assert res["status"] in ("CAPTURE_STATUS_REJECTED", "CAPTURE_STATUS_FAILED",
                             "CAPTURE_STATUS_LOST"), res
    assert res.get("message"), res
    assert not res.get("file"), res
    assert not list(trace.path.glob(f"*pid{os.getpid()}*")), list(trace.path.iterdir())
    assert trace.result_for(real_workload.pid)["status"] == "CAPTURE_STATUS_OK"
    assert daemon.alive()
    # The fake client (if still attached) would be selected again and never answer.
    client.close()
    wait_until(lambda: os.getpid() not in cli.attached_pids(), what="the fake client to detach")
    assert_real_workload_traced(cli, real_workload)
