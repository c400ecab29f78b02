#!/usr/bin/env python3
"""boto3 client for wharf's integration tests (driven by integration/python_test.go).

Reads a JSON job from argv[1], talks to a wharf server with boto3, writes every
downloaded payload to a file under job["out"] and prints a JSON report on
stdout. The Go side compares every payload with the source tree; this script
decides nothing about correctness except what boto3 itself checks.
"""
import json
import os
import sys
import urllib.error
import urllib.request

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config


def client(job, **cfg):
    kw = dict(retries={"total_max_attempts": 1})
    kw.update(cfg)
    if job.get("access_key"):
        return boto3.client(
            "s3",
            endpoint_url=job["endpoint"],
            region_name="us-east-1",
            aws_access_key_id=job["access_key"],
            aws_secret_access_key=job["secret_key"],
            config=Config(**kw),
        )
    kw["signature_version"] = botocore.UNSIGNED
    return boto3.client("s3", endpoint_url=job["endpoint"], region_name="us-east-1", config=Config(**kw))


def main():
    job = json.loads(sys.argv[1])
    out = job["out"]
    s3 = client(job)
    report = {"boto3": boto3.__version__, "botocore": botocore.__version__, "list": {}, "head": [], "files": [], "errors": {}}
    n = 0

    def save(kind, bucket, key, start, end, data):
        nonlocal n
        n += 1
        path = os.path.join(out, "payload-%05d" % n)
        with open(path, "wb") as f:
            f.write(data)
        report["files"].append({"kind": kind, "bucket": bucket, "key": key, "start": start, "end": end, "path": path})

    # 1. list_objects_v2 paginator (botocore adds encoding-type=url and decodes).
    for bucket in job["buckets"]:
        rows = []
        pages = 0
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 500}):
            pages += 1
            for o in page.get("Contents", []):
                rows.append([o["Key"], o["Size"], o["ETag"]])
        report["list"][bucket] = {"pages": pages, "objects": rows}
        # Delimiter listing of the bucket root.
        resp = s3.list_objects_v2(Bucket=bucket, Delimiter="/")
        report["list"][bucket]["root_keys"] = [o["Key"] for o in resp.get("Contents", [])]
        report["list"][bucket]["root_prefixes"] = [p["Prefix"] for p in resp.get("CommonPrefixes", [])]

    # 2. head_object and full get_object.
    for bucket, key in job["objects"]:
        h = s3.head_object(Bucket=bucket, Key=key)
        report["head"].append([bucket, key, h["ContentLength"], h["ETag"]])
        body = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        save("get", bucket, key, 0, -1, body)

    # 3. get_object with ranges (Go computed header and expected span).
    for bucket, key, header, start, end in job["ranges"]:
        r = s3.get_object(Bucket=bucket, Key=key, Range=header)
        report.setdefault("content_ranges", []).append(r.get("ContentRange", ""))
        save("range " + header, bucket, key, start, end, r["Body"].read())

    # 4. download_file: > 8 MiB, so s3transfer does parallel ranged GETs
    # (with If-Match on recent s3transfer).
    tc = TransferConfig(multipart_threshold=8 * 1024 * 1024, multipart_chunksize=2 * 1024 * 1024, max_concurrency=6)
    for bucket, key in job["downloads"]:
        n += 1
        path = os.path.join(out, "download-%05d" % n)
        s3.download_file(bucket, key, path, Config=tc)
        report["files"].append({"kind": "download_file", "bucket": bucket, "key": key, "start": 0, "end": -1, "path": path})

    # 5. Presigned URLs read with urllib: SigV2 (botocore's default for a
    # custom endpoint in us-east-1) and SigV4.
    if job.get("access_key"):
        for style, cfg in (("default", {}), ("s3v4", {"signature_version": "s3v4"})):
            c = client(job, **cfg)
            for bucket, key in job["presign"]:
                url = c.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=600)
                sig = "v4" if "X-Amz-Signature=" in url else ("v2" if "Signature=" in url else "unknown")
                report.setdefault("presigned", []).append({"style": style, "sig": sig, "bucket": bucket, "key": key})
                with urllib.request.urlopen(url, timeout=60) as resp:
                    save("presigned-" + style + "-" + sig, bucket, key, 0, -1, resp.read())
        # A presigned URL with one signature digit changed must be refused.
        url = client(job, signature_version="s3v4").generate_presigned_url(
            "get_object", Params={"Bucket": job["presign"][0][0], "Key": job["presign"][0][1]}, ExpiresIn=600)
        i = url.index("X-Amz-Signature=") + len("X-Amz-Signature=")
        flipped = "1" if url[i] == "0" else "0"
        try:
            urllib.request.urlopen(url[:i] + flipped + url[i + 1:], timeout=60)
            report["errors"]["tampered_presign"] = "200"
        except urllib.error.HTTPError as e:
            report["errors"]["tampered_presign"] = str(e.code)

    # 6. Errors as boto3 sees them.
    try:
        s3.get_object(Bucket=job["buckets"][0], Key="no/such/key")
        report["errors"]["missing_key"] = "none"
    except botocore.exceptions.ClientError as e:
        report["errors"]["missing_key"] = e.response["Error"]["Code"]
    try:
        s3.put_object(Bucket=job["buckets"][0], Key="new.txt", Body=b"x")
        report["errors"]["put"] = "none"
    except botocore.exceptions.ClientError as e:
        report["errors"]["put"] = e.response["Error"]["Code"]

    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
