package replay

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/fserr"
	"github.com/tokentrace/tokentrace/traces"
)

// JournalPath is the journal that goes with a results file: finished
// requests are appended to it while the replay runs, so they survive a
// SIGKILL. It is a JSONL results file (metadata line first) that inspect and
// analyze read as is; a torn last line is skipped as malformed. Results
// sent to the null device (a run for its checks alone) have none: "".
func JournalPath(out string) string {
	if out == os.DevNull {
		return ""
	}
	return out + ".journal.jsonl"
}

// IncompleteJournalPath is where a journal that could not be written to the
// end is left, so that its name says it is cut short.
func IncompleteJournalPath(journal string) string {
	return strings.TrimSuffix(journal, ".jsonl") + ".incomplete.jsonl"
}

// JournalError reports a journal write that failed during a run. The run
// stopped sending at the failure (in-flight requests got Options.Drain to
// finish) and its Result still holds every finished request; the journal
// holds only those written before the failure.
type JournalError struct {
	// Path is where the incomplete journal now is (IncompleteJournalPath of
	// Options.Journal, or Options.Journal if it could not be renamed).
	Path string
	Err  error
}

func (e *JournalError) Error() string {
	return fmt.Sprintf("journal write failed, sending stopped: %v; %s is incomplete", e.Err, e.Path)
}

func (e *JournalError) Unwrap() error { return e.Err }

// journalFile is what the journal writes to: an *os.File, or a fake that
// fails in tests.
type journalFile interface {
	io.Writer
	Sync() error
	Close() error
	Stat() (os.FileInfo, error)
}

// createJournal opens the journal file; tests replace it.
var createJournal = func(path string) (journalFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
}

// journal appends records as JSON lines and fsyncs on demand.
type journal struct {
	path string
	f    journalFile
	bw   *bufio.Writer
	buf  []byte
}

func openJournal(path string, m traces.Meta) (*journal, error) {
	f, err := createJournal(path)
	if err != nil {
		return nil, fserr.Wrap("replay: create journal", path, err)
	}
	j := &journal{path: path, f: f, bw: bufio.NewWriterSize(f, 256<<10)}
	if m.SchemaVersion == "" {
		m.SchemaVersion = traces.SchemaVersion
	}
	hdr, err := json.Marshal(map[string]traces.Meta{"tokentrace_meta": m.Redacted()})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("replay: journal metadata: %w", err)
	}
	j.bw.Write(hdr)
	j.bw.WriteByte('\n')
	if err := j.sync(); err != nil {
		f.Close()
		os.Remove(path) // a journal that cannot take its first line holds nothing
		return nil, fmt.Errorf("replay: write journal: %w", err)
	}
	return j, nil
}

func (j *journal) write(recs []traces.Record) error {
	// The JSONL codec's own encoder: 0.18 ms per 1,250 rows (one 250 ms
	// flush at 5k req/s) against 1.9 ms with encoding/json, a burst that
	// made the dispatcher late on a single core.
	for i := range recs {
		j.buf = traces.AppendJSONL(j.buf[:0], &recs[i])
		j.buf = append(j.buf, '\n')
		if _, err := j.bw.Write(j.buf); err != nil {
			return err
		}
	}
	return nil
}

func (j *journal) sync() error {
	if err := j.bw.Flush(); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	// Writes to a journal whose directory was removed (or that was replaced)
	// succeed on the open file but reach nothing anyone can read: check that
	// the name still leads to this file.
	fi, err := j.f.Stat()
	if err != nil {
		return err
	}
	if pi, err := os.Stat(j.path); err != nil || !os.SameFile(fi, pi) {
		return fmt.Errorf("%s was removed or replaced during the run", j.path)
	}
	return nil
}

// abandon closes and removes a journal that holds no request (the run
// never started); nil does nothing.
func (j *journal) abandon() {
	if j == nil {
		return
	}
	j.f.Close()
	os.Remove(j.path)
}

func (j *journal) close() error {
	err := j.sync()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// journalLoop appends finished records to the journal every JournalSync and
// fsyncs, until r.jstop closes; then it writes the rest and closes. The
// first failed write stops sending at once: a run that goes on would hold
// requests nothing on disk keeps if the process died.
func (r *runner) journalLoop(j *journal) error {
	t := time.NewTicker(r.o.JournalSync)
	defer t.Stop()
	var werr error
	// With RecordsInJournal the journal is where records live: a batch
	// leaves memory once written. After a failed write every later batch
	// stays in memory (Result.Records), and so does the failed one: its
	// rows may be in the journal in part, so the caller skips the journal
	// rows whose seq Result.Records holds.
	flush := func() {
		r.mu.Lock()
		drop := r.o.RecordsInJournal && werr == nil
		var batch [][]traces.Record
		if drop {
			batch, r.journaled = r.done.take(), 0
		} else {
			batch, r.journaled = r.done.since(r.journaled), r.done.n
		}
		r.mu.Unlock()
		if count(batch) == 0 || werr != nil {
			return
		}
		for _, c := range batch {
			if r.o.RecordsInJournal {
				r.withClasses(c)
			}
			if werr = j.write(c); werr != nil {
				break
			}
			// A chunk at a time (about 70 µs): the dispatcher may be
			// waiting for this P (collectPiece).
			runtime.Gosched()
		}
		if werr == nil {
			werr = j.sync()
		}
		if werr == nil {
			if drop {
				r.mu.Lock()
				r.done.reuse(batch)
				r.mu.Unlock()
			}
			return
		}
		if drop {
			r.mu.Lock()
			r.done.putBack(batch)
			r.journaled = r.done.n
			r.mu.Unlock()
		}
		r.stopSend()
		if r.o.Log != nil {
			fmt.Fprintf(r.o.Log, "replay: journal write failed (%v): sending stopped, in-flight requests get the drain time\n", werr)
		}
	}
	for {
		select {
		case <-t.C:
			flush()
		case <-r.jstop:
			flush()
			if err := j.close(); werr == nil {
				werr = err
			}
			return werr
		}
	}
}
