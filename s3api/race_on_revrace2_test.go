//go:build race

package s3api_test

// raceBuild says the test binary runs under the race detector, whose
// instrumentation moves some of the handler's locals (a request id's
// bytes, a header's digits) to the heap: allocation counts are then
// higher for the same code (race_off_revrace2_test.go).
const raceBuild = true
