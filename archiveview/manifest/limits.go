package manifest

// Limits caps what a manifest may hold, to guard against hostile input.
// Zero fields take the defaults (see DefaultLimits).
type Limits struct {
	MaxStoredBytes int64 // manifest object as stored (gzip or plain)
	MaxJSONBytes   int64 // after gunzip
	MaxFiles       int
	MaxChunks      int
	MaxFrames      int // across all chunks
	MaxPathBytes   int // one path
	MaxChainDepth  int
}

// Default caps. The byte and count caps are CargoShip's own
// (pkg/manifest/limits.go: MaxManifestObjectBytes, MaxManifestJSONBytes,
// MaxManifestFiles, MaxManifestChunks); the chain depth is CargoShip's
// maxChainDepth. Frames and path length have no CargoShip counterpart:
// 10M frames cover 160 PiB at the default 16 MiB frame size, and 4096 bytes
// is PATH_MAX on Linux.
const (
	DefaultMaxStoredBytes int64 = 512 << 20
	DefaultMaxJSONBytes   int64 = 4 << 30
	DefaultMaxFiles             = 100_000_000
	DefaultMaxChunks            = 10_000_000
	DefaultMaxFrames            = 10_000_000
	DefaultMaxPathBytes         = 4096
	DefaultMaxChainDepth        = 10_000
)

// DefaultLimits returns the default caps (see the Default* constants).
func DefaultLimits() Limits {
	return Limits{
		MaxStoredBytes: DefaultMaxStoredBytes,
		MaxJSONBytes:   DefaultMaxJSONBytes,
		MaxFiles:       DefaultMaxFiles,
		MaxChunks:      DefaultMaxChunks,
		MaxFrames:      DefaultMaxFrames,
		MaxPathBytes:   DefaultMaxPathBytes,
		MaxChainDepth:  DefaultMaxChainDepth,
	}
}

// WithDefaults returns l with every zero (or negative) field replaced by its
// default. Non-zero fields are kept as given, so a caller can tighten or
// loosen a single cap.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxStoredBytes <= 0 {
		l.MaxStoredBytes = d.MaxStoredBytes
	}
	if l.MaxJSONBytes <= 0 {
		l.MaxJSONBytes = d.MaxJSONBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxChunks <= 0 {
		l.MaxChunks = d.MaxChunks
	}
	if l.MaxFrames <= 0 {
		l.MaxFrames = d.MaxFrames
	}
	if l.MaxPathBytes <= 0 {
		l.MaxPathBytes = d.MaxPathBytes
	}
	if l.MaxChainDepth <= 0 {
		l.MaxChainDepth = d.MaxChainDepth
	}
	return l
}
