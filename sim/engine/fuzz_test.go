package engine

import (
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// FuzzParseGen: any body either parses or yields a 4xx error; never a panic.
func FuzzParseGen(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3}`, `{"prompt":[1,2,3]}`, `{"prompt":[[1],[2,3]]}`, `{"prompt":["a","b"]}`,
		`{"messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`, `{"prompt":[]}`, `{"prompt":[[]]}`,
		`{"prompt":null}`, `{"prompt":1}`, `[]`, `{`, `{"prompt":"x","max_tokens":-1,"min_tokens":9}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	s, err := newServer(DefaultOptions())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		api := traces.APICompletions
		if chat {
			api = traces.APIChat
		}
		g, e := s.parseGen(body, api)
		if (g == nil) == (e == nil) {
			t.Fatalf("parseGen(%q) = %v, %v; want exactly one", body, g, e)
		}
		if e != nil && (e.status < 400 || e.status >= 500) {
			t.Fatalf("parseGen(%q) status %d", body, e.status)
		}
		if g != nil {
			for _, p := range g.prompts {
				if len(p) == 0 {
					t.Fatalf("parseGen(%q) gave an empty prompt", body)
				}
			}
		}
	})
}

// FuzzTokenize: the pieces concatenate back to the text and the counts agree.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{"", "Hello, world!", "  two  spaces", "héllo wörld\n\n", "abcdefghijk 123456789", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks, strs := Tokenize(s), TokenStrings(s)
		if len(toks) != len(strs) || len(toks) != TokenCount(s) {
			t.Fatalf("Tokenize(%q): %d ids, %d pieces, count %d", s, len(toks), len(strs), TokenCount(s))
		}
		if strings.Join(strs, "") != s {
			t.Fatalf("pieces of %q rejoin to %q", s, strings.Join(strs, ""))
		}
		for _, id := range toks {
			if id < FirstWordID || id >= DefaultVocabSize {
				t.Fatalf("id %d out of range", id)
			}
		}
	})
}

// FuzzPromptHashes: no request body panics the router's hashing, and the
// hashes of a prompt are its engine's.
func FuzzPromptHashes(f *testing.F) {
	for _, s := range []string{`{"prompt":"hello world, a prompt of some length to fill a block or two"}`, `{"prompt":[1,2,3]}`,
		`{"prompt":[[1,2],[3]]}`, `{"messages":[{"role":"user","content":"x"}]}`, `{"prompt":null}`, `[]`, `{`, `{"prompt":"x","cache_salt":"s"}`} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, chat bool) {
		api := "completions"
		if chat {
			api = "chat"
		}
		hs := PromptHashes(api, body, 4)
		for _, h := range hs {
			if h == 0 {
				t.Fatalf("%q: a zero block hash", body)
			}
		}
	})
}
