package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"
)

// durationValue is a time.Duration flag whose error says how to write
// the value: flag.Duration's own answer to "--send-timeout 5" is only
// "parse error", and a bare number is the usual mistake.
type durationValue struct{ d *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return fmt.Errorf("%q has no unit: write a duration such as %ss, %sms or %sm", s, s, s, s)
		}
		return fmt.Errorf("%q is not a duration: write it like 90s, 500ms, 2m or 1h30m", s)
	}
	*v.d = d
	return nil
}

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

// durationVar defines a duration flag like flag.FlagSet.DurationVar, with
// durationValue's errors.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationValue{p}, name, usage)
}
