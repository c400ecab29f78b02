package main

import (
	"strings"
	"testing"

	"github.com/wharf-s3/wharf/auth"
)

// TestConsoleFlag: --console and the YAML key console set the option;
// start-up refuses a console nobody could use (no keys, no --anonymous)
// and accepts it with either.
func TestConsoleFlag(t *testing.T) {
	cfg := defaultServeConfig()
	var path string
	var check bool
	if err := serveFlags(&cfg, &path, &check).Parse([]string{"--console"}); err != nil || !cfg.Console {
		t.Fatalf("--console: %v, Console %v", err, cfg.Console)
	}
	cfg = defaultServeConfig()
	if err := applyConfigYAML([]byte("console: true\n"), &cfg); err != nil || !cfg.Console {
		t.Fatalf("console: true: %v, Console %v", err, cfg.Console)
	}
	if err := applyConfigYAML([]byte("console: maybe\n"), &cfg); err == nil {
		t.Fatal("console: maybe was accepted")
	}
	base := func() serveConfig {
		c := defaultServeConfig()
		c.StoreURL, c.Listen, c.Console = "file://"+t.TempDir(), "127.0.0.1:0", true
		c.Archives = []serveArchive{{Name: "data", ManifestURL: "s3://b/m.json"}}
		return c
	}
	c := base()
	if err := c.validate(nil); err == nil || !strings.Contains(err.Error(), "--console") {
		t.Errorf("--console with neither keys nor --anonymous: %v", err)
	}
	c = base()
	c.Anonymous = true
	if err := c.validate(nil); err != nil {
		t.Errorf("--console --anonymous: %v", err)
	}
	c = base()
	if err := c.validate([]auth.Key{{AccessKey: "AK", SecretKey: "SK"}}); err != nil {
		t.Errorf("--console with keys: %v", err)
	}
	c = base()
	c.Console = false
	if err := c.validate(nil); err != nil {
		t.Errorf("no console, loopback, no keys (allowed before): %v", err)
	}
}
