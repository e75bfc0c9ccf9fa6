package capture

import (
	"context"
	"io"
	"sync"
	"unicode/utf8"
)

// Parallel parsing for the line-independent formats (openai-jsonl, litellm,
// otlp-json): a reader cuts batches of lines, workers (each with its own
// parser, redactor, caches and HMAC) parse and redact them, and this
// goroutine hands the results to the pipeline in input order. Redacted
// requests name categories and blocks by keyed digest, so they need no
// mapping between workers and the records do not depend on their number.

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
	entries  []redacted
	problems []LineError
	ignored  int64
}

const batchBytes = 1 << 20

func (pl *pipeline) readParallel(parent context.Context, input int32, name, format string, lr *lineReader, workers int) error {
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
		em := &emitter{rd: newRedactor(pl.o, pl.key, pl.seed), input: input, name: name}
		p := parserFor(format, em)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				b.done <- parseBatch(em, p, b)
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
		pl.stats.Lines += b.lines
		pl.tick("reading", 0)
		if err = pl.merge(res); err != nil {
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
func parseBatch(em *emitter, p lineParser, b *pbatch) *presult {
	res := &presult{}
	em.out, em.ignored = nil, 0
	for _, it := range b.items {
		if it.kind != "" {
			res.problems = append(res.problems, LineError{File: em.name, Line: it.line, Kind: it.kind})
			continue
		}
		if kind, field := p.parse(it.data, it.line); kind != "" {
			res.problems = append(res.problems, LineError{File: em.name, Line: it.line, Kind: kind, Field: field})
		}
	}
	res.entries, res.ignored = em.out, em.ignored
	em.out = nil
	return res
}

// merge hands a worker's batch to the pipeline in input order.
func (pl *pipeline) merge(res *presult) error {
	for _, pe := range res.problems {
		if err := pl.problems.add(pe.File, pe.Line, pe.Kind, pe.Field); err != nil {
			return err
		}
	}
	pl.stats.Ignored += res.ignored
	return pl.add(res.entries)
}
