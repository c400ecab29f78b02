#!/usr/bin/env bash
# wharf's test command (README: `bash scripts/test.sh`; CI: `bash .ci/run`).
#
#   1. installs the missing Debian packages the end-to-end tests drive
#      (only as root with apt-get; otherwise it says what is missing),
#   2. checks gofmt, that no merge conflict marker was left in a tracked
#      file, go vet, that `go mod tidy` would change nothing, and
#      staticcheck (a pinned version, installed into ./bin on first use),
#   3. runs every Go test: the unit tests of every package (these include
#      cmd/wharf/internal/bench: the metrics check and the short soak),
#      then integration/ with real S3 clients over gofakes3, then the read
#      suite of integration/ again over versitygw (a real S3 server, built
#      once into ./bin),
#   4. runs each fuzz target briefly (WHARF_FUZZTIME, default 5s; 0 skips),
#   5. validates docker-compose.yml with `docker-compose config -q`,
#   6. prints one summary line and exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZTIME=${WHARF_FUZZTIME:-5s}
GO_TEST_TIMEOUT=${WHARF_GO_TEST_TIMEOUT:-40m}
# staticcheck 2026.2.2 is module version v0.8.2 (the proxy serves only the
# module version).
STATICCHECK_VERSION=v0.8.2
# versitygw, the real S3 server the end-to-end read suite also runs against
# (built once from the module proxy into ./bin, then cached there).
VERSITYGW_VERSION=v1.8.0
# The read suite run against versitygw: every archive shape, listing, GETs
# and ranges through two SDKs, get/ls, ETag pinning (a replaced chunk),
# damaged and missing objects, the shared index's conditional PUT, and the
# start-up error of an unknown access key. CI-sized: about 20 s.
VERSITYGW_TESTS='TestArchiveShapes|TestComposeCommands|TestAWSSDKGoV2|TestMinioGo|TestGetAndLsWithoutServer|TestReliability|TestSharedIndexReplicas|TestReplacedChunkEndToEnd|TestUnknownAccessKey'
# The clients of docs/clients.md (run by integration/clients_recipes_test.go)
# are among them: s3fs (FUSE), gdal-bin, python3-rasterio, curl, nodejs;
# npm is checked as a command (nodejs builds may bundle it), and the
# recipe's npm package is installed by the test into tmp/npm-recipes.
PACKAGES=(awscli python3-boto3 rclone s3cmd python3-zarr python3-xarray python3-fsspec python3-aiohttp zstd docker-compose
	s3fs fuse3 gdal-bin python3-rasterio curl nodejs chromium)

failed=()
passed=0
t_start=$SECONDS

step() {
	local name=$1
	shift
	echo "==> $name"
	local t0=$SECONDS
	if "$@"; then
		echo "    ok: $name ($((SECONDS - t0))s)"
		passed=$((passed + 1))
	else
		echo "    FAILED: $name ($((SECONDS - t0))s)"
		failed+=("$name")
	fi
}

install_packages() {
	local missing=()
	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "    no dpkg: cannot check ${PACKAGES[*]}; tests needing them will fail"
		return 0
	fi
	for p in "${PACKAGES[@]}"; do
		if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
			missing+=("$p")
		fi
	done
	command -v npm >/dev/null 2>&1 || missing+=(npm)
	if [ ${#missing[@]} -eq 0 ]; then
		echo "    all present: ${PACKAGES[*]}"
		return 0
	fi
	if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
		echo "    missing Debian packages: ${missing[*]}"
		echo "    (not root or no apt-get: install them yourself; the tests that need them will fail)"
		return 0
	fi
	echo "    installing: ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq </dev/null &&
		apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
}

check_gofmt() {
	local out
	out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
	if [ -n "$out" ]; then
		echo "    not gofmt-clean:"
		echo "$out" | sed 's/^/      /'
		return 1
	fi
}

# check_merge_markers fails on a conflict marker left in any tracked text
# file (a merge resolved in a hurry once left one in ARCHITECTURE.md).
check_merge_markers() {
	local out
	out=$(git grep -InE '^(<<<<<<< |>>>>>>> |=======$)' 2>/dev/null || true)
	if [ -n "$out" ]; then
		echo "    merge conflict markers:"
		echo "$out" | sed 's/^/      /'
		return 1
	fi
}

run_staticcheck() {
	local bin="$PWD/bin/staticcheck"
	if ! "$bin" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; then
		echo "    installing honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION into ./bin"
		GOBIN="$PWD/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" || return 1
	fi
	"$bin" -version
	"$bin" ./...
}

install_versitygw() {
	# go install stamps no version into the binary (--version says "git"):
	# a stamp file beside it says which one was built.
	local bin="$PWD/bin/versitygw" stamp="$PWD/bin/versitygw.version"
	if [ -x "$bin" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$VERSITYGW_VERSION" ]; then
		echo "    cached: $bin ($VERSITYGW_VERSION)"
		return 0
	fi
	echo "    installing github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION into ./bin"
	GOBIN="$PWD/bin" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" &&
		echo "$VERSITYGW_VERSION" >"$stamp"
}

run_fuzz() {
	if [ "$FUZZTIME" = 0 ] || [ "$FUZZTIME" = 0s ]; then
		echo "    skipped (WHARF_FUZZTIME=$FUZZTIME)"
		return 0
	fi
	local rc=0 pkg f n=0 log flakes=0
	log=$(mktemp)
	# integration/ has no fuzz targets. The targets are found in the
	# package's own test files (no fuzz file has build constraints), which
	# saves linking a test binary per package only to list them.
	local dir
	while read -r pkg dir; do
		for f in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' || true); do
			n=$((n + 1))
			echo "    $pkg $f (-fuzztime=$FUZZTIME)"
			if ! go test -run '^$' -fuzz "^${f}\$" -fuzztime "$FUZZTIME" "$pkg" >"$log" 2>&1 </dev/null; then
				# Go 1.26's fuzz coordinator can report a bare "context
				# deadline exceeded" when -fuzztime ends under CPU load
				# (golang/go#75804): no failing input, not a finding.
				if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
					echo "      (ignored: fuzztime deadline race of the Go toolchain, golang/go#75804; no failing input)"
					flakes=$((flakes + 1))
				else
					tail -40 "$log"
					rc=1
				fi
			fi
		done
	done < <(go list -f '{{.ImportPath}} {{.Dir}}' ./... | grep -v '/integration ')
	rm -f "$log"
	echo "    $n fuzz targets ($flakes deadline races ignored)"
	return $rc
}

check_compose() {
	if ! command -v docker-compose >/dev/null 2>&1; then
		echo "    docker-compose not found: install Debian package docker-compose"
		return 1
	fi
	docker-compose -f docker-compose.yml config -q
}

step "install test tools" install_packages
step "go build" go build ./...
step "gofmt" check_gofmt
step "no merge markers" check_merge_markers
step "go vet" go vet ./...
step "go mod tidy" go mod tidy -diff
step "staticcheck" run_staticcheck
# Every package but the end-to-end suite, which runs in the next step. This
# includes cmd/wharf/internal/bench (the metrics check against the counting
# store, and the 15 s soak with injected faults).
step "go test (units)" go test -count=1 -timeout "$GO_TEST_TIMEOUT" $(go list ./... | grep -v '/integration$')
# -v: the subtest names and log lines say which client checked what.
step "go test (integration, real clients)" go test -count=1 -v -timeout "$GO_TEST_TIMEOUT" ./integration
step "versitygw" install_versitygw
step "go test (integration, versitygw)" env WHARF_S3_BACKEND=versitygw WHARF_VERSITYGW="$PWD/bin/versitygw" \
	go test -count=1 -v -timeout "$GO_TEST_TIMEOUT" -run "^($VERSITYGW_TESTS)\$" ./integration
step "fuzz" run_fuzz
step "docker-compose config" check_compose

total=$((SECONDS - t_start))
if [ ${#failed[@]} -gt 0 ]; then
	echo "wharf test: FAIL (${#failed[@]} of $((passed + ${#failed[@]})) steps failed: ${failed[*]}) in ${total}s"
	exit 1
fi
echo "wharf test: PASS ($passed steps) in ${total}s"
