package steal

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const stat = `cpu  28585 10374 16730 90557 681 0 3215 178 0 0
cpu0 11769 0 6136 54440 103 0 839 108 0 0
cpu1 16816 10374 10594 36117 578 0 2376 70 0 0
intr 1234 0 0
ctxt 99
`

func TestParse(t *testing.T) {
	for _, c := range []struct {
		why  string
		in   string
		cpus []int
		want time.Duration
		err  error
	}{
		{"nil CPUs take the machine's line", stat, nil, 1780 * time.Millisecond, nil},
		{"one CPU is its own line", stat, []int{1}, 700 * time.Millisecond, nil},
		{"several CPUs add up", stat, []int{0, 1}, 1780 * time.Millisecond, nil},
		{"a CPU not in the file counts nothing, the others still do", stat, []int{1, 7}, 700 * time.Millisecond, nil},
		{"no line asked for is no steal to read", stat, []int{7}, 0, ErrNoSteal},
		{"a kernel without the steal column says so", "cpu 1 2 3 4 5 6 7\n", nil, 0, ErrNoSteal},
		{"an empty file has no steal", "", nil, 0, ErrNoSteal},
	} {
		got, err := Parse(strings.NewReader(c.in), c.cpus)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: Parse(%v) = %v, %v; want %v, %v", c.why, c.cpus, got, err, c.want, c.err)
		}
	}
}

// A steal column that is not a number is an error naming the line.
func TestParseBadNumber(t *testing.T) {
	_, err := Parse(strings.NewReader("cpu3 1 2 3 4 5 6 7 x8 0 0\n"), []int{3})
	if err == nil || !strings.Contains(err.Error(), "cpu3") {
		t.Fatalf("err = %v, want one naming cpu3", err)
	}
}

// Read names the file it could not read.
func TestReadNamesFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "stat")
	if _, err := (&Source{Path: p}).Read(); err == nil {
		t.Fatal("read of a missing file: no error")
	}
	if err := os.WriteFile(p, []byte("cpu 1 2 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&Source{Path: p}).Read(); !errors.Is(err, ErrNoSteal) || !strings.Contains(err.Error(), p) {
		t.Fatalf("err = %v, want ErrNoSteal naming %s", err, p)
	}
}

// On Linux the process's own source reads the CPUs it may run on, and its
// steal only grows.
func TestForProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("steal is read from Linux's /proc/stat")
	}
	s := ForProcess()
	if s == nil {
		t.Skip("this kernel's /proc/stat has no steal column")
	}
	if len(s.CPUs) == 0 || len(s.CPUs) > runtime.NumCPU() {
		t.Errorf("CPUs %v for a machine of %d", s.CPUs, runtime.NumCPU())
	}
	a, err := s.Read()
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Read()
	if err != nil || b < a {
		t.Fatalf("second read %v, %v after %v", b, err, a)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(stat, 1)
	f.Add("cpu0 1 2 3 4 5 6 7 18446744073709551615\n", 0)
	f.Fuzz(func(t *testing.T, in string, cpu int) {
		d, err := Parse(strings.NewReader(in), []int{cpu})
		if err == nil && d < 0 {
			t.Fatalf("negative steal %v", d)
		}
		if _, err := Parse(strings.NewReader(in), nil); err == nil {
			return
		}
	})
}
