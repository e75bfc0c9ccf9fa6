package main

import (
	"github.com/tokentrace/tokentrace/traces"
	"github.com/urfave/cli/v2"
)

// sortFlags are the Parquet writer's sort budget and spill directory, for
// the commands whose rows may come out of arrival order (import, replay's
// results in completion order); capture has its own, shared with its
// request sort.
type sortFlags struct {
	mib int
	dir string
}

func (f *sortFlags) flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "sort-memory-mib", Value: traces.DefaultSortMemoryBytes >> 20, Usage: "memory for sorting a Parquet output by arrival; beyond it sorted runs spill to --temp-dir", Destination: &f.mib},
		&cli.StringFlag{Name: "temp-dir", Usage: "where sorted runs spill (removed at the end; default: $TMPDIR or /tmp)", Destination: &f.dir},
	}
}

func (f *sortFlags) options() (traces.CreateOptions, error) {
	if f.mib < 1 {
		return traces.CreateOptions{}, usageErrorf("--sort-memory-mib %d: want at least 1", f.mib)
	}
	o := traces.DefaultCreateOptions()
	o.SortMemoryBytes, o.TempDir = int64(f.mib)<<20, f.dir
	return o, nil
}
