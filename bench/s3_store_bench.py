"""Trace store throughput to S3, against copying the file and another client.

Starts its own single-node Ceph cluster (scripts/ceph/start.sh: radosgw on
127.0.0.1, OSD on memstore) and measures, alternating in the same run, for
incompressible files of gzip trace sizes (0.26, 2.8 and 28 MB; 2.8 MB is
the 60 000-launch capture of gpuctl_convert_bench):

  copy          shutil.copyfile to a new file on the same disk (page cache)
  copy + fsync  the same, then fsync: a durable local write of the bytes
  boto3         the AWS SDK for Python, an independent client, as gpuctld
                sends: one PutObject up to 16 MiB (put_object), above that
                a multipart upload in 8 MiB parts (upload_file, which sends
                parts on up to 10 threads)
  gpuctl        S3Client::PutObjectFromFile, what gpuctld's S3 store does
                for each trace file (bin/gpuctl_s3_put_bench)
  local store   a one-file trace stored in a LocalTraceStore (PutFile +
                PutManifest: the store without S3)
  S3 store      the same trace in an S3TraceStore, whose PutManifest returns
                once the file and the manifest are in the bucket and the
                local file is removed (as gpuctld completes a trace)

and then the gzip size against the raw JSON of realistic traces: the
sample workload traced for 2 s through a real gpuctld, and the 60 000-launch
capture of gpuctl_convert_bench.

Usage (from the repository root, after a build):
  .venv/bin/python bench/s3_store_bench.py [--build build] [--runs 15]

Prints markdown tables; everything it starts or writes goes at the end.
"""

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import Fleet, percentile  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CEPH = REPO / "scripts" / "ceph"
MIB = 1024 * 1024
SIZES = [260_000, 2_800_000, 28_000_000]
OPS = ["copy", "copy + fsync", "boto3", "gpuctl", "local store", "S3 store"]
# gpuctld's defaults (store.s3.multipart_threshold, part_size).
MULTIPART_THRESHOLD = 16 * MIB
PART_SIZE = 8 * MIB


def read_env(path):
    values = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    return values


class Uploaders:
    """The two S3 clients and the two copies, each timed on one file."""

    def __init__(self, build, env, work):
        self.env = env
        self.work = work
        self.bucket = env["S3_BUCKET"]
        self.prefix = f"bench/{uuid.uuid4().hex[:8]}"
        self.boto3 = boto3.client(
            "s3", endpoint_url=env["S3_ENDPOINT"], region_name=env["S3_REGION"],
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
        self.transfer = TransferConfig(multipart_threshold=MULTIPART_THRESHOLD,
                                       multipart_chunksize=PART_SIZE)
        self.put_log = work / "gpuctl_s3_put_bench.log"
        self.put = subprocess.Popen(
            [str(build / "bin" / "gpuctl_s3_put_bench"), "--multipart-threshold",
             str(MULTIPART_THRESHOLD), "--part-size", str(PART_SIZE), "--dir",
             str(work / "stores")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(self.put_log, "wb"),
            text=True, env={**os.environ, **env})
        self.count = 0

    def key(self, op):
        self.count += 1
        return f"{self.prefix}/{op}-{self.count}"

    def ask(self, request):
        """One request to gpuctl_s3_put_bench; its wall time."""
        self.put.stdin.write(request + "\n")
        self.put.stdin.flush()
        answer = self.put.stdout.readline().rstrip("\n").split(" ", 1)
        if answer[0] != "ok":
            raise SystemExit(f"gpuctl_s3_put_bench: {' '.join(answer)}\n"
                             + self.put_log.read_text(errors="replace"))
        return float(answer[1])

    def run(self, op, path):
        if op == "local store":
            return self.ask(f"local {path}")
        if op == "S3 store":
            return self.ask(f"store {path}")
        if op in ("copy", "copy + fsync"):
            target = self.work / f"copy-{self.count}"
            self.count += 1
            started = time.perf_counter()
            shutil.copyfile(path, target)
            if op == "copy + fsync":
                fd = os.open(target, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
            took = time.perf_counter() - started
            target.unlink()
            return took
        key = self.key(op.replace(" ", ""))
        if op == "boto3":
            started = time.perf_counter()
            if path.stat().st_size > MULTIPART_THRESHOLD:
                self.boto3.upload_file(str(path), self.bucket, key, Config=self.transfer)
            else:
                with open(path, "rb") as body:
                    self.boto3.put_object(Bucket=self.bucket, Key=key, Body=body)
            took = time.perf_counter() - started
        else:
            took = self.ask(f"put {key} {path}")
        head = self.boto3.head_object(Bucket=self.bucket, Key=key)
        if head["ContentLength"] != path.stat().st_size:
            raise SystemExit(f"{key}: {head['ContentLength']} bytes in S3, "
                             f"{path.stat().st_size} sent")
        self.boto3.delete_object(Bucket=self.bucket, Key=key)
        return took

    def close(self):
        self.put.stdin.close()
        self.put.wait(30)


def throughput(uploaders, files, runs):
    samples = {(op, size): [] for op in OPS for size in SIZES}
    for run in range(runs):
        for size in SIZES:
            # Rotated each run, so that no operation always follows another.
            for op in OPS[run % len(OPS):] + OPS[:run % len(OPS)]:
                samples[(op, size)].append(uploaders.run(op, files[size]))
    def rate(op, size, p):
        # The p90 rate comes from the p90 (slower) time.
        return size / 1e6 / percentile(samples[(op, size)], p)

    def ms(op, size):
        return " / ".join(f"{percentile(samples[(op, size)], p) * 1e3:.1f}" for p in (50, 90))

    print(f"\n{runs} runs, alternating; MB/s = file size / wall time (p50 of the runs).\n")
    print("| file | copy MB/s | copy + fsync MB/s | boto3 MB/s | gpuctl MB/s p50 / p90 "
          "| gpuctl / copy + fsync | gpuctl / boto3 | gpuctl ms p50 / p90 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for size in SIZES:
        print(f"| {size / 1e6:.2f} MB | {rate('copy', size, 50):.0f} "
              f"| {rate('copy + fsync', size, 50):.0f} | {rate('boto3', size, 50):.0f} "
              f"| {rate('gpuctl', size, 50):.0f} / {rate('gpuctl', size, 90):.0f} "
              f"| {rate('gpuctl', size, 50) / rate('copy + fsync', size, 50):.2f} "
              f"| {rate('gpuctl', size, 50) / rate('boto3', size, 50):.2f} "
              f"| {ms('gpuctl', size)} |")
    print("\n| file | local store MB/s | S3 store MB/s p50 / p90 | S3 store / local store "
          "| local store ms p50 / p90 | S3 store ms p50 / p90 |")
    print("|---|---:|---:|---:|---:|---:|")
    for size in SIZES:
        print(f"| {size / 1e6:.2f} MB | {rate('local store', size, 50):.0f} "
              f"| {rate('S3 store', size, 50):.0f} / {rate('S3 store', size, 90):.0f} "
              f"| {rate('S3 store', size, 50) / rate('local store', size, 50):.2f} "
              f"| {ms('local store', size)} | {ms('S3 store', size)} |")


def sample_workload_trace(build):
    """gzip and raw JSON bytes of the sample workload traced for 2 s."""
    with Fleet(build) as fleet:
        fleet.start_daemon()
        fleet.wait_ready()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUCTL_")}
        env.update(LD_PRELOAD=str(build / "lib" / "libgpuctl.so"), GPUCTL_JOB_ID="bench",
                   GPUCTL_SOCKET=str(fleet.daemons[0][2]), RANK="0", WORLD_SIZE="1")
        workload = subprocess.Popen([str(build / "bin" / "gpuctl_sample_workload"),
                                     "--step-ms", "20"], env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL)
        fleet.workloads.append(workload)
        fleet.wait_attached(0, 1)
        out = fleet.dir / "download"
        result, _ = fleet.gpuctl("trace", "--job", "bench", "--duration", "2s", "--json",
                                 "-o", str(out), "--host", fleet.address(0))
        if result.returncode != 0:
            raise SystemExit(f"gpuctl trace failed:\n{result.stdout}{result.stderr}")
        (path,) = out.glob("*/*.json.gz")
        raw = gzip.decompress(path.read_bytes())
        events = len(json.loads(raw)["traceEvents"])
        return path.stat().st_size, len(raw), events


def convert_bench_sizes(build):
    """JSON and gzip MB of gpuctl_convert_bench's 60 000-launch capture."""
    result = subprocess.run([str(build / "bin" / "gpuctl_convert_bench"), "--runs", "1"],
                            capture_output=True, text=True, timeout=600)
    m = re.search(r"JSON ([\d.]+) MB, gzip level \d+ ([\d.]+) MB", result.stdout)
    if result.returncode != 0 or not m:
        raise SystemExit(f"gpuctl_convert_bench failed:\n{result.stdout}{result.stderr}")
    return float(m.group(2)) * 1e6, float(m.group(1)) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=str(REPO / "build"))
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    build = Path(args.build).resolve()
    for binary in ("gpuctld", "gpuctl", "gpuctl_s3_put_bench", "gpuctl_convert_bench",
                   "gpuctl_sample_workload"):
        if not (build / "bin" / binary).exists():
            parser.error(f"{build}/bin/{binary} not found: build first")

    work = Path(tempfile.mkdtemp(prefix="gpuctl-s3-bench-",
                                 dir=os.environ.get("TMPDIR", "/var/tmp")))
    ceph_dir = work / "ceph"
    uploaders = None
    try:
        # Deleted objects above 4 MiB stay in the OSD until radosgw's garbage
        # collection (hours later): room for every upload of the run.
        subprocess.run([str(CEPH / "start.sh"), str(ceph_dir)], check=True,
                       stdin=subprocess.DEVNULL,
                       env={**os.environ, "CEPH_MEMSTORE_BYTES": str(4 << 30)})
        files = {}
        for size in SIZES:
            files[size] = work / f"file-{size}.json.gz"
            files[size].write_bytes(os.urandom(size))
        uploaders = Uploaders(build, read_env(ceph_dir / "env"), work)
        print(f"S3: radosgw at {uploaders.env['S3_ENDPOINT']} (OSD on memstore); "
              f"files on {work}")
        throughput(uploaders, files, args.runs)

        gz, raw, events = sample_workload_trace(build)
        conv_gz, conv_raw = convert_bench_sizes(build)
        print("\n| trace | JSON | .json.gz | JSON / gzip |")
        print("|---|---:|---:|---:|")
        print(f"| sample workload, 2 s, one rank ({events} events) | {raw / 1e6:.2f} MB "
              f"| {gz / 1e6:.3f} MB | {raw / gz:.1f} |")
        print(f"| gpuctl_convert_bench, 60 000 launches | {conv_raw / 1e6:.1f} MB "
              f"| {conv_gz / 1e6:.1f} MB | {conv_raw / conv_gz:.1f} |")
    finally:
        if uploaders is not None:
            uploaders.close()
        subprocess.run([str(CEPH / "stop.sh"), str(ceph_dir)], stdin=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
