package capture

import (
	"context"
	"io"
	"sync"
	"unicode/utf8"
)

// Parallel parsing for the line-independent formats (openai-jsonl, litellm,
// otlp-json): a reader cuts batches of lines, workers (each with its own
// parser state, caches and HMAC) parse them, and this goroutine merges the
// results in input order, mapping each worker's keyed digests to the shared
// provisional ids. The records do not depend on the number of workers:
// finish renumbers everything in arrival order.

type pitem struct {
	line int64
	data []byte
	kind string // set by the reader: too long, not UTF-8, truncated
}

type pbatch struct {
	items []pitem
	lines int64
	done  chan *presult
}

type presult struct {
	entries   []entry
	catDig    [][32]byte
	catPrefix []int32
	blockDig  [][][32]byte
	problems  []LineError
	ignored   int64
}

const batchBytes = 1 << 20

// newWorker returns a parsing state sharing st's options, key and hash seed.
func (st *state) newWorker() *state {
	w, _ := newState(st.o)
	w.key, w.ephemeral, w.seed = st.key, st.ephemeral, st.seed
	w.mac = st.newMAC()
	return w
}

func parserFor(format string, st *state) lineParser {
	switch format {
	case FormatOpenAI:
		return newOpenAIParser(st)
	case FormatLiteLLM:
		return &litellmParser{st: st}
	case FormatVLLM:
		return newVLLMParser(st)
	case FormatOTLP:
		return &otlpParser{st: st}
	}
	return nil
}

func (st *state) readParallel(parent context.Context, name, format string, lr *lineReader, workers int) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	work := make(chan *pbatch, workers)
	order := make(chan *pbatch, 2*workers)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // reader
		defer wg.Done()
		defer close(work)
		defer close(order)
		send := func(b *pbatch) bool {
			select {
			case order <- b:
			case <-ctx.Done():
				return false
			}
			select {
			case work <- b:
				return true
			case <-ctx.Done():
				return false
			}
		}
		b := &pbatch{done: make(chan *presult, 1)}
		size := 0
		for {
			line, tooLong, err := lr.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.items = append(b.items, pitem{line: lr.line + 1, kind: KindTruncated})
				break
			}
			b.lines++
			switch {
			case tooLong:
				b.items = append(b.items, pitem{line: lr.line, kind: KindTooLong})
			case len(line) == 0 || isBlank(line):
			case !utf8.Valid(line):
				b.items = append(b.items, pitem{line: lr.line, kind: KindNotUTF8})
			default:
				b.items = append(b.items, pitem{line: lr.line, data: append([]byte(nil), line...)})
				size += len(line)
			}
			if size >= batchBytes || len(b.items) >= 4096 {
				if !send(b) {
					return
				}
				b, size = &pbatch{done: make(chan *presult, 1)}, 0
			}
		}
		if len(b.items) > 0 || b.lines > 0 {
			send(b)
		}
	}()
	for i := 0; i < workers; i++ {
		w := st.newWorker()
		w.curInput, w.curName = st.curInput, name
		p := parserFor(format, w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				b.done <- w.parseBatch(p, b)
			}
		}()
	}
	var err error
	for b := range order {
		var res *presult
		select {
		case res = <-b.done:
		case <-ctx.Done():
		}
		if res == nil {
			err = ctx.Err()
			break
		}
		st.stats.Lines += b.lines
		if err = st.merge(res); err != nil {
			break
		}
		if err = ctx.Err(); err != nil {
			break
		}
	}
	cancel()
	for range order { // let the reader finish
	}
	wg.Wait()
	if err == nil {
		err = parent.Err()
	}
	return err
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// parseBatch runs on a worker.
func (w *state) parseBatch(p lineParser, b *pbatch) *presult {
	res := &presult{}
	w.entries = w.entries[:0]
	ign := w.stats.Ignored
	for _, it := range b.items {
		if it.kind != "" {
			res.problems = append(res.problems, LineError{File: w.curName, Line: it.line, Kind: it.kind})
			continue
		}
		if kind, field := p.parse(it.data, it.line); kind != "" {
			res.problems = append(res.problems, LineError{File: w.curName, Line: it.line, Kind: kind, Field: field})
		}
	}
	res.ignored = w.stats.Ignored - ign
	res.entries = append([]entry(nil), w.entries...)
	res.catDig = make([][32]byte, len(res.entries))
	res.catPrefix = make([]int32, len(res.entries))
	res.blockDig = make([][][32]byte, len(res.entries))
	for i := range res.entries {
		e := &res.entries[i]
		if e.cat >= 0 {
			res.catDig[i], res.catPrefix[i] = w.cats[e.cat].digest, w.cats[e.cat].prefixTokens
		}
		if len(e.blocks) > 0 {
			d := make([][32]byte, len(e.blocks))
			for j, b := range e.blocks {
				d[j] = w.blockDig[b]
			}
			res.blockDig[i] = d
		}
	}
	return res
}

// merge adds a worker's batch to st in input order.
func (st *state) merge(res *presult) error {
	for _, pe := range res.problems {
		if err := st.problem(pe.File, pe.Line, pe.Kind, pe.Field); err != nil {
			return err
		}
	}
	st.stats.Ignored += res.ignored
	for i := range res.entries {
		e := res.entries[i]
		if e.cat >= 0 {
			d := res.catDig[i]
			idx, ok := st.catIndex[d]
			if !ok {
				idx = int32(len(st.cats))
				st.cats = append(st.cats, category{digest: d, prefixTokens: res.catPrefix[i]})
				st.catIndex[d] = idx
			}
			e.cat = idx
		}
		if len(e.blocks) > 0 {
			blocks := make([]int32, len(e.blocks))
			for j, d := range res.blockDig[i] {
				idx, ok := st.blockIdx[d]
				if !ok {
					idx = int32(len(st.blockDig))
					st.blockDig = append(st.blockDig, d)
					st.blockIdx[d] = idx
				}
				blocks[j] = idx
			}
			e.blocks = blocks
		}
		e.model = st.intern(e.model)
		st.entries = append(st.entries, e)
	}
	return nil
}
