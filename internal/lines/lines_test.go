package lines

import (
	"bufio"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// read returns every line of in read with limit max, a long line as
// "!N" (its number) and the error that ended the input.
func read(t *testing.T, in string, max, bufSize int) ([]string, error) {
	t.Helper()
	r := NewReader(bufio.NewReaderSize(strings.NewReader(in), bufSize), max)
	var got []string
	for {
		l, err := r.Next()
		var tl *TooLongError
		switch {
		case errors.As(err, &tl):
			if tl.Line != r.Line() {
				t.Errorf("too long line %d, reader at line %d", tl.Line, r.Line())
			}
			got = append(got, "!"+strings.Repeat("x", int(tl.Bytes-int64(tl.Max))))
			continue
		case err == io.EOF:
			return got, nil
		case err != nil:
			return got, err
		}
		got = append(got, string(l))
	}
}

func TestReaderSkipsLongLines(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     string
	}{
		{"short lines", "a\nbb\n\nccc\n", "a|bb||ccc"},
		{"CRLF", "a\r\nbb\r\n", "a|bb"},
		{"no final newline", "a\nbb", "a|bb"},
		{"exactly the limit", "12345678\n", "12345678"},
		{"one over", "123456789\nok\n", "!x|ok"},
		{"long within the buffer", strings.Repeat("y", 12) + "\nok", "!xxxx|ok"},
		{"long across buffers", "ok\n" + strings.Repeat("y", 100) + "\nok2\n", "ok|!" + strings.Repeat("x", 92) + "|ok2"},
		{"long and last", "ok\n" + strings.Repeat("y", 100), "ok|!" + strings.Repeat("x", 92)},
		{"two long in a row", strings.Repeat("y", 40) + "\n" + strings.Repeat("z", 41) + "\nend\n", "!" + strings.Repeat("x", 32) + "|!" + strings.Repeat("x", 33) + "|end"},
	} {
		got, err := read(t, c.in, 8, 16)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if g := strings.Join(got, "|"); g != c.want {
			t.Errorf("%s: got %q, want %q", c.name, g, c.want)
		}
	}
}

// A long line is read in pieces and never held: the reader's buffer stays
// within the limit however long the line.
func TestReaderHoldsNoLongLine(t *testing.T) {
	in := strings.Repeat("y", 10<<20) + "\nok\n"
	r := NewReader(bufio.NewReaderSize(strings.NewReader(in), 4096), 1024)
	_, err := r.Next()
	var tl *TooLongError
	if !errors.As(err, &tl) || tl.Bytes != 10<<20 || tl.Line != 1 {
		t.Fatalf("got %v, want a line of 10 MiB too long", err)
	}
	if cap(r.long) > 1024+4096 {
		t.Errorf("the reader holds %d bytes after a long line, want at most the limit and a buffer", cap(r.long))
	}
	if l, err := r.Next(); err != nil || string(l) != "ok" || r.Line() != 2 {
		t.Errorf("after the long line: %q, %v at line %d; want ok at line 2", l, err, r.Line())
	}
	if tl.Error() != "line of 10 MiB, over the limit of 1 KiB" {
		t.Errorf("message %q", tl.Error())
	}
}

// A done context stops the reader between the pieces of a long line.
func TestReaderStopsOnContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	reads := 0
	src := readerFunc(func(p []byte) (int, error) {
		reads++
		if reads == 10 {
			cancel()
		}
		for i := range p {
			p[i] = 'y'
		}
		return len(p), nil // an endless line
	})
	r := NewReader(bufio.NewReaderSize(src, 4096), 1<<20).WithContext(ctx)
	if _, err := r.Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if reads > 11 {
		t.Errorf("%d reads after the context was done at the 10th", reads)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 20: "64 MiB", 1 << 30: "1 GiB", 100000199: "100000199 bytes", 1536: "1536 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

// The filter blanks long lines, keeps the others and their numbering,
// and says which it dropped.
func TestFilter(t *testing.T) {
	in := "h1,h2\n1,2\n" + strings.Repeat("9", 100) + ",1\n3,4\n" + strings.Repeat("8", 50)
	f := NewFilter(bufio.NewReaderSize(strings.NewReader(in), 16), 20)
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != "h1,h2\n1,2\n\n3,4\n" {
		t.Errorf("filtered %q", out)
	}
	if d := f.Dropped(4); len(d) != 1 || d[0].Line != 3 || d[0].Bytes != 102 {
		t.Errorf("dropped before line 4: %v", d)
	}
	if d := f.Dropped(-1); len(d) != 1 || d[0].Line != 5 || !d[0].Last {
		t.Errorf("dropped at the end: %v", d)
	}
}
