// Command wharf serves CargoShip archives as read-only S3 buckets of their
// original files. Subcommands: serve, inspect, ls, get, verify, index,
// restore, pack, bench, demo, version.
// This package is flags and wiring only; the work lives in archiveview,
// backend, s3api and auth.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `wharf: serve CargoShip archives as S3 buckets of their original files

usage:
  wharf serve   --listen HOST:PORT --store URL --archive NAME=MANIFEST_URL [--archive ...] [--anonymous | --access-key AK --secret-key SK]
  wharf serve   --config FILE | --discover s3://BUCKET/PREFIX [--alias NAME=s3://BUCKET/PREFIX@latest] [--rescan 10m] [--check-config]
  wharf inspect [--store URL] [--json] MANIFEST_URL
  wharf ls      [--store URL] [--recursive] [--versions] [--json] MANIFEST_URL [PREFIX]
  wharf get     [--store URL] [--parallel N] MANIFEST_URL KEY|PREFIX/ ... -o DIR|-
  wharf verify  [--store URL] [--quiet] MANIFEST_URL
  wharf index   build [--store URL] MANIFEST_URL -o FILE | show FILE
  wharf restore [--store URL] MANIFEST_URL [--path GLOB ...] --days N --tier Standard|Bulk|Expedited [--dry-run]
  wharf pack    DIR --store URL --bucket B --prefix P [--frame-size N] [--quiet]
  wharf bench   [--soak] [flags]
  wharf demo    [--listen HOST:PORT] [--tls]
  wharf doctor  [the flags or --config of serve]: check keys, TLS, store, credentials, manifests, restores, index cache
  wharf version

Run "wharf COMMAND -h" for a command's flags. verify, pack, index build and
get show progress on stderr (a live line on a terminal, else a JSON log line
every 5 s); --quiet turns it off. Exit status: 0 done, 1 failed (or
interrupted: Ctrl-C stops cleanly and says what was done), 2 bad usage.
`

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "serve":
		err = runServe(ctx, args[1:])
	case "inspect":
		err = runInspect(ctx, args[1:])
	case "ls":
		err = runLs(ctx, args[1:])
	case "get":
		err = runGet(ctx, args[1:])
	case "index":
		err = runIndex(ctx, args[1:])
	case "verify":
		err = runVerify(ctx, args[1:])
	case "restore":
		err = runRestore(ctx, args[1:])
	case "pack":
		err = runPack(ctx, args[1:])
	case "bench":
		err = runBench(ctx, args[1:])
	case "demo":
		err = runDemo(ctx, args[1:])
	case "doctor":
		err = runDoctor(ctx, args[1:])
	case "version", "--version", "-v":
		fmt.Println("wharf", version)
		return 0
	case "help", "-h", "--help":
		fmt.Print(usage)
		return 0
	default:
		fmt.Fprintf(os.Stderr, "wharf: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(os.Stderr, "wharf %s: %s\n", args[0], printable(err.Error()))
	var usage usageError
	if errors.As(err, &usage) {
		return 2
	}
	return 1
}
