package main

// The opening limits of "wharf serve": the open deadline, the index
// memory budget of discovered uploads and their file cap
// (catalog.Config). They are one struct, inline in both serveConfig and
// the YAML file, so the flags, the keys and their validation live here.

import (
	"flag"
	"fmt"
	"time"

	"github.com/wharf-s3/wharf/archiveview/catalog"
	"github.com/wharf-s3/wharf/archiveview/manifest"
)

// Bounds of the opening limits.
const (
	minOpenTimeout  = time.Second
	maxOpenTimeout  = time.Hour
	minIndexMemory  = 16 << 20
	maxIndexMemory  = 1 << 40
	minFilesPerLoad = 1000
)

// openLimits are --open-timeout, --index-memory,
// --max-files-per-upload and --dataset-history (YAML open_timeout,
// index_memory, max_files_per_upload, dataset_history).
type openLimits struct {
	OpenTimeout       time.Duration `yaml:"open_timeout"`
	IndexMemory       yamlBytes     `yaml:"index_memory"`
	MaxFilesPerUpload int           `yaml:"max_files_per_upload"`
	// DatasetHistory: the published versions a dataset bucket's version
	// history holds at most (each is opened once to build it).
	DatasetHistory int `yaml:"dataset_history"`
}

func defaultOpenLimits() openLimits {
	return openLimits{
		OpenTimeout:       catalog.DefaultOpenTimeout,
		IndexMemory:       yamlBytes(catalog.DefaultIndexMemory),
		MaxFilesPerUpload: catalog.DefaultMaxFilesPerUpload,
		DatasetHistory:    catalog.DefaultDatasetHistory,
	}
}

// openLimitFlags registers the flags on fs.
func openLimitFlags(fs *flag.FlagSet, ol *openLimits) {
	durationVar(fs, &ol.OpenTimeout, "open-timeout", ol.OpenTimeout,
		"one archive's open (manifest GETs and index build, or index cache HEADs) and its wait for index memory each end within this; then that bucket alone answers 503 SlowDown until a rescan retries it")
	fs.Var((*byteSize)(&ol.IndexMemory), "index-memory",
		"index memory all discovered and aliased uploads may hold, open or opening (e.g. 1GiB); an open waits while it is used, up to --open-timeout")
	fs.IntVar(&ol.MaxFilesPerUpload, "max-files-per-upload", ol.MaxFilesPerUpload,
		"files one manifest of a discovered or aliased upload may list; a larger one fails to open, naming the flag (0 = the default)")
	fs.IntVar(&ol.DatasetHistory, "dataset-history", ol.DatasetHistory,
		"published versions a dataset bucket's version history (ListObjectVersions, versionId=) holds at most, the served one included; built on first use by opening each older version once (1 to 10000; 0 = the default)")
}

// validate checks the limits at start; a zero field takes its default.
func (ol openLimits) validate() error {
	def := defaultOpenLimits()
	if ol.OpenTimeout == 0 {
		ol.OpenTimeout = def.OpenTimeout
	}
	if ol.IndexMemory == 0 {
		ol.IndexMemory = def.IndexMemory
	}
	if ol.MaxFilesPerUpload == 0 {
		ol.MaxFilesPerUpload = def.MaxFilesPerUpload
	}
	if ol.DatasetHistory == 0 {
		ol.DatasetHistory = def.DatasetHistory
	}
	if ol.DatasetHistory < 1 || ol.DatasetHistory > catalog.MaxDatasetHistory {
		return fmt.Errorf("--dataset-history %d: want 1 to %d (default %d)", ol.DatasetHistory, catalog.MaxDatasetHistory, catalog.DefaultDatasetHistory)
	}
	if ol.OpenTimeout < minOpenTimeout || ol.OpenTimeout > maxOpenTimeout {
		return fmt.Errorf("--open-timeout %s: want %s to %s (default %s)", ol.OpenTimeout, minOpenTimeout, maxOpenTimeout, catalog.DefaultOpenTimeout)
	}
	if ol.IndexMemory < minIndexMemory || ol.IndexMemory > maxIndexMemory {
		return fmt.Errorf("--index-memory %d: want 16MiB to 1TiB (default %d)", ol.IndexMemory, catalog.DefaultIndexMemory)
	}
	if ol.MaxFilesPerUpload < minFilesPerLoad || ol.MaxFilesPerUpload > manifest.DefaultMaxFiles {
		return fmt.Errorf("--max-files-per-upload %d: want %d to %d (default %d)", ol.MaxFilesPerUpload, minFilesPerLoad, manifest.DefaultMaxFiles, catalog.DefaultMaxFilesPerUpload)
	}
	if need := int64(ol.MaxFilesPerUpload) * catalog.IndexBytesPerFile; need > int64(ol.IndexMemory) {
		return fmt.Errorf("--max-files-per-upload %d needs %d bytes of index memory at %d bytes per file, more than --index-memory %d: lower it or raise --index-memory",
			ol.MaxFilesPerUpload, need, catalog.IndexBytesPerFile, ol.IndexMemory)
	}
	return nil
}
