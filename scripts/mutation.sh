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
#       # directory): prints KILLED, LIVED or NOT VIABLE (exit 0, 1, 0).
#       # It runs the tests of the first row of the table with the file's
#       # directory; WHARF_MUTATION_ROW=<name> picks another row (e.g.
#       # chunkio-via-archiveview); WHARF_MUTATION_TIMEOUT (default 10m) is
#       # go test's -timeout (a hang fails the test binary: KILLED).
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
# measured 2026-11-30 with the timeout coefficients of then, see
# TESTING.md): auth 5 min, s3api 32 min, chunkio 10 min, manifest 43 min.
# The archiveview rows were not run to the end: 1,314 covered mutants in
# the three together at about 15 s each, some 5 to 6 hours, plus the two
# chunkio rows that run archiveview's tests.
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

# chunkio files whose mutants also run archiveview's tests: the frame cache,
# extent verification and the memory of verified extents
# (chunkio-via-archiveview), and framed reads (chunkio-framed-via-archiveview).
CHUNKIO_VIA_EXCLUDE='^(chunk|doc|fetch|framed|memo|memory|metrics|parked|part|plan|set|stream|tarwalk|verify|zstream)\.go$'
CHUNKIO_FRAMED_EXCLUDE='^(chunk|doc|extent|fetch|framecache|memo|memory|metrics|parked|part|plan|set|stream|tarwalk|verified|verify|zstream)\.go$'

# name ; directory ; floor (efficacy %) ; timeout coefficient ; extra gremlins
# flags ; go test flags (passed through GOFLAGS) ; other package directories
# whose tests also run for every mutant (through the go wrapper below)
PACKAGES=(
	"auth;auth;0;30;--invert-logical;;"
	"s3api;s3api;0;6;--invert-logical;;"
	"chunkio;archiveview/chunkio;0;30;;;"
	"manifest;archiveview/manifest;0;30;;;"
	"archiveview;archiveview;0;4;--exclude-files / --exclude-files ^(index|list|persist|resolve|versions)\.go$;-skip=$ARCHIVEVIEW_SKIP;"
	"chunkio-via-archiveview;archiveview/chunkio;0;4;--exclude-files $CHUNKIO_VIA_EXCLUDE;-skip=$ARCHIVEVIEW_SKIP;archiveview"
	"archiveview-resolve;archiveview;0;4;--exclude-files / --exclude-files ^(api|index|info|list|model|open|persist|read|verify|versions)\.go$;-skip=$ARCHIVEVIEW_SKIP;"
	"chunkio-framed-via-archiveview;archiveview/chunkio;0;4;--exclude-files $CHUNKIO_FRAMED_EXCLUDE;-skip=$ARCHIVEVIEW_SKIP;archiveview"
	"archiveview-index;archiveview;0;4;--exclude-files / --exclude-files ^(api|info|model|open|read|resolve|verify)\.go$;-skip=$ARCHIVEVIEW_SKIP;"
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
	# NOT COVERED, with the source line. Gremlins takes coverage from Go's
	# cover blocks, which hold statements but not the expressions of a
	# switch's case clauses nor package-level declarations: mutants there are
	# NOT COVERED however well tested. Those on a "case" line are counted
	# apart.
	local spec type src f l ncase=0 nother=0 list
	list=$(jq -r --arg dir "$dir" '.files[] | .file_name as $f | .mutations[]
		| select(.status == "NOT COVERED") | "\($dir)/\($f):\(.line):\(.column) \(.type)"' "$json" | sort -t: -k1,1 -k2,2n -k3,3n)
	{
		echo "NOT COVERED:"
		while read -r spec type; do
			[ -n "$spec" ] || continue
			IFS=: read -r f l _ <<<"$spec"
			src=$(sed -n "${l}p" "$f" | sed 's/^[[:space:]]*//')
			if [[ $src == case\ * ]]; then ncase=$((ncase + 1)); else nother=$((nother + 1)); fi
			echo "  $spec $type | $src"
		done <<<"$list"
		echo "NOT COVERED on case lines (never run by Gremlins): $ncase; elsewhere: $nother"
	} >>"$OUT_DIR/$name.txt"
	echo "    $(head -1 "$OUT_DIR/$name.txt")"
	echo "    $(tail -1 "$OUT_DIR/$name.txt")"
}

# efficacy NAME: the efficacy of NAME.json in whole percent, rounded down.
efficacy() {
	jq -r '[.files[].mutations[]] as $m
		| ($m | map(select(.status == "KILLED")) | length) as $k
		| ($m | map(select(.status == "LIVED")) | length) as $l
		| if $k + $l > 0 then ($k * 100 / ($k + $l) | floor) else 0 end' "$OUT_DIR/$1.json"
}

# write_go_wrapper: Gremlins runs `go test ... <package>` for each mutant
# and `go test -cover ... ./<dir>/...` once for coverage. For a row with
# other packages to test, a `go` earlier on PATH adds them: to each mutant's
# run, and to the coverage run with -coverpkg=<package>, so that code those
# packages' tests reach counts as covered. Every other go command passes
# through unchanged.
write_go_wrapper() {
	mkdir -p "$BIN_DIR/wrap"
	cat >"$BIN_DIR/wrap/go" <<'WRAPPER'
#!/usr/bin/env bash
# Written by scripts/mutation.sh: adds $WHARF_MUTATION_ALSO to the go test
# runs of $WHARF_MUTATION_PKG (see write_go_wrapper there).
if [ "${1:-}" = test ] && [ $# -gt 1 ]; then
	last=${!#}
	set -- "${@:1:$#-1}"
	case $last in
	"$WHARF_MUTATION_PKG")
		exec "$WHARF_MUTATION_GO" "$@" "$last" $WHARF_MUTATION_ALSO ;;
	"./$WHARF_MUTATION_DIR/...")
		exec "$WHARF_MUTATION_GO" "$@" -coverpkg="$WHARF_MUTATION_PKG" "./$WHARF_MUTATION_DIR" $WHARF_MUTATION_ALSO ;;
	esac
	set -- "$@" "$last"
fi
exec "$WHARF_MUTATION_GO" "$@"
WRAPPER
	chmod +x "$BIN_DIR/wrap/go"
}

run_package() {
	local name=$1 dir=$2 coef=$3 flags=$4 goflags=$5 also=$6
	local -a extra=() env=()
	[ -n "$flags" ] && read -r -a extra <<<"$flags"
	if [ -n "$also" ]; then
		local mod d pkgs=""
		mod=$(go list -m)
		for d in $also; do pkgs+=" $mod/$d"; done
		write_go_wrapper
		env=(PATH="$BIN_DIR/wrap:$PATH" WHARF_MUTATION_GO="$(command -v go)" WHARF_MUTATION_PKG="$mod/$dir"
			WHARF_MUTATION_DIR="$dir" WHARF_MUTATION_ALSO="${pkgs# }")
	fi
	echo "==> $name ($dir): gremlins unleash, 1 worker, timeout coefficient $coef${flags:+, $flags}${goflags:+, go test $goflags}${also:+, also the tests of $also}"
	local t0=$SECONDS
	# -count=1: the coverage run's duration sets every mutant's timeout, so it
	# must not come from the test cache.
	(cd "$dir" && env "${env[@]}" GOFLAGS="-count=1${goflags:+ $goflags}" "$BIN_DIR/gremlins" unleash \
		--workers 1 --timeout-coefficient "$coef" "${extra[@]}" \
		--output "$OUT_DIR/$name.json") >"$OUT_DIR/$name.log" 2>&1
	local rc=$?
	echo "    gremlins exit $rc after $((SECONDS - t0))s (log: .mutation/$name.log)"
	return $rc
}

# build_mutator: builds bin/mutation/mutate-one, a small Go program (its
# source is below, in a module of its own under bin/) that applies one
# mutant the way Gremlins does: it changes the operator of the AST node at
# FILE:LINE:COL and prints the file with go/printer, which adds the
# parentheses the changed tree needs (so `a && b && c` with its first `&&`
# inverted is `(a || b) && c`, not `a || b && c`).
build_mutator() {
	local src="$BIN_DIR/mutate-src"
	[ -x "$BIN_DIR/mutate-one" ] && [ "$BIN_DIR/mutate-one" -nt "${BASH_SOURCE[0]}" ] && return 0
	mkdir -p "$src"
	printf 'module wharfmutate\n\ngo 1.26\n' >"$src/go.mod"
	cat >"$src/main.go" <<'GOSRC'
// Command mutate-one prints FILE with the operator at LINE:COL changed as
// Gremlins' mutant TYPE changes it. It exits 1 if TYPE does not apply there.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"strconv"
)

var swaps = map[string]map[token.Token]token.Token{
	"ARITHMETIC_BASE":       {token.ADD: token.SUB, token.SUB: token.ADD, token.MUL: token.QUO, token.QUO: token.MUL, token.REM: token.MUL},
	"CONDITIONALS_BOUNDARY": {token.LSS: token.LEQ, token.LEQ: token.LSS, token.GTR: token.GEQ, token.GEQ: token.GTR},
	"CONDITIONALS_NEGATION": {token.EQL: token.NEQ, token.NEQ: token.EQL, token.LSS: token.GEQ, token.GEQ: token.LSS, token.GTR: token.LEQ, token.LEQ: token.GTR},
	"INCREMENT_DECREMENT":   {token.INC: token.DEC, token.DEC: token.INC},
	"INVERT_NEGATIVES":      {token.SUB: token.ADD},
	"INVERT_LOGICAL":        {token.LAND: token.LOR, token.LOR: token.LAND},
	"INVERT_LOOPCTRL":       {token.BREAK: token.CONTINUE, token.CONTINUE: token.BREAK},
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: mutate-one FILE LINE COL TYPE")
		os.Exit(2)
	}
	file, typ := os.Args[1], os.Args[4]
	line, err1 := strconv.Atoi(os.Args[2])
	col, err2 := strconv.Atoi(os.Args[3])
	sw, ok := swaps[typ]
	if err1 != nil || err2 != nil || !ok {
		fmt.Fprintln(os.Stderr, "mutate-one: bad LINE, COL or TYPE")
		os.Exit(2)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.ParseComments)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mutate-one:", err)
		os.Exit(2)
	}
	at := func(p token.Pos) bool {
		pos := fset.Position(p)
		return pos.Line == line && pos.Column == col
	}
	done := false
	ast.Inspect(f, func(n ast.Node) bool {
		if done {
			return false
		}
		switch n := n.(type) {
		case *ast.BinaryExpr:
			if to, ok := sw[n.Op]; ok && at(n.OpPos) {
				n.Op, done = to, true
			}
		case *ast.UnaryExpr:
			if to, ok := sw[n.Op]; ok && typ == "INVERT_NEGATIVES" && at(n.OpPos) {
				n.Op, done = to, true
			}
		case *ast.IncDecStmt:
			if to, ok := sw[n.Tok]; ok && at(n.TokPos) {
				n.Tok, done = to, true
			}
		case *ast.BranchStmt:
			if to, ok := sw[n.Tok]; ok && at(n.TokPos) {
				n.Tok, done = to, true
			}
		}
		return true
	})
	if !done {
		os.Exit(1)
	}
	if err := printer.Fprint(os.Stdout, fset, f); err != nil {
		fmt.Fprintln(os.Stderr, "mutate-one:", err)
		os.Exit(2)
	}
}
GOSRC
	(cd "$src" && GOFLAGS= GOWORK=off go build -o "$BIN_DIR/mutate-one" .)
}

# recheck FILE:LINE:COL TYPE: applies one mutant to a copy of the work tree
# and runs its package's tests there (with the package's GOFLAGS).
recheck() {
	local spec=$1 type=$2 file line col dir goflags="" also="" row name d fl co f g a tmp rc pkgs
	IFS=: read -r file line col <<<"$spec"
	dir=$(dirname "$file")
	if [ ! -f "$file" ] || ! [[ $line =~ ^[0-9]+$ && $col =~ ^[0-9]+$ ]]; then
		echo "mutation: --recheck wants FILE:LINE:COL (a file of this tree) and a Gremlins mutant type" >&2
		return 2
	fi
	for row in "${PACKAGES[@]}"; do
		IFS=';' read -r name d fl co f g a <<<"$row"
		if [ -n "${WHARF_MUTATION_ROW:-}" ] && [ "$name" = "$WHARF_MUTATION_ROW" ] ||
			[ -z "${WHARF_MUTATION_ROW:-}" ] && [ "$d" = "$dir" ]; then
			goflags=$g also=$a
			break
		fi
	done
	pkgs="./$dir"
	for a in $also; do pkgs+=" ./$a"; done
	build_mutator || return 2
	tmp=$(mktemp -d)
	RECHECK_TMP=$tmp
	trap 'rm -rf "$RECHECK_TMP"' EXIT
	git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$tmp"
	if ! "$BIN_DIR/mutate-one" "$file" "$line" "$col" "$type" >"$tmp/$file"; then
		echo "mutation: $type does not apply at $spec: $(sed -n "${line}p" "$file")" >&2
		return 2
	fi
	echo "    $spec $type:"
	diff <(gofmt "$file") <(gofmt "$tmp/$file") | sed -n 's/^<[[:space:]]*/      - /p; s/^>[[:space:]]*/      + /p'

	if ! (cd "$tmp" && go build "./$dir" >/dev/null 2>&1); then
		echo "    NOT VIABLE (does not compile)"
		rc=0
	elif (cd "$tmp" && GOFLAGS="-count=1${goflags:+ $goflags}" go test -failfast -timeout "${WHARF_MUTATION_TIMEOUT:-10m}" $pkgs >"$tmp/.test.log" 2>&1); then
		echo "    LIVED (every test of $pkgs passes)"
		rc=1
	else
		echo "    KILLED: $({ grep -m1 -E -- '^[[:space:]]*--- FAIL|panic:|^FAIL|vet:' "$tmp/.test.log" || tail -1 "$tmp/.test.log"; } | sed 's/^[[:space:]]*//')"
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
	IFS=';' read -r name dir floor coef flags goflags also <<<"$row"
	if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qxF "$name"; then
		continue
	fi
	rm -f "$OUT_DIR/$name.json" "$OUT_DIR/$name.txt"
	if ! run_package "$name" "$dir" "$coef" "$flags" "$goflags" "$also" || [ ! -s "$OUT_DIR/$name.json" ]; then
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
