"""S3 traces across a daemon's life (s3_fixtures.py has the cluster and the
bucket): a pending upload survives a restart with the same spool, SIGTERM
uploads what is pending before gpuctld exits (store.s3.shutdown_wait), and
a trace whose pod and spool are gone is served from the bucket by any
daemon sharing it.
"""

import json
import shutil
import subprocess
import time
import uuid

from e2e_util import snake_keys
from s3_fixtures import *  # noqa: F401,F403 (fixtures and helpers)


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
    # pod-b lists it from the bucket, where it is; its own store has none.
    own = cli_b.run("traces", "--json")
    assert own.returncode == 0, own.stdout + own.stderr
    assert trace_id not in own.stdout
    listed = cli_b.run("traces", "--bucket", "--json", "--job", "s3-gone")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (found,) = snake_keys(json.loads(listed.stdout))["traces"]
    assert found["trace_id"] == trace_id and found["host"] == pod_a.host_name, found
    assert found["location"].startswith("s3://"), found
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


def test_a_fan_out_trace_of_pods_that_are_gone_is_fetched_and_analysed_whole_from_the_bucket(
        build_dir, start_s3_daemon, cli_for, start_workload, bucket, workdir):
    # Two pods' sidecars take one fan-out trace, rank 0 and rank 1; both pods
    # then go, spools and all. A third daemon of the bucket serves the whole
    # trace: every host's manifest and process file.
    pods = [start_s3_daemon(name=f"pod-{n}") for n in ("a", "b")]
    workloads = [start_workload(job="s3-whole", rank=i, world_size=2, socket=p.socket)
                 for i, p in enumerate(pods)]
    for pod, workload in zip(pods, workloads):
        cli_for(pod).wait_attached([workload.pid])
    taken = subprocess.run(
        [str(build_dir / "bin" / "gpuctl"), "trace", "--job", "s3-whole", "--duration", "1s",
         "--json", "-o", str(workdir / "taken"),
         *[arg for p in pods for arg in ("--host", p.address)]],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    trace_id = snake_keys(json.loads(taken.stdout))["trace_id"]
    for pod in pods:
        wait_uploaded(cli_for(pod), trace_id)
    originals = {p.name: p.read_bytes() for p in (workdir / "taken" / trace_id).glob("*.json.gz")}
    assert len(originals) == 2, originals.keys()
    for pod in pods:
        assert pod.stop() == 0, pod.log()
        shutil.rmtree(pod.store)

    cli_c = cli_for(start_s3_daemon(name="pod-c"))
    # Without --bucket: the one host's part the daemon picks for a trace it
    # never stored.
    one = cli_c.run("get", trace_id, "-o", str(workdir / "one"))
    assert one.returncode == 0, one.stdout + one.stderr
    assert len(data_files(workdir / "one" / trace_id)) == 1
    # With it: every host's files, byte for byte, and every host's manifest.
    whole = cli_c.run("get", trace_id, "--bucket", "-o", str(workdir / "whole"))
    assert whole.returncode == 0, whole.stdout + whole.stderr
    fetched = workdir / "whole" / trace_id
    assert {f: (fetched / f).read_bytes() for f in data_files(fetched)} == originals
    manifests = sorted(p.name for p in (fetched / "_gpuctl").glob("*.json"))
    assert manifests == sorted(f"{p.host_name}.json" for p in pods), manifests

    # analyze --trace-id --bucket: both ranks, from one daemon.
    by_id = cli_c.run("analyze", "--trace-id", trace_id, "--bucket", "--json", timeout=120)
    assert by_id.returncode == 0, by_id.stdout + by_id.stderr
    doc = json.loads(by_id.stdout)
    assert sorted((r["rank"], r["pid"]) for r in doc["traces"]) == \
        [(i, w.pid) for i, w in enumerate(workloads)], doc["traces"]
    # analyze --since --job --bucket: looked up in the bucket (days back), a
    # week is a valid look-back, and the trace is analysed whole.
    by_job = cli_c.run("analyze", "--since", "7d", "--job", "s3-whole", "--bucket", "--json",
                       timeout=120)
    assert by_job.returncode == 0, by_job.stdout + by_job.stderr
    job = json.loads(by_job.stdout)
    assert job["matched"] == 1 and job["since_s"] == 7 * 86400, job
    (listed,) = job["traces"]
    assert listed["trace_id"] == trace_id
    assert sorted(r["pid"] for r in listed["report"]["traces"]) == sorted(w.pid for w in workloads)
    assert job["aggregate"]["processes"] == 2
    # Its own store knows none of it.
    own = cli_c.run("analyze", "--since", "7d", "--job", "s3-whole", "--json")
    assert own.returncode == 3, own.stdout + own.stderr
