package capture

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// SampleOptions shapes the made-up gateway logs of WriteSampleLogs.
type SampleOptions struct {
	// Duration is the span of arrivals. Defaults to 60s.
	Duration time.Duration
	// Rate is the mean number of new conversations per second outside the
	// burst (follow-up turns come on top). Defaults to 18.
	Rate float64
	// Start is the wall-clock time of the first second. Defaults to
	// 2025-06-02T09:00:00Z.
	Start time.Time
	// Model is the model name in every request. Defaults to "demo-8b".
	Model string
}

// DefaultSampleOptions returns the defaults.
func DefaultSampleOptions() SampleOptions {
	return SampleOptions{
		Duration: 60 * time.Second,
		Rate:     18,
		Start:    time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC),
		Model:    "demo-8b",
	}
}

// sampleCategory is one invented system prompt + tool set.
type sampleCategory struct {
	name        string
	weight      float64
	systemWords int
	tools       int
	turnsMax    int
	userWords   [2]int
	outWords    [2]int
	system      string
	toolsJSON   json.RawMessage
}

var sampleCategories = []sampleCategory{
	{name: "support", weight: 0.34, systemWords: 500, tools: 3, turnsMax: 6, userWords: [2]int{8, 60}, outWords: [2]int{20, 160}},
	{name: "coder", weight: 0.22, systemWords: 900, tools: 2, turnsMax: 4, userWords: [2]int{30, 400}, outWords: [2]int{40, 300}},
	{name: "summarize", weight: 0.16, systemWords: 120, turnsMax: 1, userWords: [2]int{300, 1500}, outWords: [2]int{30, 120}},
	{name: "translate", weight: 0.10, systemWords: 60, turnsMax: 2, userWords: [2]int{20, 300}, outWords: [2]int{20, 300}},
	{name: "none", weight: 0.16, turnsMax: 3, userWords: [2]int{5, 150}, outWords: [2]int{10, 200}},
	// Rare: fewer requests than the default k, so capture drops them.
	{name: "rare-a", weight: 0.0012, systemWords: 300, tools: 1, turnsMax: 1, userWords: [2]int{10, 60}, outWords: [2]int{10, 60}},
	{name: "rare-b", weight: 0.0008, systemWords: 200, turnsMax: 1, userWords: [2]int{10, 60}, outWords: [2]int{10, 60}},
}

// sampleSyllables make invented words: no real text is ever written.
var sampleSyllables = []string{"ka", "lo", "mi", "ru", "sen", "ta", "vo", "zel", "pri", "dun", "ha", "qe", "nor", "bi", "fle", "gu", "xan", "wy", "om", "tri"}

type sampleGen struct {
	rng   *rand.Rand
	words []string
}

func (g *sampleGen) text(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			if i%13 == 0 {
				sb.WriteString(". ")
			} else {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(g.words[g.rng.IntN(len(g.words))])
	}
	sb.WriteByte('.')
	return sb.String()
}

func (g *sampleGen) between(r [2]int) int {
	// log-uniform lengths: many short, some long
	lo, hi := math.Log(float64(r[0])), math.Log(float64(r[1]))
	return int(math.Exp(lo + g.rng.Float64()*(hi-lo)))
}

type sampleMsg struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type sampleReq struct {
	t        time.Duration
	conv     int
	cat      *sampleCategory
	msgs     []sampleMsg
	stream   bool
	outWords int
	turn     int
}

// WriteSampleLogs writes made-up openai-jsonl gateway logs to w: about
// 1,500–3,000 requests over Duration from a handful of system prompts and
// tool sets (two of them rarer than k = 5), multi-turn conversations found
// only by their chat structure, a burst in the middle, streaming and
// non-streaming requests, a few errors. All text is invented from random
// syllables; usage numbers are what capture's tokenizer counts.
func WriteSampleLogs(ctx context.Context, w io.Writer, seed int64, o SampleOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	enc, err := fastEncoder(DefaultTokenizer)
	if err != nil {
		return err
	}
	g := newSampleGen(seed)
	cats := g.categories()
	b := sampleBurst(o.Duration)
	reqs := g.conversations(o, cats, b)
	c := &tokenCounter{enc: enc, counts: map[string]int{}}
	bw := bufio.NewWriterSize(w, 1<<20)
	for i, r := range reqs {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := json.Marshal(g.logLine(o, i, r, c.prompt(r), c, b))
		if err != nil {
			return fmt.Errorf("sample logs: %w", err)
		}
		bw.Write(line)
		if err := bw.WriteByte('\n'); err != nil {
			return fmt.Errorf("sample logs: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("sample logs: %w", err)
	}
	return nil
}

// Validate refuses options WriteSampleLogs cannot use: a span or a rate
// that is not positive.
func (o SampleOptions) Validate() error {
	var errs []error
	if o.Duration <= 0 {
		errs = append(errs, optionErr("SampleOptions.Duration", o.Duration, "must be > 0"))
	}
	if !(o.Rate > 0) {
		errs = append(errs, optionErr("SampleOptions.Rate", o.Rate, "must be > 0"))
	}
	return errors.Join(errs...)
}

// newSampleGen seeds the generator and invents its 400 words.
func newSampleGen(seed int64) *sampleGen {
	g := &sampleGen{rng: rand.New(rand.NewPCG(uint64(seed), uint64(seed)^0x5eed))}
	for i := 0; i < 400; i++ {
		n := 1 + g.rng.IntN(3)
		var sb strings.Builder
		for j := 0; j < n; j++ {
			sb.WriteString(sampleSyllables[g.rng.IntN(len(sampleSyllables))])
		}
		g.words = append(g.words, sb.String())
	}
	return g
}

// categories are sampleCategories with their system prompts and tool
// sets invented.
func (g *sampleGen) categories() []sampleCategory {
	cats := make([]sampleCategory, len(sampleCategories))
	copy(cats, sampleCategories)
	for i := range cats {
		c := &cats[i]
		if c.systemWords > 0 {
			c.system = "You are " + c.name + " helper. " + g.text(c.systemWords)
		}
		if c.tools > 0 {
			var tools []map[string]any
			for j := 0; j < c.tools; j++ {
				tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
					"name": fmt.Sprintf("%s_tool_%d", strings.ReplaceAll(c.name, "-", "_"), j), "description": g.text(20),
					"parameters": map[string]any{"type": "object", "properties": map[string]any{"query": map[string]any{"type": "string", "description": g.text(8)}}},
				}})
			}
			c.toolsJSON, _ = json.Marshal(tools)
		}
	}
	return cats
}

// pick draws a common category by weight (the rare ones come at fixed
// points: see conversations).
func (g *sampleGen) pick(cats []sampleCategory) *sampleCategory {
	total := 0.0
	for i := range cats {
		if !strings.HasPrefix(cats[i].name, "rare") {
			total += cats[i].weight
		}
	}
	x := g.rng.Float64() * total
	for i := range cats {
		if strings.HasPrefix(cats[i].name, "rare") {
			continue
		}
		if x -= cats[i].weight; x < 0 {
			return &cats[i]
		}
	}
	return &cats[0]
}

// burst is the span of the run when conversations start at 3x the rate.
type burst struct{ from, to time.Duration }

// sampleBurst is a 6 s burst at 55% of a run of duration d.
func sampleBurst(d time.Duration) burst {
	from := time.Duration(float64(d) * 0.55)
	return burst{from, from + 6*time.Second}
}

// conversations draws the conversations' starts (Poisson at o.Rate, 3x
// in the burst) and turns, and returns their requests in time order.
func (g *sampleGen) conversations(o SampleOptions, cats []sampleCategory, b burst) []*sampleReq {
	var reqs []*sampleReq
	conv := 0
	var rareLeft = map[string]int{"rare-a": 3, "rare-b": 2}
	for t := time.Duration(0); t < o.Duration; {
		rate := o.Rate
		if t >= b.from && t < b.to {
			rate *= 3
		}
		t += time.Duration(g.rng.ExpFloat64() / rate * float64(time.Second))
		if t >= o.Duration {
			break
		}
		c := g.pick(cats)
		// The rare categories appear at fixed points of the run.
		for i := range cats {
			if n := rareLeft[cats[i].name]; n > 0 && t >= time.Duration(float64(o.Duration)*float64(conv%7+1)/9) && g.rng.IntN(40) == 0 {
				rareLeft[cats[i].name]--
				c = &cats[i]
				break
			}
		}
		conv++
		reqs = g.turns(reqs, o.Duration, t, conv, c)
	}
	sort.SliceStable(reqs, func(i, j int) bool { return reqs[i].t < reqs[j].t })
	return reqs
}

// turns appends the requests of conversation conv of category c, started
// at t: each turn resends the history with a new user message.
func (g *sampleGen) turns(reqs []*sampleReq, end, t time.Duration, conv int, c *sampleCategory) []*sampleReq {
	turns := 1 + g.rng.IntN(c.turnsMax)
	var history []sampleMsg
	if c.system != "" {
		history = append(history, sampleMsg{Role: "system", Content: c.system})
	}
	at := t
	for k := 0; k < turns && at < end; k++ {
		var content any = g.text(g.between(c.userWords))
		if g.rng.IntN(10) == 0 { // array content parts
			content = []map[string]string{{"type": "text", "text": g.text(g.between(c.userWords))}, {"type": "text", "text": g.text(5)}}
		}
		history = append(history, sampleMsg{Role: "user", Content: content})
		r := &sampleReq{t: at, conv: conv, cat: c, msgs: append([]sampleMsg(nil), history...), stream: g.rng.Float64() < 0.6, outWords: g.between(c.outWords), turn: k}
		reqs = append(reqs, r)
		history = append(history, sampleMsg{Role: "assistant", Content: g.text(r.outWords)})
		at += 2*time.Second + time.Duration(g.rng.Float64()*8*float64(time.Second))
	}
	return reqs
}

// tokenCounter counts tokens as capture's tokenizer does, remembering
// the texts that repeat (system prompts, tool sets, roles).
type tokenCounter struct {
	enc    *fastBPE
	counts map[string]int
}

func (c *tokenCounter) count(s string) int {
	if n, ok := c.counts[s]; ok {
		return n
	}
	n := len(c.enc.encode(nil, s))
	if len(c.counts) < 1<<16 {
		c.counts[s] = n
	}
	return n
}

// prompt is r's prompt tokens exactly as capture counts them (see
// chatPrompt).
func (c *tokenCounter) prompt(r *sampleReq) int {
	pt := 3
	if len(r.cat.toolsJSON) > 0 {
		pt += c.count(string(r.cat.toolsJSON))
	}
	for _, m := range r.msgs {
		pt += 3 + c.count(m.Role)
		switch content := m.Content.(type) {
		case string:
			pt += c.count(content)
		case []map[string]string:
			var parts []string
			for _, p := range content {
				parts = append(parts, p["text"])
			}
			pt += c.count(strings.Join(parts, "\n"))
		}
	}
	return pt
}

// logLine is the gateway's log line of request i (r, with pt prompt
// tokens): its answer's made-up timing, slower in and just after the
// burst, or one of a few errors.
func (g *sampleGen) logLine(o SampleOptions, i int, r *sampleReq, pt int, c *tokenCounter, b burst) map[string]any {
	out := g.text(r.outWords)
	ot := c.count(out)
	inflight := 1.0
	if r.t >= b.from && r.t < b.to+3*time.Second {
		inflight = 4
	}
	ttft := (40 + float64(pt)*0.08*inflight + g.rng.Float64()*20) // ms
	lat := ttft + float64(ot)*(18+4*inflight) + g.rng.Float64()*10
	req := map[string]any{"model": o.Model, "messages": r.msgs, "max_tokens": 1024, "stream": r.stream}
	if len(r.cat.toolsJSON) > 0 {
		req["tools"] = r.cat.toolsJSON
	}
	if r.stream {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	line := map[string]any{
		"time":       o.Start.Add(r.t).UTC().Format(time.RFC3339Nano),
		"request_id": fmt.Sprintf("req-%d-%08x", i, g.rng.Uint32()),
		"request":    req,
	}
	if g.rng.IntN(70) == 0 {
		status := []int{429, 500, 503}[g.rng.IntN(3)]
		line["status"] = status
		line["latency_ms"] = round3(5 + g.rng.Float64()*30)
		line["response"] = map[string]any{"error": map[string]any{"message": g.text(6), "type": "server_error"}}
		return line
	}
	cached := 0
	if r.turn > 0 {
		cached = (pt / 2) / 16 * 16
	}
	line["status"] = 200
	line["latency_ms"] = round3(lat)
	if r.stream {
		line["ttft_ms"] = round3(ttft)
	}
	line["response"] = map[string]any{
		"id": fmt.Sprintf("chatcmpl-%08x", g.rng.Uint32()), "object": "chat.completion", "model": o.Model,
		"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": out}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": pt, "completion_tokens": ot, "total_tokens": pt + ot, "prompt_tokens_details": map[string]any{"cached_tokens": cached}},
	}
	return line
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
