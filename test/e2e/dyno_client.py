"""dynolog's RPC client, as its `dyno` CLI speaks it (dynolog's
cli/src/commands/{utils,status,gputrace}.rs): a TCP connection per call,
the request as a 4-byte length in the host's byte order and the JSON text,
the answer framed the same way. The config text is built exactly as
`dyno gputrace` builds it, so gpuctld is tested against what dyno sends.
"""

import json
import socket
import struct


def call(port, request_text, host="127.0.0.1", timeout=10.0):
    """Sends one request (text, sent as is); returns the answer's text."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        body = request_text.encode()
        s.sendall(struct.pack("=i", len(body)) + body)
        header = _read_exact(s, 4)
        (size,) = struct.unpack("=i", header)
        return _read_exact(s, size).decode()


def _read_exact(s, n):
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def status(port):
    return json.loads(call(port, '{"fn":"getStatus"}'))


def gputrace_config(log_file, duration_ms=500, profile_start_time=0, iterations=-1,
                    profile_start_iteration_roundup=1, record_shapes=False,
                    profile_memory=False, with_stacks=False, with_flops=False,
                    with_modules=False):
    """GpuTraceConfig::config() of gputrace.rs."""
    if iterations > 0:
        trigger = (f"PROFILE_START_ITERATION=0\n"
                   f"PROFILE_START_ITERATION_ROUNDUP={profile_start_iteration_roundup}\n"
                   f"ACTIVITIES_ITERATIONS={iterations}")
    else:
        trigger = (f"PROFILE_START_TIME={profile_start_time}\n"
                   f"ACTIVITIES_DURATION_MSECS={duration_ms}")
    memory = ""
    if profile_memory:
        memory = (f"\nPROFILE_PROFILE_MEMORY=true\nPROFILE_MEMORY=true\n"
                  f"PROFILE_MEMORY_DURATION_MSECS={duration_ms}")
    flag = lambda b: "true" if b else "false"  # noqa: E731 (Rust's bool Display)
    options = (f"\nPROFILE_REPORT_INPUT_SHAPES={flag(record_shapes)}{memory}\n"
               f"PROFILE_WITH_STACK={flag(with_stacks)}\n"
               f"PROFILE_WITH_FLOPS={flag(with_flops)}\n"
               f"PROFILE_WITH_MODULES={flag(with_modules)}")
    return f"ACTIVITIES_LOG_FILE={log_file}\n{trigger}{options}"


def gputrace(port, job_id=0, pids="0", process_limit=3, **config):
    """run_gputrace of gputrace.rs: returns the parsed answer."""
    kineto_config = gputrace_config(**config).replace("\n", "\\n")
    request = f"""
{{
    "fn": "setKinetOnDemandRequest",
    "config": "{kineto_config}",
    "job_id": {job_id},
    "pids": [{pids}],
    "process_limit": {process_limit}
}}"""
    answer = json.loads(call(port, request))
    # What dyno itself does next: it panics without this list.
    assert isinstance(answer["processesMatched"], list), answer
    return answer
