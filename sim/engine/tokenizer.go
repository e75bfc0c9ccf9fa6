package engine

import (
	"strconv"
	"unicode/utf8"
)

// Special token ids of the built-in tokenizer. Ordinary pieces map to ids in
// [FirstWordID, DefaultVocabSize).
const (
	TokenBOS         = 1 // beginning of text, prepended to text prompts
	TokenHeaderStart = 2 // chat template: before a role
	TokenHeaderEnd   = 3 // chat template: after a role
	TokenEOT         = 4 // chat template: end of a message
	FirstWordID      = 256
)

// Tokenize splits text into token ids with the simulator's built-in,
// deterministic rule (about four characters per token on English text, like
// a BPE tokenizer):
//
//   - a piece is an optional single ASCII space followed by 1–4 ASCII letters
//     or digits; longer runs are split every 4 bytes (the continuation pieces
//     carry no space);
//   - every other rune (punctuation, newline, a space not followed by a
//     letter or digit, any non-ASCII rune) is a piece of its own;
//   - a piece's id is FNV-1a(piece) mapped into [FirstWordID, DefaultVocabSize).
//
// So "Hello, world!" is "Hell" "o" "," " worl" "d" "!" = 6 tokens. Equal text
// always gives equal ids, so repeated text prefixes hit the prefix cache.
// Text prompts get TokenBOS in front (add_special_tokens); token-id prompts
// are used as they are.
func Tokenize(text string) []int32 {
	return appendTokens(nil, text)
}

// TokenCount is len(Tokenize(text)) without allocating.
func TokenCount(text string) int {
	n := 0
	forEachPiece(text, func(string) { n++ })
	return n
}

// TokenStrings returns the pieces Tokenize maps to ids.
func TokenStrings(text string) []string {
	var s []string
	forEachPiece(text, func(p string) { s = append(s, p) })
	return s
}

func appendTokens(dst []int32, text string) []int32 {
	forEachPiece(text, func(p string) { dst = append(dst, pieceID(p)) })
	return dst
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func forEachPiece(text string, f func(string)) {
	n := len(text)
	for i := 0; i < n; {
		start := i
		if text[i] == ' ' && i+1 < n && isWordByte(text[i+1]) {
			i++
		}
		if isWordByte(text[i]) {
			j := i
			for j < n && j-i < 4 && isWordByte(text[j]) {
				j++
			}
			f(text[start:j])
			i = j
			continue
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		f(text[i : i+size])
		i += size
	}
}

func pieceID(p string) int32 {
	h := uint32(2166136261)
	for i := 0; i < len(p); i++ {
		h ^= uint32(p[i])
		h *= 16777619
	}
	return int32(FirstWordID + h%uint32(DefaultVocabSize-FirstWordID))
}

// ChatMessage is one message of a chat request (text content only).
type ChatMessage struct {
	Role    string
	Content string
}

// ChatTokens renders messages with the simulator's Llama-3-like template and
// tokenizes them:
//
//	BOS, then per message: HEADER_START Tokenize(role) HEADER_END Tokenize("\n\n"+content) EOT,
//	then (add_generation_prompt) HEADER_START Tokenize("assistant") HEADER_END Tokenize("\n\n").
func ChatTokens(msgs []ChatMessage) []int32 {
	t := []int32{TokenBOS}
	for _, m := range msgs {
		t = append(t, TokenHeaderStart)
		t = appendTokens(t, m.Role)
		t = append(t, TokenHeaderEnd)
		t = appendTokens(t, "\n\n")
		t = appendTokens(t, m.Content)
		t = append(t, TokenEOT)
	}
	t = append(t, TokenHeaderStart)
	t = appendTokens(t, "assistant")
	t = append(t, TokenHeaderEnd)
	return appendTokens(t, "\n\n")
}

// TextTokens is the token-id form of a completions text prompt: BOS followed
// by Tokenize(text).
func TextTokens(text string) []int32 {
	return appendTokens([]int32{TokenBOS}, text)
}

// fillerWords is the output vocabulary: output token k of every request is
// fillerWords[k % len], so output text is deterministic and one word per token.
var fillerWords = [...]string{
	" the", " model", " is", " a", " simulated", " engine", " that", " streams",
	" tokens", " at", " the", " pace", " of", " its", " step", " time",
	",", " and", " every", " word", " here", " is", " one", " token",
	" of", " filler", " text", " for", " latency", " tests", ".", " It",
	" keeps", " going", " until", " the", " length", " is", " reached", ";",
	" then", " it", " stops", " with", " a", " finish", " reason", ".",
}

// appendFiller appends the text of output tokens [from, to).
func appendFiller(dst []byte, from, to int) []byte {
	for k := from; k < to; k++ {
		dst = append(dst, fillerWords[k%len(fillerWords)]...)
	}
	return dst
}

// OutputTokenID is the id of output token k of every request: the piece id
// of its filler word taken whole (Tokenize may split a long word into
// several pieces, so reading the output text back gives other ids). These
// are the ids return_token_ids returns and the ids the prefix cache hashes
// for generated tokens.
func OutputTokenID(k int) int32 { return pieceID(fillerWords[k%len(fillerWords)]) }

// appendOutputIDs appends the ids of output tokens [from, to), comma-separated.
func appendOutputIDs(dst []byte, from, to int) []byte {
	for k := from; k < to; k++ {
		if k > from {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(OutputTokenID(k)), 10)
	}
	return dst
}

func itoa(n int) string { return strconv.Itoa(n) }
