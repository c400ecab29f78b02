package catalog

// Retiring: an entry a scan no longer serves has its open cancelled and,
// after RetireGrace (requests already reading finish; at shutdown at
// once), its archive closed, unless a served or kept entry holds it.

import (
	"time"

	"github.com/wharf-s3/wharf/archiveview"
)

// isHeld reports whether a served or kept entry holds a: one recorded at
// the last settle, or one served now (an entry that was still opening then
// and has opened since).
func (cm *Manager) isHeld(a *archiveview.Archive) bool {
	if (*cm.held.Load())[a] {
		return true
	}
	for _, e := range cm.catalog.Entries() {
		if got, _, _ := e.State(); got == a {
			return true
		}
	}
	return false
}

// setHeld records the archives served entries and kept ones hold: a
// retired entry's archive is closed only if it is not among them.
func (cm *Manager) setHeld(maps ...map[string]*Entry) {
	held := archivesOf(append(maps, cm.static)...)
	cm.held.Store(&held)
}

// archivesOf is the set of archives the entries of maps hold (the open
// ones).
func archivesOf(maps ...map[string]*Entry) map[*archiveview.Archive]bool {
	held := map[*archiveview.Archive]bool{}
	for _, m := range maps {
		for _, e := range m {
			if a, _, _ := e.State(); a != nil {
				held[a] = true
			}
		}
	}
	return held
}

// retire stops the opens of entries still running and, after the retire
// grace (or at shutdown, whichever is first), closes their archives that
// no served entry holds, each once. Requests that looked an archive up
// before the swap keep reading it: Close only stops prefetch and releases
// parked decoders, and reads still open afterwards complete (without
// readahead).
func (cm *Manager) retire(entries ...*Entry) {
	if len(entries) == 0 {
		return
	}
	for _, e := range entries {
		if _, _, done := e.State(); !done && e.cancel != nil {
			e.cancel()
		}
	}
	cm.retired.Add(1)
	go func() {
		defer cm.retired.Done()
		t := time.NewTimer(cm.cfg.RetireGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-cm.done:
		}
		closed := map[*archiveview.Archive]bool{}
		for _, e := range entries {
			<-e.done // the open was cancelled, or ends with the manager's base context
			a := e.arc
			if a == nil || closed[a] || cm.isHeld(a) {
				continue
			}
			closed[a] = true
			cm.closeArchive(a)
			cm.log.Debug().Str("archive", a.Name()).Msg("retired archive closed")
		}
	}()
}
