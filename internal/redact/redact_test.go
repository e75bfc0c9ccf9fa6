package redact

import (
	"strings"
	"testing"
)

func TestURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"http://localhost:8000", "http://localhost:8000"},
		{"http://localhost:8000/v1/models", "http://localhost:8000/v1/models"},
		{"no urls here, mail alice@example.com", "no urls here, mail alice@example.com"},
		{"http://user:pass@host:8000/v1", "http://(redacted)@host:8000/v1"},
		{"https://user@host", "https://(redacted)@host"},
		{"http://h/metrics?token=s3cr3t&x=1", "http://h/metrics?token=(redacted)&x=(redacted)"},
		{"http://h/m?bare&k=", "http://h/m?(redacted)&k="},
		{"http://h/#access_token=abc", "http://h/#(redacted)"},
		{"http://h/?a=b#frag", "http://h/?a=(redacted)#(redacted)"},
		{"--target base=http://u:p@h:1 --target new=sim", "--target base=http://(redacted)@h:1 --target new=sim"},
		{`Get "http://u:***@h/metrics?token=t": dial tcp: refused`, `Get "http://(redacted)@h/metrics?token=(redacted)": dial tcp: refused`},
		{"url=http://a/?next=http://u:p@b/?tok=s", "url=http://a/?next=http://(redacted)@b/?tok=(redacted)"},
		{"a=http://x,b=http://y:z@w", "a=http://x,b=http://(redacted)@w"},
		{"target user:pass@host:8000", "target (redacted)@host:8000"},
		{"NAME=user:pass@host:8000", "NAME=(redacted)@host:8000"},
		{"sim:max-num-seqs=4,replicas=2", "sim:max-num-seqs=4,replicas=2"},
		{"otlp://u:p@collector:4318/v1/traces?k=v", "otlp://(redacted)@collector:4318/v1/traces?k=(redacted)"},
	} {
		got := URLs(c.in)
		if got != c.want {
			t.Errorf("URLs(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := URLs(got); again != got {
			t.Errorf("URLs twice on %q: %q, then %q", c.in, got, again)
		}
	}
}

// No canary survives, wherever it sits in a URL.
func TestURLsCanaries(t *testing.T) {
	const canary = "CANARY7f3"
	for _, in := range []string{
		"http://" + canary + ":x@h", "http://u:" + canary + "@h", "http://h/?t=" + canary, "http://h/?" + canary,
		"http://h/?a=1&t=" + canary + "&b=2", "http://h/p#" + canary, "https://u:" + canary + "@h:443/p?q=" + canary + "#" + canary,
		"x=u:" + canary + "@h", `"http://h/?k=` + canary + `"`,
	} {
		if got := URLs(in); strings.Contains(got, canary) {
			t.Errorf("URLs(%q) = %q keeps the canary", in, got)
		}
	}
}
