package bench

// cpuprof.go reads back a CPU profile the bench wrote itself (runtime/pprof's
// gzip-compressed profile.proto) and sums its CPU time by the value of one
// pprof label, so that the CPU workload can report wharf's CPU seconds
// (label side=wharf) apart from the clients' and the S3 model's, which run
// in the same process. Only the fields needed are decoded: sample_type
// (1), sample (2: value, label) and string_table (6).

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"time"
)

// cpuByLabel returns the CPU time of the samples of profile prof (gzip'd
// profile.proto) grouped by the value of label key ("" for samples
// without it).
func cpuByLabel(prof []byte, key string) (map[string]time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(prof))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 1<<30))
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	type label struct{ key, str int64 }
	type sample struct {
		values []int64
		labels []label
	}
	var strs []string
	var types []int64 // sample_type[i].type (string index)
	var samples []sample
	err = protoFields(raw, func(field int, wire int, v uint64, b []byte) error {
		switch {
		case field == 1 && wire == 2: // sample_type
			var t int64
			err := protoFields(b, func(f, w int, v uint64, _ []byte) error {
				if f == 1 && w == 0 {
					t = int64(v)
				}
				return nil
			})
			types = append(types, t)
			return err
		case field == 2 && wire == 2: // sample
			var s sample
			err := protoFields(b, func(f, w int, v uint64, b []byte) error {
				switch {
				case f == 2 && w == 0:
					s.values = append(s.values, int64(v))
				case f == 2 && w == 2: // packed
					return protoVarints(b, func(v uint64) { s.values = append(s.values, int64(v)) })
				case f == 3 && w == 2:
					var l label
					err := protoFields(b, func(f, w int, v uint64, _ []byte) error {
						switch {
						case f == 1 && w == 0:
							l.key = int64(v)
						case f == 2 && w == 0:
							l.str = int64(v)
						}
						return nil
					})
					s.labels = append(s.labels, l)
					return err
				}
				return nil
			})
			samples = append(samples, s)
			return err
		case field == 6 && wire == 2:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	str := func(i int64) string {
		if i < 0 || i >= int64(len(strs)) {
			return ""
		}
		return strs[i]
	}
	ns := -1
	for i, t := range types {
		if str(t) == "cpu" {
			ns = i
		}
	}
	if ns < 0 {
		return nil, errors.New("cpu profile: no cpu sample type")
	}
	out := map[string]time.Duration{}
	for _, s := range samples {
		if ns >= len(s.values) {
			continue
		}
		v := ""
		for _, l := range s.labels {
			if str(l.key) == key {
				v = str(l.str)
			}
		}
		out[v] += time.Duration(s.values[ns])
	}
	return out, nil
}

// protoFields calls fn for each field of the protobuf message b: its
// number, wire type and value (varint: v; length-delimited: b). Fixed
// 32- and 64-bit fields are skipped.
func protoFields(b []byte, fn func(field, wire int, v uint64, b []byte) error) error {
	for len(b) > 0 {
		tag, n := protoVarint(b)
		if n <= 0 {
			return errors.New("bad tag")
		}
		b = b[n:]
		field, wire := int(tag>>3), int(tag&7)
		var v uint64
		var sub []byte
		switch wire {
		case 0:
			v, n = protoVarint(b)
			if n <= 0 {
				return errors.New("bad varint")
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return errors.New("short fixed64")
			}
			b = b[8:]
			continue
		case 2:
			l, n := protoVarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errors.New("bad length")
			}
			sub, b = b[n:n+int(l)], b[n+int(l):]
		case 5:
			if len(b) < 4 {
				return errors.New("short fixed32")
			}
			b = b[4:]
			continue
		default:
			return fmt.Errorf("wire type %d", wire)
		}
		if err := fn(field, wire, v, sub); err != nil {
			return err
		}
	}
	return nil
}

// protoVarints calls fn for each varint of a packed repeated field.
func protoVarints(b []byte, fn func(uint64)) error {
	for len(b) > 0 {
		v, n := protoVarint(b)
		if n <= 0 {
			return errors.New("bad packed varint")
		}
		fn(v)
		b = b[n:]
	}
	return nil
}

// protoVarint decodes the varint at the start of b and returns it and its
// length (0: b ends inside it, -1: longer than 10 bytes).
func protoVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < len(b); i++ {
		if i == 10 {
			return 0, -1
		}
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}
