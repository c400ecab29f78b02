#!/usr/bin/env python3
"""boto3 client for wharf's archived-upload test (integration/archived_test.go).

Reads a JSON job from argv[1] and walks one archived file through its
restore with boto3 against wharf: the listing with RestoreStatus, HEAD before,
during and after, a GET refused with InvalidObjectState and then served, a
ranged GET of readable bytes, RestoreObject's answers, and the refusals. It
prints a JSON report of what boto3 saw; the Go side decides what is right and
compares the downloaded bytes with the source.
"""
import json
import sys
import time

import boto3
import botocore
from botocore.config import Config
from botocore.exceptions import ClientError


def client(endpoint, key):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key[0],
        aws_secret_access_key=key[1],
        config=Config(retries={"total_max_attempts": 1}),
    )


def err(e):
    r = e.response
    return {
        "status": r.get("ResponseMetadata", {}).get("HTTPStatusCode"),
        "code": r.get("Error", {}).get("Code"),
        "message": r.get("Error", {}).get("Message"),
        "storage_class": r.get("StorageClass") or r.get("Error", {}).get("StorageClass"),
        "access_tier": r.get("AccessTier") or r.get("Error", {}).get("AccessTier"),
    }


def call(fn, **kw):
    try:
        r = fn(**kw)
        return {"status": r["ResponseMetadata"]["HTTPStatusCode"]}, r
    except ClientError as e:
        return err(e), None


def listing(s3, bucket):
    out = {}
    r = s3.list_objects_v2(Bucket=bucket, OptionalObjectAttributes=["RestoreStatus"])
    for o in r.get("Contents", []):
        rs = o.get("RestoreStatus")
        if rs is not None:
            rs = {"in_progress": rs.get("IsRestoreInProgress"), "expiry": str(rs.get("RestoreExpiryDate") or "")}
        out[o["Key"]] = {"class": o.get("StorageClass"), "restore": rs}
    return out


def head(s3, bucket, key):
    r = s3.head_object(Bucket=bucket, Key=key)
    return {"class": r.get("StorageClass"), "restore": r.get("Restore"), "length": r["ContentLength"]}


def main():
    job = json.loads(sys.argv[1])
    bucket, key = job["bucket"], job["key"]
    s3 = client(job["endpoint"], job["keys"]["ok"])
    rep = {"boto3": boto3.__version__, "botocore": botocore.__version__}
    restore_req = {"Days": 1, "GlacierJobParameters": {"Tier": "Standard"}}

    rep["list_before"] = listing(s3, bucket)
    rep["head_before"] = head(s3, bucket, key)
    rep["get_before"], _ = call(s3.get_object, Bucket=bucket, Key=key)
    r = s3.get_object(Bucket=bucket, Key=key, Range=job["readable_range"])
    with open(job["out"] + "/range", "wb") as f:
        f.write(r["Body"].read())

    # Refusals: a key whose grant denies restores, and a server without
    # --allow-restore.
    rep["restore_denied_key"], _ = call(client(job["endpoint"], job["keys"]["deny"]).restore_object,
                                        Bucket=bucket, Key=key, RestoreRequest=restore_req)
    rep["restore_no_allow"], _ = call(client(job["norestore_endpoint"], job["keys"]["ok"]).restore_object,
                                      Bucket=bucket, Key=key, RestoreRequest=restore_req)

    rep["restore_first"], _ = call(s3.restore_object, Bucket=bucket, Key=key, RestoreRequest=restore_req)
    rep["head_during"] = head(s3, bucket, key)
    rep["list_during"] = listing(s3, bucket)
    rep["restore_during"], _ = call(s3.restore_object, Bucket=bucket, Key=key, RestoreRequest=restore_req)
    rep["get_during"], _ = call(s3.get_object, Bucket=bucket, Key=key)

    deadline = time.time() + job["wait_seconds"]
    h = head(s3, bucket, key)
    while (h["restore"] or "").startswith('ongoing-request="true"') and time.time() < deadline:
        time.sleep(0.2)
        h = head(s3, bucket, key)
    rep["head_after"] = h
    r = s3.get_object(Bucket=bucket, Key=key)
    with open(job["out"] + "/whole", "wb") as f:
        f.write(r["Body"].read())
    rep["list_after"] = listing(s3, bucket)
    rep["restore_after"], _ = call(s3.restore_object, Bucket=bucket, Key=key, RestoreRequest=restore_req)
    print(json.dumps(rep))


if __name__ == "__main__":
    main()
