package auth

import (
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// RestoreGrant says in which buckets a key may ask for restores of archived
// objects (RestoreObject), when the server allows restores at all (wharf
// serve --allow-restore; restores cost money). In a keys file:
//
//	restore: true          # every bucket the key may read (also when absent)
//	restore: false         # none
//	restore: [photos, raw] # only these; each must be a bucket the key may read
//
// The zero RestoreGrant is "every bucket the key may read". Anonymous
// callers never restore.
type RestoreGrant struct {
	// Deny: the key may not restore anywhere (restore: false).
	Deny bool
	// Buckets, when non-empty, are the only buckets the key may restore in.
	Buckets []string
}

// IsZero reports whether g is the default grant (YAML omitempty).
func (g RestoreGrant) IsZero() bool { return !g.Deny && len(g.Buckets) == 0 }

// UnmarshalYAML reads true, false or a list of bucket names.
func (g *RestoreGrant) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		var b bool
		if err := n.Decode(&b); err != nil {
			return fmt.Errorf("line %d: restore: want true, false or a list of buckets", n.Line)
		}
		*g = RestoreGrant{Deny: !b}
		return nil
	case yaml.SequenceNode:
		var bs []string
		if err := n.Decode(&bs); err != nil {
			return fmt.Errorf("line %d: restore: want a list of bucket names: %w", n.Line, err)
		}
		if len(bs) == 0 {
			return fmt.Errorf("line %d: restore: an empty list grants nothing; write restore: false", n.Line)
		}
		*g = RestoreGrant{Buckets: bs}
		return nil
	}
	return fmt.Errorf("line %d: restore: want true, false or a list of buckets", n.Line)
}

// MarshalYAML writes the grant in the form UnmarshalYAML reads.
func (g RestoreGrant) MarshalYAML() (any, error) {
	switch {
	case g.Deny:
		return false, nil
	case len(g.Buckets) > 0:
		return g.Buckets, nil
	}
	return true, nil
}

// check validates g for a key that may read buckets (nil = every bucket).
func (g RestoreGrant) check(buckets map[string]bool) error {
	if g.Deny && len(g.Buckets) > 0 {
		return errors.New("restore grant both denies and lists buckets")
	}
	for _, b := range g.Buckets {
		if b == "" {
			return errors.New("empty bucket name in restore grant")
		}
		if buckets != nil && !buckets[b] {
			return fmt.Errorf("restore grant for bucket %q, which the key may not read", b)
		}
	}
	return nil
}

// CanRestore reports whether the identity may ask for restores in bucket:
// never for an anonymous caller, else per the key's RestoreGrant (and only
// in buckets it may read). Whether the server allows restores at all is
// the server's own switch.
func (id Identity) CanRestore(bucket string) bool {
	if id.Anonymous() || !id.CanRead(bucket) || id.restore.Deny {
		return false
	}
	if len(id.restore.Buckets) == 0 {
		return true
	}
	for _, b := range id.restore.Buckets {
		if b == bucket {
			return true
		}
	}
	return false
}
