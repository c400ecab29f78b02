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
