package capture

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// textFields lists the fields of a struct type (nested structs included)
// that could carry text: strings not in allowed, byte slices other than
// fixed-size digests, interfaces, maps, pointers.
func textFields(typ reflect.Type, allowed map[string]string) []string {
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		switch k := f.Type.Kind(); {
		case k == reflect.Struct:
			out = append(out, textFields(f.Type, allowed)...)
		case k == reflect.String:
			if _, ok := allowed[f.Name]; !ok {
				out = append(out, f.Name)
			}
		case k == reflect.Bool, k >= reflect.Int && k <= reflect.Uint64:
		case k == reflect.Array && f.Type.Elem().Kind() == reflect.Uint8: // a keyed digest
		case k == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint64: // digests, hashes
		default:
			out = append(out, f.Name)
		}
	}
	return out
}

// TestRedactedHoldsNoText pins the redact stage's output type: numbers,
// digests and hashes, and strings only where capture picks the value (the
// model name leaves capture by design). A new string, byte slice or
// interface field fails here until it is argued for.
func TestRedactedHoldsNoText(t *testing.T) {
	allowed := map[string]string{
		"model":  "the model name, written to the trace by design",
		"api":    "traces.APIChat or traces.APICompletions",
		"tokSrc": "SourceUsage, SourceTokenIDs or the tokenizer's name",
		"status": "one of traces.Statuses",
		"errMsg": `"http N", "litellm failure" or "span status error"`,
	}
	if bad := textFields(reflect.TypeOf(redacted{}), allowed); len(bad) > 0 {
		t.Errorf("redacted fields that could carry text: %v", bad)
	}
	// The check itself notices text: request, the parse stage's type, has
	// text fields by design.
	if bad := textFields(reflect.TypeOf(request{}), allowed); len(bad) == 0 {
		t.Errorf("the check finds no text in request, which holds messages")
	}
}

// TestRedactNoCanary redacts requests with a canary in every text field and
// checks that none reaches the redacted value.
func TestRedactNoCanary(t *testing.T) {
	c := &canaries{rng: rand.New(rand.NewPCG(3, 4))}
	quote := func(s string) rawValue { return rawValue(`"` + s + `"`) }
	chat := newRequest(1, 1e18, "m")
	chat.kind = promptChat
	chat.msgs = []chatMsg{
		{Role: "system", Content: quote(c.text())},
		{Role: "user", Name: c.next(), Content: quote(c.text()), ToolCalls: rawValue(`[{"id":"` + c.next() + `"}]`)},
	}
	chat.tools = rawValue(`[{"name":"` + c.next() + `"}]`)
	chat.choices = []choice{{Message: respMsg{Content: quote(c.text())}}}
	chat.sessKind, chat.sessID = "user", c.next()
	completion := newRequest(2, 1e18, "m")
	completion.kind = promptCompletion
	completion.prompt = rawValue(`["` + c.text() + `", [1, 2, 3]]`)
	completion.choices = []choice{{Text: quote(c.text())}}
	for _, sessions := range []string{SessionsAuto, SessionsField} {
		o := DefaultOptions()
		o.BlockSize, o.Sessions = 4, sessions
		rd := newRedactor(o, []byte("0123456789abcdef"), maphash.MakeSeed())
		for _, q := range []request{chat, completion} {
			e, ok := rd.redact(&q)
			if !ok {
				t.Fatalf("redact %+v failed", q)
			}
			c.check(t, "redacted "+sessions, []byte(fmt.Sprintf("%#v", e)))
		}
	}
}

// TestRedact is a table of what the redact stage makes of a request.
func TestRedact(t *testing.T) {
	user := func(s string) []chatMsg { return []chatMsg{{Role: "user", Content: rawValue(`"` + s + `"`)}} }
	withSys := append([]chatMsg{{Role: "system", Content: rawValue(`"be brief"`)}}, user("hi")...)
	tests := []struct {
		name  string
		setup func(q *request)
		block int
		check func(t *testing.T, e redacted)
		ok    bool
	}{
		{"usage numbers win over the tokenizer and need no prompt text", func(q *request) {
			q.kind, q.msgs, q.usageIn, q.usageOut = promptChat, user("hello there"), 42, 7
		}, 0, func(t *testing.T, e redacted) {
			if e.inTok != 42 || e.outTok != 7 || e.tokSrc != SourceUsage || e.api != traces.APIChat {
				t.Errorf("got in %d out %d src %q api %q", e.inTok, e.outTok, e.tokSrc, e.api)
			}
		}, true},
		{"without usage a chat prompt counts 3 + per message 3 + role + content", func(q *request) {
			q.kind, q.msgs = promptChat, user("hello there")
		}, 0, func(t *testing.T, e redacted) {
			want := 3 + 3 + tok(t, "user") + tok(t, "hello there")
			if e.inTok != want || e.tokSrc != DefaultTokenizer {
				t.Errorf("got %d from %q, want %d", e.inTok, e.tokSrc, want)
			}
		}, true},
		{"system messages make a category with their prefix length", func(q *request) {
			q.kind, q.msgs, q.usageIn = promptChat, withSys, 10
		}, 0, func(t *testing.T, e redacted) {
			if !e.hasCat || e.prefixTokens != msgTok(t, "system", "be brief") || e.nSys != 1 {
				t.Errorf("category %v, prefix %d, nSys %d", e.hasCat, e.prefixTokens, e.nSys)
			}
		}, true},
		{"a user-only chat has no category", func(q *request) {
			q.kind, q.msgs, q.usageIn = promptChat, user("x"), 10
		}, 0, func(t *testing.T, e redacted) {
			if e.hasCat {
				t.Errorf("got a category")
			}
		}, true},
		{"completion token ids count as ids and cut into blocks", func(q *request) {
			q.kind, q.prompt = promptCompletion, rawValue(`[1,2,3,4,5,6,7,8,9]`)
		}, 4, func(t *testing.T, e redacted) {
			if e.inTok != 9 || e.tokSrc != SourceTokenIDs || len(e.blocks) != 3 || e.api != traces.APICompletions {
				t.Errorf("got %d from %q, %d blocks", e.inTok, e.tokSrc, len(e.blocks))
			}
		}, true},
		{"a malformed completions prompt is refused when it must be read", func(q *request) {
			q.kind, q.prompt = promptCompletion, rawValue(`{"a":1}`)
		}, 0, nil, false},
		{"a malformed completions prompt is not read when usage is there and blocks are off", func(q *request) {
			q.kind, q.prompt, q.usageIn = promptCompletion, rawValue(`{"a":1}`), 5
		}, 0, func(t *testing.T, e redacted) {
			if e.inTok != 5 {
				t.Errorf("got %d", e.inTok)
			}
		}, true},
		{"a session field becomes an odd in-memory hash", func(q *request) {
			q.usageIn, q.sessKind, q.sessID = 1, "session", "abc"
		}, 0, func(t *testing.T, e redacted) {
			if e.sessKey == 0 || e.sessKey&1 == 0 {
				t.Errorf("got %x", e.sessKey)
			}
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.BlockSize = tc.block
			rd := newRedactor(o, []byte("0123456789abcdef"), maphash.MakeSeed())
			q := newRequest(1, 1, "m")
			tc.setup(&q)
			e, ok := rd.redact(&q)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && tc.check != nil {
				tc.check(t, e)
			}
		})
	}
}

// TestBlocksChain: equal prefixes give equal blocks, and a block's digest
// depends on every block before it.
func TestBlocksChain(t *testing.T) {
	o := DefaultOptions()
	o.BlockSize = 2
	rd := newRedactor(o, []byte("0123456789abcdef"), maphash.MakeSeed())
	a := rd.blocksOf([]int{1, 2, 3, 4, 5})
	b := rd.blocksOf([]int{1, 2, 3, 4, 6})
	c := rd.blocksOf([]int{9, 2, 3, 4, 5})
	if len(a) != 3 || a[0] != b[0] || a[1] != b[1] || a[2] == b[2] {
		t.Errorf("shared prefix: %x vs %x", a, b)
	}
	if a[1] == c[1] {
		t.Errorf("block 2 does not depend on block 1")
	}
	other := newRedactor(o, []byte("another key 01234"), maphash.MakeSeed())
	if d := other.blocksOf([]int{1, 2}); d[0] == a[0] {
		t.Errorf("block digest does not depend on the key")
	}
}

// TestRedactOutput is a table of where a request's output length comes from.
func TestRedactOutput(t *testing.T) {
	text := []choice{{Message: respMsg{Content: rawValue(`"a red kayak"`)}}, {Text: rawValue(`"!"`)}}
	tests := []struct {
		name     string
		usageOut int32
		choices  []choice
		maxTok   int32
		status   string
		want     int32
	}{
		{"output usage wins over the response text", 7, text, 64, traces.StatusOK, 7},
		{"without output usage the response text is tokenized", -1, text, 64, traces.StatusOK, tok(t, "a red kayak") + tok(t, "!")},
		{"without usage or text a successful request's max_tokens is its output", -1, nil, 64, traces.StatusOK, 64},
		{"a failed request's max_tokens is not its output", -1, nil, 64, traces.StatusHTTPError, 0},
		{"with nothing logged the output is 0", -1, nil, -1, traces.StatusOK, 0},
	}
	rd := newRedactor(DefaultOptions(), []byte("0123456789abcdef"), maphash.MakeSeed())
	for _, tc := range tests {
		q := newRequest(1, 1, "m")
		q.usageIn, q.usageOut, q.choices, q.maxTok, q.status = 1, tc.usageOut, tc.choices, tc.maxTok, tc.status
		if e, _ := rd.redact(&q); e.outTok != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, e.outTok, tc.want)
		}
	}
}
