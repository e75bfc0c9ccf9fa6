package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tokentrace/tokentrace/replay"
	"github.com/tokentrace/tokentrace/traces"
)

// TestImportSIGTERMStopsALongLine: an import in the middle of an endless
// line (a child process reading a pipe that never ends the line) stops
// on SIGTERM at once, whichever way the importer reads (a line at a time,
// the whole input before the first row, JSON documents, CSV): it exits 1
// saying it was interrupted, reads almost nothing after the signal (a
// count, not a time: the pipe's and the reader's buffers), and leaves no
// output and no temporary file. The same holds when the input stalls
// (the read is blocked on a pipe that sends nothing). The time it took is
// logged; the hang guard is generous because the machine may be loaded.
func TestImportSIGTERMStopsALongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("signals a child process")
	}
	for _, c := range []struct{ format, head, fill string }{
		{"mooncake", `{"timestamp": 0, "input_length": 1, "output_length": 1}` + "\n" + `{"hash_ids": [`, "1,"},
		{"dynamo", `{"hash_ids": [`, "1,"},
		{"weka", `{"requests": [`, "1,"},
		{"azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n", "1"},
		{"mooncake", `{"timestamp": 0, "input_length": 1, "output_length": 1}` + "\n" + `{"hash_ids": [`, ""}, // stalls
	} {
		dir := t.TempDir()
		out := filepath.Join(dir, "t.parquet")
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{"tokentrace", "import", "--format", c.format, "--out", out, "-"}, "\x1f"))
		pr, stdin, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdin = pr
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pr.Close()
		var written atomic.Int64
		stalled := make(chan struct{})
		defer close(stalled)
		go func() {
			defer stdin.Close()
			if _, err := stdin.Write([]byte(c.head)); err != nil {
				return
			}
			written.Add(int64(len(c.head)))
			if c.fill == "" {
				<-stalled // a producer that stalls, with the pipe open
				return
			}
			chunk := bytes.Repeat([]byte(c.fill), 32<<10)
			for {
				n, err := stdin.Write(chunk)
				written.Add(int64(n))
				if err != nil {
					return
				}
			}
		}()
		if c.fill == "" {
			// The child has read the head once the pipe is empty: it is
			// past installing its signal handler, reading.
			waitFor(t, func() bool { return written.Load() > 0 && pipeBuffered(t, stdin) == 0 }, "the input's head read")
			time.Sleep(100 * time.Millisecond) // the import is blocked reading
		} else {
			waitFor(t, func() bool { return written.Load() > 16<<20 }, "16 MiB read by "+c.format)
		}
		done := make(chan error, 1)
		at, sent := time.Now(), written.Load()
		cmd.Process.Signal(syscall.SIGTERM)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("import --format %s was still running 10 s after SIGTERM", c.format)
		}
		took, after := time.Since(at), written.Load()-sent
		t.Logf("import --format %s: stopped %v after SIGTERM, having read %d KiB more", c.format, took.Round(time.Millisecond), after>>10)
		if code := cmd.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(stderr.String(), "context canceled") {
			t.Errorf("import --format %s after SIGTERM: exit %d (%v), want 1 saying it was interrupted:\n%s", c.format, code, err, stderr.String())
		}
		// The pipe holds 64 KiB and the readers 64-256 KiB each.
		if after > 2<<20 {
			t.Errorf("import --format %s read %d KiB after SIGTERM, want at most 2 MiB", c.format, after>>10)
		}
		if left, _ := os.ReadDir(dir); len(left) > 0 {
			t.Errorf("import --format %s left %s after SIGTERM", c.format, left[0].Name())
		}
	}
}

// pipeBuffered is the number of bytes written to a pipe and not yet read.
func pipeBuffered(t *testing.T, w *os.File) int {
	rc, err := w.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	var errno syscall.Errno
	rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n)))
	})
	if errno != 0 {
		t.Fatalf("FIONREAD on the child's standard input: %v", errno)
	}
	return int(n)
}

// TestReplayWarnsOfALongWait: a trace whose last row is two hours after
// the others: replay says so before it waits (the wait, the row, what
// shortens it), rather than looking hung, and stops on a cancel while it
// waits, writing what finished.
func TestReplayWarnsOfALongWait(t *testing.T) {
	t.Parallel()
	recs := evenRecords(3, time.Millisecond, 32, 2)
	recs[2].ArrivalNs = int64(2 * time.Hour)
	dir := t.TempDir()
	trace, out := filepath.Join(dir, "t.jsonl"), filepath.Join(dir, "r.jsonl")
	writeTrace(t, trace, traces.NewMeta("test"), recs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuf
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"tokentrace", "replay", "--max-lateness", "1m", "--out", out, trace}, strings.NewReader(""), io.Discard, &stderr)
	}()
	const want = "warning: the run waits 2h0m0s with nothing to send before seq 2 (at --speed 1); --window FROM,TO or a higher --speed shortens it"
	waitFor(t, func() bool { return strings.Contains(stderr.String(), want) }, "the long wait's warning")
	waitFor(t, func() bool { got, _, _ := traces.ReadAll(replay.JournalPath(out)); return len(got) == 2 }, "the first two requests in the journal")
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("replay did not stop on cancel while waiting")
	}
	if got, _, err := traces.ReadAll(out); err != nil || len(got) != 2 {
		t.Errorf("interrupted while waiting: %d results, %v; want the 2 sent", len(got), err)
	}
}
