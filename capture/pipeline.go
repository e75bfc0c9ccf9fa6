package capture

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"hash/maphash"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

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
// once, and streams them through sessions and records, which yield one
// record at a time; k-anonymity counts them as they are parsed. Only the
// records stage numbers anything.

// pipeline drives the stages. It holds every redacted request (288 bytes
// each, plus its block digests and, until the sessions stage, its message
// prefix hashes): the sort and the k rule need them all, so this is where
// a bounded-memory capture would spill to disk.
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
	// token sources of the requests, in all and per input
	tokensFrom map[string]int64
	perInput   []map[string]int64
}

func newPipeline(o Options) (*pipeline, error) {
	pl := &pipeline{
		o: o, key: o.Key, seed: maphash.MakeSeed(),
		problems: problems{strict: o.Strict}, models: map[string]string{},
		tokensFrom: map[string]int64{},
		kanon:      newKAnon(o.MinCategorySize),
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
		pl.tokensFrom[e.tokSrc]++
		for int(e.input) >= len(pl.perInput) {
			pl.perInput = append(pl.perInput, map[string]int64{})
		}
		pl.perInput[e.input][e.tokSrc]++
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

// start validates o, reads every input through the parse and redact stages
// and sorts the requests: what is left to run is pl.records(order).
func start(ctx context.Context, o Options, inputs []Input) (pl *pipeline, order []int32, err error) {
	if err := o.Validate(); err != nil {
		return nil, nil, err
	}
	if pl, err = newPipeline(o); err != nil {
		return nil, nil, err
	}
	for i, in := range inputs {
		if err := pl.readInput(ctx, i, in); err != nil {
			return nil, nil, err
		}
	}
	return pl, pl.sort(), nil
}

// sort orders the requests by arrival: the pipeline's one sort. Ties
// (several spans on one line) keep input order.
func (pl *pipeline) sort() []int32 {
	E := pl.entries
	order := make([]int32, len(E))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		x, y := &E[a], &E[b]
		return cmp.Or(cmp.Compare(x.t, y.t), cmp.Compare(x.input, y.input), cmp.Compare(x.line, y.line))
	})
	return order
}

// records runs the sessions and records stages over the requests in
// order and yields the records one at a time; pl.stats is complete once
// the stream has run to its end. Run it once: the sessions stage drops the
// message prefixes it has used.
func (pl *pipeline) records(order []int32) iter.Seq[traces.Record] {
	return func(yield func(traces.Record) bool) {
		E := pl.entries
		sess := newSessions(pl.o.Sessions)
		sids := make([]sessionID, len(order))
		for i, ei := range order {
			sids[i] = sess.add(&E[ei], i)
		}
		rs := newRecords(pl.o, sess, pl.kanon)
		defer func() {
			pl.stats.Requests = rs.seq
			pl.stats.Categories = rs.nCat
			pl.stats.CategoriesDropped = pl.kanon.dropped()
			pl.stats.Sessions = int(rs.nSess)
			pl.stats.TokensFrom = pl.tokensFrom
			pl.stats.Problems = pl.problems.list()
		}()
		for i, ei := range order {
			if !yield(rs.next(&E[ei], sids[i])) {
				return
			}
		}
	}
}

// meta describes the capture: formats, token sources, options and key.
func (pl *pipeline) meta(order []int32) traces.Meta {
	o := pl.o
	m := traces.NewMeta("capture:" + strings.Join(uniq(pl.formats), "+"))
	m.Tokenizer = strings.Join(byCount(pl.tokensFrom), "+")
	m.BlockSize = o.BlockSize
	m.KThreshold = o.MinCategorySize
	if pl.ephemeral {
		m.KeyFingerprint = EphemeralFingerprint
	} else {
		m.KeyFingerprint = Fingerprint(pl.key)
	}
	m.Set("capture.prefix_tokenizer", o.Tokenizer)
	m.Set("capture.sessions", o.Sessions)
	if o.KeepHashes {
		m.Set("capture.keep_hashes", "true")
	}
	if len(order) > 0 {
		m.Set("capture.start", startString(time.Unix(0, pl.entries[order[0]].t), o.KeepStart))
		if o.KeepStart {
			m.Set("capture.start_precision", "exact")
		} else {
			m.Set("capture.start_precision", "hour")
		}
	}
	for i, f := range pl.formats {
		p := "capture.input." + strconv.Itoa(i+1)
		m.Set(p+".format", f)
		var ss []string
		if i < len(pl.perInput) {
			for s := range pl.perInput[i] {
				ss = append(ss, s)
			}
		}
		slices.Sort(ss)
		m.Set(p+".tokens", strings.Join(ss, "+"))
		if f == FormatVLLM {
			m.Set(p+".time_precision", "1s")
			m.Set(p+".year", strconv.Itoa(o.year()))
			m.Set(p+".timezone", "UTC (assumed; vLLM logs carry none)")
		}
	}
	return m
}

// byCount lists the keys of n, most counted first (ties by name).
func byCount(n map[string]int64) []string {
	keys := make([]string, 0, len(n))
	for s := range n {
		keys = append(keys, s)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(n[b], n[a]), strings.Compare(a, b))
	})
	return keys
}

func uniq(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
