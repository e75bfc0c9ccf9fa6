package kmerge

import "os"

// MaxRuns bounds the run files an external sort merges at once (each open
// run holds a decoder or a page per column): at that many, Compact merges
// them into one first, so a sort of any length keeps at most MaxRuns open.
const MaxRuns = 16

// Compact returns runs as they are while there are fewer than MaxRuns. At
// MaxRuns it has merge write all of them, in order, to the file name()
// returns, removes them, and returns that one file in their place (reusing
// runs' storage). On an error runs are returned as they were.
func Compact(runs []string, name func() string, merge func(out string, runs []string) error) ([]string, error) {
	if len(runs) < MaxRuns {
		return runs, nil
	}
	out := name()
	if err := merge(out, runs); err != nil {
		return runs, err
	}
	for _, r := range runs {
		os.Remove(r)
	}
	return append(runs[:0], out), nil
}
