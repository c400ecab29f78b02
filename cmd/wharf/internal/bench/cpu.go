package bench

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/wharf-s3/wharf/archiveview/cargopack"
)

// cpuMaxSize caps the CPU workload's file: its figures are per GB and do
// not need the whole --large-size.
const cpuMaxSize = 256 << 20

// cpuPerGB is workload 9 (issue 24): the CPU seconds wharf spends per GB
// served, against the floor of the work it must do, the reference
// `zstd -d` of the compressed bytes plus `openssl dgst -sha256` of the
// compressed and of the decoded bytes (each tool's user + system CPU,
// measured in the same run on the same files). One file of mixed content
// (at most 256 MiB of --large-size) is packed twice: in 4 MiB sub-frames
// and as one giant zstd frame (the shape older CargoShip versions wrote),
// and each is read cold by one whole GET and by five concurrent 8 MiB
// ranges (the SDK downloader), three rounds each, the round of median
// wharf CPU counting. wharf's CPU is the CPU profile's samples labelled
// side=wharf (its handlers, the read path and its SDK connections to the
// S3 model; env.labelled), so the clients and the S3 model in the same
// process are not counted. The floor is measured again right before each
// variant, and each variant is compared with the floor beside it. The
// giant frame is compared with the sub-frames under five ranges in
// interleaved pairs of rounds (the median pair's ratio). With
// --cpuprofile the process profile is taken and this workload reports
// nothing.
func cpuPerGB(ctx context.Context, cfg Config, e *env, rep *Report) error {
	size := min(cfg.LargeSize, cpuMaxSize)
	wl := fmt.Sprintf("9. CPU per GB served (%d MiB file, mixed content, cold cache per read)", size>>20)
	seed := cfg.Seed + 900
	rawKey := "raw/cpu.bin"
	want, err := writeRaw(e, rawKey, contents[0].open(seed, size))
	if err != nil {
		return err
	}
	defer os.Remove(filepath.Join(e.dir, benchBucket, filepath.FromSlash(rawKey)))
	mtime := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	type packed struct {
		name string
		res  *cargopack.Result
	}
	var packs []packed
	for _, p := range []struct {
		name, prefix string
		giant        bool
	}{{"4 MiB sub-frames", "cpusub", false}, {"one giant frame", "cpugiant", true}} {
		cfg.logf("packing the CPU workload's %d MiB file (%s)", size>>20, p.name)
		res, err := cargopack.Write(ctx, cargopack.DirSink(e.dir), []cargopack.File{{
			Rel: "large/data.bin", Size: size, ModTime: mtime, Mode: 0o644,
			Open: func() (io.ReadCloser, error) { return contents[0].open(seed, size), nil },
		}}, cargopack.Options{
			Bucket: benchBucket, Prefix: p.prefix, UploadID: p.prefix,
			FrameSize: 4 << 20, NoSubFrames: p.giant, ChunkSize: size + (1 << 20), ShardCount: 1,
		})
		if err != nil {
			return fmt.Errorf("pack CPU workload file (%s): %w", p.name, err)
		}
		defer os.RemoveAll(filepath.Join(e.dir, benchBucket, p.prefix))
		packs = append(packs, packed{p.name, res})
	}

	// The floor, on the sub-frame archive's chunk and the raw file. It is
	// measured again right before each variant's rounds and each variant
	// is compared with its own: the CPU seconds the same work takes on
	// this shared machine drift by a quarter within minutes, and a ratio
	// of two figures taken minutes apart carried that drift.
	rawPath := filepath.Join(e.dir, benchBucket, filepath.FromSlash(rawKey))
	measureFloor := func() (float64, string, error) {
		floor, how, err := cpuFloor(e, packs[0].res, rawPath)
		return floor.Seconds() / (float64(size) / 1e9), how, err
	}
	floorGB, how, err := measureFloor()
	if err != nil {
		return err
	}
	rep.add(Row{Workload: wl, System: "floor", Variant: how, Metric: "CPU s per GB", Value: floorGB, Unit: "s"})
	cfg.logf("CPU floor (%s): %.2f CPU s per GB", how, floorGB)

	const rounds = 3
	type mode struct {
		name string
		do   func() (uint32, error)
	}
	modes := []mode{
		{"one GET", func() (uint32, error) { return getCRC(ctx, e.client, "wharf", "large/data.bin") }},
		{"five concurrent 8 MiB ranges (SDK downloader)", func() (uint32, error) {
			return downloadCRCConc(ctx, e, e.client, "wharf", "large/data.bin", size, sdkConcurrency)
		}},
	}
	// round reads p's file once by m with a cold cache under a CPU
	// profile: wharf's CPU (and the rest's, by label), its wall time and
	// the backend bytes.
	errProfileInUse := errors.New("the CPU profile is in use")
	round := func(p packed, m mode) (map[string]time.Duration, float64, int64, error) {
		if _, err := e.serveArchive(ctx, p.res.ManifestKey, cfg.CacheBytes, 0); err != nil {
			return nil, 0, 0, err
		}
		e.faulty.Reset()
		var prof bytes.Buffer
		if err := pprof.StartCPUProfile(&prof); err != nil {
			cfg.logf("CPU workload skipped: %v (--cpuprofile takes the process profile)", err)
			return nil, 0, 0, errProfileInUse
		}
		t0 := time.Now()
		got, err := m.do()
		pprof.StopCPUProfile()
		if err != nil {
			return nil, 0, 0, err
		}
		wall := time.Since(t0).Seconds()
		if got != want {
			return nil, 0, 0, fmt.Errorf("CPU workload (%s, %s): bytes differ from the source", p.name, m.name)
		}
		by, err := cpuByLabel(prof.Bytes(), "side")
		return by, wall, e.faulty.BytesReturned(), err
	}
	notMeasured := func() error {
		rep.add(Row{Workload: wl, System: "wharf", Variant: "not measured: the CPU profile is in use (--cpuprofile)", Metric: "CPU s per GB", Value: 0, Unit: "s"})
		return nil
	}
	gb := float64(size) / 1e9
	first := true
	for _, p := range packs {
		for _, m := range modes {
			if !first {
				if floorGB, _, err = measureFloor(); err != nil {
					return err
				}
			}
			first = false
			// One CPU profile per round; the round whose wharf CPU is the
			// median counts (a round disturbed by something else on the
			// machine does not).
			var backendB int64
			var walls []float64
			var rounds3 []map[string]time.Duration
			for r := 0; r < rounds; r++ {
				by, wall, b, err := round(p, m)
				if errors.Is(err, errProfileInUse) {
					return notMeasured()
				}
				if err != nil {
					return err
				}
				walls = append(walls, wall)
				backendB = max(backendB, b)
				rounds3 = append(rounds3, by)
			}
			slices.SortFunc(rounds3, func(a, b map[string]time.Duration) int { return cmp.Compare(a["wharf"], b["wharf"]) })
			by := rounds3[len(rounds3)/2]
			w := by["wharf"].Seconds() / gb
			ratio := float64(backendB) / float64(p.res.CompressedBytes)
			rep.add(Row{Workload: wl, System: "wharf", Variant: p.name + ", " + m.name, Metric: "CPU s per GB", Value: w, Unit: "s"})
			rep.add(Row{Workload: wl, System: "wharf", Variant: p.name + ", " + m.name, Metric: "CPU / floor", Value: w / floorGB, Unit: "x"})
			rep.add(Row{Workload: wl, System: "wharf", Variant: p.name + ", " + m.name, Metric: "throughput (median of 3)", Value: float64(size) / 1e6 / medianOf(walls), Unit: "MB/s"})
			rep.add(Row{Workload: wl, System: "wharf", Variant: p.name + ", " + m.name, Metric: "backend bytes / compressed (most of a round)", Value: ratio, Unit: "x"})
			rep.add(Row{Workload: wl, System: "S3 model + clients", Variant: p.name + ", " + m.name, Metric: "CPU s per GB", Value: (by["s3model"] + by[""]).Seconds() / gb, Unit: "s"})
			cfg.logf("CPU %s, %s: wharf %.2f CPU s per GB (%.2fx the floor), %.0f MB/s, backend bytes %.2fx compressed; S3 model %.2f, clients and the rest %.2f CPU s per GB",
				p.name, m.name, w, w/floorGB, float64(size)/1e6/medianOf(walls), ratio, by["s3model"].Seconds()/gb, by[""].Seconds()/gb)
			if p.name == packs[0].name {
				rep.target("CPU per GB served, "+m.name+", sub-frames, vs the floor (zstd -d + sha256 of compressed and decoded, measured beside it)",
					fmt.Sprintf("%.2fx (%.2f vs %.2f CPU s/GB)", w/floorGB, w, floorGB), "<= 1.5x", w/floorGB <= 1.5)
			} else if m.name == modes[1].name {
				rep.target("giant frame, five concurrent 8 MiB ranges: backend bytes / the frame", fmt.Sprintf("%.2fx", ratio), "<= 2x", ratio <= 2.0)
			}
		}
	}

	// The giant frame against the same file in sub-frames, five ranges:
	// rounds of the two taken in interleaved pairs (sub-frames first in
	// odd pairs, the giant frame first in even ones), each pair's ratio
	// of wharf CPU, the median pair counting. The two reads of a pair run
	// seconds apart, so the machine's drift (the CPU seconds of the same
	// work move by a quarter within minutes here, and by a third between
	// the variants' own rounds above) is mostly common to both and
	// cancels in the ratio.
	var ratios []float64
	var giantGB, subGB []float64
	var fetched float64
	for i := 0; i < cpuPairs; i++ {
		var cpu [2]float64
		for k := 0; k < 2; k++ {
			j := (k + i) % 2 // 0: sub-frames, 1: giant
			by, _, b, err := round(packs[j], modes[1])
			if errors.Is(err, errProfileInUse) {
				return notMeasured()
			}
			if err != nil {
				return err
			}
			cpu[j] = by["wharf"].Seconds() / gb
			if j == 1 {
				fetched = max(fetched, float64(b)/float64(packs[1].res.CompressedBytes))
			}
		}
		ratios = append(ratios, cpu[1]/max(cpu[0], 1e-9))
		subGB, giantGB = append(subGB, cpu[0]), append(giantGB, cpu[1])
	}
	r, sub, giant := medianOf(ratios), medianOf(subGB), medianOf(giantGB)
	rep.add(Row{Workload: wl, System: "wharf", Variant: fmt.Sprintf("giant frame / sub-frames, five concurrent 8 MiB ranges (median of %d interleaved pairs)", cpuPairs), Metric: "CPU vs sub-frames", Value: r, Unit: "x"})
	cfg.logf("CPU giant frame vs sub-frames, five ranges, %d interleaved pairs: ratios %s (median %.2fx; giant %.2f, sub-frames %.2f CPU s per GB, medians), giant frame fetched at most %.2fx",
		cpuPairs, fmtRatios(ratios), r, giant, sub, fetched)
	rep.target("giant frame, five concurrent 8 MiB ranges: CPU per GB vs the same file in sub-frames (median of interleaved pairs)",
		fmt.Sprintf("%.2fx (%.2f vs %.2f CPU s/GB)", r, giant, sub), "<= 1.5x", r <= 1.5)
	return nil
}

// cpuPairs is how many interleaved pairs of five-range rounds (sub-frames,
// giant frame) the giant frame's CPU ratio is the median of.
const cpuPairs = 5

func fmtRatios(rs []float64) string {
	var b bytes.Buffer
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%.2f", r)
	}
	return b.String()
}

// cpuFloor is the CPU time of the work a read of res's file must do at
// least: decode every chunk and sha256 both its compressed and its decoded
// bytes, with the reference tools (`zstd -d`, `openssl dgst -sha256`),
// each run three times (the median counts). Without those tools it is the
// same work in this process with wharf's libraries, timed on one
// goroutine, and how says so.
func cpuFloor(e *env, res *cargopack.Result, raw string) (time.Duration, string, error) {
	var chunks []string
	for _, c := range res.Manifest.Chunks {
		chunks = append(chunks, e.objectPath(res.Manifest, c))
	}
	_, zerr := exec.LookPath("zstd")
	_, oerr := exec.LookPath("openssl")
	if zerr != nil || oerr != nil {
		limit, err := decodeLimit(e, res)
		if err != nil {
			return 0, "", err
		}
		// sha256 of the compressed and decoded bytes at this machine's
		// single-goroutine rate.
		rate, err := sha256Rate()
		if err != nil {
			return 0, "", err
		}
		dec := float64(res.Manifest.Files[0].Size) / 1e6
		secs := dec/limit + (dec+float64(res.CompressedBytes)/1e6)/rate
		return time.Duration(secs * float64(time.Second)), "Go floor (klauspost zstd DecodeAll + crypto/sha256, one goroutine): zstd or openssl missing", nil
	}
	var total time.Duration
	for _, ch := range chunks {
		for _, cmd := range [][]string{
			{"zstd", "-d", "-q", "-f", "-o", os.DevNull, ch},
			{"openssl", "dgst", "-sha256", ch},
		} {
			d, err := toolCPU(cmd)
			if err != nil {
				return 0, "", err
			}
			total += d
		}
	}
	d, err := toolCPU([]string{"openssl", "dgst", "-sha256", raw})
	if err != nil {
		return 0, "", err
	}
	total += d
	return total, "zstd -d + openssl dgst -sha256 of the compressed chunk and of the raw file (user + system CPU, median of 3 each)", nil
}

// sha256Rate is this machine's sha256 rate on one goroutine, MB/s.
func sha256Rate() (float64, error) {
	b := make([]byte, 64<<20)
	t0 := time.Now()
	_ = sha256.Sum256(b)
	return float64(len(b)) / 1e6 / max(time.Since(t0).Seconds(), 1e-9), nil
}

// toolCPU runs cmd three times and returns the median of its user +
// system CPU time.
func toolCPU(cmd []string) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < 3; i++ {
		c := exec.Command(cmd[0], cmd[1:]...)
		c.Stdout = io.Discard
		var stderr bytes.Buffer
		c.Stderr = &stderr
		if err := c.Run(); err != nil {
			return 0, fmt.Errorf("floor: %v: %w (%s)", cmd, err, stderr.String())
		}
		if c.ProcessState == nil {
			return 0, errors.New("floor: no process state")
		}
		ds = append(ds, c.ProcessState.UserTime()+c.ProcessState.SystemTime())
	}
	slices.Sort(ds)
	return ds[1], nil
}
