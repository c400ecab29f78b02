#!/bin/sh
# Fetch one voyage manifest from the served bucket.
set -eu
aws --endpoint-url "${WHARF_URL:-http://127.0.0.1:9000}" s3 cp s3://sample/data/manifests/voyage-1.json -
