#!/usr/bin/env python3
"""boto3 over TLS for wharf's integration tests (driven by integration/tls_test.go).

Reads a JSON job from argv[1]: endpoint (https://), ca (the private CA file),
keys, out (a directory), bucket/key/range for get_object, download
[bucket, key] for download_file. Writes every payload to a file under out and
prints a JSON report; the Go side compares the bytes. Also tries the endpoint
with verify=True (the system CAs), which must fail on the certificate.
"""
import json
import os
import ssl
import sys
import urllib.request

import boto3
import botocore
from botocore.config import Config


def client(job, verify):
    return boto3.client(
        "s3",
        endpoint_url=job["endpoint"],
        region_name="us-east-1",
        aws_access_key_id=job["access_key"],
        aws_secret_access_key=job["secret_key"],
        verify=verify,
        config=Config(retries={"total_max_attempts": 1}, signature_version="s3v4"),
    )


def main():
    job = json.loads(sys.argv[1])
    out = job["out"]
    s3 = client(job, job["ca"])
    report = {"boto3": boto3.__version__, "files": {}}

    def save(name, data):
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(data)
        report["files"][name] = path

    keys = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=job["bucket"]):
        keys += [o["Key"] for o in page.get("Contents", [])]
    report["keys"] = keys

    save("object", s3.get_object(Bucket=job["bucket"], Key=job["key"])["Body"].read())
    r = s3.get_object(Bucket=job["bucket"], Key=job["key"], Range=job["range"])
    report["content_range"] = r["ContentRange"]
    save("range", r["Body"].read())

    b, k = job["download"]
    path = os.path.join(out, "download")
    s3.download_file(b, k, path)
    report["files"]["download"] = path

    # A presigned GET fetched with urllib, trusting only the CA.
    url = s3.generate_presigned_url("get_object", Params={"Bucket": job["bucket"], "Key": "README.txt"}, ExpiresIn=300)
    ctx = ssl.create_default_context(cafile=job["ca"])
    with urllib.request.urlopen(url, context=ctx) as resp:
        save("presigned", resp.read())

    try:
        client(job, True).list_objects_v2(Bucket=job["bucket"], MaxKeys=1)
        report["unverified"] = "succeeded"
    except botocore.exceptions.SSLError as e:
        report["unverified"] = str(e)
    except Exception as e:  # noqa: BLE001 - reported for the Go side to judge
        report["unverified"] = "%s: %s" % (type(e).__name__, e)

    print(json.dumps(report))


if __name__ == "__main__":
    main()
