"""Captures the exact requests botocore/boto3 1.43 sends (signed headers,
presigned URLs) for auth/testdata/botocore-requests.json. Run:
python3 capture_botocore.py > botocore-requests.json
Nothing is sent: a before-send hook records each request and aborts it."""
import json, time, sys
import boto3
from botocore.config import Config

EP = "http://127.0.0.1:9999"
AK, SK = "AKIAWHARFTEST0001", "wJalr+XUt nFEMI/K7%MDENG/ü+bPxRfiCY=="
out = []

class Captured(Exception):
    pass

def client(region, sigver=None):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                 **({"signature_version": sigver} if sigver else {}))
    c = boto3.client("s3", endpoint_url=EP, aws_access_key_id=AK, aws_secret_access_key=SK,
                     region_name=region, config=cfg)
    return c

def capture(name, c, op, **kw):
    def h(request, **_):
        out.append({"name": name, "method": request.method, "url": request.url,
                    "headers": {k: (v.decode() if isinstance(v, bytes) else v) for k, v in request.headers.items()},
                    "now": int(time.time())})
        raise Captured()
    c.meta.events.register("before-send", h, unique_id="wharf-capture")
    try:
        getattr(c, op)(**kw)
    except Captured:
        pass
    finally:
        c.meta.events.unregister("before-send", unique_id="wharf-capture")

c = client("us-east-1")
capture("get_object ranged if-match checksum", c, "get_object", Bucket="bkt", Key="dir/ü a+b%20.txt", Range="bytes=8388608-16777215", IfMatch='"abc-1"', ChecksumMode="ENABLED")
capture("head_object", c, "head_object", Bucket="bkt", Key="a//b/./c")
capture("list_objects_v2", c, "list_objects_v2", Bucket="bkt", Prefix="a b+c/ü", Delimiter="/")
capture("get_bucket_location", c, "get_bucket_location", Bucket="bkt")
capture("head_bucket eu-west-1", client("eu-west-1"), "head_bucket", Bucket="bkt")
capture("get_object region auto", client("auto"), "get_object", Bucket="bkt", Key="k~1")
for name, cl in [("presign default (SigV2)", c), ("presign s3v4 eu-west-1", client("eu-west-1", "s3v4"))]:
    url = cl.generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "dir/ü a+b.txt", "ResponseContentDisposition": 'attachment; filename="x y.txt"'}, ExpiresIn=3600)
    out.append({"name": name, "method": "GET", "url": url, "headers": {}, "now": int(time.time())})
json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
