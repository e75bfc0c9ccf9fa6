package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// TestTokenizerPieces: the built-in tokenizer's rule, one case per part
// of it, on the pieces Tokenize maps to ids.
func TestTokenizerPieces(t *testing.T) {
	for _, tc := range []struct {
		why, text string
		want      []string
	}{
		{"The documented example: letters in runs of at most 4, a leading space kept, punctuation alone.", "Hello, world!", []string{"Hell", "o", ",", " worl", "d", "!"}},
		{"A space not followed by a letter or digit is a piece of its own.", "a  b", []string{"a", " ", " b"}},
		{"Digits are word bytes like letters.", "x 2026", []string{"x", " 2026"}},
		{"A continuation piece carries no space.", " abcdefghij", []string{" abcd", "efgh", "ij"}},
		{"A newline is a piece, and so is the space after it.", "a\n b", []string{"a", "\n", " b"}},
		{"A non-ASCII rune is one piece, whatever its bytes.", "é中x", []string{"é", "中", "x"}},
		{"Nothing gives nothing.", "", nil},
	} {
		if got := TokenStrings(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: pieces %q, want %q", tc.why, tc.text, got, tc.want)
		}
		if n := TokenCount(tc.text); n != len(tc.want) || len(Tokenize(tc.text)) != n {
			t.Errorf("%s %q: TokenCount %d, Tokenize %d, want %d", tc.why, tc.text, n, len(Tokenize(tc.text)), len(tc.want))
		}
	}
}

// TestTokenIDs: ids are a piece's own (equal text, equal ids; never a
// special token), a text prompt gets BOS, and the chat template frames
// every message with header tokens and ends with the assistant's header.
func TestTokenIDs(t *testing.T) {
	a, b := Tokenize("the same words"), Tokenize("the same words")
	if !slices.Equal(a, b) {
		t.Errorf("equal text gave %v and %v", a, b)
	}
	for _, id := range Tokenize("Hello, world! é 2026") {
		if id < FirstWordID || id >= DefaultVocabSize {
			t.Errorf("id %d outside [FirstWordID, DefaultVocabSize)", id)
		}
	}
	if got := TextTokens("hi"); got[0] != TokenBOS || !slices.Equal(got[1:], Tokenize("hi")) {
		t.Errorf("TextTokens(hi) = %v, want BOS then Tokenize(hi)", got)
	}
	chat := ChatTokens([]ChatMessage{{Role: "user", Content: "hi"}})
	var want []int32
	want = append(want, TokenBOS, TokenHeaderStart)
	want = append(append(want, Tokenize("user")...), TokenHeaderEnd)
	want = append(append(append(want, Tokenize("\n\n")...), Tokenize("hi")...), TokenEOT, TokenHeaderStart)
	want = append(append(append(want, Tokenize("assistant")...), TokenHeaderEnd), Tokenize("\n\n")...)
	if !slices.Equal(chat, want) {
		t.Errorf("ChatTokens = %v, want %v", chat, want)
	}
}

// TestPromptHashes: a router's hashes of a request body are the engine's
// block hashes of its first prompt (cache_salt included), and nothing for
// a body that does not parse.
func TestPromptHashes(t *testing.T) {
	long := strings.Repeat("lorem ipsum dolor sit amet ", 20)
	completions := PromptHashes(traces.APICompletions, []byte(`{"prompt":"`+long+`"}`), 16)
	if want := blockHashes(TextTokens(long), 16, ""); !slices.Equal(completions, want) || len(want) == 0 {
		t.Errorf("completions: %d hashes, want the %d of BOS + the text's tokens", len(completions), len(want))
	}
	for _, tc := range []struct {
		why  string
		api  string
		body string
		want []uint64
	}{
		{"A token-id prompt is hashed as given (2 full blocks of 4).", traces.APICompletions, `{"prompt":[5,6,7,8,9,10,11,12,13]}`,
			blockHashes([]int32{5, 6, 7, 8, 9, 10, 11, 12, 13}, 4, "")},
		{"Only the first of several prompts counts.", traces.APICompletions, `{"prompt":[[5,6,7,8],[9,9,9,9]]}`,
			blockHashes([]int32{5, 6, 7, 8}, 4, "")},
		{"A chat request is hashed through the chat template.", traces.APIChat, `{"messages":[{"role":"user","content":"` + long + `"}]}`,
			blockHashes(ChatTokens([]ChatMessage{{Role: "user", Content: long}}), 4, "")},
		{"A salt seeds the chain: the same prompt hashes apart.", traces.APICompletions, `{"prompt":[5,6,7,8],"cache_salt":"tenant-a"}`,
			blockHashes([]int32{5, 6, 7, 8}, 4, "tenant-a")},
		{"A prompt shorter than a block has no full block.", traces.APICompletions, `{"prompt":[5,6,7]}`, nil},
		{"A body that is not JSON gives nothing.", traces.APICompletions, `{"prompt":`, nil},
		{"A chat body without messages gives nothing.", traces.APIChat, `{"prompt":[5,6,7,8]}`, nil},
	} {
		if got := PromptHashes(tc.api, []byte(tc.body), 4); !slices.Equal(got, tc.want) {
			t.Errorf("%s got %v, want %v", tc.why, got, tc.want)
		}
	}
	salted := blockHashes([]int32{5, 6, 7, 8}, 4, "tenant-a")
	if plain := blockHashes([]int32{5, 6, 7, 8}, 4, ""); salted[0] == plain[0] {
		t.Error("a salted block hashes as the unsalted one: tenants would share a cache")
	}
	if PromptHashes(traces.APICompletions, []byte(`{"prompt":[5,6,7,8]}`), 0) != nil {
		t.Error("block size 0: want no hashes")
	}
}
