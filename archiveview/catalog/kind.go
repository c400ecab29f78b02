package catalog

import "strings"

// Kind names what a bucket serves, in the words the console and the
// /-/archives page show. It is decided here, from the configuration and
// the last scan, so that no reader of the catalog guesses it from a
// source's text.
type Kind string

// The kinds of bucket.
const (
	KindArchive           Kind = "archive"            // --archive: one manifest URL
	KindAlias             Kind = "alias"              // --alias NAME=…@latest: the newest upload of a prefix
	KindDataset           Kind = "dataset"            // --alias NAME=…@current: follows CURRENT
	KindPinned            Kind = "pinned version"     // --alias NAME=…@<version_id>
	KindDiscovered        Kind = "discovered archive" // found by --discover under uploads/
	KindDiscoveredDataset Kind = "discovered dataset" // found by --discover by its CURRENT
)

// Kind reports what bucket name serves; ok is false for a bucket the
// catalog does not know.
func (cm *Manager) Kind(name string) (k Kind, ok bool) {
	cm.dsMu.Lock()
	st := cm.datasets[name]
	cm.dsMu.Unlock()
	if st != nil {
		switch {
		case strings.HasPrefix(st.source, "discover "):
			return KindDiscoveredDataset, true
		case st.ref.Version != "":
			return KindPinned, true
		}
		return KindDataset, true
	}
	for _, al := range cm.cfg.Aliases {
		if al.Name == name {
			return KindAlias, true
		}
	}
	for _, sa := range cm.cfg.Archives {
		if sa.Name == name {
			return KindArchive, true
		}
	}
	if _, served := cm.catalog.cur.Load().byName[name]; served {
		return KindDiscovered, true
	}
	return "", false
}
