// Package chunkio is the read core's chunk layer: it turns byte ranges of a
// CargoShip chunk's tar stream (or of a direct-upload object) into verified
// bytes, reading the backend with as few range GETs as the read needs.
//
// A Set holds one archive's chunk table (Chunk: key, kind, frame table,
// sums) and everything the read path learns about it at run time: each
// object's pinned ETag (every later GET carries If-Match; a direct
// object's first GET too, with the ETag its listing reported), tar-walk
// offsets, accepted header checks, parked stream decoders and the promises
// of concurrent readers sharing one decode pass (parked.go), the evidence
// that reads are a stream and the background prefetch it earns
// (readahead.go). Version shadows of an archive share
// one Set. The FrameCache (decoded frames and small verified extents, one
// flight per key) and its ReadLimits (the one memory budget, the backend
// GET slots, the stream decoders) are shared by every Set of a server.
//
// What callers can rely on:
//
//   - Range(ctx, ci, u0, u1) and OpenExtent(ctx, e, start, n) return a
//     Source of exactly the bytes asked for, or an error; a byte that fails
//     a check (a frame's or extent's sha256, a decoded length, a tar header)
//     is never returned. Framed zstd: each frame's sha256 is checked before
//     any of its decoded bytes reaches a reader (the decode may run beside
//     the hash, into the frame's own buffer that no reader sees until the
//     sum matched; progressive.go), and a frame's decoded prefix is handed
//     out as the decode passes it, its last step only with the frame's
//     length and zstd checksum verdict. Extents no frame checksum covers (plain
//     tar, direct objects, giant frames, unframed zstd) are read in part
//     only after the span their sha256 covers was read whole and checked
//     (verified.go; small ones are fetched whole and cached), unless
//     Options.TrustUnframed; a stream decode that reaches the end checks
//     there too (the caller holds back the last segment).
//
//   - Errors wrap ErrChecksum, ErrCorrupt, ErrWrongMember, ErrNotInChunk, a
//     backend sentinel (backend.ErrNotFound for a missing chunk,
//     backend.ErrChanged for a replaced one) or the context's error, and
//     name the frame or object bytes concerned; the archive layer adds the
//     archive and key.
//
//   - A failure of the data itself (a corrupt tar, a checksum mismatch of a
//     whole unframed object) is remembered per chunk; backend and context
//     failures are retried by the next read.
//
//   - Memory (limits.go): every buffer and decoder window of every read is
//     charged to one process-wide budget (ReadLimits, WithMemory) before it
//     is allocated, so the bytes in use never exceed it. A read takes the
//     memory and backend GET slots its next part needs in one take, or
//     waits holding nothing; a stream decoder (giant frame, unframed zstd)
//     is admitted first (a bound sized from MaxParts and the budget), then
//     takes its first part, window and 256 KiB segment at once. Every wait
//     has a deadline (WithMemoryWait) and ends in ErrBusy (503 SlowDown).
//     Parts past a stream's first are speculative: never past the stream's
//     fair share (the budget over the streams reading) or its client's
//     share (WithClient, WithClientShare). A compressed span too large for
//     one zstd frame of its decoded size is refused unread
//     (manifest.CheckFramePlausible). Memory a read needs beside its
//     source's (a verified extent's buffer) comes with the source's first
//     take; work that needs memory while the read holds some it would wait
//     on (a header check beside the member's data, a frame the read
//     fetches itself while its parts ahead are held) does not wait, and on
//     a shortage the read gives back what it holds first. Nothing a read
//     queues or claims per frame is unbounded: at most 1024 frames per
//     part and queued ahead, one cache entry per 512 budget bytes.
//
//   - Storage classes (classes.go): a range GET of an object that is
//     archived (S3 Glacier classes) without a finished restore fails with
//     an error wrapping backend.ErrArchived before any fetch. Classes keeps
//     each object's class and restore state (from one listing of each
//     upload prefix when the archive asks for it with Load, else from HEADs
//     and refused GETs) and sends restores once per object.
//
//   - Peers (peers.go): with WithPeers, a miss of a frame that has a
//     sha256 (not giant) is first asked of the replica that owns it
//     (Peers.Owner, Peers.Fetch); its bytes are checked against the
//     sha256 like the backend's before any is used, and any failure of
//     the peer costs one backend fetch instead, never a failed read.
//     PeerFrame answers the other replicas: verified compressed frames of
//     archives a Set of this cache has open, and nothing else. Frames
//     without a frame checksum and giant frames are never shared. Every
//     peer buffer is charged to the one memory budget. The owner's
//     fetches for peers take one GET each and at most half the GET slots
//     and half the memory while they wait, and the frames it keeps for
//     them (one entry per 512 bytes at most) stay charged to the asking
//     peer's client share, which it evicts first when short, as its
//     decoded frames.
//
// The package never sees HTTP. It lists the bucket only in Classes.Load,
// which the archive layer calls at open and on rescans when asked to.
package chunkio
