package manifest

import "time"

// parseTimeFast parses the canonical RFC 3339 form Go's time.Time JSON
// encoding writes, "2006-01-02T15:04:05[.fraction](Z|±hh:mm)" with 1 to 9
// fraction digits, without allocating, and yields exactly what
// time.Time.UnmarshalJSON would (Local when the offset matches the local
// zone at that instant, else a fixed zone taken from zones). Anything else,
// including every out-of-range field, returns ok=false and the caller falls
// back to UnmarshalJSON, which stays the authority.
func parseTimeFast(s []byte, zones map[int]*time.Location) (time.Time, bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := digits(s[0:4])
	month, ok2 := digits(s[5:7])
	day, ok3 := digits(s[8:10])
	hour, ok4 := digits(s[11:13])
	minute, ok5 := digits(s[14:16])
	sec, ok6 := digits(s[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || day > daysIn(month, year) ||
		hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	rest := s[19:]
	nsec := 0
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return time.Time{}, false
		}
		f, _ := digits(rest[1:n])
		for i := n; i < 10; i++ {
			f *= 10
		}
		nsec = f
		rest = rest[n:]
	}
	switch {
	case len(rest) == 1 && rest[0] == 'Z':
		return time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC), true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		hh, ok1 := digits(rest[1:3])
		mm, ok2 := digits(rest[4:6])
		if !ok1 || !ok2 || hh > 23 || mm > 59 {
			return time.Time{}, false
		}
		off := (hh*60 + mm) * 60
		if rest[0] == '-' {
			off = -off
		}
		t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC).Add(-time.Duration(off) * time.Second)
		if _, lo := t.In(time.Local).Zone(); lo == off {
			return t.In(time.Local), true
		}
		z, ok := zones[off]
		if !ok {
			if len(zones) >= 64 {
				return time.Time{}, false
			}
			z = time.FixedZone("", off)
			zones[off] = z
		}
		return t.In(z), true
	}
	return time.Time{}, false
}

// digits parses an all-digit field.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}
