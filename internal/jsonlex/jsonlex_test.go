package jsonlex

import (
	"encoding/json"
	"testing"
)

// TestString: strings come back unescaped exactly as encoding/json reads
// them, including surrogate pairs and lone surrogates.
func TestString(t *testing.T) {
	for _, in := range []string{
		`"plain"`,
		`"a\"b\\c\/d\b\f\n\r\t"`,
		`"\u00e9\u4e2d"`,
		`"\ud83d\ude00 pair"`,
		`"\ud83d lone"`,
		`""`,
	} {
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		l := Lexer{B: []byte(in)}
		got, ok := l.String()
		if !ok || string(got) != want || !l.End() {
			t.Errorf("%s: got %q ok=%v, want %q", in, got, ok, want)
		}
	}
}

// TestMalformed: each input is rejected by the method that reads it.
func TestMalformed(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		read     func(*Lexer) bool
	}{
		{"unterminated string", `"abc`, func(l *Lexer) bool { _, ok := l.String(); return ok }},
		{"control character in a string", "\"a\x01b\"", func(l *Lexer) bool { _, ok := l.String(); return ok }},
		{"bad escape", `"\x"`, func(l *Lexer) bool { _, ok := l.String(); return ok }},
		{"short unicode escape", `"\u12"`, func(l *Lexer) bool { _, ok := l.String(); return ok }},
		{"object without colon", `{"a" 1}`, (*Lexer).Skip},
		{"array without comma", `[1 2]`, (*Lexer).Skip},
		{"number without digits", `-`, (*Lexer).Skip},
		{"nesting deeper than the limit", string(make([]byte, 0)) + deep(100), (*Lexer).Skip},
		{"fraction is not an integer", `1.5`, func(l *Lexer) bool { _, err := l.Int64(); return err == nil }},
		{"huge float is not an int64", `1e300`, func(l *Lexer) bool { _, err := l.Int64(); return err == nil }},
	} {
		l := Lexer{B: []byte(tc.in)}
		if tc.read(&l) {
			t.Errorf("%s: %q accepted", tc.name, tc.in)
		}
	}
}

func deep(n int) string {
	s := ""
	for range n {
		s += "["
	}
	for range n {
		s += "]"
	}
	return s
}

// TestInt64: integers, negative numbers and integral floats read exactly.
func TestInt64(t *testing.T) {
	for in, want := range map[string]int64{
		"0": 0, "-17": -17, "123456789012345678": 123456789012345678,
		"9223372036854775807": 9223372036854775807, "1e3": 1000, "12.0": 12,
	} {
		l := Lexer{B: []byte(in)}
		got, err := l.Int64()
		if err != nil || got != want {
			t.Errorf("%s: got %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestObjectSkip: Object visits every key in order and Skip consumes any
// value, nested ones included.
func TestObjectSkip(t *testing.T) {
	in := `{"a": [1, {"x": null}], "b\n": true, "c": "s", "d": -1.5e3}`
	l := Lexer{B: []byte(in)}
	var keys []string
	if !l.Object(func(k []byte) bool { keys = append(keys, string(k)); return l.Skip() }) || !l.End() {
		t.Fatalf("object not read to the end (at %d)", l.I)
	}
	if want := "[a b\n c d]"; fmtKeys(keys) != want {
		t.Errorf("keys %q, want %q", fmtKeys(keys), want)
	}
}

func fmtKeys(k []string) string {
	s := "["
	for i, x := range k {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s + "]"
}

// TestAppendString: what AppendString writes, encoding/json reads back as
// the same string (invalid UTF-8 as U+FFFD).
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\", "\x00\x1f\n\r\t", "é中😀", "bad\xffutf8", "\u2028"} {
		var got string
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\uFFFDutf8"
		}
		if got != want {
			t.Errorf("%q: read back %q", s, got)
		}
	}
}

// FuzzLexer: Skip never panics, and whatever it accepts as a whole input
// encoding/json accepts too.
func FuzzLexer(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c"}]}`, `"\ud800"`, `[1e999]`, `{"a":}`, deep(70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l := Lexer{B: b}
		if l.Skip() && l.End() && !json.Valid(b) {
			t.Errorf("accepted invalid JSON %q", b)
		}
	})
}
