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
