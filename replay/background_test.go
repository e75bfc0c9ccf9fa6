package replay

import (
	"strings"
	"testing"
)

func TestParseBackground(t *testing.T) {
	for _, c := range []struct {
		why, in string
		want    Background
		err     string
	}{
		{"every key", "class=batch,concurrency=256,input=1024,output=256", Background{"batch", 256, 1024, 256}, ""},
		{"missing keys take the defaults", "class=offline", Background{"offline", DefaultBackgroundConcurrency, DefaultBackgroundInput, DefaultBackgroundOutput}, ""},
		{"spaces are trimmed", " concurrency = 4 , output=8", Background{DefaultBackgroundClass, 4, DefaultBackgroundInput, 8}, ""},
		{"negative concurrency is refused", "concurrency=-1", Background{}, "concurrency must be >= 1"},
		{"zero output is refused", "output=0", Background{}, "output must be >= 1"},
		{"a non-number is refused", "input=lots", Background{}, "want an integer"},
		{"an unknown key is refused", "rate=5", Background{}, "unknown key"},
		{"a bare word is refused", "batch", Background{}, "want key=value"},
		{"an empty class is refused", "class=", Background{}, "class"},
	} {
		got, err := ParseBackground(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "ackground") || strings.Contains(err.Error(), "--") {
				t.Errorf("%s: err %v, want one naming the background option, not a flag, with %q", c.why, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %+v, %v; want %+v", c.why, got, err, c.want)
		}
		if back, err := ParseBackground(got.String()); err != nil || back != got {
			t.Errorf("%s: String does not round-trip: %q", c.why, got.String())
		}
	}
	o := DefaultOptions()
	o.URL = "http://127.0.0.1:1"
	o.Background = []Background{{"batch", 1, 1, 1}, {"batch", 2, 2, 2}}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("duplicate classes: %v", err)
	}
}

func FuzzParseBackground(f *testing.F) {
	for _, s := range []string{"class=batch,concurrency=256,input=1024,output=256", "concurrency=-1", "", "=,=", "class=a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBackground(s)
		if err != nil {
			return
		}
		if b.Concurrency < 1 || b.Input < 1 || b.Output < 1 || b.Class == "" {
			t.Fatalf("ParseBackground(%q) = %+v without error", s, b)
		}
		if back, err := ParseBackground(b.String()); err != nil || back != b {
			t.Fatalf("round trip of %+v: %+v, %v", b, back, err)
		}
	})
}
