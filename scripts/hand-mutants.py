#!/usr/bin/env python3
"""Hand mutants of wharf's byte, limit and auth rules (the rev-mutation
audit of 2026-12-02; TESTING.md, "Mutation audit (rev-mutation)").

Each mutant is one exact text replacement in one file that breaks one rule
(an inverted compare, a dropped check, an off-by-one bound, a skipped
release). For each, the script copies the committed tree (git archive HEAD)
to a temporary directory once, applies the mutant there, runs
`go test -count=1 -failfast` of the packages listed (in order, stopping at
the first failure), restores the file and prints one line:

    ID KILLED|SURVIVED|NO MATCH seconds file first-failing-test

Usage (from the repository root; the work tree is never modified):

    python3 scripts/hand-mutants.py            # every mutant (hours here)
    python3 scripts/hand-mutants.py B L2 I01   # ids starting with these

A mutant whose text no longer matches (the code moved on) prints NO MATCH:
update its row. Not part of CI.
"""

import os
import subprocess
import sys
import tempfile
import time

CIO = "./archiveview/chunkio,./archiveview"
AV = "./archiveview"

# (id, file, text, replacement, packages)
MUTANTS = [
    ('A01', 'auth/sigv4.go', 'if hmac.Equal(signV4(key, a, t, creq), a.Signature) {', 'if hmac.Equal(signV4(key, a, t, creq), a.Signature) || true {', './auth'),
    ('A02', 'auth/sigv4.go', 'd > maxSkew || d < -maxSkew', 'd > maxSkew', './auth'),
    ('A03', 'auth/sigv4.go', 'if now.After(t.Add(time.Duration(expires) * time.Second)) {', 'if false {', './auth'),
    ('A04', 'auth/sigv4.go', 'if now.Before(t.Add(-maxSkew)) {', 'if false {', './auth'),
    ('A05', 'auth/sigv4.go', '\tif err := checkAmzHeadersSigned(r, a.SignedHeaders); err != nil {\n\t\treturn Identity{}, err\n\t}\n\tpayload := unsignedPayload', '\tpayload := unsignedPayload', './auth'),
    ('A06', 'auth/sigv4.go', 'if expires > maxPresignV4 {', 'if expires > maxPresignV4+1 {', './auth'),
    ('A07', 'auth/auth.go', 'return id.buckets == nil || id.buckets[bucket]', 'return true', './auth,./s3api'),
    ('A08', 's3api/server.go', 'return len(named) > 0 && (len(named) > 1 || named[0] != owner)', 'return len(named) > 0 && named[0] != owner', './s3api'),
    ('A09', 'auth/sigv2.go', 'if hmac.Equal(m.Sum(nil), sig) {', 'if true {', './auth'),
    ('A10', 'auth/sigv2.go', '\tif now.Unix() > exp {', '\tif false {', './auth'),
    ('A11', 'auth/sigv2.go', 'if exp-now.Unix() > int64((maxPresignV2+maxSkew)/time.Second) {', 'if false {', './auth'),
    ('A12', 'auth/restore.go', 'if id.Anonymous() || !id.CanRead(bucket) || id.restore.Deny {', 'if id.Anonymous() || id.restore.Deny {', './auth,./s3api'),
    ('A13', 'auth/sigv4.go', 'if t.UTC().Format(scopeDateLayout) != a.Date {\n\t\treturn Identity{}, errMalformedHeader', 'if false {\n\t\treturn Identity{}, errMalformedHeader', './auth'),
    ('B01', 'archiveview/chunkio/fetch.go', '\t\tif got != fr.Sum {\n\t\t\tout.Release()', '\t\tif got != fr.Sum && false {\n\t\t\tout.Release()', './archiveview/chunkio,./archiveview'),
    ('B02', 'archiveview/chunkio/verify.go', 'if f.HasSum && got != f.Sum {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B03', 'archiveview/chunkio/progressive.go', 'if sum != fr.Sum {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B04', 'archiveview/chunkio/verified.go', 'if got != u.Sum {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B05', 'archiveview/chunkio/verified.go', 'if u.Kind != UnitObject && n != u.N {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B06', 'archiveview/chunkio/stream.go', 'if got != r.want {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B07', 'archiveview/chunkio/tarwalk.go', 'if size != length && !(size == 0 && length > 077777777777) {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B08', 'archiveview/chunkio/tarwalk.go', 'if !tarNameMatches(name, len(nameField), tarName) {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B09', 'archiveview/chunkio/tarwalk.go', 'if want != unsigned && want != signed {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B10', 'archiveview/read.go', '\tif got != c.want {', '\tif false {', './archiveview'),
    ('B11', 'archiveview/read.go', '|| (fileSum && off == 0 && n == f.Size)\n', '|| fileSum\n', './archiveview'),
    ('B12', 'archiveview/read.go', 'if r.pieceGot != p.l {', 'if false {', './archiveview'),
    ('B13', 'archiveview/read.go', 'if err == nil && int64(len(seg)) > p.l-r.pieceGot {', 'if false {', './archiveview'),
    ('B14', 'archiveview/read.go', '\t\t\tif c.end <= end {', '\t\t\tif c.end < end {', './archiveview'),
    ('B15', 'archiveview/read.go', '\tif at != f.Size {', '\tif false {', './archiveview'),
    ('B16', 'archiveview/verify.go', 'if err == nil && n != f.Size {', 'if false {', './archiveview'),
    ('B17', 'archiveview/chunkio/set.go', '} else if rs.etag != info.ETag {', '} else if false {', './archiveview/chunkio,./archiveview'),
    ('B18', 'archiveview/chunkio/set.go', 'b, info, err := s.store.ReadRange(ctx, s.bucket, c.Key, off, length, rs.ifMatch())', 'b, info, err := s.store.ReadRange(ctx, s.bucket, c.Key, off, length, "")', './archiveview/chunkio,./archiveview'),
    ('B19', 'archiveview/chunkio/set.go', 'if s.chunks[ci].Kind != Direct || rs.replacedAt != 0 || rs.ifMatch() != "" {', 'if true {', './archiveview/chunkio,./archiveview'),
    ('B20', 'archiveview/chunkio/set.go', 'if c.Kind == Direct && info.Size > 0 && info.Size != c.Size {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B21', 'archiveview/chunkio/verify.go', 'if sha256.Sum256(nil) != c.Sum {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('B22', 'archiveview/chunkio/part.go', '\t\tif err != nil {\n\t\t\tp.fail(i, fmt.Errorf("body ended', '\t\tif err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {\n\t\t\tp.fail(i, fmt.Errorf("body ended', './archiveview/chunkio,./archiveview'),
    ('B23', 'archiveview/chunkio/framecache.go', 'case int64(len(got)) != usize || (usize > 0 && &got[0] != &out.b[0]):', 'case usize > 0 && &got[0] != &out.b[0]:', './archiveview/chunkio,./archiveview'),
    ('B24', 'archiveview/chunkio/peers.go', '\tif sum != f.Sum {\n\t\ts.lim.unreserve', '\tif false {\n\t\ts.lim.unreserve', './archiveview/chunkio/peer,./archiveview/chunkio,./archiveview'),
    ('B25', 'archiveview/chunkio/peers.go', 'if sha256.Sum256(p.buf.b) != f.Sum {', 'if false {', './archiveview/chunkio/peer,./archiveview/chunkio,./archiveview'),
    ('B26', 'archiveview/chunkio/framed.go', '\t_, err = io.ReadFull(body, comp)\n\t\tbody.Close()\n\t\terr = shortBody(err)', '\t_, err = io.ReadFull(body, comp)\n\t\tbody.Close()\n\t\tif err == io.ErrUnexpectedEOF { err = nil }', './archiveview/chunkio,./archiveview'),
    ('E01', 's3api/errors.go', 'errSlowDown:           {http.StatusServiceUnavailable,', 'errSlowDown:           {http.StatusInternalServerError,', './s3api'),
    ('E02', 's3api/errors.go', '\t{backend.ErrUnavailable, errSlowDown, nil},\n', '', './s3api'),
    ('E03', 's3api/errors.go', 'errInvalidRange:       {http.StatusRequestedRangeNotSatisfiable,', 'errInvalidRange:       {http.StatusBadRequest,', './s3api'),
    ('E04', 's3api/errors.go', '\t{backend.ErrChanged, errObjectChanged, changedMessage},\n', '', './s3api'),
    ('E05', 's3api/errors.go', 'errObjectChanged:             {http.StatusConflict,', 'errObjectChanged:             {http.StatusInternalServerError,', './s3api'),
    ('E06', 's3api/errors.go', 'errInvalidObjectState:        {http.StatusForbidden,', 'errInvalidObjectState:        {http.StatusConflict,', './s3api'),
    ('E07', 's3api/errors.go', 'errPreconditionFailed: {http.StatusPreconditionFailed,', 'errPreconditionFailed: {http.StatusBadRequest,', './s3api'),
    ('E08', 's3api/errors.go', '\t{chunkio.ErrNoRestorer, errNotImplemented, notImplementedMessage},\n', '', './s3api'),
    ('I01', 'archiveview/internal/index/mac.go', 'if !hmac.Equal(secret.header(name, int64(n)), h[:]) {', 'if false {', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('I02', 'archiveview/internal/index/mac.go', 'if n > uint64(limit) || int64(n) > limit-int64(Overhead) {', 'if false {', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('I03', 'archiveview/internal/index/mac.go', '\tcase got != indexMACTrailer:', '\tcase got < indexMACTrailer:', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('I04', 'archiveview/internal/index/mac.go', 'if !hmac.Equal(secret.seal(m, int64(n)), tr[:indexMACTrailer]) {', 'if false {', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('I05', 'archiveview/internal/index/mac.go', 'for _, f := range []string{name.Bucket, name.ManifestKey, name.ETag} {', 'for _, f := range []string{name.Bucket, name.ManifestKey} {', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('I06', 'archiveview/internal/index/mac.go', '\t\tif total > limit {', '\t\tif false {', './archiveview/internal/index,./archiveview/indexcachetest,./archiveview'),
    ('L01', 'archiveview/chunkio/limits.go', 'case cl != nil && cl.used > 0 && cl.used+n > l.clientMem:', 'case false:', './archiveview/chunkio,./archiveview'),
    ('L02', 'archiveview/chunkio/limits.go', 'case l.used+n > l.memory:', 'case l.used+n > 2*l.memory:', './archiveview/chunkio,./archiveview'),
    ('L03', 'archiveview/chunkio/limits.go', 'case gets > 0 && l.gets >= l.maxGets:', 'case false:', './archiveview/chunkio,./archiveview'),
    ('L04', 'archiveview/chunkio/part.go', 'if mode == speculative && held+need > l.share() {', 'if false {', './archiveview/chunkio,./archiveview'),
    ('L05', 'archiveview/chunkio/limits.go', '\tdl := deadline{wait: l.wait}\n\tdefer dl.stop()\n\tfor {\n\t\tl.mu.Lock()\n\t\tch := l.freed\n\t\tl.mu.Unlock()', '\tdl := deadline{wait: 20 * l.wait}\n\tdefer dl.stop()\n\tfor {\n\t\tl.mu.Lock()\n\t\tch := l.freed\n\t\tl.mu.Unlock()', './archiveview/chunkio,./archiveview'),
    ('L06', 'archiveview/chunkio/verify.go', '\tdefer func() { s.lim.unreserve(p.cl, reserved) }()\n', '', './archiveview/chunkio,./archiveview'),
    ('L07', 'archiveview/chunkio/part.go', '\tif p.buf != nil {\n\t\tp.buf.Release()', '\tif false {\n\t\tp.buf.Release()', './archiveview/chunkio,./archiveview'),
    ('L08', 'archiveview/chunkio/framed.go', '\t\tc.complete(key, fls[k-lo], buf, err)\n\t\tif buf != nil {\n\t\t\tbuf.Release()\n\t\t}\n\t}\n\ts.lim.unreserve(p.cl, reserved)', '\t\tc.complete(key, fls[k-lo], buf, err)\n\t\tif buf != nil {\n\t\t\tbuf.Release()\n\t\t}\n\t}', './archiveview/chunkio,./archiveview'),
    ('L09', 'archiveview/chunkio/framed.go', '\t\terr = shortBody(err)\n\t}\n\ts.lim.putGets(1)', '\t\terr = shortBody(err)\n\t}', './archiveview/chunkio,./archiveview'),
    ('L10', 'archiveview/chunkio/part.go', '\tcl, n, err := l.take(ctx, need, useful, mode)', '\tcl, _, err := l.take(ctx, need, 0, mode)\n\tvar n int\n\tif err == nil {\n\t\t_, n, err = l.take(ctx, 0, useful, mode)\n\t}', './archiveview/chunkio,./archiveview'),
    ('L11', 'archiveview/chunkio/limits.go', 'own := cl != nil && cl.decoders >= l.clientDecs', 'own := false', './archiveview/chunkio,./archiveview'),
    ('L12', 'archiveview/chunkio/limits.go', '\tif n > l.memory {\n\t\treturn nil, 0, fmt.Errorf', '\tif false {\n\t\treturn nil, 0, fmt.Errorf', './archiveview/chunkio,./archiveview'),
    ('L13', 'archiveview/chunkio/zstream.go', '\t\tmaxWin = max(min(w, maxDecoderWindow), 1<<10)', '\t\tmaxWin = int64(maxDecoderWindow)', './archiveview/chunkio,./archiveview'),
    ('L14', 'archiveview/versionpage.go', 'if len(res.Entries) < p.MaxKeys && (p.MaxNameBytes <= 0 || names < p.MaxNameBytes) {', 'if len(res.Entries) < p.MaxKeys {', './archiveview,./s3api'),
    ('L15', 's3api/list.go', '\t\tif n < maxKeysCap {\n\t\t\tlq.maxKeys = n', '\t\tif true {\n\t\t\tlq.maxKeys = n', './s3api'),
    ('L16', 's3api/progress.go', 'if w.off || len(p) <= progressStep {', 'if true {', './s3api,./cmd/wharf'),
    ('L17', 'archiveview/catalog/manager.go', '\toctx, cancel := context.WithTimeout(ctx, cm.cfg.OpenTimeout)', '\toctx, cancel := context.WithCancel(ctx)', './archiveview/catalog'),
    ('L18', 'archiveview/manifest/decode.go', '\t\tif d.frames >= d.lim.MaxFrames {', '\t\tif d.frames > d.lim.MaxFrames {', './archiveview/manifest'),
    ('L19', 'archiveview/manifest/decode.go', '\t\tif i >= d.lim.MaxFiles {', '\t\tif i > d.lim.MaxFiles {', './archiveview/manifest'),
    ('L20', 's3api/progress.go', '\t\tif total > 0 {\n\t\t\tw.extend()\n\t\t}\n', '', './s3api,./cmd/wharf'),
    ('L21', 'archiveview/manifest/load.go', '\tif int64(len(p)) > c.left {\n\t\tp = p[:c.left]', '\tif false {\n\t\tp = p[:c.left]', './archiveview/manifest'),
    ('L22', 'archiveview/manifest/validate.go', 'if len(p) > lim.MaxPathBytes {', 'if len(p) > lim.MaxPathBytes+1 {', './archiveview/manifest'),
    ('L23', 'archiveview/open.go', '\t\tif len(chain) > maxDepth {', '\t\tif len(chain) > maxDepth+1 {', './archiveview'),
    ('L24', 'archiveview/chunkio/zstream.go', 'if need := decoderCost(w) + seg; need > l.memory {', 'if need := decoderCost(w) + seg; need > 4*l.memory {', './archiveview/chunkio,./archiveview'),
    ('L25', 'archiveview/chunkio/limits.go', '\tl.clientMem = int64(float64(cfg.memory) * f)', '\tl.clientMem = cfg.memory', './archiveview/chunkio,./archiveview'),
    ('P01', 'archiveview/chunkio/peer/group.go', '!hmac.Equal(mac, g.keys.answerMAC(nonce, id.Size, id.Sum))', '(!hmac.Equal(mac, g.keys.answerMAC(nonce, id.Size, id.Sum)) && false)', './archiveview/chunkio/peer'),
    ('P02', 'archiveview/chunkio/peer/group.go', 'if !ok || resp.ContentLength != id.Size ||', 'if !ok ||', './archiveview/chunkio/peer'),
    ('P03', 'archiveview/chunkio/peer/server.go', 'if !hmac.Equal(mac, g.keys.requestMAC(r.Method, r.URL.Path, r.URL.RawQuery, date, nonce, from, to)) {', 'if !hmac.Equal(mac, g.keys.requestMAC(r.Method, r.URL.Path, r.URL.RawQuery, date, nonce, from, to)) && false {', './archiveview/chunkio/peer'),
    ('P04', 'archiveview/chunkio/peer/server.go', '\tif to != g.self {', '\tif false {', './archiveview/chunkio/peer'),
    ('R01', 's3api/range.go', 'if a >= size {', 'if a > size {', './s3api'),
    ('R02', 's3api/range.go', 'if k > size {\n\t\t\tk = size', 'if k > size+1 {\n\t\t\tk = size', './s3api'),
    ('R03', 's3api/conditional.go', 'if t, ok := parseHTTPDate(c.ifUnmodifiedSince); ok && mod.After(t) {', 'if t, ok := parseHTTPDate(c.ifUnmodifiedSince); ok && !mod.After(t) {', './s3api'),
    ('R04', 's3api/conditional.go', '\t\tif !etagListMatches(c.ifMatch, etag) {', '\t\tif false {', './s3api'),
    ('R05', 's3api/conditional.go', 'if p == "*" || (p != "" && p == etag) {', 'if p == "*" || p == etag {', './s3api'),
    ('R06', 's3api/conditional.go', '\treturn ok && t.Equal(mod.UTC().Truncate(time.Second))', '\treturn ok && !t.Before(mod.UTC().Truncate(time.Second))', './s3api'),
    # Stop 32 follow-up (rev-mutation2): rules written after bda6fc4.
    # K block sums, F forgetting remembered corruption, S kept SigV4
    # signing keys, N other new rules (chain history charge, empty HEAD,
    # restore, presigned x-amz-* parameters, clock skew, get, shutdown).
    ('K01', 'archiveview/chunkio/stream.go', '; got != r.blocks.sums[r.blocks.index(blo)] {', '; got != r.blocks.sums[r.blocks.index(blo)] && false {', './archiveview/chunkio'),
    ('K02', 'archiveview/chunkio/stream.go', '\t\tavail = p.checked - p.off\n', '', './archiveview/chunkio'),
    ('K03', 'archiveview/chunkio/stream.go', '\t\tneed = bhi - p.off // the whole block', '\t\t_ = bhi // the whole block', './archiveview/chunkio'),
    ('K04', 'archiveview/chunkio/stream.go', 'if r.refetched && r.refetchLo == lo {', 'if r.refetched {', './archiveview/chunkio'),
    ('K05', 'archiveview/chunkio/blocksums.go', '\t\tif used+n > limit {', '\t\tif used+n > limit && false {', './archiveview/chunkio'),
    ('K06', 'archiveview/chunkio/blocksums.go', 'limit := max(c.budget/32, 64<<10)', 'limit := max(c.budget, 64<<10)', './archiveview/chunkio'),
    ('K07', 'archiveview/chunkio/set.go', '\ts.cache.giveSums(sums)\n', '\t_ = sums\n', './archiveview/chunkio'),
    ('K08', 'archiveview/chunkio/verified.go', '\tif got != u.Sum {\n\t\ts.dropSums(bh)\n', '\tif got != u.Sum {\n', './archiveview/chunkio'),
    ('K09', 'archiveview/chunkio/verified.go', '\tif err != nil {\n\t\ts.dropSums(bh)\n\t\treturn nil, fmt.Errorf("checking %s: %w"', '\tif err != nil {\n\t\treturn nil, fmt.Errorf("checking %s: %w"', './archiveview/chunkio'),
    ('K10', 'archiveview/chunkio/blocksums.go', 'if s.closed || !s.cache.takeSums(n) {', 'if !s.cache.takeSums(n) {', './archiveview/chunkio'),
    ('K11', 'archiveview/chunkio/blocksums.go', '\tif s.closed {\n\t\treturn\n\t}\n\ts.sumHeld.Add(-n)', '\ts.sumHeld.Add(-n)', './archiveview/chunkio'),
    ('F01', 'archiveview/chunkio/forget.go', 'if at == 0 || s.now().UnixNano()-at < int64(s.forgetAfter) {', 'if at == 0 || s.now().UnixNano()-at < 2*int64(s.forgetAfter) {', './archiveview/chunkio'),
    ('F02', 'archiveview/chunkio/set.go', 'DefaultForgetCorrupt = 5 * time.Minute', 'DefaultForgetCorrupt = 50 * time.Minute', './archiveview/chunkio,./archiveview,./cmd/wharf'),
    ('F03', 'archiveview/chunkio/forget.go', '\tif !rs.corrupt.Load() {\n\t\treturn\n\t}\n\trs.units.mu.Lock()', '\tif true {\n\t\treturn\n\t}\n\trs.units.mu.Lock()', './archiveview/chunkio'),
    ('F04', 'archiveview/chunkio/forget.go', 'if rs.replacedAt != 0 && now-rs.replacedAt < int64(s.forgetAfter) {', 'if false {', './archiveview/chunkio'),
    ('F05', 'archiveview/chunkio/forget.go', '\tif len(rs.units.done) > 0 {\n\t\treturn\n\t}', '\tif false {\n\t\treturn\n\t}', './archiveview/chunkio'),
    ('F06', 'archiveview/chunkio/forget.go', '\tif !rs.corrupt.Load() {\n\t\treturn\n\t}\n\trs.units.mu.Lock()', '\tif false {\n\t\treturn\n\t}\n\trs.units.mu.Lock()', './archiveview/chunkio'),
    ('F07', 'archiveview/chunkio/forget.go', '\tfresh.replacedAt = now', '\tfresh.replacedAt = 0', './archiveview/chunkio'),
    ('S01', 'auth/sigv4.go', '\tif !matchV4(r, k, a, t, canonQuery, payloadHash) {\n\t\treturn false\n\t}', '\tif !matchV4(r, k, a, t, canonQuery, payloadHash) {\n\t\tv.sigKeys.put(scope, k)\n\t\treturn false\n\t}', './auth'),
    ('S02', 'auth/sigv4.go', 'if len(a.Date) <= maxKeptScopeField && len(a.Region) <= maxKeptScopeField && len(a.Service) <= maxKeptScopeField {', 'if true {', './auth'),
    ('S03', 'auth/sigv4.go', 'if c.m == nil || len(c.m) >= maxSigningKeys {', 'if c.m == nil {', './auth'),
    ('S04', 'auth/sigv4.go', 'scope := signingScope{access: a.AccessKey, date: a.Date,', 'scope := signingScope{date: a.Date,', './auth'),
    ('N01', 'archiveview/catalog/manager.go', '\tif x.charged {\n\t\to.HistoryMemory', '\tif false {\n\t\to.HistoryMemory', './archiveview/catalog'),
    ('N02', 'archiveview/versions.go', '\t\t\tcharge.Settle(v.Bytes())\n', '', './archiveview,./archiveview/catalog'),
    ('N03', 'archiveview/versions.go', '\tif charge != nil {\n\t\tcharge.Release()\n\t}\n\tif v, ok := a.vers.memo.Peek()', '\tif charge != nil && false {\n\t\tcharge.Release()\n\t}\n\tif v, ok := a.vers.memo.Peek()', './archiveview,./archiveview/catalog'),
    ('N04', 's3api/object.go', 'if req.method == http.MethodHead && n > 0 {', 'if req.method == http.MethodHead {', './s3api'),
    ('N05', 'archiveview/chunkio/classes.go', '\tdefer func() { <-turn }()\n', '\t<-turn\n', './archiveview/chunkio'),
    ('N06', 'archiveview/chunkio/classes.go', '\t\t\to.restoreKnown, o.restoreAt, o.tierKnown = false, time.Time{}, false\n', '', './archiveview/chunkio'),
    ('N07', 'archiveview/chunkio/classes.go', 'if wantRestore && o.class == backend.ClassIntelligentTiering && !o.tierKnown {', 'if false {', './archiveview/chunkio'),
    ('N08', 's3api/amzparam.go', '\tfor _, p := range q {\n\t\tif strings.EqualFold(p.Key, name) {\n\t\t\treturn p.Value', '\tfor _, p := range q[:0] {\n\t\tif strings.EqualFold(p.Key, name) {\n\t\t\treturn p.Value', './s3api'),
    ('N09', 's3api/amzparam.go', '\tfor _, p := range q {\n\t\tif strings.EqualFold(p.Key, name) {\n\t\t\tvals = append', '\tfor _, p := range q[:0] {\n\t\tif strings.EqualFold(p.Key, name) {\n\t\t\tvals = append', './s3api'),
    ('N10', 'backend/s3.go', '"RequestTimeTooSkewed": {kind: ErrAccessDenied, also: ErrClockSkew,', '"RequestTimeTooSkewed": {kind: ErrUnavailable, also: ErrClockSkew,', './backend,./s3api'),
    ('N11', 'cmd/wharf/get.go', 'case differs != "" && !g.overwrite:', 'case false:', './cmd/wharf'),
    ('N12', 'cmd/wharf/serve.go', 'if cfg.ShutdownDelay > 0 && serveErr == nil {', 'if false {', './cmd/wharf'),
    ('N13', 'cmd/wharf/serve.go', 'if cfg.ShutdownDelay < 0 || cfg.ShutdownDelay > maxShutdownDelay {', 'if cfg.ShutdownDelay < 0 {', './cmd/wharf'),
    # Stop 33 (rev-mutation3): the stop's own rules. XT admin token, XK
    # block tags and the decode pass's whole-stream sum, XB token bucket,
    # XR restore budget and per-client HEAD allowance, XH HEAD clock skew,
    # XG get's normalisation fold, XP outside text in logs and pages.
    ('XT01', 'cmd/wharf/admintoken.go', 'if !ok || !strings.EqualFold(scheme, "Bearer") {', 'if _ = scheme; !ok {', './cmd/wharf'),
    ('XT02', 'cmd/wharf/admintoken.go', 'r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || t.allowed(r)', 'r.URL.Path == "/healthz" || t.allowed(r)', './cmd/wharf'),
    ('XT03', 'cmd/wharf/admintoken.go', 'if now.Sub(t.checked) < adminTokenRecheck {', 'if true {', './cmd/wharf'),
    ('XT04', 'cmd/wharf/admintoken.go', 'st.Size() == t.size && st.ModTime().Equal(t.mtime)', 'st.Size() == t.size', './cmd/wharf'),
    ('XT05', 'cmd/wharf/admintoken.go', "if c <= ' ' || c > '~' {", "if c < ' ' || c > '~' {", './cmd/wharf'),
    ('XT06', 'cmd/wharf/admintoken.go', 'minAdminToken     = 16', 'minAdminToken     = 15', './cmd/wharf'),
    ('XT07', 'cmd/wharf/admintoken.go', 'sha256.Sum256([]byte(strings.TrimLeft(tok, " ")))', 'sha256.Sum256([]byte(tok))', './cmd/wharf'),
    ('XT08', 'cmd/wharf/admintoken.go', '\t\tt.denied.Inc()\n', '', './cmd/wharf'),
    ('XT09', 'cmd/wharf/frontdoor.go', '\t\tif adminListen == "" {\n\t\t\treturn errors.New("--admin-token-file is set', '\t\tif false {\n\t\t\treturn errors.New("--admin-token-file is set', './cmd/wharf'),
    ('XT10', 'cmd/wharf/serve.go', '\t\t\tadmin = tok.guard(admin)\n', '\t\t\t_ = tok\n', './cmd/wharf'),
    ('XT11', 'cmd/wharf/serve.go', '} else if !isLoopbackListen(cfg.AdminListen) {', '} else if false {', './cmd/wharf'),
    ('XT12', 'cmd/wharf/admintoken.go', 'return subtle.ConstantTimeCompare(got[:], want[:]) == 1', 'return subtle.ConstantTimeCompare(got[:8], want[:8]) == 1', './cmd/wharf'),
    ('XT13', 'cmd/wharf/admintoken.go', '\tif err == nil {\n\t\terr = t.load()\n\t}', '\tif err == nil {\n\t\terr = t.load()\n\t} else {\n\t\terr = nil\n\t}', './cmd/wharf'),
    ('XK12', 'archiveview/chunkio/blocksums.go', 'return subtle.ConstantTimeCompare(t[:], b.sums[b.index(lo)][:]) == 1', 'return subtle.ConstantTimeCompare(t[:], t[:]) == 1', './archiveview/chunkio'),
    ('XK13', 'archiveview/chunkio/stream.go', 'return b != nil && b.unitSum == sum && b.off <= r.start', 'return b != nil && b.off <= r.start', './archiveview/chunkio'),
    ('XK14', 'archiveview/chunkio/stream.go', 'b.unitSum == sum && b.off <= r.start && r.end <= b.end && b.complete()', 'b.unitSum == sum && b.complete()', './archiveview/chunkio'),
    ('XK15', 'archiveview/chunkio/zstream.go', 'if f.HasSum && !src.checkedAs(f.Sum) {', 'if f.HasSum && false {', './archiveview/chunkio'),
    ('XK16', 'archiveview/chunkio/zstream.go', 'if c.HasSum && !src.checkedAs(c.Sum) {', 'if c.HasSum && false {', './archiveview/chunkio'),
    ('XK17', 'archiveview/chunkio/verified.go', '\t\tstep = max(step, bh.b.bs)\n', '', './archiveview/chunkio'),
    ('XK18', 'archiveview/chunkio/blocksums.go', 'if w.at != lo || int64(len(data)) != hi-lo {', 'if false {', './archiveview/chunkio'),
    ('XK19', 'archiveview/chunkio/blocksums.go', '; i >= 0 && x.maxEnd[i] >= end; i-- {', '; i >= 0 && x.maxEnd[i] > end; i-- {', './archiveview/chunkio'),
    ('XK20', 'archiveview/chunkio/blocksums.go', '\t\tif j > 0 {\n\t\t\tm = max(m, x.maxEnd[j-1])\n\t\t}\n', '', './archiveview/chunkio'),
    ('XK21', 'archiveview/chunkio/blocksums.go', '; i >= 0 && x.maxEnd[i] >= end; i-- {', '; i >= 0 && x.maxEnd[i] >= end; i = -1 {', './archiveview/chunkio'),
    ('XK22', 'archiveview/chunkio/verified.go', '\tbh.b.unitSum = u.Sum\n', '', './archiveview/chunkio'),
    ('XK23', 'archiveview/chunkio/verified.go', 'if errors.Is(err, backend.ErrChanged) && s.state(ci) != rs {', 'if errors.Is(err, backend.ErrChanged) {', './archiveview/chunkio'),
    ('XK24', 'archiveview/chunkio/blocksums.go', '\tbinary.BigEndian.PutUint64(nonce[4:], uint64(lo))\n', '\tbinary.BigEndian.PutUint64(nonce[4:], 0)\n', './archiveview/chunkio'),
    ('XK25', 'archiveview/chunkio/verified.go', 'if bh != nil && off+n < end && int64(k) == want {', 'if bh != nil && off+n < end && k > 0 {', './archiveview/chunkio'),
    ('XB01', 's3api/internal/tokenbucket/tokenbucket.go', '\tif d <= 0 {\n\t\treturn s.tokens', '\tif false {\n\t\treturn s.tokens', './s3api/internal/tokenbucket'),
    ('XB02', 's3api/internal/tokenbucket/tokenbucket.go', 'want := math.Min(n, b.capacity)', 'want := n', './s3api/internal/tokenbucket'),
    ('XB03', 's3api/internal/tokenbucket/tokenbucket.go', 'if s.tokens >= want {', 'if s.tokens > want {', './s3api/internal/tokenbucket'),
    ('XB04', 's3api/internal/tokenbucket/tokenbucket.go', '\t\ts.tokens -= n\n', '\t\ts.tokens -= want\n', './s3api/internal/tokenbucket'),
    ('XB05', 's3api/internal/tokenbucket/tokenbucket.go', 'if b.maxKeys > 0 && len(b.keys) >= b.maxKeys {', 'if b.maxKeys > 0 && len(b.keys) > b.maxKeys {', './s3api/internal/tokenbucket'),
    ('XB06', 's3api/internal/tokenbucket/tokenbucket.go', 'if !b.swept.IsZero() && now.Sub(b.swept) < b.tokenTime() {', 'if false {', './s3api/internal/tokenbucket'),
    ('XB07', 's3api/internal/tokenbucket/tokenbucket.go', 'if b.refilled(o, now) >= b.capacity {', 'if b.refilled(o, now) > b.capacity {', './s3api/internal/tokenbucket'),
    ('XB08', 's3api/internal/tokenbucket/tokenbucket.go', 'k := min(n, int(math.Floor(s.tokens)))', 'k := min(n, int(math.Ceil(s.tokens)))', './s3api/internal/tokenbucket'),
    ('XB09', 's3api/internal/tokenbucket/tokenbucket.go', '\t\tdelete(b.keys, key) // full', '\t\t_ = key // full', './s3api/internal/tokenbucket'),
    ('XB10', 's3api/internal/tokenbucket/tokenbucket.go', '\t\t\tif len(b.keys) >= b.maxKeys {\n\t\t\t\treturn nil', '\t\t\tif false {\n\t\t\t\treturn nil', './s3api/internal/tokenbucket'),
    ('XR01', 's3api/restorebudget.go', 'case o.Restore.Ongoing || o.Restore.Done(now):\n\t\t\tobjs = append', 'case o.Restore.Ongoing:\n\t\t\tobjs = append', './s3api'),
    ('XR02', 's3api/restorebudget.go', '\t\tcase stopped:\n', '\t\tcase stopped && false:\n', './s3api'),
    ('XR03', 's3api/restorebudget.go', 'return restoreCharge(max(o.Size, o.ObjectClass.Size))', 'return restoreCharge(o.Size)', './s3api'),
    ('XR04', 's3api/restorebudget.go', 'func restoreCharge(size int64) int64 { return max(size, minRestoreCharge) }', 'func restoreCharge(size int64) int64 { return size }', './s3api'),
    ('XR05', 's3api/restore.go', 's.restoreBudget.give(req.identity.AccessKey, charged-restoreSentCharge(rep), s.now())', 's.restoreBudget.give(req.identity.AccessKey, charged, s.now())', './s3api'),
    ('XR06', 's3api/restorebudget.go', '\t\tif o.Sent {\n\t\t\tn += objectCharge', '\t\tif true {\n\t\t\tn += objectCharge', './s3api'),
    ('XR07', 's3api/restorebudget.go', '\t\tif backend.CheckRestore(o.Class, o.Tier, req) != nil {\n\t\t\treturn 0', '\t\tif false {\n\t\t\treturn 0', './s3api'),
    ('XR08', 's3api/restorebudget.go', '\t\tb.throttled.Inc()\n', '', './s3api'),
    ('XR09', 's3api/restoreheads.go', 'return s.statusHeads.TakeAtMost(req.client, archiveview.MaxFreshHeads, s.now())', 'return s.statusHeads.TakeAtMost("", archiveview.MaxFreshHeads, s.now())', './s3api'),
    ('XR10', 's3api/restoreheads.go', '\tif sent < took {', '\tif false {', './s3api'),
    ('XR11', 's3api/restoreheads.go', 's.statusHeads.Give(req.client, float64(took-sent), s.now())', 's.statusHeads.Give(req.client, float64(took), s.now())', './s3api'),
    ('XR12', 's3api/restorebudget.go', '\t\t\tif charged == 0 {\n\t\t\t\twait = w\n\t\t\t}', '\t\t\twait = w', './s3api'),
    ('XH01', 'backend/s3.go', 'if d <= maxSignedSkew && d >= -maxSignedSkew {', 'if d <= maxSignedSkew {', './backend'),
    ('XH02', 'backend/s3.go', 're.HTTPStatusCode() != http.StatusForbidden || re.Response.Request == nil {', 're.Response.Request == nil {', './backend'),
    ('XH03', 'backend/s3.go', '\tif _, skewed := forbiddenSkew(err); skewed {', '\tif _, skewed := forbiddenSkew(err); skewed && false {', './backend'),
    ('XH04', 'backend/s3.go', 'ok && (!hasCode || ae.ErrorCode() == "Forbidden") {', 'ok {', './backend'),
    ('XH05', 'backend/s3.go', 'const maxSignedSkew = 15 * time.Minute', 'const maxSignedSkew = 16 * time.Minute', './backend'),
    ('XG01', 'cmd/wharf/get.go', '\tf.dec = norm.NFD.Append(f.dec[:0], f.fold...)\n', '\tf.dec = append(f.dec[:0], f.fold...)\n', './cmd/wharf'),
    ('XG02', 'cmd/wharf/get.go', '\tif !f.rule.caseFold {\n\t\treturn f.dec', '\tif true {\n\t\treturn f.dec', './cmd/wharf'),
    ('XG03', 'cmd/wharf/get.go', '\treturn err1 == nil && err2 == nil && os.SameFile(fi, li)\n}\n\n// collisions', '\treturn (err1 == nil && err2 == nil && os.SameFile(fi, li)) || true\n}\n\n// collisions', './cmd/wharf'),
    ('XG04', 'cmd/wharf/get.go', 'fr.any() {', 'fr.caseFold {', './cmd/wharf'),
    ('XG05', 'cmd/wharf/get.go', '} else if m, ok := strings.CutSuffix(h, norm.NFD.String(tempNormMark)); ok {', '} else if m, ok := strings.CutSuffix(h, "\\x00"); ok {', './cmd/wharf'),
    ('XG06', 'cmd/wharf/get.go', '\tif decomposed == tmp {\n\t\treturn false\n\t}\n', '', './cmd/wharf'),
    ('XP01', 'cmd/wharf/serve.go', '\t\tif !unicode.IsPrint(r) {\n\t\t\tbreak', '\t\tif _ = r; false {\n\t\t\tbreak', './cmd/wharf'),
    ('XP02', 'cmd/wharf/serve.go', '\t\tcase r > 0xFFFF:\n', '\t\tcase r > 0xFFFF && false:\n', './cmd/wharf'),
    ('XP03', 'cmd/wharf/serve.go', 'case r < utf8.RuneSelf || unicode.IsPrint(r):', 'case unicode.IsPrint(r):', './cmd/wharf'),
    ('XP04', 'cmd/wharf/serve.go', '\t\t\treturn backend.PrintableText(fmt.Sprint(i), 0)\n', '\t\t\treturn fmt.Sprint(i)\n', './cmd/wharf'),
    ('XP05', 'cmd/wharf/serve.go', 'mux.HandleFunc("/-/archives", pages.serve(func(w http.ResponseWriter, r *http.Request) {\n\t\tw.Header().Set("Content-Type", "application/json")\n\t\tenc := json.NewEncoder(printableJSON{w})', 'mux.HandleFunc("/-/archives", pages.serve(func(w http.ResponseWriter, r *http.Request) {\n\t\tw.Header().Set("Content-Type", "application/json")\n\t\tenc := json.NewEncoder(w)', './cmd/wharf'),
    ('XP06', 's3api/restore.go', 'obj{Key: backend.PrintableText(o.Key, MaxLoggedKey),', 'obj{Key: o.Key,', './s3api'),
    ('XP07', 's3api/server.go', 'Str("key", backend.PrintableText(req.key, MaxLoggedKey))', 'Str("key", req.key)', './s3api'),
    ('XP08', 'archiveview/catalog/catalog.go', '\ts = backend.PrintableText(s, 0)\n', '\t_ = backend.PrintableText\n', './archiveview/catalog'),
]


def main(prefixes):
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="wharf-hand-mutants-") as tmp:
        archive = subprocess.run(["git", "-C", root, "archive", "HEAD"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        for mid, path, old, new, pkgs in MUTANTS:
            if prefixes and not any(mid.startswith(p) for p in prefixes):
                continue
            f = os.path.join(tmp, path)
            src = open(f).read()
            if src.count(old) != 1:
                print(f"{mid} NO MATCH 0s {path}", flush=True)
                continue
            open(f, "w").write(src.replace(old, new))
            start, verdict, failing = time.time(), "SURVIVED", ""
            try:
                for pkg in pkgs.split(","):
                    p = subprocess.run(["go", "test", "-count=1", "-failfast", pkg], cwd=tmp, capture_output=True, text=True)
                    if p.returncode != 0:
                        verdict = "KILLED"
                        lines = [l for l in (p.stdout + p.stderr).splitlines() if l.startswith("--- FAIL") or "build failed" in l]
                        failing = lines[0] if lines else "(exit %d)" % p.returncode
                        break
            finally:
                open(f, "w").write(src)
            print(f"{mid} {verdict} {time.time() - start:.0f}s {path} {failing}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
