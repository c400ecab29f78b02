package main

import (
	"net/http"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api/console"
)

// consoleHandler builds the /-/console/ handler when --console is set
// (nil otherwise): the catalog's buckets and what each serves
// (catalog.Manager.Kind), published datasets' version histories
// (catalog.Manager.History), the verifier and the restore switch.
func consoleHandler(cfg *serveConfig, cm *catalog.Manager, verifier *auth.Verifier, logins bool, log zerolog.Logger) func(http.Handler) http.Handler {
	if !cfg.Console {
		return nil
	}
	return func(api http.Handler) http.Handler {
		return console.New(console.Config{Catalog: cm.Catalog(), Verifier: verifier, API: api, Logins: logins,
			AllowRestore: cfg.AllowRestore, Region: cfg.Region, Logger: log, History: cm.History, VersionIDForm: cm.VersionIDForm,
			Kind: func(b string) string {
				k, _ := cm.Kind(b)
				return string(k)
			}})
	}
}
