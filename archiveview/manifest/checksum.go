package manifest

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// ParseChecksum decodes a SHA-256 checksum as CargoShip writes it: 64 hex
// digits, any case, optionally prefixed "sha256:" (the docs' placeholder
// form). "" (and a bare "sha256:") gives ok=false and no error: the checksum
// is absent. Anything else that is not exactly 32 bytes of hex is an error;
// a caller must never treat such a value as verified.
func ParseChecksum(s string) (sum [32]byte, ok bool, err error) {
	if len(s) >= 7 && strings.EqualFold(s[:7], "sha256:") {
		s = s[7:]
	}
	if s == "" {
		return sum, false, nil
	}
	if err := decodeHex(sum[:], s); err != nil {
		return sum, false, fmt.Errorf("sha256 checksum %q: %w", clip(s), err)
	}
	return sum, true, nil
}

// ParseMD5 decodes an MD5 digest (content_hash): 32 hex digits, any case,
// optionally prefixed "md5:". "" gives ok=false and no error.
func ParseMD5(s string) (sum [16]byte, ok bool, err error) {
	if len(s) >= 4 && strings.EqualFold(s[:4], "md5:") {
		s = s[4:]
	}
	if s == "" {
		return sum, false, nil
	}
	if err := decodeHex(sum[:], s); err != nil {
		return sum, false, fmt.Errorf("md5 checksum %q: %w", clip(s), err)
	}
	return sum, true, nil
}

func decodeHex(dst []byte, s string) error {
	if len(s) != 2*len(dst) {
		return fmt.Errorf("want %d hex digits, have %d characters", 2*len(dst), len(s))
	}
	if _, err := hex.Decode(dst, []byte(s)); err != nil {
		return err
	}
	return nil
}

// clip shortens s for error messages so a hostile value cannot bloat them.
func clip(s string) string {
	const max = 80
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
