"""Fixtures and helpers for the S3 end-to-end tests (test_s3*.py): a real
Ceph radosgw (scripts/ceph), the test bucket seen through boto3 (an S3
client independent of gpuctld's), gpuctld started with a config file that
uploads there, and readers of what the CLI, the stores and the bucket say.

The cluster is GPUCTL_TEST_CEPH_DIR's (scripts/test.sh starts one for the
whole suite), else one started here in a temporary directory. Without Ceph
the tests fail under CI=true and skip otherwise. Each test writes under its
own key prefix, deleted at teardown. Some tests stop the shared gateway:
CTest runs these tests one at a time (RESOURCE_LOCK radosgw), and the
bucket fixture starts the gateway again when a test left it stopped.

A test module takes them with `from s3_fixtures import *`.
"""

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from e2e_util import snake_keys, wait_until

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
