"""gpuctld storing traces in S3: a real Ceph radosgw, a real gpuctld whose
config file points at it, real workloads and the real CLI; boto3 checks the
bucket on its own (s3_fixtures.py). Uploads, failures left pending in the
local store, fan-out traces and multipart uploads; test_s3_lifecycle.py
has what outlives a daemon: restarts, the flush at SIGTERM, and traces
served from the bucket once their pod is gone.
"""

import gzip
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from conftest import LineReader, Workload
from e2e_util import check_workload_trace, load_trace, sanitizer_report, snake_keys, wait_until
from s3_fixtures import *  # noqa: F401,F403 (fixtures and helpers)


def test_trace_is_uploaded_and_read_back_from_the_bucket(start_s3_daemon, cli_for, start_workload,
                                                          bucket, workdir):
    daemon = start_s3_daemon()
    cli = cli_for(daemon)
    ranks = [start_workload(job="s3", rank=r, world_size=2) for r in (0, 1)]
    cli.wait_attached([w.pid for w in ranks])

    host, trace, _ = run_trace(cli, "--job", "s3", "--duration", "1s")
    trace_id = trace.trace_id
    remote = f"s3://{bucket.name}/{trace_key_prefix(bucket, trace_id)}"
    storage = host["storage"]
    assert storage["state"] == UPLOADED, storage
    assert storage["remote_location"] == remote, storage
    assert storage["remote_endpoint"] == bucket.endpoint, storage
    assert not storage.get("upload_error"), storage
    assert storage.get("uploaded_at"), storage
    assert host["location"] == remote, host

    files = sorted(r["file"] for r in host["results"])
    assert len(files) == 2, host["results"]
    # The CLI downloaded through gpuctld, which read the files from S3.
    downloaded = {f: (trace.path / f).read_bytes() for f in files}
    s3_manifest = check_trace_objects(bucket, trace_id, files, downloaded)
    assert s3_manifest["storage"]["state"] == UPLOADED, s3_manifest
    assert s3_manifest["storage"]["remote_location"] == remote

    # Each object parses on its own as the workload's trace.
    for workload, rank in zip(ranks, (0, 1)):
        (result,) = [r for r in host["results"] if int(r["pid"]) == workload.pid]
        name = result["file"]
        assert name == f"{result['host']}-rank{rank}-pid{workload.pid}.json.gz", result
        copy = workdir / f"from-s3-{name}"
        copy.write_bytes(bucket.get(trace_key_prefix(bucket, trace_id) + name))
        from_s3 = check_workload_trace(copy, workload.pid, rank)
        _, from_cli = load_trace(trace.path / name)
        assert from_s3["traceEvents"] == from_cli["traceEvents"]

    # The spool keeps only the manifest, which says where the files went.
    local_dir = workdir / "store" / trace_id
    wait_local_data_removed(local_dir)
    assert not (local_dir / ".awaiting-upload").exists()
    local_manifest = snake_keys(json.loads(manifest_in(local_dir).read_text()))
    assert local_manifest["storage"]["state"] == UPLOADED, local_manifest
    assert local_manifest["storage"]["remote_location"] == remote

    listed = listed_manifest(cli, trace_id)
    assert listed is not None and listed["storage"]["state"] == UPLOADED, listed
    assert listed["storage"]["remote_location"] == remote, listed
    table = cli.run("traces")
    assert table.returncode == 0, table.stderr
    row = [line for line in table.stdout.splitlines() if trace_id in line]
    assert len(row) == 1 and remote.rstrip("/") in row[0], table.stdout

    # gpuctl get serves an uploaded trace from the bucket.
    got = cli.run("get", trace_id, "-o", str(workdir / "fetched"))
    assert got.returncode == 0, got.stdout + got.stderr
    fetched = workdir / "fetched" / trace_id
    for name, data in downloaded.items():
        assert (fetched / name).read_bytes() == data, name
    assert snake_keys(json.loads(manifest_in(fetched).read_text()))["trace_id"] == trace_id


def test_wrong_secret_leaves_the_trace_pending_in_the_local_store(start_s3_daemon, cli_for,
                                                                  start_workload, bucket, workdir):
    daemon = start_s3_daemon(secret_access_key="not-the-secret-" + uuid.uuid4().hex)
    cli = cli_for(daemon)
    workload = start_workload(job="s3-auth", rank=0, world_size=1)
    cli.wait_attached([workload.pid])

    host, trace, stderr = run_trace(cli, "--job", "s3-auth", "--duration", "1s")
    trace_id = trace.trace_id
    local_dir = workdir / "store" / trace_id
    storage = host["storage"]
    assert storage["state"] == PENDING, storage
    assert storage["remote_location"] == f"s3://{bucket.name}/{trace_key_prefix(bucket, trace_id)}"
    error = storage["upload_error"]
    assert endpoint_hostport(bucket) in error, error
    expect_auth_error(error)
    assert int(storage["upload_attempts"]) >= 1, storage
    assert Path(storage["local_location"]).resolve() == local_dir.resolve(), storage
    assert Path(host["location"]).resolve() == local_dir.resolve(), host
    assert f"upload to {storage['remote_location']} pending: " in stderr, stderr

    # The trace is safe in the local store, marked for upload, and served from there.
    (result,) = host["results"]
    assert result["status"] == "CAPTURE_STATUS_OK", result
    assert data_files(local_dir) == [result["file"]]
    assert (local_dir / result["file"]).stat().st_size == int(result["stored_bytes"])
    assert (local_dir / ".awaiting-upload").exists()
    check_workload_trace(local_dir / result["file"], workload.pid, 0)
    got = cli.run("get", trace_id, "-o", str(workdir / "fetched"))
    assert got.returncode == 0, got.stdout + got.stderr
    assert (workdir / "fetched" / trace_id / result["file"]).read_bytes() == \
        (local_dir / result["file"]).read_bytes()

    assert bucket.objects() == {}, "a rejected upload left objects in the bucket"
    listed = listed_manifest(cli, trace_id)
    assert listed["storage"]["state"] == PENDING, listed
    expect_auth_error(listed["storage"]["upload_error"])
    table = cli.run("traces")
    row = [line for line in table.stdout.splitlines() if trace_id in line]
    assert len(row) == 1 and "pending" in row[0], table.stdout


def test_upload_waits_for_a_stopped_gateway_and_completes_when_it_returns(
        ceph, start_s3_daemon, cli_for, start_workload, bucket, workdir):
    daemon = start_s3_daemon()
    cli = cli_for(daemon)
    workload = start_workload(job="s3-down", rank=0, world_size=1)
    cli.wait_attached([workload.pid])

    ceph.rgw("stop")
    host, trace, _ = run_trace(cli, "--job", "s3-down", "--duration", "1s")
    trace_id = trace.trace_id
    storage = host["storage"]
    assert storage["state"] == PENDING, storage
    assert endpoint_hostport(bucket) in storage["upload_error"], storage
    local_dir = workdir / "store" / trace_id
    files = data_files(local_dir)
    assert files == [host["results"][0]["file"]], files
    spooled = {f: (local_dir / f).read_bytes() for f in files}
    # The CLI's copy came from the spool.
    assert {f: (trace.path / f).read_bytes() for f in files} == spooled

    ceph.rgw("start")
    manifest = wait_uploaded(cli, trace_id)
    assert int(manifest["storage"]["upload_attempts"]) >= 2, manifest
    assert manifest["storage"]["remote_location"] == \
        f"s3://{bucket.name}/{trace_key_prefix(bucket, trace_id)}"
    check_trace_objects(bucket, trace_id, files, spooled)
    wait_local_data_removed(local_dir)
    assert not (local_dir / ".awaiting-upload").exists()

    # Served from the bucket now.
    got = cli.run("get", trace_id, "-o", str(workdir / "fetched"))
    assert got.returncode == 0, got.stdout + got.stderr
    assert {f: (workdir / "fetched" / trace_id / f).read_bytes() for f in files} == spooled






def test_fan_out_trace_keeps_every_hosts_manifest_and_files_in_one_bucket(
        build_dir, start_s3_daemon, cli_for, start_workload, bucket, workdir):
    # Two daemons of their own host names, store and socket, one bucket and
    # prefix; one fan-out trace, so one trace id and one key prefix.
    daemons = [start_s3_daemon(name=f"node{i}") for i in range(2)]
    # Each daemon has its own --host-name (the fixture's "e2e-<name>").
    names = [d.host_name for d in daemons]
    assert len(set(names)) == 2, names
    workloads = [start_workload(job="s3-fan", rank=i, world_size=2, socket=d.socket)
                 for i, d in enumerate(daemons)]
    for daemon, workload in zip(daemons, workloads):
        cli_for(daemon).wait_attached([workload.pid])

    out = Path(tempfile.mkdtemp(prefix="dl-", dir=workdir))
    hosts_args = [arg for d in daemons for arg in ("--host", d.address)]
    result = subprocess.run(
        [str(build_dir / "bin" / "gpuctl"), "trace", "--job", "s3-fan", "--duration", "1s",
         "--json", "-o", str(out), *hosts_args],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert result.returncode == 0, result.stdout + result.stderr
    doc = snake_keys(json.loads(result.stdout))
    trace_id = doc["trace_id"]
    entries = {h["host"]: h for h in doc["hosts"]}
    assert set(entries) == {d.address for d in daemons}, entries.keys()

    files = {}  # host name -> its process's file
    for rank, (daemon, workload, host_name) in enumerate(zip(daemons, workloads, names)):
        entry = entries[daemon.address]
        assert not entry.get("error"), entry
        (process,) = entry["results"]
        assert int(process["pid"]) == workload.pid, entry
        assert process["host"] == host_name, process
        assert process["file"] == f"{host_name}-rank{rank}-pid{workload.pid}.json.gz", process
        files[host_name] = process["file"]
        # Each daemon lists the trace as uploaded: its own host's part.
        wait_uploaded(cli_for(daemon), trace_id)

    # Every host's manifest and every file, none overwriting another.
    prefix = trace_key_prefix(bucket, trace_id)
    objects = bucket.objects(under=f"{trace_day(trace_id)}/{trace_id}/")
    expected = [prefix + f for f in files.values()] + \
        [host_manifest_key(prefix, h) for h in names]
    assert sorted(objects) == sorted(expected), sorted(objects)
    assert prefix + "manifest.json" not in objects
    for rank, (workload, host_name) in enumerate(zip(workloads, names)):
        key = host_manifest_key(prefix, host_name)
        manifest = snake_keys(json.loads(bucket.get(key)))
        assert manifest["trace_id"] == trace_id, manifest
        assert manifest["host"] == host_name, manifest
        assert [r.get("file") for r in manifest["results"]] == [files[host_name]], manifest
        assert [int(r["pid"]) for r in manifest["results"]] == [workload.pid], manifest
        assert manifest["storage"]["state"] == UPLOADED, manifest
        assert manifest["storage"]["remote_location"] == f"s3://{bucket.name}/{prefix}"
        # Each host's manifest went up after its file.
        assert objects[prefix + files[host_name]]["LastModified"] <= \
            objects[key]["LastModified"], objects
        copy = workdir / f"from-s3-{files[host_name]}"
        copy.write_bytes(bucket.get(prefix + files[host_name]))
        check_workload_trace(copy, workload.pid, rank)

    # The fan-out download holds both hosts' processes.
    downloaded = sorted(p.name for p in (out / trace_id).glob("*.json.gz"))
    assert downloaded == sorted(files.values()), downloaded




# A workload of distinct 4000-character range names (random base64, of
# which gzip keeps about 3 kB each): at RANGES_PER_S, a 1 s window makes a
# .json.gz of about 18 MB, above the 5 MiB parts' multipart threshold.
# Names come from a pool of random bytes made once (cheap to slice), large
# enough that no name repeats within 2 s.
RANGES_PER_S = 6000
RANGES_SCRIPT = f"""\
import base64
import os
import time

import gpuctl

RATE = {RANGES_PER_S}
TICK = 0.005
NAME_CHARS = 4000
POOL_NAMES = 2 * RATE
pool = base64.b64encode(os.urandom(POOL_NAMES * NAME_CHARS * 3 // 4)).decode("ascii")
announced = False
n = 0
next_tick = time.monotonic()
while True:
    if not announced and gpuctl.connected():
        print("connected", flush=True)
        announced = True
    for _ in range(int(RATE * TICK)):
        at = (n % POOL_NAMES) * NAME_CHARS
        gpuctl.range_push(pool[at:at + NAME_CHARS])
        gpuctl.range_pop()
        n += 1
    next_tick += TICK
    delay = next_tick - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    else:
        next_tick = time.monotonic()
"""


@pytest.fixture
def start_ranges_workload(workdir, lib_path):
    """Runs RANGES_SCRIPT under LD_PRELOAD=libgpuctl.so with the gpuctl
    Python package; killed at teardown."""
    workloads = []

    def start():
        script = workdir / "ranges.py"
        script.write_text(textwrap.dedent(RANGES_SCRIPT))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GPUCTL_") and k not in ("LD_PRELOAD", "PYTHONPATH")}
        env.update(PYTHONPATH=str(PYTHON_DIR), GPUCTL_SOCKET=str(workdir / "gpuctl.sock"),
                   GPUCTL_JOB_ID="s3-multipart", PYTHONDONTWRITEBYTECODE="1")
        # Set by CTest for sanitized builds: the runtime must load first.
        first = os.environ.get("GPUCTL_E2E_PRELOAD_FIRST")
        if first:
            # What the interpreter itself leaves allocated at exit is not gpuctl's.
            asan = os.environ.get("ASAN_OPTIONS")
            env["ASAN_OPTIONS"] = f"{asan}:detect_leaks=0" if asan else "detect_leaks=0"
        env["LD_PRELOAD"] = ":".join(([first] if first else []) + [str(lib_path)])
        proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        workloads.append(Workload(proc, LineReader(proc.stdout)))
        return workloads[-1]

    yield start
    for workload in workloads:
        workload.proc.kill()
        workload.wait(10)
        output = "\n".join(workload.lines())
        assert not sanitizer_report(output), output


def multipart_etag(data, part_size):
    """S3's ETag of a multipart object: MD5 of the parts' MD5s, "-<parts>"."""
    digests = b"".join(hashlib.md5(data[o:o + part_size]).digest()
                       for o in range(0, len(data), part_size))
    return f'"{hashlib.md5(digests).hexdigest()}-{math.ceil(len(data) / part_size)}"'


def test_large_trace_goes_up_in_parts(start_s3_daemon, cli_for, start_ranges_workload, bucket):
    daemon = start_s3_daemon(multipart_threshold="5MiB", part_size="5MiB")
    cli = cli_for(daemon)
    workload = start_ranges_workload()
    wait_until(lambda: "connected" in workload.lines(), what="the ranges workload connected")
    cli.wait_attached([workload.pid])

    host, trace, _ = run_trace(cli, "--pid", str(workload.pid), "--duration", "1s")
    assert host["storage"]["state"] == UPLOADED, host["storage"]
    (result,) = host["results"]
    assert result["status"] == "CAPTURE_STATUS_OK", result
    data = (trace.path / result["file"]).read_bytes()
    assert len(data) == int(result["stored_bytes"])
    assert len(data) >= 10 * MIB, \
        f"the trace is {len(data)} bytes: too small to need three parts of 5 MiB"

    key = trace_key_prefix(bucket, trace.trace_id) + result["file"]
    head = bucket.head(key)
    assert head["ContentLength"] == len(data), head
    assert re.fullmatch(r'"[0-9a-f]{32}-\d+"', head["ETag"]), head["ETag"]
    assert head["ETag"] == multipart_etag(data, 5 * MIB), head["ETag"]
    from_s3 = bucket.get(key)
    assert hashlib.sha256(from_s3).hexdigest() == hashlib.sha256(data).hexdigest()

    events = json.loads(gzip.decompress(from_s3))["traceEvents"]
    named = [e for e in events if e.get("cat") == "user_annotation" and len(e["name"]) == 4000]
    assert len(named) >= 1000, f"{len(named)} ranges of the workload in the trace"
    assert len({e["name"] for e in named}) == len(named), "range names repeat"
