package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wharf-s3/wharf/archiveview"
	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/catalog/dataset"
)

// runInspect opens one archive (manifest chain, resolution, index; no chunk
// bytes are read) and prints its summary, as text or (--json) as one JSON
// object (inspectJSON).
func runInspect(ctx context.Context, args []string) error {
	return inspect(ctx, args, os.Stdout)
}

func inspect(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	sf := addStoreFlags(fs)
	asJSON := fs.Bool("json", false, "print the facts as one JSON object (field names in README)")
	histLimit := fs.Int("dataset-history", catalog.DefaultDatasetHistory, "for a dataset name: the published versions its history counts at most")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf inspect [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] [--json] MANIFEST_URL|s3://BUCKET/DATASET@current|@<version_id>")
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageErr(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return usageErr(fmt.Errorf("want exactly one MANIFEST_URL, got %d arguments", len(pos)))
	}
	if *histLimit < 1 || *histLimit > catalog.MaxDatasetHistory {
		return usageErr(fmt.Errorf("--dataset-history %d: want 1 to %d", *histLimit, catalog.MaxDatasetHistory))
	}
	t, err := sf.openTarget(ctx, pos[0])
	if err != nil {
		return err
	}
	a, err := t.open(ctx, archiveview.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	ds := t.datasetJSON(a.Info())
	if ds != nil {
		// The history's length: one listing of DATASET/v/, no version opened.
		cur, prev := t.historyCurrent(a)
		chain, ended, err := catalog.HistoryChain(ctx, t.store, t.dataset.Ref, cur, prev, *histLimit)
		if err != nil {
			return err
		}
		ds.History = &inspectHistoryJSON{Versions: len(chain), Ended: ended}
		for _, v := range chain {
			ds.History.VersionIDs = append(ds.History.VersionIDs, v.ID)
		}
	}
	if *asJSON {
		return printInfoJSON(out, t.bucket, a.Info(), ds)
	}
	out = printableWriter{out} // upload ids, keys and warnings come from the manifest
	printInfo(out, a.Info())
	if ds != nil {
		printDataset(out, ds)
	}
	return nil
}

// inspectDatasetJSON is inspect --json's "dataset" object, present when
// MANIFEST_URL names a published dataset (@current or @<version_id>).
// Pointer is the CURRENT read (null for a pinned version, whose pointer
// is not read); Warnings the pointer's file_count and total_bytes that
// disagree with the manifest (the manifest decides).
type inspectDatasetJSON struct {
	Dataset   string           `json:"dataset"`
	Follows   bool             `json:"follows_current"`
	VersionID string           `json:"version_id"`
	Pointer   *dataset.Pointer `json:"pointer"`
	Warnings  []string         `json:"warnings"`
	// History is the version history wharf serve's ListObjectVersions
	// walks for this version (at most --dataset-history versions).
	History *inspectHistoryJSON `json:"history"`
}

// inspectHistoryJSON is the dataset object's "history": its length, the
// published version ids newest first (the served one first), and why it
// ends there.
type inspectHistoryJSON struct {
	Versions   int      `json:"versions"`
	VersionIDs []string `json:"version_ids"`
	Ended      string   `json:"ended"`
}

func (t target) datasetJSON(in archiveview.Info) *inspectDatasetJSON {
	if t.dataset == nil {
		return nil
	}
	d := &inspectDatasetJSON{Dataset: t.dataset.Ref.URL(), Follows: t.dataset.Ref.Version == "",
		VersionID: t.dataset.Pointer.VersionID, Warnings: t.countWarnings(in)}
	if d.Follows {
		p := t.dataset.Pointer
		d.Pointer = &p
	}
	if d.Warnings == nil {
		d.Warnings = []string{}
	}
	return d
}

func printDataset(w io.Writer, d *inspectDatasetJSON) {
	fmt.Fprintf(w, "dataset:            %s\n", d.Dataset)
	if d.Follows {
		fmt.Fprintf(w, "version served:     %s (CURRENT)\n", d.VersionID)
		p := d.Pointer
		fmt.Fprintf(w, "pointer:            created %s, previous %s, file_count %d, total_bytes %d, index_key %s\n",
			p.Created, p.PreviousVersionID, p.FileCount, p.TotalBytes, p.IndexKey)
	} else {
		fmt.Fprintf(w, "version served:     %s (pinned)\n", d.VersionID)
	}
	for _, s := range d.Warnings {
		fmt.Fprintf(w, "pointer warning:    %s\n", s)
	}
	if h := d.History; h != nil {
		fmt.Fprintf(w, "history:            %d published version(s), newest first %s; it ends: %s\n", h.Versions, strings.Join(h.VersionIDs, " "), h.Ended)
	}
}

// inspectJSON is inspect --json's object: the facts of the text form.
// Field names are part of the CLI contract (README): add fields, never
// rename them. Lists are never null.
type inspectJSON struct {
	UploadID          string   `json:"upload_id"`
	Version           string   `json:"version"`
	Bucket            string   `json:"bucket"`
	Manifest          string   `json:"manifest"` // object key of the newest manifest
	Chain             []string `json:"chain"`    // upload ids, newest first
	Files             int      `json:"files"`
	Chunks            int      `json:"chunks"`
	Frames            int      `json:"frames"`
	CompressedBytes   int64    `json:"compressed_bytes"`
	UncompressedBytes int64    `json:"uncompressed_bytes"`
	Shapes            []string `json:"shapes"`
	Warnings          []string `json:"warnings"`
	// Unverifiable counts files no checksum covers (served as stored),
	// with a sample of their keys.
	Unverifiable       int      `json:"unverifiable_files"`
	UnverifiableSample []string `json:"unverifiable_sample"`
	// Dataset is set when MANIFEST_URL names a published dataset.
	Dataset *inspectDatasetJSON `json:"dataset,omitempty"`
}

func printInfoJSON(w io.Writer, bucket string, in archiveview.Info, ds *inspectDatasetJSON) error {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	enc := json.NewEncoder(jsonSafeWriter{w})
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(inspectJSON{
		UploadID: in.UploadID, Version: in.Version, Bucket: bucket, Manifest: in.ManifestKey,
		Chain: nonNil(in.Chain), Files: in.Files, Chunks: in.Chunks, Frames: in.Frames,
		CompressedBytes: in.CompressedBytes, UncompressedBytes: in.UncompressedBytes,
		Shapes: nonNil(in.Shapes), Warnings: nonNil(in.Warnings),
		Unverifiable: in.Unverifiable, UnverifiableSample: nonNil(in.UnverifiableSample),
		Dataset: ds,
	})
}

func printInfo(w io.Writer, in archiveview.Info) {
	fmt.Fprintf(w, "id:                 %s\n", in.UploadID)
	fmt.Fprintf(w, "version:            %s\n", in.Version)
	fmt.Fprintf(w, "manifest:           %s\n", in.ManifestKey)
	fmt.Fprintf(w, "chain:              %s\n", strings.Join(in.Chain, " <- "))
	fmt.Fprintf(w, "files:              %d\n", in.Files)
	fmt.Fprintf(w, "chunks:             %d\n", in.Chunks)
	fmt.Fprintf(w, "frames:             %d\n", in.Frames)
	fmt.Fprintf(w, "compressed bytes:   %d\n", in.CompressedBytes)
	fmt.Fprintf(w, "uncompressed bytes: %d\n", in.UncompressedBytes)
	fmt.Fprintf(w, "shapes:             %s\n", strings.Join(in.Shapes, ", "))
	fmt.Fprintf(w, "unverifiable files: %d", in.Unverifiable)
	if in.Unverifiable > 0 {
		fmt.Fprintf(w, " (no checksum covers them; served as stored), e.g. %s", strings.Join(in.UnverifiableSample, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "warnings:           %d\n", len(in.Warnings))
	for _, s := range in.Warnings {
		fmt.Fprintf(w, "  - %s\n", s)
	}
}
