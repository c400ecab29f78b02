// Package integration holds wharf's end-to-end tests. They build the wharf
// binary, start an in-process gofakes3 S3 server (or versitygw, or a
// running server: WHARF_S3_BACKEND, s3backend_test.go), pack deterministic source
// trees into it with archiveview/cargopack, run `wharf serve` against it as a
// subprocess (once with SigV4 keys, once anonymous), and drive real S3
// clients at it: aws-sdk-go-v2, minio-go, the aws CLI, boto3, rclone, s3cmd
// and Zarr/xarray over fsspec. Every byte a client downloads is compared with
// the source tree on disk.
//
// The fleet tests (fleet_test.go, fleetpeers_test.go) run four `wharf
// serve` replicas at once behind a random balancer in the test, over the
// suite's S3 behind faults.FaultyHTTP with S3's first-byte latency and
// per-connection bandwidth, with and without --peers, and measure what the
// fleet fetches from S3 against the frames its reads touched. They are not
// parallel, so that the latencies they compare are not the other tests'.
//
// External clients are required: a missing binary or python module fails the
// test with the Debian package to install (scripts/test.sh installs them).
// Clients run with temporary HOME and configuration files, never the user's.
package integration
