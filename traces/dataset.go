package traces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tokentrace/tokentrace/internal/fserr"
)

// A dataset is a trace stored as several time-ordered part files: a
// directory of them, or a glob pattern. Open reads it as one trace, a part
// at a time, in name order (name parts so that this is time order, e.g.
// part-00001.parquet).

// partExts are the files of a dataset directory.
var partExts = []string{".parquet", ".jsonl", ".jsonl.zst", ".csv", ".csv.zst"}

// DatasetParts returns the part files name stands for when it is a
// directory or a glob pattern that is not itself a file, in name order;
// nil when name is one file (or stdin).
func DatasetParts(name string) ([]string, error) {
	if name == "-" {
		return nil, nil
	}
	fi, err := os.Stat(name)
	switch {
	case err == nil && fi.IsDir():
		es, err := os.ReadDir(name)
		if err != nil {
			return nil, fserr.Wrap("open dataset", name, err)
		}
		var parts []string
		for _, e := range es {
			n := e.Name()
			if e.IsDir() || strings.HasPrefix(n, ".") {
				continue // hidden: partial and set-aside outputs
			}
			if slices.ContainsFunc(partExts, func(ext string) bool { return strings.HasSuffix(strings.ToLower(n), ext) }) {
				parts = append(parts, filepath.Join(name, n))
			}
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("open dataset %s: no trace files (%s) in the directory", name, strings.Join(partExts, ", "))
		}
		return parts, nil
	case err == nil:
		return nil, nil
	case strings.ContainsAny(name, "*?["):
		parts, gerr := filepath.Glob(name)
		if gerr != nil {
			return nil, fmt.Errorf("open dataset %q: %w", name, gerr)
		}
		if len(parts) == 0 {
			return nil, fmt.Errorf("open dataset %q: no file matches", name)
		}
		return parts, nil
	}
	return nil, nil
}

// datasetReader reads the parts one after the other. Its Meta is the first
// part's; a part that starts before the previous one ended is an error
// naming both, since the stream would no longer be in arrival order.
type datasetReader struct {
	parts []string
	o     OpenOptions
	i     int
	cur   Reader
	meta  Meta
	stats ReadStats // of the parts done
	last  int64     // the previous part's last arrival
	seen  bool      // a row of the previous parts was read
	first bool      // no row of the current part read yet
	err   error
}

func openDataset(parts []string, o OpenOptions) (Reader, error) {
	d := &datasetReader{parts: parts, o: o}
	r, err := openPart(parts[0], o)
	if err != nil {
		return nil, err
	}
	d.cur, d.meta, d.first = r, r.Meta(), true
	d.meta.Set("dataset.parts", fmt.Sprint(len(parts)))
	return d, nil
}

func (d *datasetReader) Meta() Meta { return d.meta }

func (d *datasetReader) Stats() ReadStats {
	s := d.stats
	if d.cur != nil {
		s.merge(d.cur.Stats())
	}
	return s
}

func (d *datasetReader) Read(recs []Record) (int, error) {
	for d.err == nil {
		n, err := d.cur.Read(recs)
		if n > 0 {
			if d.first && d.seen && recs[0].ArrivalNs < d.last {
				d.err = fmt.Errorf("%w: dataset part %s starts at arrival_ns %d, before the previous part %s ended (%d): parts must be in time order by name",
					ErrMalformed, d.parts[d.i], recs[0].ArrivalNs, d.parts[d.i-1], d.last)
				return 0, d.err
			}
			d.first = false
			d.last = max(d.last, recs[n-1].ArrivalNs)
		}
		if err != io.EOF {
			if err != nil {
				d.err = err // names the part (RowError.File)
			}
			return n, err
		}
		// This part is done: on to the next.
		if err := d.next(); err != nil {
			d.err = err
			return n, err
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, d.err
}

// next closes the current part and opens the following one (io.EOF after
// the last).
func (d *datasetReader) next() error {
	s := d.cur.Stats()
	d.stats.merge(s)
	d.seen = d.seen || s.Rows > 0
	cerr := d.cur.Close()
	d.cur = nil
	if cerr != nil {
		return fmt.Errorf("close dataset part %s: %w", d.parts[d.i], cerr)
	}
	d.i++
	if d.i == len(d.parts) {
		return io.EOF
	}
	r, err := openPart(d.parts[d.i], d.o)
	if err != nil {
		return err // names the part
	}
	if m := r.Meta(); m.SchemaVersion != "" && d.meta.SchemaVersion != "" && m.SchemaVersion != d.meta.SchemaVersion {
		r.Close()
		return fmt.Errorf("%w: dataset part %s has schema %s, the first part %s", ErrMalformed, d.parts[d.i], m.SchemaVersion, d.meta.SchemaVersion)
	}
	d.cur, d.first = r, true
	return nil
}

func (d *datasetReader) Close() error {
	if d.cur == nil {
		return nil
	}
	err := d.cur.Close()
	d.cur = nil
	if errors.Is(d.err, io.EOF) {
		return nil
	}
	return err
}

// openPart opens one part file of a dataset with its codec's reader: the
// damage and bad rows of a part are the dataset's, which OpenWith checks
// once for all its parts.
func openPart(name string, o OpenOptions) (Reader, error) {
	r, err := openWith(name, o)
	if err != nil {
		return nil, err
	}
	if m := r.Meta(); m.KAnonDeferred() && !o.AllowDeferred {
		r.Close()
		return nil, fmt.Errorf("open trace %s: %w", name, ErrKAnonDeferred)
	}
	return r, nil
}
