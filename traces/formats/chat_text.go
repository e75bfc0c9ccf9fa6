package formats

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Several peer formats carry prompts as chat messages instead of token
// counts (AIPerf's dag_jsonl, SGLang's agentic trace, inference-perf's OTel
// spans, SageMaker captures). tokentrace stores no content, so:
//
//   - importers count a message's tokens from its text when the format has
//     no count: chatTokens, ceil(bytes / 4), the usual rule of thumb for
//     English under BPE tokenizers (off by tens of percent for code or other
//     languages; the import says how many rows were estimated);
//   - exporters write filler text of a known length: fillerText(n) is n
//     copies of " the"-style words that BPE tokenizers (GPT, Llama, Qwen)
//     encode as one token each, and that chatTokens counts back as exactly
//     n, so a round trip through a message format keeps every count.

// ChatBytesPerToken is the bytes of message text counted as one token when
// a format gives text without a token count.
const ChatBytesPerToken = 4

// chatTokens estimates the tokens of text: ceil(len / ChatBytesPerToken).
func chatTokens(text string) int64 {
	return (int64(len(text)) + ChatBytesPerToken - 1) / ChatBytesPerToken
}

// fillerText returns text that chatTokens counts as n tokens and that
// tokenizes to about n tokens: "the" followed by n-1 " the". The first
// fillerTagWords words may be replaced by a tag (see taggedFiller).
func fillerText(n int64) string {
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(int(4*n - 1))
	b.WriteString("the")
	for i := int64(1); i < n; i++ {
		b.WriteString(" the")
	}
	return b.String()
}

// taggedFiller is fillerText(n) whose first word is replaced by tag padded
// or cut to 3 bytes plus a space boundary, so that prompts of different
// sessions differ from their first token (a replay must not find a prefix
// shared between sessions that the trace did not share) while chatTokens
// still counts n. tag is a small number.
func taggedFiller(n int64, tag int64) string {
	if n <= 0 {
		return ""
	}
	s := fillerText(n)
	// Base-36 of the tag in at most 3 characters (46,655 distinct tags;
	// more wrap around, which only weakens the distinction).
	t := strconv.FormatInt(tag%46656, 36)
	for len(t) < 3 {
		t = "x" + t
	}
	return t + s[3:]
}

// chatMessage is an OpenAI chat message as the peer formats write it; only
// the text is read.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content,omitempty"`
}

// chatMessageText returns the text of a message's content: a string, or the
// "text" of each part of a multimodal parts list (images and audio carry no
// text and count nothing). ok is false when content is neither.
func chatMessageText(raw json.RawMessage) (text string, ok bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		return s, true
	}
	if raw[0] == '[' {
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", false
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String(), true
	}
	return "", false
}

// chatMessagesTokens estimates the tokens of messages (the sum of each
// message's estimate); ok is false when a content is malformed.
func chatMessagesTokens(msgs []chatMessage) (int64, bool) {
	var n int64
	for _, m := range msgs {
		text, ok := chatMessageText(m.Content)
		if !ok {
			return 0, false
		}
		n += chatTokens(text)
	}
	return n, true
}

// appendJSONString appends s as a JSON string literal.
func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
