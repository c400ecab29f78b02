//go:build !race

package s3api_test

// raceBuild says the test binary runs under the race detector (false
// here; race_on_revrace2_test.go).
const raceBuild = false
