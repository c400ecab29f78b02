#!/usr/bin/env bash
# wharf's mutation testing (on demand, not part of CI; TESTING.md records the
# last results and a reason or follow-up for every surviving mutant).
#
# Usage:
#   bash scripts/mutation.sh                 # every package below, in sequence
#   bash scripts/mutation.sh auth s3api      # only these (names from the table)
#   nohup bash scripts/mutation.sh >.mutation/run.log 2>&1 &   # the usual way
#   bash scripts/mutation.sh --recheck auth/sigv2.go:162:16 CONDITIONALS_BOUNDARY
#       # one mutant, as Gremlins reported it, against the current tests
#       # (tracked and new files of the work tree, copied to a temporary
#       # directory): prints KILLED, LIVED or NOT VIABLE (exit 0, 1, 0)
#
# What it does:
#   1. installs Gremlins (github.com/go-gremlins/gremlins, a pinned version,
#      from the Go module proxy) into ./bin/mutation on first use;
#   2. for each package, runs `gremlins unleash` in the package directory with
#      1 worker. Gremlins first runs the package's tests with coverage, then
#      for every covered mutation point applies one mutation to a copy of the
#      module (under $TMPDIR) and runs `go test -failfast` of THAT package
#      only (its own tests; the tool's default): the mutant is KILLED if a test
#      fails, LIVED if all pass, TIMED OUT if the run exceeds the coverage
#      run's time x the package's timeout coefficient. Code no test of the
#      package covers is reported NOT COVERED and not run;
#   3. writes, per package, under .mutation/ (ignored by git):
#        <name>.json  Gremlins' machine-readable report (every mutant),
#        <name>.log   its console output,
#        <name>.txt   the score and the list of surviving (LIVED) mutants;
#   4. prints one score line per package.
#
# Mutation operators: Gremlins' defaults (ARITHMETIC_BASE,
# CONDITIONALS_BOUNDARY, CONDITIONALS_NEGATION, INCREMENT_DECREMENT,
# INVERT_NEGATIVES), plus INVERT_LOGICAL (&& <-> ||) for auth and s3api,
# whose access decisions are mostly boolean expressions.
#
# Restrictions (they change what "survived" means; TESTING.md says so too):
#   - archiveview: only the package's own files (its sub-packages are run
#     separately or not at all: cargopack and catalog are not in scope), and
#     its mutants run the package's tests minus five slow ones that check
#     time and memory budgets, not bytes (ARCHIVEVIEW_SKIP below). A mutant
#     that only those five would catch is reported LIVED here.
#   - archiveview/chunkio: its own tests cover about a fifth of it; the read
#     planner (framed.go, part.go, stream.go, fetch.go, extent.go, verify.go)
#     is exercised by archiveview's tests and is reported NOT COVERED here.
#
# Score: efficacy = KILLED / (KILLED + LIVED); TIMED OUT and NOT VIABLE
# (mutants that do not compile) count in neither.
#
# Exit status: 0 if every package ran and its efficacy is at least the floor
# recorded in the table below (the last measured score, rounded down); 1 if a
# package's efficacy fell below its floor or Gremlins failed (for example the
# package's tests fail without any mutation). WHARF_MUTATION_NO_FLOOR=1
# reports without gating.
#
# Time on the development machine (2 shared cores, Go 1.26.8, 1 worker;
# measured 2026-xx, see TESTING.md): auth ~MIN, s3api ~MIN, chunkio ~MIN,
# manifest ~MIN, archiveview ~MIN; about HOURS in all.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

GREMLINS_MODULE=github.com/go-gremlins/gremlins
GREMLINS_VERSION=v0.6.0
BIN_DIR="$PWD/bin/mutation"
OUT_DIR="$PWD/.mutation"

# Tests of archiveview that its mutants do not run: they measure memory and
# time budgets (stalled readers, planner bytes per workload, a cancelled
# fetcher's waiters) or open 100k-entry and oversize manifests, and take
# about half of the package's test time.
ARCHIVEVIEW_SKIP='^(TestCancelledFetcherDoesNotFailWaiters|TestPlannerBytesPerWorkload|TestBudgetStalledGiantReaders|TestHostile100kManifestOpens|TestHostileJSONSize)$'

# name ; directory ; floor (efficacy %) ; timeout coefficient ; extra gremlins
# flags ; go test flags (passed through GOFLAGS)
PACKAGES=(
	"auth;auth;0;10;--invert-logical;"
	"s3api;s3api;0;6;--invert-logical;"
	"chunkio;archiveview/chunkio;0;10;;"
	"manifest;archiveview/manifest;0;10;;"
	"archiveview;archiveview;0;4;--exclude-files / --exclude-files ^(persist|versions)\.go$;-skip=$ARCHIVEVIEW_SKIP"
	"archiveview-index;archiveview;0;4;--exclude-files / --exclude-files ^(api|index|info|list|model|open|read|resolve|verify)\.go$;-skip=$ARCHIVEVIEW_SKIP"
)

install_gremlins() {
	local bin="$BIN_DIR/gremlins"
	if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -qE "^[[:space:]]+mod[[:space:]]+$GREMLINS_MODULE[[:space:]]+$GREMLINS_VERSION([[:space:]]|$)"; then
		return 0
	fi
	echo "==> installing $GREMLINS_MODULE@$GREMLINS_VERSION into ${BIN_DIR#"$PWD"/}"
	mkdir -p "$BIN_DIR"
	GOBIN="$BIN_DIR" go install "$GREMLINS_MODULE/cmd/gremlins@$GREMLINS_VERSION"
}

# summarize NAME DIR: writes .mutation/NAME.txt from NAME.json and prints its
# score line.
summarize() {
	local name=$1 dir=$2 json="$OUT_DIR/$1.json"
	jq -r --arg dir "$dir" --arg name "$name" '
		[.files[] | .file_name as $f | .mutations[] | . + {file: ($dir + "/" + $f)}] as $m
		| ($m | map(select(.status == "KILLED")) | length) as $k
		| ($m | map(select(.status == "LIVED")) | length) as $l
		| ($m | map(select(.status == "TIMED OUT")) | length) as $t
		| ($m | map(select(.status == "NOT VIABLE")) | length) as $v
		| ($m | map(select(.status == "NOT COVERED")) | length) as $n
		| "\($name): efficacy \(if $k + $l > 0 then ($k * 10000 / ($k + $l) | floor) / 100 else 0 end)% = killed \($k) / (killed + lived \($l)); timed out \($t), not viable \($v), not covered \($n); \($m | length) mutants in all",
		  "",
		  "LIVED:",
		  ($m | map(select(.status == "LIVED")) | sort_by(.file, .line, .column)[]
		   | "  \(.file):\(.line):\(.column) \(.type)"),
		  "TIMED OUT:",
		  ($m | map(select(.status == "TIMED OUT")) | sort_by(.file, .line, .column)[]
		   | "  \(.file):\(.line):\(.column) \(.type)")
	' "$json" >"$OUT_DIR/$name.txt" || return 1
	echo "    $(head -1 "$OUT_DIR/$name.txt")"
}

# efficacy NAME: the efficacy of NAME.json in whole percent, rounded down.
efficacy() {
	jq -r '[.files[].mutations[]] as $m
		| ($m | map(select(.status == "KILLED")) | length) as $k
		| ($m | map(select(.status == "LIVED")) | length) as $l
		| if $k + $l > 0 then ($k * 100 / ($k + $l) | floor) else 0 end' "$OUT_DIR/$1.json"
}

run_package() {
	local name=$1 dir=$2 coef=$3 flags=$4 goflags=$5
	local -a extra=()
	[ -n "$flags" ] && read -r -a extra <<<"$flags"
	echo "==> $name ($dir): gremlins unleash, 1 worker, timeout coefficient $coef${flags:+, $flags}${goflags:+, go test $goflags}"
	local t0=$SECONDS
	# -count=1: the coverage run's duration sets every mutant's timeout, so it
	# must not come from the test cache.
	(cd "$dir" && GOFLAGS="-count=1${goflags:+ $goflags}" "$BIN_DIR/gremlins" unleash \
		--workers 1 --timeout-coefficient "$coef" "${extra[@]}" \
		--output "$OUT_DIR/$name.json") >"$OUT_DIR/$name.log" 2>&1
	local rc=$?
	echo "    gremlins exit $rc after $((SECONDS - t0))s (log: .mutation/$name.log)"
	return $rc
}

# mutate_line TYPE COL: reads one line of Go on stdin and writes it with the
# operator at byte column COL (1-based, as Gremlins reports it) replaced the
# way Gremlins' TYPE replaces it; fails if TYPE does not apply there.
mutate_line() {
	LC_ALL=C awk -v type="$1" -v col="$2" '
	{
		pre = substr($0, 1, col - 1); two = substr($0, col, 2); one = substr($0, col, 1)
		op = ""
		if (two ~ /^(<=|>=|==|!=|&&|\|\||\+\+|--)$/) op = two
		else if (one ~ /^[<>+*\/%-]$/) op = one
		else if (substr($0, col, 5) == "break") op = "break"
		else if (substr($0, col, 8) == "continue") op = "continue"
		m["ARITHMETIC_BASE", "+"] = "-"; m["ARITHMETIC_BASE", "-"] = "+"; m["ARITHMETIC_BASE", "*"] = "/"
		m["ARITHMETIC_BASE", "/"] = "*"; m["ARITHMETIC_BASE", "%"] = "*"
		m["CONDITIONALS_BOUNDARY", "<"] = "<="; m["CONDITIONALS_BOUNDARY", "<="] = "<"
		m["CONDITIONALS_BOUNDARY", ">"] = ">="; m["CONDITIONALS_BOUNDARY", ">="] = ">"
		m["CONDITIONALS_NEGATION", "=="] = "!="; m["CONDITIONALS_NEGATION", "!="] = "=="
		m["CONDITIONALS_NEGATION", "<"] = ">="; m["CONDITIONALS_NEGATION", ">="] = "<"
		m["CONDITIONALS_NEGATION", ">"] = "<="; m["CONDITIONALS_NEGATION", "<="] = ">"
		m["INCREMENT_DECREMENT", "++"] = "--"; m["INCREMENT_DECREMENT", "--"] = "++"
		m["INVERT_NEGATIVES", "-"] = "+"
		m["INVERT_LOGICAL", "&&"] = "||"; m["INVERT_LOGICAL", "||"] = "&&"
		m["INVERT_LOOPCTRL", "break"] = "continue"; m["INVERT_LOOPCTRL", "continue"] = "break"
		if (op == "" || !((type, op) in m)) exit 1
		print pre m[type, op] substr($0, col + length(op))
	}'
}

# recheck FILE:LINE:COL TYPE: applies one mutant to a copy of the work tree
# and runs its package's tests there (with the package's GOFLAGS).
recheck() {
	local spec=$1 type=$2 file line col dir goflags="" row name d fl co f g tmp mutated rc
	IFS=: read -r file line col <<<"$spec"
	dir=$(dirname "$file")
	if [ ! -f "$file" ] || ! [[ $line =~ ^[0-9]+$ && $col =~ ^[0-9]+$ ]]; then
		echo "mutation: --recheck wants FILE:LINE:COL (a file of this tree) and a Gremlins mutant type" >&2
		return 2
	fi
	for row in "${PACKAGES[@]}"; do
		IFS=';' read -r name d fl co f g <<<"$row"
		[ "$d" = "$dir" ] && goflags=$g
	done
	mutated=$(sed -n "${line}p" "$file" | mutate_line "$type" "$col") || {
		echo "mutation: $type does not apply at $spec: $(sed -n "${line}p" "$file")" >&2
		return 2
	}
	tmp=$(mktemp -d)
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$tmp"
	MUTATED=$mutated awk -v n="$line" 'NR == n { print ENVIRON["MUTATED"]; next } { print }' "$file" >"$tmp/$file"
	echo "    $spec $type:"
	echo "      - $(sed -n "${line}p" "$file" | sed 's/^[[:space:]]*//')"
	echo "      + $(printf '%s\n' "$mutated" | sed 's/^[[:space:]]*//')"
	if ! (cd "$tmp" && go build "./$dir" >/dev/null 2>&1); then
		echo "    NOT VIABLE (does not compile)"
		rc=0
	elif (cd "$tmp" && GOFLAGS="-count=1${goflags:+ $goflags}" go test -failfast -timeout 20m "./$dir" >"$tmp/.test.log" 2>&1); then
		echo "    LIVED (every test of ./$dir passes)"
		rc=1
	else
		echo "    KILLED: $(grep -m1 -E -- '^[[:space:]]*--- FAIL|panic:' "$tmp/.test.log" | sed 's/^[[:space:]]*//')"
		rc=0
	fi
	rm -rf "$tmp"
	return $rc
}

if [ "${1:-}" = --recheck ]; then
	[ $# -eq 3 ] || {
		echo "usage: bash scripts/mutation.sh --recheck FILE:LINE:COL TYPE" >&2
		exit 2
	}
	recheck "$2" "$3"
	exit $?
fi

command -v jq >/dev/null 2>&1 || {
	echo "mutation: jq is required (Debian package jq)" >&2
	exit 1
}
install_gremlins || exit 1
mkdir -p "$OUT_DIR"

want=("$@")
failed=()
for row in "${PACKAGES[@]}"; do
	IFS=';' read -r name dir floor coef flags goflags <<<"$row"
	if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qxF "$name"; then
		continue
	fi
	rm -f "$OUT_DIR/$name.json" "$OUT_DIR/$name.txt"
	if ! run_package "$name" "$dir" "$coef" "$flags" "$goflags" || [ ! -s "$OUT_DIR/$name.json" ]; then
		tail -20 "$OUT_DIR/$name.log"
		failed+=("$name (gremlins failed)")
		continue
	fi
	summarize "$name" "$dir" || failed+=("$name (no summary)")
	eff=$(efficacy "$name") || eff=
	if [ -z "$eff" ]; then
		failed+=("$name (no report)")
	elif [ "${WHARF_MUTATION_NO_FLOOR:-0}" != 1 ] && [ "$eff" -lt "$floor" ]; then
		failed+=("$name (efficacy $eff% < floor $floor%)")
	fi
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "mutation: FAIL: ${failed[*]}"
	exit 1
fi
echo "mutation: ok (reports in .mutation/)"
