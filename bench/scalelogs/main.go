// Command scalelogs writes N requests of made-up openai-jsonl gateway logs
// for the scale benchmark (bench/scale.sh), streaming: its memory depends on
// the conversations in flight, not on N. The lines carry usage numbers (so
// capture does not tokenize), a session field on part of the traffic and
// chat structure on the rest, six system prompts, streaming
// and non-streaming requests and a few errors, like capture's sample logs
// and about the same size per request (4-5 KB), written fast enough to pipe
// into capture, so that tens of millions of requests need no disk.
//
//	go run ./bench/scalelogs -n 1000000 -rate 1000 | tokentrace capture --out trace.parquet -
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/tokentrace/tokentrace/internal/minheap"
)

type conv struct {
	at      int64 // next turn's arrival, ns from the start
	id      int
	cat     int
	turns   int
	turn    int
	session bool
	history []byte // the messages so far, as JSON array elements
}

// convFirst orders the conversations by their next turn's time, then id.
func convFirst(a, b **conv) bool {
	return (*a).at < (*b).at || (*a).at == (*b).at && (*a).id < (*b).id
}

var syllables = []string{"ka", "lo", "mi", "ru", "sen", "ta", "vo", "zel", "pri", "dun", "ha", "qe", "nor", "bi", "fle", "gu"}

func main() {
	n := flag.Int64("n", 1_000_000, "requests to write")
	rate := flag.Float64("rate", 1000, "mean requests per second")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	rng := rand.New(rand.NewPCG(*seed, *seed^0x5ca1e))
	word := func(b []byte) []byte {
		for range 1 + rng.IntN(2) {
			b = append(b, syllables[rng.IntN(len(syllables))]...)
		}
		return b
	}
	text := func(b []byte, words int) []byte {
		for i := range words {
			if i > 0 {
				b = append(b, ' ')
			}
			b = word(b)
		}
		return b
	}
	var systems [][]byte
	// System prompts of 60 to 900 words, as in capture's sample logs.
	for i, words := range []int{60, 120, 300, 500, 700, 900} {
		systems = append(systems, text([]byte("You are helper "+strconv.Itoa(i)+". "), words))
	}
	start := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	w := bufio.NewWriterSize(os.Stdout, 1<<20)
	defer w.Flush()
	var h []*conv // a min-heap by convFirst
	// New conversations arrive as a Poisson process; with about 2.5 turns
	// each, the request rate is about rate.
	newRate := *rate / 2.5
	next := int64(0)
	ids := 0
	var line []byte
	for written := int64(0); written < *n; written++ {
		for len(h) == 0 || next <= h[0].at {
			ids++
			c := &conv{at: next, id: ids, cat: rng.IntN(len(systems)), turns: 1 + rng.IntN(4), session: rng.IntN(2) == 0}
			minheap.Push(&h, c, convFirst)
			next += int64(rng.ExpFloat64() / newRate * 1e9)
		}
		c := h[0]
		// The user's turn.
		if len(c.history) > 0 {
			c.history = append(c.history, ',')
		}
		c.history = append(c.history, `{"role":"user","content":"`...)
		// User turns of 8 to 400 words, most of them short.
		c.history = text(c.history, 8+int(rng.ExpFloat64()*60)%392)
		c.history = append(c.history, `"}`...)
		in := 60 + 20*c.cat + 25*(c.turn+1) + rng.IntN(400)
		out := 10 + rng.IntN(300)
		ttft := 40 + float64(in)*0.05 + rng.Float64()*20
		lat := ttft + float64(out)*20 + rng.Float64()*10
		stream := rng.IntN(10) < 6

		line = append(line[:0], `{"time":"`...)
		line = start.Add(time.Duration(c.at)).AppendFormat(line, time.RFC3339Nano)
		line = append(line, `","request_id":"req-`...)
		line = strconv.AppendInt(line, written, 10)
		if c.session {
			line = append(line, `","session_id":"s-`...)
			line = strconv.AppendInt(line, int64(c.id), 10)
		}
		line = append(line, `","request":{"model":"demo-8b","max_tokens":1024,"stream":`...)
		line = strconv.AppendBool(line, stream)
		line = append(line, `,"messages":[{"role":"system","content":"`...)
		line = append(line, systems[c.cat]...)
		line = append(line, `"},`...)
		line = append(line, c.history...)
		line = append(line, `]}`...)
		if rng.IntN(70) == 0 {
			line = append(line, `,"status":503,"latency_ms":12.5,"response":{"error":{"message":"overloaded","type":"server_error"}}}`...)
		} else {
			line = append(line, `,"status":200,"latency_ms":`...)
			line = strconv.AppendFloat(line, lat, 'f', 3, 64)
			if stream {
				line = append(line, `,"ttft_ms":`...)
				line = strconv.AppendFloat(line, ttft, 'f', 3, 64)
			}
			line = append(line, `,"response":{"object":"chat.completion","model":"demo-8b","choices":[{"index":0,"message":{"role":"assistant","content":"`...)
			start := len(line)
			line = text(line, 20+rng.IntN(280))
			answer := line[start:]
			line = append(line, `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":`...)
			line = strconv.AppendInt(line, int64(in), 10)
			line = append(line, `,"completion_tokens":`...)
			line = strconv.AppendInt(line, int64(out), 10)
			line = append(line, `}}}`...)
			c.history = append(c.history, `,{"role":"assistant","content":"`...)
			c.history = append(c.history, answer...)
			c.history = append(c.history, `"}`...)
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			fmt.Fprintln(os.Stderr, "scalelogs:", err)
			os.Exit(1)
		}
		c.turn++
		if c.turn >= c.turns {
			minheap.Pop(&h, convFirst)
			continue
		}
		c.at += int64((2 + rng.Float64()*20) * 1e9)
		minheap.Down(h, 0, convFirst)
	}
}
