package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/wharf-s3/wharf/s3api"
)

// frontDoorConfig is how "wharf serve" meets its clients: TLS on the S3 and
// admin listeners, and CORS for browser clients. It is embedded in
// serveConfig and, with its YAML names, inlined in the config file's layout
// (fileConfig), so flags and file say the same.
type frontDoorConfig struct {
	// TLSCert and TLSKey are PEM files (the certificate chain, leaf first,
	// and its private key); set, the S3 listener speaks TLS 1.2+ only,
	// offering HTTP/2 and HTTP/1.1 by ALPN.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	// AdminTLSCert and AdminTLSKey give the admin listener its own
	// certificate. Without them the admin listener uses the S3 one when
	// the S3 listener has TLS, unless AdminPlain keeps it plain HTTP
	// (allowed on a loopback admin address only).
	AdminTLSCert string `yaml:"admin_tls_cert"`
	AdminTLSKey  string `yaml:"admin_tls_key"`
	AdminPlain   bool   `yaml:"admin_plain"`
	// AdminTokenFile holds the bearer token every admin endpoint but the
	// probes asks for (admintoken.go); empty = the admin endpoints are
	// open to whoever reaches the listener.
	AdminTokenFile string `yaml:"admin_token_file"`
	// TLSReloadInterval is how often the certificate files are re-read to
	// pick up a rotation (SIGHUP also reloads them). 0 = on SIGHUP only.
	TLSReloadInterval time.Duration `yaml:"tls_reload_interval"`
	// CORSAllowOrigins are the origins whose pages may read the buckets
	// ("scheme://host[:port]" or "*"); empty = no CORS.
	CORSAllowOrigins []string `yaml:"cors_allow_origins"`
	// CORSMaxAge is how long a browser may cache a preflight answer
	// (whole seconds; 0 = no Access-Control-Max-Age header).
	CORSMaxAge time.Duration `yaml:"cors_max_age"`

	// Test hooks: tlsReloadNow reloads the certificates like SIGHUP;
	// tlsChecked is called after every reload round.
	tlsReloadNow <-chan struct{}
	tlsChecked   func()
}

// Front-door defaults.
const (
	defaultTLSReloadInterval = 5 * time.Second
	defaultCORSMaxAge        = 10 * time.Minute
	minTLSReloadInterval     = 100 * time.Millisecond
)

func defaultFrontDoor() frontDoorConfig {
	return frontDoorConfig{TLSReloadInterval: defaultTLSReloadInterval, CORSMaxAge: defaultCORSMaxAge}
}

// frontDoorFlags defines the TLS and CORS flags of "wharf serve" on fd.
func frontDoorFlags(fs *flag.FlagSet, fd *frontDoorConfig) {
	fs.StringVar(&fd.TLSCert, "tls-cert", fd.TLSCert, "PEM certificate chain `FILE` (leaf first): serve S3 over TLS 1.2+ with HTTP/2 (needs --tls-key); reloaded on SIGHUP and when the file changes")
	fs.StringVar(&fd.TLSKey, "tls-key", fd.TLSKey, "PEM private key `FILE` of --tls-cert")
	fs.StringVar(&fd.AdminTLSCert, "admin-tls-cert", fd.AdminTLSCert, "PEM certificate `FILE` of the admin listener (default: the --tls-cert one)")
	fs.StringVar(&fd.AdminTLSKey, "admin-tls-key", fd.AdminTLSKey, "PEM private key `FILE` of --admin-tls-cert")
	fs.BoolVar(&fd.AdminPlain, "admin-plain", fd.AdminPlain, "keep the admin listener plain HTTP while S3 uses TLS (loopback --admin-listen only)")
	fs.StringVar(&fd.AdminTokenFile, "admin-token-file", fd.AdminTokenFile, "`FILE` holding a bearer token (at least 16 printable bytes, not readable by other users) that every admin endpoint but /healthz and /readyz asks for; a rotation of the file is taken within a second")
	durationVar(fs, &fd.TLSReloadInterval, "tls-reload-interval", fd.TLSReloadInterval, "re-read the certificate files this often to pick up a rotation (0 = only on SIGHUP)")
	fs.Var(&listFlag[string]{list: &fd.CORSAllowOrigins, parse: func(v string) (string, error) {
		_, err := s3api.ParseCORSOrigin(v)
		return v, err
	}, show: func(s string) string { return s }},
		"cors-allow-origin", "`ORIGIN` (scheme://host[:port], or * for any) whose web pages may read the buckets with fetch(); repeatable")
	durationVar(fs, &fd.CORSMaxAge, "cors-max-age", fd.CORSMaxAge, "how long browsers may cache a CORS preflight answer (whole seconds; 0 = send no Access-Control-Max-Age)")
}

// tlsEnabled reports whether the S3 listener serves TLS.
func (fd *frontDoorConfig) tlsEnabled() bool { return fd.TLSCert != "" }

// adminTLS reports whether the admin listener (when there is one) serves
// TLS, and from which files.
func (fd *frontDoorConfig) adminTLS() (on, own bool) {
	switch {
	case fd.AdminTLSCert != "":
		return true, true
	case fd.tlsEnabled() && !fd.AdminPlain:
		return true, false
	}
	return false, false
}

// validate checks the front-door options of a server whose admin listener
// is adminListen ("" = none) at time now: flag pairs and conflicts, that
// every certificate and key loads (readable, matching, not expired), the
// reload interval, and every CORS origin and the max age.
func (fd *frontDoorConfig) validate(adminListen string, now time.Time) error {
	if (fd.TLSCert == "") != (fd.TLSKey == "") {
		return errors.New("--tls-cert and --tls-key (tls_cert, tls_key) must be given together")
	}
	if (fd.AdminTLSCert == "") != (fd.AdminTLSKey == "") {
		return errors.New("--admin-tls-cert and --admin-tls-key (admin_tls_cert, admin_tls_key) must be given together")
	}
	if fd.AdminTLSCert != "" && adminListen == "" {
		return errors.New("--admin-tls-cert is set but there is no admin listener (--admin-listen)")
	}
	if fd.AdminPlain {
		switch {
		case adminListen == "":
			return errors.New("--admin-plain is set but there is no admin listener (--admin-listen)")
		case !fd.tlsEnabled():
			return errors.New("--admin-plain is set but the S3 listener has no TLS (--tls-cert): the admin listener is plain HTTP already")
		case fd.AdminTLSCert != "":
			return errors.New("--admin-plain contradicts --admin-tls-cert")
		case !isLoopbackListen(adminListen):
			return fmt.Errorf("--admin-plain: the admin listener %s is not loopback; plain HTTP admin (metrics, /debug/pprof with the command line) is allowed on a loopback address only", adminListen)
		}
	}
	if fd.AdminTokenFile != "" {
		if adminListen == "" {
			return errors.New("--admin-token-file is set but there is no admin listener (--admin-listen)")
		}
		if _, err := readAdminToken(fd.AdminTokenFile); err != nil {
			return err
		}
	}
	if fd.TLSReloadInterval < 0 || (fd.TLSReloadInterval > 0 && fd.TLSReloadInterval < minTLSReloadInterval) {
		return fmt.Errorf("--tls-reload-interval %s: want 0 (SIGHUP only) or at least %s", fd.TLSReloadInterval, minTLSReloadInterval)
	}
	for _, src := range fd.certSources() {
		if _, err := readKeyPair(src, now); err != nil {
			return err
		}
	}
	if _, err := fd.corsPolicy(); err != nil {
		return err
	}
	return nil
}

// certSources are the certificate pairs to load: the S3 one, and the
// admin one when it has its own.
func (fd *frontDoorConfig) certSources() []certSource {
	var out []certSource
	if fd.tlsEnabled() {
		out = append(out, certSource{listener: "s3", certFlag: "--tls-cert", keyFlag: "--tls-key", certFile: fd.TLSCert, keyFile: fd.TLSKey})
	}
	if fd.AdminTLSCert != "" {
		out = append(out, certSource{listener: "admin", certFlag: "--admin-tls-cert", keyFlag: "--admin-tls-key", certFile: fd.AdminTLSCert, keyFile: fd.AdminTLSKey})
	}
	return out
}

// corsPolicy builds the CORS configuration of every bucket: one
// read-only rule (s3api.ReadOnlyCORSRule) for the allowed origins, or nil
// when none is configured. Every origin is checked (s3api.ParseCORSOrigin)
// and one given twice is an error, as is a max age that is negative or
// not whole seconds.
func (fd *frontDoorConfig) corsPolicy() (s3api.CORSPolicy, error) {
	if fd.CORSMaxAge < 0 || fd.CORSMaxAge%time.Second != 0 {
		return nil, fmt.Errorf("--cors-max-age %s: want whole seconds, not negative", fd.CORSMaxAge)
	}
	if len(fd.CORSAllowOrigins) == 0 {
		return nil, nil
	}
	seen := map[string]string{}
	var origins []string
	for _, v := range fd.CORSAllowOrigins {
		o, err := s3api.ParseCORSOrigin(v)
		if err != nil {
			return nil, fmt.Errorf("--cors-allow-origin: %w", err)
		}
		if first, ok := seen[o]; ok {
			return nil, fmt.Errorf("--cors-allow-origin %q: the same origin as %q", v, first)
		}
		seen[o] = v
		origins = append(origins, o)
	}
	return s3api.CORSRules{s3api.ReadOnlyCORSRule(origins, int(fd.CORSMaxAge/time.Second))}, nil
}
