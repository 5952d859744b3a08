"""S3 checks against the cluster of scripts/ceph/start.sh, used by selftest.sh.

Reads S3_ENDPOINT, S3_REGION, S3_BUCKET, AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY from the environment (DIR/env) and runs one check:

  roundtrip  put/get/list/delete of a small object, then a 12 MiB multipart
             upload (parts of 5, 5 and 2 MiB) read back in full; the
             multipart object is left in the bucket for `reread`
  reread     reads the multipart object back and compares its content
  down       expects the gateway to refuse connections

Exits non-zero with a message on the first mismatch.
"""

import hashlib
import os
import random
import sys

import boto3
import botocore.exceptions
from botocore.config import Config

MIB = 1024 * 1024
MULTIPART_KEY = "selftest/multipart-12MiB"
MULTIPART_SIZE = 12 * MIB
PART_SIZE = 5 * MIB


def fail(message):
    sys.exit(f"s3_check: {message}")


def client():
    return boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT"],
        region_name=os.environ["S3_REGION"],
        config=Config(s3={"addressing_style": "path"},
                      retries={"max_attempts": 1},
                      connect_timeout=5, read_timeout=30),
    )


def payload(size, seed):
    return random.Random(seed).randbytes(size)


def check_small(s3, bucket):
    key = "selftest/small.txt"
    body = b"gpuctl object storage self-test\n"
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    got = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
    if got != body:
        fail(f"GET {key} returned {got!r}, expected {body!r}")
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="selftest/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    if key not in keys:
        fail(f"LIST selftest/ returned {keys}, missing {key}")
    s3.delete_object(Bucket=bucket, Key=key)
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=key)
    if listed.get("KeyCount", 0) != 0:
        fail(f"{key} still listed after DELETE")
    try:
        s3.head_object(Bucket=bucket, Key=key)
        fail(f"HEAD {key} succeeded after DELETE")
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] not in ("404", "NoSuchKey"):
            raise


def check_multipart(s3, bucket):
    data = payload(MULTIPART_SIZE, seed=12)
    upload = s3.create_multipart_upload(Bucket=bucket, Key=MULTIPART_KEY)
    parts = []
    for number, offset in enumerate(range(0, MULTIPART_SIZE, PART_SIZE), 1):
        chunk = data[offset:offset + PART_SIZE]
        etag = s3.upload_part(Bucket=bucket, Key=MULTIPART_KEY, PartNumber=number,
                              UploadId=upload["UploadId"], Body=chunk)["ETag"]
        parts.append({"PartNumber": number, "ETag": etag})
    done = s3.complete_multipart_upload(
        Bucket=bucket, Key=MULTIPART_KEY, UploadId=upload["UploadId"],
        MultipartUpload={"Parts": parts})
    # S3's multipart ETag: MD5 of the parts' binary MD5s, then "-<parts>".
    digests = b"".join(hashlib.md5(data[o:o + PART_SIZE]).digest()
                       for o in range(0, MULTIPART_SIZE, PART_SIZE))
    want_etag = f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'
    # radosgw 16.2 answers CompleteMultipartUpload with an empty <ETag/>;
    # the object's ETag (HEAD, GET, LIST) is right.
    if done.get("ETag") not in ("", want_etag):
        fail(f"CompleteMultipartUpload ETag {done.get('ETag')}, expected {want_etag}")
    head = s3.head_object(Bucket=bucket, Key=MULTIPART_KEY)
    if head["ContentLength"] != MULTIPART_SIZE:
        fail(f"multipart object is {head['ContentLength']} bytes, expected {MULTIPART_SIZE}")
    if head["ETag"] != want_etag:
        fail(f"multipart object ETag {head['ETag']}, expected {want_etag}")
    reread(s3, bucket)


def reread(s3, bucket):
    want = hashlib.sha256(payload(MULTIPART_SIZE, seed=12)).hexdigest()
    got = hashlib.sha256(
        s3.get_object(Bucket=bucket, Key=MULTIPART_KEY)["Body"].read()).hexdigest()
    if got != want:
        fail(f"{MULTIPART_KEY} content sha256 {got}, expected {want}")


def expect_down(s3, bucket):
    try:
        s3.list_objects_v2(Bucket=bucket)
    except botocore.exceptions.EndpointConnectionError:
        return
    fail("the gateway still answers after it was stopped")


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("roundtrip", "reread", "down"):
        sys.exit(f"usage: {sys.argv[0]} roundtrip|reread|down")
    s3 = client()
    bucket = os.environ["S3_BUCKET"]
    if sys.argv[1] == "roundtrip":
        check_small(s3, bucket)
        check_multipart(s3, bucket)
    elif sys.argv[1] == "reread":
        reread(s3, bucket)
    else:
        expect_down(s3, bucket)


if __name__ == "__main__":
    main()
