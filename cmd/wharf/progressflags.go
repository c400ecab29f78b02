package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/wharf-s3/wharf/cmd/wharf/internal/progress"
)

// progressFlags are the progress flags of the long commands (verify, pack,
// index build, get): --quiet (-q) and --progress-interval. Progress goes
// to stderr: a live line on a terminal, else a zerolog JSON line every
// interval and at the end (package progress documents both).
type progressFlags struct {
	quiet    bool
	interval time.Duration
	stderr   io.Writer // os.Stderr; tests swap it
}

func addProgressFlags(fs *flag.FlagSet) *progressFlags {
	p := &progressFlags{stderr: os.Stderr}
	fs.BoolVar(&p.quiet, "quiet", false, "no progress output (and only the essential lines)")
	fs.BoolVar(&p.quiet, "q", false, "same as --quiet")
	durationVar(fs, &p.interval, "progress-interval", progress.DefaultInterval, "how often progress is logged when stderr is not a terminal")
	return p
}

// check validates the flags (called after parsing, before any work).
func (p *progressFlags) check() error {
	if p.interval <= 0 {
		return fmt.Errorf("--progress-interval %s: want > 0", p.interval)
	}
	return nil
}

// start begins reporting the progress of op, counting items (files,
// chunks).
func (p *progressFlags) start(op, items string) *progress.Reporter {
	return progress.New(progress.Options{
		Mode:     progress.ModeFor(p.stderr, p.quiet),
		Op:       op,
		Items:    items,
		Out:      p.stderr,
		Log:      zerolog.New(p.stderr).With().Timestamp().Logger(),
		Interval: p.interval,
	})
}

// formatBytes renders n bytes for people: "512 B", "1.5 KiB", "3.2 GiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	i := -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[i])
}
