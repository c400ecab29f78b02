#!/bin/sh
# Captures the requests real S3 command-line clients send, for
# cli-requests.json. Start the recorder first:
#   python3 capture_server.py cap > reqs.jsonl &
# then run this script, and convert reqs.jsonl (one JSON object per request:
# method, raw request-target, headers, unix time) into cli-requests.json
# entries {name, method, target, headers, now}. Captured with s3cmd 2.3.0,
# rclone 1.60.1 and aws-cli 1.45.11 (botocore 1.43.11).
set -e
AK=AKIAWHARFTEST0001
SK='wJalr+XUt nFEMI/K7%MDENG/ü+bPxRfiCY=='
EP=127.0.0.1:9999
KEY='dir/ü a+b.txt'
printf '[default]\naccess_key = %s\nhost_base = %s\nhost_bucket = %s\nuse_https = False\nbucket_location = us-east-1\n' "$AK" "$EP" "$EP" > s3cfg
s3cmd -c s3cfg --secret_key="$SK" get "s3://bkt/$KEY" -
s3cmd -c s3cfg --secret_key="$SK" ls "s3://bkt/a b+c/"
s3cmd -c s3cfg --secret_key="$SK" --signature-v2 get "s3://bkt/$KEY" -
R="--config /dev/null --low-level-retries 1 --retries 1 --s3-access-key-id $AK --s3-endpoint http://$EP --s3-force-path-style"
env -u AWS_CA_BUNDLE rclone $R --s3-secret-access-key "$SK" --s3-provider Other cat ":s3:bkt/$KEY" --offset 1 --count 3
env -u AWS_CA_BUNDLE rclone $R --s3-secret-access-key "$SK" --s3-provider Other --s3-v2-auth cat ":s3:bkt/$KEY"
env -u AWS_CA_BUNDLE rclone $R --s3-secret-access-key "$SK" --s3-provider Minio --s3-region eu-west-1 lsf ":s3:bkt/a b+c/"
export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY="$SK" AWS_DEFAULT_REGION=us-east-1
aws --endpoint-url "http://$EP" s3 cp "s3://bkt/$KEY" -
aws --endpoint-url "http://$EP" s3 presign "s3://bkt/$KEY"   # URL only; appended by hand
