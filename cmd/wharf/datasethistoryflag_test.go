package main

import (
	"strings"
	"testing"
)

// TestDatasetHistoryFlag: --dataset-history and its YAML key
// dataset_history are validated at start (1 to catalog.MaxDatasetHistory;
// 0 in YAML takes the default).
func TestDatasetHistoryFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		yaml string
		want int
		err  string
	}{
		{want: 100},
		{args: []string{"--dataset-history", "7"}, want: 7},
		{args: []string{"--dataset-history", "1"}, want: 1},
		{args: []string{"--dataset-history", "-1"}, err: "--dataset-history -1: want 1 to 10000"},
		{args: []string{"--dataset-history", "10001"}, err: "--dataset-history 10001"},
		{yaml: "dataset_history: 12\n", want: 12},
		{yaml: "dataset_history: 20000\n", err: "--dataset-history 20000"},
	} {
		cfg, _, err := parseServeArgs(append([]string{"--store", "file:///tmp", "--anonymous"}, c.args...))
		if err == nil && c.yaml != "" {
			err = applyConfigYAML([]byte(c.yaml), &cfg)
		}
		if err == nil {
			err = cfg.openLimits.validate()
		}
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%v %q: %v, want %q", c.args, c.yaml, err, c.err)
		case c.err == "" && err != nil:
			t.Errorf("%v %q: %v", c.args, c.yaml, err)
		case c.err == "" && cfg.DatasetHistory != c.want:
			t.Errorf("%v %q: %d, want %d", c.args, c.yaml, cfg.DatasetHistory, c.want)
		}
	}
}
