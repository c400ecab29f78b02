package catalog

// A scan's log: what a settled scan found is logged when it is new (not
// what the last settled scan logged already: a broken upload stays broken,
// a misplaced object stays misplaced, at every rescan), at most a bounded
// number of lines a scan, and one line counting the rest. /-/archives
// shows every one.

import "github.com/wharf-s3/wharf/archiveview"

// Bounds of the lines a scan logs one by one: skipped objects (an
// uploader's choice: any number of manifest-named objects in the wrong
// place), and failed opens likewise.
const (
	maxSkippedLogged = 100
	maxFailedLogged  = 100
)

// cappedLog counts the new lines of one kind a scan logs: at most max one
// by one, quiet the rest.
type cappedLog struct {
	max, logged, quiet int
}

// take reports whether one more line is logged one by one; false (counted
// in quiet) once max have been.
func (c *cappedLog) take() bool {
	if c.logged == c.max {
		c.quiet++
		return false
	}
	c.logged++
	return true
}

// logEntries logs the buckets op serves: each still opening from an
// earlier scan, each failure that is new (not the same error the last
// settled scan logged for the bucket; cm.failedSeen), at most
// maxFailedLogged of them and a line counting the rest, and each archive
// opened anew. Called with cm.mu held (settle).
func (cm *Manager) logEntries(op *scanOp) {
	rep := op.rep
	failures := map[string]string{}
	lines := cappedLog{max: maxFailedLogged}
	for n, e := range op.entries {
		a, err, _ := e.State()
		var was *archiveview.Archive
		if b := op.before[n]; b != nil {
			was, _, _ = b.State()
		}
		switch {
		case err == nil && a == nil:
			cm.log.Info().Str("archive", n).Str("source", rep.Sources[n]).Msg("archive still opening (from an earlier scan)")
		case err != nil:
			failures[n] = err.Error()
			if cm.failedSeen[n] != failures[n] && lines.take() { // else logged by an earlier scan, or counted
				cm.log.Error().Str("archive", n).Str("source", rep.Sources[n]).Err(err).Msg("archive could not be opened; its bucket answers this error")
			}
		case a != was:
			cm.logArchive(n, rep.Sources[n], a)
		}
	}
	cm.failedSeen = failures
	if lines.quiet > 0 {
		cm.log.Error().Int("not_logged", lines.quiet).
			Msgf("%d more archives could not be opened, not logged one by one (/-/archives has each error)", lines.quiet)
	}
}

// logSkipped warns of each object rep's scan skipped that the last scan
// settled before it did not skip already (cm.skippedSeen), at most
// maxSkippedLogged of them, and counts the rest in one line: a rescan
// that finds what it found before logs nothing again. Called with cm.mu
// held (settle).
func (cm *Manager) logSkipped(rep *scanReport) {
	seen := make(map[Skipped]bool, len(rep.Skipped))
	lines := cappedLog{max: maxSkippedLogged}
	for _, s := range rep.Skipped {
		seen[s] = true
		if !cm.skippedSeen[s] && lines.take() {
			cm.log.Warn().Str("bucket", s.Bucket).Str("key", s.Key).Str("reason", s.Reason).Msg("discovery skipped")
		}
	}
	cm.skippedSeen = seen
	if lines.quiet > 0 {
		cm.log.Warn().Int("not_logged", lines.quiet).Int("skipped", len(rep.Skipped)).
			Msgf("discovery skipped %d more objects, not logged one by one (/-/archives lists the first %d)", lines.quiet, maxSkippedPage)
	}
}
