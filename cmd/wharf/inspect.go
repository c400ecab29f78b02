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
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: wharf inspect [--store URL] [--s3-endpoint URL --s3-region R --s3-path-style --s3-access-key AK --s3-secret-key SK] [--json] MANIFEST_URL")
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
	store, bucket, key, err := sf.openManifest(ctx, pos[0])
	if err != nil {
		return err
	}
	a, err := archiveview.Open(ctx, store, bucket, key, archiveview.Options{})
	if err != nil {
		return err
	}
	defer a.Close()
	if *asJSON {
		return printInfoJSON(out, bucket, a.Info())
	}
	printInfo(out, a.Info())
	return nil
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
}

func printInfoJSON(w io.Writer, bucket string, in archiveview.Info) error {
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(inspectJSON{
		UploadID: in.UploadID, Version: in.Version, Bucket: bucket, Manifest: in.ManifestKey,
		Chain: nonNil(in.Chain), Files: in.Files, Chunks: in.Chunks, Frames: in.Frames,
		CompressedBytes: in.CompressedBytes, UncompressedBytes: in.UncompressedBytes,
		Shapes: nonNil(in.Shapes), Warnings: nonNil(in.Warnings),
		Unverifiable: in.Unverifiable, UnverifiableSample: nonNil(in.UnverifiableSample),
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
