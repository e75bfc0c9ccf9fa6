package capture

import (
	"cmp"
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/tokentrace/tokentrace/traces"
)

// A capture runs five stages:
//
//	parse     lines → requests (text aliasing the line)     openai.go, litellm.go, vllm.go, otlp.go
//	redact    request → redacted (counts, digests, hashes)   redact.go
//	sessions  redacted in arrival order → session identity   sessions.go
//	k-anon    counts per category and block → kept or not    kanon.go
//	records   numbering in order of first appearance         records.go
//
// Parse and redact run line by line (on several goroutines for the JSON
// formats). The pipeline keeps the redacted requests, sorts them by arrival
// once, and streams them through sessions and records; k-anonymity counts
// them as they are parsed. Only the records stage numbers anything.

type pipeline struct {
	o         Options
	key       []byte
	ephemeral bool
	seed      maphash.Seed
	rd        *redactor // for inputs parsed on this goroutine

	problems problems
	stats    Stats
	formats  []string // per input
	models   map[string]string
	entries  []redacted
	kanon    *kAnon
}

func newPipeline(o Options) (*pipeline, error) {
	pl := &pipeline{
		o: o, key: o.Key, seed: maphash.MakeSeed(),
		problems: problems{strict: o.Strict}, models: map[string]string{},
		kanon: newKAnon(o.MinCategorySize),
	}
	if len(pl.key) == 0 {
		pl.key = make([]byte, 32)
		if _, err := rand.Read(pl.key); err != nil {
			return nil, fmt.Errorf("generate ephemeral key: %w", err)
		}
		pl.ephemeral = true
	}
	pl.rd = newRedactor(o, pl.key, pl.seed)
	return pl, nil
}

// collect takes what em's parser emitted since the last call.
func (pl *pipeline) collect(em *emitter) {
	pl.stats.Ignored += em.ignored
	em.ignored = 0
	pl.add(em.out)
	em.out = em.out[:0]
}

// add keeps redacted requests in input order.
func (pl *pipeline) add(es []redacted) {
	for i := range es {
		e := &es[i]
		e.model = pl.intern(e.model)
		pl.kanon.add(e)
		pl.entries = append(pl.entries, *e)
	}
}

func (pl *pipeline) intern(s string) string {
	if v, ok := pl.models[s]; ok {
		return v
	}
	if len(pl.models) > 10000 {
		return s
	}
	pl.models[s] = s
	return s
}

// finish sorts the requests by arrival (the one sort) and runs the sessions
// and records stages over them.
func (pl *pipeline) finish() *Result {
	E := pl.entries
	order := make([]int32, len(E))
	for i := range order {
		order[i] = int32(i)
	}
	// Ties (several spans on one line) keep input order.
	slices.SortStableFunc(order, func(a, b int32) int {
		x, y := &E[a], &E[b]
		return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.input, y.input), cmp.Compare(x.line, y.line))
	})
	sess := newSessions(pl.o.Sessions)
	sids := make([]sessionID, len(order))
	for i, ei := range order {
		sids[i] = sess.add(&E[ei], i)
	}
	rb := newRecords(pl.o, sess, pl.kanon, len(pl.formats))
	recs := make([]traces.Record, len(order))
	for i, ei := range order {
		recs[i] = rb.next(&E[ei], sids[i])
	}
	pl.stats.Requests = int64(len(recs))
	pl.stats.Categories = rb.nCat
	pl.stats.CategoriesDropped = pl.kanon.dropped()
	pl.stats.Sessions = int(rb.nSess)
	pl.stats.TokensFrom = rb.tokensFrom
	pl.stats.Problems = pl.problems.list()
	m := rb.meta(pl.formats, pl.ephemeral, pl.key)
	return &Result{Records: recs, Meta: m, Stats: pl.stats}
}
