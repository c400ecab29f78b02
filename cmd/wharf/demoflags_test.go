package main

import (
	"context"
	"strings"
	"testing"
)

// TestDemoFlagRefusals: demo's flags are checked before anything is
// packed, each error naming its flag.
func TestDemoFlagRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--frame-size", "-1"}, "--frame-size -1"},
		{[]string{"--frame-size", "1099511627776"}, "--frame-size 1099511627776"},
		{[]string{"--listen", "nocolon"}, `--listen: listen address "nocolon"`},
	} {
		err := runDemo(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("demo %q: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}
