#!/usr/bin/env bash
# On demand (not in CI): the end-to-end read suite of integration/ against
# real S3 servers besides the two scripts/test.sh runs (gofakes3 and
# versitygw): SeaweedFS (one `weed server -s3` process) and MinIO, each
# built once from the Go module proxy into ./bin and run on loopback with
# the suite's backend credentials. TESTING.md gives each server's result.
#
#   bash scripts/backends.sh                 # seaweedfs and minio
#   bash scripts/backends.sh seaweedfs       # one of them
#   WHARF_BACKEND_TESTS='TestAWSSDKGoV2' bash scripts/backends.sh minio
#
# Versions: SEAWEEDFS_VERSION and MINIO_VERSION (module versions; default
# latest: neither publishes semver tags the module proxy serves). MinIO is
# `go install`ed; SeaweedFS's go.mod has replace directives, which go
# install refuses, so its module is downloaded and built as the main module.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SEAWEEDFS_VERSION=${SEAWEEDFS_VERSION:-latest}
MINIO_VERSION=${MINIO_VERSION:-latest}
TESTS=${WHARF_BACKEND_TESTS:-'TestArchiveShapes|TestAWSSDKGoV2|TestMinioGo|TestGetAndLsWithoutServer|TestReliability|TestSharedIndexReplicas|TestReplacedChunkEndToEnd|TestUnknownAccessKey'}
# The suite's backend credentials (integration/main_test.go).
KEY=backend-fake-key
SECRET=backend-fake-secret

servers=("$@")
[ ${#servers[@]} -eq 0 ] && servers=(seaweedfs minio)

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# build NAME MODULE@VERSION: go install into ./bin once; a stamp file says
# which version was built (go install stamps none into the binary).
build() {
	local name=$1 mod=$2 bin="$PWD/bin/$1"
	if [ -x "$bin" ] && [ "$(cat "$bin.version" 2>/dev/null)" = "$mod" ]; then
		return 0
	fi
	echo "==> building $mod into ./bin (once)"
	GOBIN="$PWD/bin" go install "$mod" && echo "$mod" >"$bin.version"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# free_pair: a port P below 50000 with P+10000 free too (SeaweedFS puts
# each server's gRPC port 10000 above its HTTP port).
free_pair() {
	python3 -c '
import random, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
while True:
    p = random.randint(20000, 49999)
    if free(p) and free(p + 10000):
        print(p); break'
}

wait_port() {
	local port=$1 i
	for i in $(seq 1 300); do
		(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
		sleep 0.2
	done
	return 1
}

# build_main NAME MODULE@VERSION PKG: for a module whose go.mod has replace
# directives (SeaweedFS), which `go install MOD@VERSION` refuses: download
# the module from the proxy and build PKG inside it, as the main module.
build_main() {
	local name=$1 mod=$2 pkg=$3 bin="$PWD/bin/$1" dir
	if [ -x "$bin" ] && [ "$(cat "$bin.version" 2>/dev/null)" = "$mod" ]; then
		return 0
	fi
	echo "==> building $mod ($pkg) into ./bin (once)"
	dir=$(go mod download -json "$mod" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])') || return 1
	(cd "$dir" && go build -o "$bin" "$pkg") && echo "$mod" >"$bin.version"
}

start_seaweedfs() {
	build_main weed "github.com/seaweedfs/seaweedfs@$SEAWEEDFS_VERSION" ./weed || return 1
	local port=$1 dir="$work/seaweedfs"
	mkdir -p "$dir"
	cat >"$dir/s3.json" <<JSON
{"identities":[{"name":"wharf","credentials":[{"accessKey":"$KEY","secretKey":"$SECRET"}],"actions":["Admin","Read","List","Tagging","Write"]}]}
JSON
	./bin/weed server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$dir" -master.port="$(free_pair)" -volume.port="$(free_pair)" \
		-filer -filer.port="$(free_pair)" -s3 -s3.port="$port" -s3.config="$dir/s3.json" >"$dir/log" 2>&1 &
	pids+=($!)
}

start_minio() {
	build minio "github.com/minio/minio@$MINIO_VERSION" || return 1
	local port=$1 dir="$work/minio"
	mkdir -p "$dir/data"
	MINIO_ROOT_USER=$KEY MINIO_ROOT_PASSWORD=$SECRET ./bin/minio server --quiet --address "127.0.0.1:$port" \
		--console-address "127.0.0.1:$(free_port)" "$dir/data" >"$dir/log" 2>&1 &
	pids+=($!)
}

results=()
for s in "${servers[@]}"; do
	port=$(free_pair)
	case $s in
	seaweedfs) start_seaweedfs "$port" ;;
	minio) start_minio "$port" ;;
	*) echo "unknown server $s (want seaweedfs or minio)"; exit 2 ;;
	esac || { results+=("$s: BUILD FAILED"); continue; }
	if ! wait_port "$port"; then
		results+=("$s: did not start (log: $(tail -3 "$work/$s/log" 2>/dev/null))")
		continue
	fi
	# The S3 gateway may listen before its filer and volumes are ready
	# (SeaweedFS elects its master first).
	if [ "$s" = seaweedfs ]; then sleep 10; else sleep 2; fi
	echo "==> integration read suite against $s on 127.0.0.1:$port"
	if WHARF_S3_BACKEND="url:http://127.0.0.1:$port" go test -count=1 -v -timeout 20m -run "^($TESTS)\$" ./integration 2>&1 | tee "$work/$s.out" | grep -E '^(--- |ok|FAIL|PASS)'; then
		:
	fi
	if grep -q '^ok' "$work/$s.out"; then
		results+=("$s: PASS")
	else
		results+=("$s: FAIL ($(grep -c -- '--- FAIL' "$work/$s.out") failed tests; see output above)")
	fi
done
echo
printf 'wharf backends: %s\n' "${results[@]}"
printf '%s\n' "${results[@]}" | grep -qv ': PASS$' && exit 1
exit 0
