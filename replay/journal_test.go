package replay

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// fullFile is a journal file on a disk that fills up after limit bytes: the
// write that crosses the limit stores what fits and fails with ENOSPC, as a
// real full disk does.
type fullFile struct {
	*os.File
	mu    sync.Mutex
	limit int
	n     int
}

func (f *fullFile) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	room := max(f.limit-f.n, 0)
	if len(p) <= room {
		f.n += len(p)
		return f.File.Write(p)
	}
	n, _ := f.File.Write(p[:room])
	f.n += n
	return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
}

// journalOnFullDisk makes the journals of this test land on a disk that
// fills up after limit bytes, and returns the journal path of a results
// file res.parquet in a fresh folder.
func journalOnFullDisk(t *testing.T, limit int) (jpath string) {
	c := createJournal
	t.Cleanup(func() { createJournal = c })
	createJournal = func(path string) (journalFile, error) {
		of, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		return &fullFile{File: of, limit: limit}, nil
	}
	return JournalPath(filepath.Join(t.TempDir(), "res.parquet"))
}

// TestJournalFailureStopsSending checks what a failed journal write does to
// a run: sending stops at once (most of the trace is not sent), the notice
// goes to Options.Log while the run goes on, Run returns a *JournalError
// that wraps the disk's error, the journal is renamed to say it is
// incomplete, and the Result still holds every request that finished.
func TestJournalFailureStopsSending(t *testing.T) {
	f := newFake(time.Millisecond)
	defer f.Close()
	jpath := journalOnFullDisk(t, 4096)
	recs := testTrace(1000, 3*time.Millisecond, 4, 3) // 3 s of trace
	o := f.options()
	o.Journal = jpath
	o.JournalSync = 20 * time.Millisecond
	o.Drain = 2 * time.Second
	var log syncBuffer
	o.Log = &log
	res, err := Run(context.Background(), recs, traces.NewMeta("t"), o)
	var je *JournalError
	if !errors.As(err, &je) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run = %v, want a *JournalError wrapping ENOSPC", err)
	}
	if je.Path != IncompleteJournalPath(jpath) || !strings.Contains(err.Error(), "is incomplete") {
		t.Errorf("JournalError %q names %s, want %s and the word incomplete", err, je.Path, IncompleteJournalPath(jpath))
	}
	if _, err := os.Stat(jpath); !os.IsNotExist(err) {
		t.Errorf("the journal's own name %s still exists (%v); an incomplete journal must not keep it", jpath, err)
	}
	if !strings.Contains(log.String(), "journal write failed") || !strings.Contains(log.String(), "sending stopped") {
		t.Errorf("Options.Log got %q, want the failure at once", log.String())
	}
	if res == nil {
		t.Fatal("no Result after a journal failure")
	}
	if res.Summary.NotSent < 500 || len(res.Records)+res.Summary.NotSent != 1000 {
		t.Errorf("%d finished, %d not sent: sending did not stop at the failure", len(res.Records), res.Summary.NotSent)
	}
	got, _, rerr := traces.ReadAll(je.Path)
	if rerr != nil && !errors.Is(rerr, traces.ErrTruncated) {
		t.Fatalf("read the incomplete journal: %v", rerr)
	}
	if len(got) == 0 || len(got) >= len(res.Records) {
		t.Errorf("incomplete journal has %d rows, results %d: want some, but fewer", len(got), len(res.Records))
	}
}

// TestJournalUnwritableAtStart checks that a journal whose first line cannot
// be written fails the run before anything is sent, and leaves no file.
func TestJournalUnwritableAtStart(t *testing.T) {
	f := newFake(0)
	defer f.Close()
	jpath := journalOnFullDisk(t, 10)
	dir := filepath.Dir(jpath)
	o := f.options()
	o.Journal = jpath
	o.Warmup = 0
	res, err := Run(context.Background(), testTrace(10, time.Millisecond, 4, 2), traces.NewMeta("t"), o)
	if res != nil || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run = %v, %v; want no result and ENOSPC", res, err)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent with no journal", n)
	}
	if es, _ := os.ReadDir(dir); len(es) != 0 {
		t.Errorf("%d files left, want none (%s)", len(es), es[0].Name())
	}
}

// Results sent to the null device have no journal beside them: it would be
// a file created in /dev.
func TestJournalPathDevNull(t *testing.T) {
	if p := JournalPath(os.DevNull); p != "" {
		t.Errorf("JournalPath(%s) = %q, want none", os.DevNull, p)
	}
	if p := JournalPath("res.parquet"); p != "res.parquet.journal.jsonl" {
		t.Errorf("JournalPath(res.parquet) = %q", p)
	}
}
