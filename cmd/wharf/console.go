package main

import (
	"net/http"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/auth"
	"github.com/wharf-s3/wharf/s3api"
	"github.com/wharf-s3/wharf/s3api/console"
)

// consoleHandler builds the /-/console/ handler when --console is set
// (nil otherwise): the S3 handler's catalog, verifier and restore switch,
// and each bucket's source from the configuration.
func consoleHandler(cfg *serveConfig, cat s3api.Catalog, verifier *auth.Verifier, logins bool, log zerolog.Logger) func(http.Handler) http.Handler {
	if !cfg.Console {
		return nil
	}
	sources := map[string]string{}
	for _, a := range cfg.Archives {
		sources[a.Name] = "archive " + a.ManifestURL
	}
	for _, a := range cfg.Aliases {
		sources[a.Name] = "alias " + a.Target
	}
	return func(api http.Handler) http.Handler {
		return console.New(console.Config{Catalog: cat, Verifier: verifier, API: api, Logins: logins,
			AllowRestore: cfg.AllowRestore, Region: cfg.Region, Logger: log,
			Source: func(b string) string {
				if s, ok := sources[b]; ok {
					return s
				}
				return "discover"
			}})
	}
}
