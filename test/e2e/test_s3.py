"""gpuctld storing traces in S3: a real Ceph radosgw (scripts/ceph), a real
gpuctld whose config file points at it, real workloads and the real CLI;
boto3 checks the bucket on its own.

The cluster is GPUCTL_TEST_CEPH_DIR's (scripts/test.sh starts one for the
whole suite), else one started here in a temporary directory. Without Ceph
the tests fail under CI=true and skip otherwise. Each test writes under its
own key prefix, deleted at teardown. Some tests stop the shared gateway:
CTest runs these tests one at a time (RESOURCE_LOCK radosgw), and the
bucket fixture starts the gateway again when a test left it stopped.
"""

import gzip
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from conftest import LineReader, Workload
from e2e_util import check_workload_trace, load_trace, sanitizer_report, snake_keys, wait_until

REPO = Path(__file__).resolve().parents[2]
CEPH_SCRIPTS = REPO / "scripts" / "ceph"
PYTHON_DIR = REPO / "python"

UPLOADED = "STORAGE_STATE_UPLOADED"
PENDING = "STORAGE_STATE_UPLOAD_PENDING"
MIB = 1024 * 1024
# Uploads retried in the background: the gateway is back within seconds, the
# daemon's next attempt comes within upload_retry_max (1s here).
UPLOAD_DEADLINE_S = 60.0
AUTH_ERROR_CODES = ("SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied")


# --- The cluster and the bucket -----------------------------------------

class Ceph:
    """A cluster started by scripts/ceph/start.sh DIR."""

    def __init__(self, path):
        self.dir = Path(path)

    def env(self):
        values = {}
        for line in (self.dir / "env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key] = value
        return values

    def rgw(self, action):
        """rgw.sh DIR stop|start: stops or starts the gateway and waits."""
        result = subprocess.run([str(CEPH_SCRIPTS / "rgw.sh"), str(self.dir), action],
                                capture_output=True, text=True, timeout=120,
                                stdin=subprocess.DEVNULL)
        assert result.returncode == 0, \
            f"rgw.sh {action} exited {result.returncode}:\n{result.stdout}{result.stderr}"

    def rgw_serving(self):
        return subprocess.run([str(CEPH_SCRIPTS / "rgw.sh"), str(self.dir), "status"],
                              capture_output=True, timeout=60,
                              stdin=subprocess.DEVNULL).returncode == 0


def _ceph_tools_missing():
    return [t for t in ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "ceph",
                        "ceph-authtool", "monmaptool") if shutil.which(t) is None]


@pytest.fixture(scope="session")
def ceph():
    raw = os.environ.get("GPUCTL_TEST_CEPH_DIR")
    if raw:
        if not (Path(raw) / "env").is_file():
            pytest.fail(f"GPUCTL_TEST_CEPH_DIR={raw} holds no cluster (no env file); "
                        "start one with scripts/ceph/start.sh DIR")
        yield Ceph(raw)
        return
    missing = _ceph_tools_missing()
    if missing:
        reason = (f"no S3 gateway: GPUCTL_TEST_CEPH_DIR is unset and {', '.join(missing)} "
                  "not installed (run scripts/ceph/install.sh)")
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with tempfile.TemporaryDirectory(prefix="gpuctl-ceph-") as parent:
        path = Path(parent) / "cluster"
        try:
            started = subprocess.run([str(CEPH_SCRIPTS / "start.sh"), str(path)],
                                     capture_output=True, text=True, timeout=300,
                                     stdin=subprocess.DEVNULL)
            assert started.returncode == 0, \
                f"scripts/ceph/start.sh failed:\n{started.stdout}{started.stderr}"
            yield Ceph(path)
        finally:
            subprocess.run([str(CEPH_SCRIPTS / "stop.sh"), str(path)], timeout=120,
                           stdin=subprocess.DEVNULL)


class Bucket:
    """The test bucket seen through boto3, an S3 client independent of gpuctld's."""

    def __init__(self, ceph, prefix):
        env = ceph.env()
        self.endpoint = env["S3_ENDPOINT"]
        self.region = env["S3_REGION"]
        self.name = env["S3_BUCKET"]
        self.access_key = env["AWS_ACCESS_KEY_ID"]
        self.secret_key = env["AWS_SECRET_ACCESS_KEY"]
        self.prefix = prefix
        self.client = boto3.client(
            "s3", endpoint_url=self.endpoint, region_name=self.region,
            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2},
                          connect_timeout=5, read_timeout=60))

    def objects(self, under=""):
        """{key: listing entry} of every object under prefix/under."""
        found = {}
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=f"{self.prefix}/{under}")
        for page in pages:
            for entry in page.get("Contents", []):
                found[entry["Key"]] = entry
        return found

    def get(self, key):
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def head(self, key):
        return self.client.head_object(Bucket=self.name, Key=key)

    def delete_all(self):
        keys = list(self.objects())
        for start in range(0, len(keys), 1000):
            self.client.delete_objects(Bucket=self.name, Delete={
                "Objects": [{"Key": k} for k in keys[start:start + 1000]], "Quiet": True})


@pytest.fixture
def bucket(ceph, request):
    """The bucket with a key prefix of this test's own; the gateway is
    serving at the start and again at the end."""
    if not ceph.rgw_serving():
        ceph.rgw("start")
    name = request.node.name.replace("_", "-")[:48]
    b = Bucket(ceph, f"e2e/{name}-{uuid.uuid4().hex[:8]}")
    yield b
    if not ceph.rgw_serving():
        ceph.rgw("start")
    b.delete_all()


def _yaml_scalar(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    # A JSON string is a YAML double-quoted scalar: a secret of digits stays a string.
    return json.dumps(value)


@pytest.fixture
def start_s3_daemon(start_daemon, workdir, bucket):
    """start_s3_daemon(name="gpuctld", args=(), **store_s3_keys) ->
    Daemon whose config file uploads to the test bucket; keys override the
    defaults below (None leaves one out), args go to start_daemon."""

    def start(name="gpuctld", args=(), **overrides):
        settings = {
            "endpoint": bucket.endpoint,
            "region": bucket.region,
            "bucket": bucket.name,
            "prefix": bucket.prefix,
            "path_style": True,
            "access_key_id": bucket.access_key,
            "secret_access_key": bucket.secret_key,
            # Fail fast while the gateway is down; retry soon in the background.
            "max_attempts": 2,
            "initial_backoff": "100ms",
            "max_backoff": "1s",
            "connect_timeout": "2s",
            "upload_wait": "20s",
            "upload_retry_max": "1s",
            # Under the 10 s a stop is given: a trace left pending at teardown
            # is tried for this long, then left in the spool.
            "shutdown_wait": "3s",
        }
        settings.update(overrides)
        # None: leave the key out.
        lines = ["store:", "  s3:"] + [f"    {k}: {_yaml_scalar(v)}"
                                       for k, v in settings.items() if v is not None]
        config = workdir / f"{name}.yaml"
        config.write_text("\n".join(lines) + "\n")
        return start_daemon("--config", str(config), *args, name=name)

    return start


# --- Reading what the CLI and the stores say ------------------------------

def trace_day(trace_id):
    """The UTC day of a UUIDv7 trace id's timestamp, as yyyy/mm/dd."""
    ms = int(trace_id.replace("-", "")[:12], 16)
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y/%m/%d")


def trace_key_prefix(bucket, trace_id):
    return f"{bucket.prefix}/{trace_day(trace_id)}/{trace_id}/"


def run_trace(cli, *args):
    """gpuctl trace ... --json on one host: (host document, TraceDir, the
    CLI's stderr, where the store location goes with --json)."""
    result, trace = cli.trace(*args, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = snake_keys(json.loads(result.stdout))
    assert len(doc["hosts"]) == 1, doc
    host = doc["hosts"][0]
    assert host["status"] == "ok", host
    assert trace is not None, "nothing downloaded:\n" + result.stdout + result.stderr
    return host, trace, result.stderr


def listed_manifest(cli, trace_id):
    """The trace's manifest as `gpuctl traces --json` lists it (None if not listed)."""
    result = cli.run("traces", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = snake_keys(json.loads(result.stdout))
    found = [m for m in doc.get("traces", []) if m.get("trace_id") == trace_id]
    return found[0] if found else None


def wait_uploaded(cli, trace_id):
    def uploaded():
        manifest = listed_manifest(cli, trace_id)
        if manifest and manifest.get("storage", {}).get("state") == UPLOADED:
            return manifest
        return None
    return wait_until(uploaded, UPLOAD_DEADLINE_S, interval=0.25,
                      what=f"trace {trace_id} listed as uploaded")


def data_files(directory):
    return sorted(p.name for p in Path(directory).glob("*.json.gz"))


def wait_local_data_removed(local_dir):
    wait_until(lambda: not data_files(local_dir), what=f"data files removed from {local_dir}")


def file_host(files):
    """The host part of trace file names <host>-rank<r>-pid<p>.json.gz (one host)."""
    hosts = {f.rsplit("-rank", 1)[0] for f in files}
    assert len(hosts) == 1, files
    return hosts.pop()


def host_manifest_key(prefix, host):
    """Where a host's manifest of the trace under `prefix` goes: its own key."""
    return f"{prefix}_gpuctl/{host}.json"


def manifest_in(directory):
    """The one manifest file of a trace directory (a store's or a download):
    _gpuctl/<host>.json, or the legacy manifest.json."""
    directory = Path(directory)
    found = sorted(directory.glob("_gpuctl/*.json"))
    if (directory / "manifest.json").is_file():
        found.append(directory / "manifest.json")
    assert len(found) == 1, f"not one manifest in {directory}: {found}"
    return found[0]


def check_trace_objects(bucket, trace_id, files, contents):
    """The bucket holds exactly the trace's files and its host's manifest,
    the files byte for byte as `contents` ({name: bytes}); returns the S3
    manifest."""
    prefix = trace_key_prefix(bucket, trace_id)
    manifest_key = host_manifest_key(prefix, file_host(files))
    objects = bucket.objects(under=f"{trace_day(trace_id)}/{trace_id}/")
    assert sorted(objects) == sorted([prefix + f for f in files] + [manifest_key]), objects
    for name in files:
        assert bucket.get(prefix + name) == contents[name], f"{name} differs in S3"
    # The manifest goes up last: a reader that sees it finds every file.
    manifest_time = objects[manifest_key]["LastModified"]
    assert all(objects[prefix + f]["LastModified"] <= manifest_time for f in files), objects
    manifest = snake_keys(json.loads(bucket.get(manifest_key)))
    assert manifest["trace_id"] == trace_id
    assert sorted(r["file"] for r in manifest["results"] if r.get("file")) == sorted(files)
    return manifest


def expect_auth_error(message):
    assert any(code in message for code in AUTH_ERROR_CODES), \
        f"no S3 authentication error code ({', '.join(AUTH_ERROR_CODES)}) in: {message}"


def endpoint_hostport(bucket):
    return bucket.endpoint.split("://", 1)[1]


# --- Tests ----------------------------------------------------------------

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


def test_pending_upload_survives_a_daemon_restart(ceph, start_s3_daemon, cli_for, start_workload,
                                                  bucket, workdir):
    first = start_s3_daemon()
    cli = cli_for(first)
    workload = start_workload(job="s3-restart", rank=0, world_size=1)
    cli.wait_attached([workload.pid])

    ceph.rgw("stop")
    host, trace, _ = run_trace(cli, "--job", "s3-restart", "--duration", "1s")
    trace_id = trace.trace_id
    assert host["storage"]["state"] == PENDING, host["storage"]
    local_dir = workdir / "store" / trace_id
    files = data_files(local_dir)
    assert files, f"no data file in {local_dir}"
    spooled = {f: (local_dir / f).read_bytes() for f in files}
    # SIGTERM tries it once more for shutdown_wait (3s), then leaves it marked.
    assert first.stop() == 0, first.log()
    left = [line for line in first.log().splitlines()
            if "traces left awaiting upload in the spool" in line]
    assert len(left) == 1 and trace_id in left[0], first.log()
    assert (local_dir / ".awaiting-upload").exists()

    # Nothing could have gone up before the restart: the gateway was down.
    ceph.rgw("start")
    second = start_s3_daemon()
    cli = cli_for(second)
    wait_uploaded(cli, trace_id)
    check_trace_objects(bucket, trace_id, files, spooled)
    wait_local_data_removed(local_dir)


def write_credentials(path, access_key, secret_key):
    """An AWS shared credentials file, replaced in one rename as a rotation
    would: gpuctld re-reads it when it changes."""
    staged = path.with_suffix(".new")
    staged.write_text(f"[default]\naws_access_key_id = {access_key}\n"
                      f"aws_secret_access_key = {secret_key}\n")
    staged.chmod(0o600)
    staged.replace(path)


def test_sigterm_uploads_the_pending_trace_at_once_and_exits(start_s3_daemon, cli_for,
                                                             start_workload, bucket, workdir):
    # A rejected key: the retry comes after upload_retry_max, an hour away.
    credentials = workdir / "s3-credentials"
    write_credentials(credentials, bucket.access_key, "not-the-secret-" + uuid.uuid4().hex)
    daemon = start_s3_daemon(access_key_id=None, secret_access_key=None,
                             credentials_file=str(credentials), upload_retry_max="1h",
                             upload_wait="5s", shutdown_wait="45s")
    cli = cli_for(daemon)
    workload = start_workload(job="s3-flush", rank=0, world_size=1)
    cli.wait_attached([workload.pid])

    host, trace, _ = run_trace(cli, "--job", "s3-flush", "--duration", "1s")
    trace_id = trace.trace_id
    assert host["storage"]["state"] == PENDING, host["storage"]
    expect_auth_error(host["storage"]["upload_error"])
    local_dir = workdir / "store" / trace_id
    files = data_files(local_dir)
    assert files == [host["results"][0]["file"]], files
    spooled = {f: (local_dir / f).read_bytes() for f in files}

    # The key is fixed, but nothing retries within the hour: only the flush
    # at SIGTERM can upload the trace now.
    write_credentials(credentials, bucket.access_key, bucket.secret_key)
    assert bucket.objects() == {}
    started = time.monotonic()
    assert daemon.stop(timeout=60) == 0, daemon.log()
    took = time.monotonic() - started
    assert took < 45, f"gpuctld took {took:.1f}s to stop:\n{daemon.log()}"

    check_trace_objects(bucket, trace_id, files, spooled)
    log = daemon.log()
    begun = [line for line in log.splitlines() if "uploading pending traces before exit" in line]
    assert len(begun) == 1 and "traces=1" in begun[0], log
    done = [line for line in log.splitlines() if "pending traces uploaded" in line]
    assert len(done) == 1 and "traces=1" in done[0], log
    assert "traces left awaiting upload" not in log, log
    assert not (local_dir / ".awaiting-upload").exists()
    local_manifest = snake_keys(json.loads(manifest_in(local_dir).read_text()))
    assert local_manifest["storage"]["state"] == UPLOADED, local_manifest


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


def unknown_trace_id():
    """A well-formed trace id (UUIDv7 of now) that no daemon has made."""
    ms = f"{int(time.time() * 1000):012x}"
    return f"{ms[:8]}-{ms[8:]}-7000-8000-{uuid.uuid4().hex[:12]}"


def test_any_daemon_of_the_bucket_serves_a_trace_whose_pod_is_gone(
        start_s3_daemon, cli_for, start_workload, bucket, workdir):
    # Two pods' sidecars sharing the bucket; pod-a takes the trace.
    pod_a = start_s3_daemon(name="pod-a")
    pod_b = start_s3_daemon(name="pod-b")
    workload = start_workload(job="s3-gone", rank=0, world_size=1, socket=pod_a.socket)
    cli_a = cli_for(pod_a)
    cli_a.wait_attached([workload.pid])
    host, trace, _ = run_trace(cli_a, "--job", "s3-gone", "--duration", "1s")
    trace_id = trace.trace_id
    assert host["storage"]["state"] == UPLOADED, host["storage"]
    files = sorted(r["file"] for r in host["results"])
    assert files, host["results"]
    taken = {f: (trace.path / f).read_bytes() for f in files}

    # The pod is gone, and its spool with it.
    assert pod_a.stop() == 0, pod_a.log()
    shutil.rmtree(pod_a.store)

    cli_b = cli_for(pod_b)
    got = cli_b.run("get", trace_id, "-o", str(workdir / "from-b"))
    assert got.returncode == 0, got.stdout + got.stderr
    fetched = workdir / "from-b" / trace_id
    assert {f: (fetched / f).read_bytes() for f in files} == taken
    # pod-a's own manifest, under its own name.
    manifest_path = manifest_in(fetched)
    assert manifest_path.name == f"{pod_a.host_name}.json", manifest_path
    manifest = snake_keys(json.loads(manifest_path.read_text()))
    assert manifest["trace_id"] == trace_id and manifest["host"] == pod_a.host_name, manifest
    assert manifest["storage"]["state"] == UPLOADED, manifest
    assert manifest_path.read_bytes() == bucket.get(
        host_manifest_key(trace_key_prefix(bucket, trace_id), pod_a.host_name))
    # pod-b's spool never held it.
    assert not (pod_b.store / trace_id).exists()

    unknown = unknown_trace_id()
    missing = cli_b.run("get", unknown, "-o", str(workdir / "from-b"))
    assert missing.returncode != 0, missing.stdout
    assert f"no trace {unknown}" in missing.stderr, missing.stderr


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
