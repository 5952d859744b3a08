#!/usr/bin/env python3
"""Peak resident memory (VmHWM) of gpuctld while N processes hand over large
trace results at the same moment, with and without trace.max_ingest_bytes.

Each process is a small client speaking the IPC protocol (the e2e tests'
FakeClient, test/e2e/test_ipc_robustness.py): it attaches with its own pid,
waits for StartCapture, and at the window's end sends a valid record payload
of --payload-mib (one range repeated) as a sealed memfd or inline. The cap
bounds inline payloads held by the daemon too: a client whose payload does
not fit waits in its sends until the daemon reads it.

Usage: bench/daemon_peak_rss.py [--build build] [--clients 64] [--payload-mib 16]
       [--transport memfd|inline] [--caps 0,512MiB]
"""

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test" / "e2e"))
from e2e_util import encode_capture_result, encode_payload_chunk  # noqa: E402
from test_ipc_robustness import (STATUS_OK, TRANSPORT_INLINE, TRANSPORT_MEMFD,  # noqa: E402
                                 FakeClient, sealed_memfd)

RANGE_EVENT_BYTES = 40
INLINE_CHUNK = 60 * 1024


def big_payload(pid, start_ns, end_ns, size):
    """A valid GPCR payload of about `size` bytes: a thread name, a step and
    the same range repeated."""
    strings = [b"bench_range", b"bench-thread"]
    ranges = max(1, (size - 200) // RANGE_EVENT_BYTES)
    one = struct.pack("<HHIqqIIQ", 1, 40, 1000, start_ns + 2000, start_ns + 5000, 0, 0, 1)
    events = (struct.pack("<HHIII", 3, 16, 1000, 1, 0)
              + struct.pack("<HHIqQ", 2, 24, 1000, start_ns + 1000, 1) + one * ranges)
    string_section = b""
    for s in strings:
        string_section += struct.pack("<I", len(s)) + s + b"\0" * (-len(s) % 4)
    events_offset = 96
    strings_offset = events_offset + len(events)
    header = struct.pack("<IHHIIQQQQQQQqqiI", 0x52435047, 1, 0, 96, 0, 2 + ranges, events_offset,
                         len(events), strings_offset, len(string_section), len(strings), 0,
                         start_ns, end_ns, pid, 0)
    return header + events + string_section


def client_main(socket_path, rank, size, transport):
    """Child process: attach, answer one StartCapture, exit."""
    client = FakeClient(socket_path)
    client.hello(job="bench", rank=rank)
    client.expect_ack()
    trace_id, start_ns, duration_ns = client.expect_start_capture()
    end_ns = start_ns + duration_ns
    while time.time_ns() < end_ns:
        time.sleep(0.005)
    payload = big_payload(os.getpid(), start_ns, end_ns, size)
    # Inline payloads beyond the daemon's budget are read later: the sends
    # block until then.
    client.sock.settimeout(None)
    if transport == "memfd":
        fd = sealed_memfd(payload)
        del payload
        client.send(encode_capture_result(trace_id, STATUS_OK, TRANSPORT_MEMFD,
                                          os.fstat(fd).st_size, 3), fds=[fd])
        os.close(fd)
    else:
        client.send(encode_capture_result(trace_id, STATUS_OK, TRANSPORT_INLINE, len(payload), 3))
        for off in range(0, len(payload), INLINE_CHUNK):
            client.send(encode_payload_chunk(trace_id, off, payload[off:off + INLINE_CHUNK]))
    # Stay attached until the daemon has the data (it closes nothing; the
    # parent kills us once the trace is over).
    client.recv(timeout=600)
    os._exit(0)


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


def run_once(build, cap, args):
    work = Path(tempfile.mkdtemp(prefix="gpuctl-rss-"))
    sock, ready = work / "s.sock", work / "ready"
    daemon = subprocess.Popen(
        [str(build / "bin/gpuctld"), "--listen", "127.0.0.1:0", "--socket", str(sock),
         "--store", str(work / "store"), "--ready-file", str(ready), "--max-ingest-bytes", cap,
         "--result-grace", "10m", "--log-level", "warning"],
        stdout=subprocess.DEVNULL, stderr=open(work / "gpuctld.log", "wb"))
    children = []
    try:
        while not ready.exists() or not ready.read_text().strip():
            time.sleep(0.05)
        address = ready.read_text().strip()
        for rank in range(args.clients):
            pid = os.fork()
            if pid == 0:
                try:
                    client_main(sock, rank, args.payload_mib << 20, args.transport)
                finally:
                    os._exit(1)
            children.append(pid)
        gpuctl = [str(build / "bin/gpuctl")]
        for _ in range(600):
            status = subprocess.run(gpuctl + ["ps", "--host", address], capture_output=True,
                                    text=True)
            if status.stdout.count("bench") >= args.clients:
                break
            time.sleep(0.1)
        hwm_before = vm_hwm_kib(daemon.pid)
        started = time.monotonic()
        traced = subprocess.run(
            gpuctl + ["trace", "--job", "bench", "--include-helpers", "--duration", "1s",
                      "--no-download", "--host", address],
            capture_output=True, text=True, timeout=900)
        seconds = time.monotonic() - started
        if traced.returncode != 0:
            print(traced.stdout[-2000:] + traced.stderr[-2000:], file=sys.stderr)
        return {"cap": cap, "hwm_idle_mib": hwm_before / 1024,
                "hwm_mib": vm_hwm_kib(daemon.pid) / 1024, "seconds": seconds,
                "exit": traced.returncode}
    finally:
        for pid in children:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        daemon.terminate()
        daemon.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--payload-mib", type=int, default=16)
    parser.add_argument("--transport", choices=["memfd", "inline"], default="memfd")
    parser.add_argument("--caps", default="0,512MiB")
    args = parser.parse_args()
    build = Path(args.build).resolve()
    print(f"{args.clients} clients x {args.payload_mib} MiB ({args.transport})")
    print(f"{'max_ingest_bytes':>16} {'VmHWM idle':>11} {'VmHWM peak':>11} {'trace s':>8} exit")
    for cap in args.caps.split(","):
        r = run_once(build, cap, args)
        print(f"{r['cap']:>16} {r['hwm_idle_mib']:>9.0f}Mi {r['hwm_mib']:>9.0f}Mi "
              f"{r['seconds']:>8.1f} {r['exit']}", flush=True)


if __name__ == "__main__":
    main()
