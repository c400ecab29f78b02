package main

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/wharf-s3/wharf/archiveview/chunkio"
)

// readOptions tune the read planner and its memory budget (chunkio): one
// set for serve, and for the commands that read archives (verify, get).
// Zero values take chunkio's defaults.
type readOptions struct {
	ReadMemory  int64 `yaml:"read_memory"`  // hard budget of all reads; 0 = cache + 128 MiB
	PartSize    int64 `yaml:"part_size"`    // bytes per planned GET; 0 = 8 MiB
	StreamParts int   `yaml:"stream_parts"` // GETs in flight per read; 0 = 8
	MaxParts    int   `yaml:"max_parts"`    // GETs in flight per process; 0 = 64
	// MaxFrameBytes: frames larger (decoded or stored) are streamed
	// rather than cached; 0 = 64 MiB.
	MaxFrameBytes int64 `yaml:"max_frame_bytes"`
	// TrustUnframed serves ranged reads of plain tar members, direct
	// objects, unframed zstd and giant frames without checking them whole
	// first (accepting S3's own integrity for these shapes).
	TrustUnframed bool `yaml:"trust_unframed"`
	// AllowKeyPrefixes lets archives name objects under these prefixes of
	// their bucket besides their own upload tree.
	AllowKeyPrefixes []string `yaml:"allow_key_prefixes"`
	// ClientMemoryShare is the fraction of the read memory and of the
	// stream decoders one client (access key, or IP for anonymous
	// callers) may hold; 0 = chunkio.DefaultClientShare (0.25), 1 = off.
	ClientMemoryShare float64 `yaml:"client_memory_share"`
}

// Limits of the read options, checked at start.
const (
	minPartSize     = 1 << 20
	maxPartSize     = 256 << 20
	maxStreamParts  = 64
	maxProcessParts = 4096
	minMemoryExtra  = 64 << 20 // read memory beyond the cache: room for reads in flight
)

// addReadFlags defines the read-planner flags on fs.
func (o *readOptions) addReadFlags(fs *flag.FlagSet) {
	fs.Var((*byteSize)(&o.ReadMemory), "read-memory", "hard memory budget of all reads: cached frames, parts in flight, frames ahead of readers, decoder windows (e.g. 1GiB; default --cache-bytes + 128MiB)")
	fs.Var((*byteSize)(&o.PartSize), "part-size", "read planner: bytes per backend range GET; adjacent frames are merged up to this size (default 8MiB)")
	fs.IntVar(&o.StreamParts, "stream-parts", o.StreamParts, "read planner: backend GETs in flight per sequential read (default 8)")
	fs.IntVar(&o.MaxParts, "max-parts", o.MaxParts, "read planner: backend GETs in flight in the whole process (default 64)")
	fs.Var((*byteSize)(&o.MaxFrameBytes), "max-frame-bytes", "frames larger than this (decoded or stored) are stream-decoded and checked at their end instead of cached whole (default 64MiB)")
	fs.BoolVar(&o.TrustUnframed, "trust-unframed", o.TrustUnframed, "serve ranged reads of plain tar members, direct objects, unframed zstd and giant frames without reading them whole and checking their sha256 first (trust S3's integrity for these shapes; off by default)")
	fs.Float64Var(&o.ClientMemoryShare, "client-memory-share", o.ClientMemoryShare, "fraction of --read-memory (and of the stream decoders) one client, an access key or an anonymous IP, may hold; past it its reads wait or get 503 SlowDown while others proceed (default 0.25; 1 = no per-client bound)")
	fs.Var(&listFlag[string]{list: &o.AllowKeyPrefixes, parse: parseKeyPrefix, show: func(s string) string { return s }},
		"allow-key-prefix", "PREFIX/: archives may also name chunk and direct-upload objects under this prefix of their bucket (default: only their own upload tree); repeatable")
}

// parseKeyPrefix checks an --allow-key-prefix value: a key prefix of the
// archive's bucket ending in "/", not a URL or a path with "..".
func parseKeyPrefix(v string) (string, error) {
	switch {
	case v == "" || !strings.HasSuffix(v, "/"):
		return "", fmt.Errorf("--allow-key-prefix %q: want a key prefix ending in \"/\" (e.g. shared/chunks/)", v)
	case strings.Contains(v, "://"):
		return "", fmt.Errorf("--allow-key-prefix %q: want a key prefix of the archive's own bucket, not a URL", v)
	case strings.HasPrefix(v, "/") || slices.Contains(strings.Split(v, "/"), ".."):
		return "", fmt.Errorf("--allow-key-prefix %q: a key prefix cannot start with \"/\" or hold \"..\"", v)
	}
	return v, nil
}

// validate checks the options against the cache budget.
func (o readOptions) validate(cacheBytes int64) error {
	var errs []error
	if o.PartSize != 0 && (o.PartSize < minPartSize || o.PartSize > maxPartSize) {
		errs = append(errs, fmt.Errorf("--part-size %d: want 1MiB to 256MiB", o.PartSize))
	}
	if o.StreamParts < 0 || o.StreamParts > maxStreamParts {
		errs = append(errs, fmt.Errorf("--stream-parts %d: want 1 to %d (0 = default 8)", o.StreamParts, maxStreamParts))
	}
	if o.MaxParts < 0 || o.MaxParts > maxProcessParts {
		errs = append(errs, fmt.Errorf("--max-parts %d: want 1 to %d (0 = default 64)", o.MaxParts, maxProcessParts))
	}
	streams := o.StreamParts
	if streams == 0 {
		streams = chunkio.DefaultStreamParts
	}
	if o.MaxParts != 0 && o.MaxParts < streams {
		errs = append(errs, fmt.Errorf("--max-parts %d is below --stream-parts %d: one read could never use its parts", o.MaxParts, streams))
	}
	for _, p := range o.AllowKeyPrefixes {
		if _, err := parseKeyPrefix(p); err != nil {
			errs = append(errs, err)
		}
	}
	if o.MaxFrameBytes != 0 && (o.MaxFrameBytes < 64<<10 || o.MaxFrameBytes > 1<<30) {
		errs = append(errs, fmt.Errorf("--max-frame-bytes %d: want 64KiB to 1GiB (0 = default 64MiB)", o.MaxFrameBytes))
	}
	if o.ClientMemoryShare != 0 && !(o.ClientMemoryShare >= 0.01 && o.ClientMemoryShare <= 1) {
		errs = append(errs, fmt.Errorf("--client-memory-share %v: want 0.01 to 1 (0 = default %v)", o.ClientMemoryShare, chunkio.DefaultClientShare))
	}
	if o.ReadMemory < 0 {
		errs = append(errs, errors.New("--read-memory must not be negative (0 = --cache-bytes + 128MiB)"))
	} else if o.ReadMemory != 0 && o.ReadMemory < cacheBytes+minMemoryExtra {
		errs = append(errs, fmt.Errorf("--read-memory %d: want at least --cache-bytes (%d) + 64MiB, room for the reads in flight", o.ReadMemory, cacheBytes))
	}
	return errors.Join(errs...)
}

// frameCache builds the shared frame cache and read budget.
func (o readOptions) frameCache(cacheBytes int64) *chunkio.FrameCache {
	return chunkio.NewFrameCache(cacheBytes, o.cacheOptions()...)
}

// cacheOptions are the options as chunkio's FrameCache takes them.
func (o readOptions) cacheOptions() []chunkio.CacheOption {
	return []chunkio.CacheOption{
		chunkio.WithMemory(o.ReadMemory),
		chunkio.WithPartSize(o.PartSize),
		chunkio.WithStreamParts(o.StreamParts),
		chunkio.WithMaxParts(o.MaxParts),
		chunkio.WithClientShare(o.ClientMemoryShare),
	}
}
