package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what a check reported instead of
// failing the test that runs it.
type recorder struct {
	testing.TB
	errs, fatals []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatals = append(r.fatals, fmt.Sprintf(format, args...))
	runtime.Goexit()
}

// run calls f with r on a goroutine of its own, so a Fatalf ends only f.
func (r *recorder) run(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		doc       string
		file      string // the golden file's content; "" = no file
		got       string
		update    bool
		wantErr   string // in the one error reported; "" = none
		wantFatal string // in the one fatal report; "" = none
		wantFile  string // the file afterwards
	}{
		{doc: "Output equal to the golden file passes.", file: "a\nb\n", got: "a\nb\n", wantFile: "a\nb\n"},
		{doc: "A changed line is reported by number, with both versions, and the file is left alone.", file: "a\nb\n", got: "a\nc\n",
			wantErr: `line 2 is "c", want "b"`, wantFile: "a\nb\n"},
		{doc: "Output that only lacks the final newline is reported as such.", file: "a\n", got: "a",
			wantErr: "1 bytes, want 2: only a final newline differs", wantFile: "a\n"},
		{doc: "A missing golden file stops the test with the hint to run -update.", got: "a\n", wantFatal: "run the test with -update"},
		{doc: "With -update the output replaces the golden file and nothing is reported.", file: "a\nb\n", got: "a\nc\n", update: true,
			wantFile: "a\nc\n"},
		{doc: "With -update a missing golden file is written, its folder made.", got: "new\n", update: true, wantFile: "new\n"},
	} {
		t.Run(tc.doc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "golden", "x.txt")
			if tc.file != "" {
				Write(t, path, []byte(tc.file))
			}
			defer func(old bool) { *update = old }(*update)
			*update = tc.update
			r := &recorder{TB: t}
			r.run(func() { Check(r, path, []byte(tc.got)) })
			check := func(what string, got []string, want string) {
				if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || !strings.Contains(got[0], want)) {
					t.Errorf("%s = %q, want one containing %q", what, got, want)
				}
			}
			check("errors", r.errs, tc.wantErr)
			check("fatals", r.fatals, tc.wantFatal)
			b, err := os.ReadFile(path)
			if tc.wantFile == "" {
				if err == nil {
					t.Errorf("golden file written: %q", b)
				}
			} else if string(b) != tc.wantFile {
				t.Errorf("golden file = %q (%v), want %q", b, err, tc.wantFile)
			}
		})
	}
}
