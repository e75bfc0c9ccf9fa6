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
// formats); k-anonymity counts the requests as they are parsed. The
// redacted requests go to a spool (spool.go) that keeps them in memory up to
// Options.SortMemoryBytes and beyond it in sorted runs on disk. Two merged
// passes in arrival order follow: the first finds every session and counts
// its requests (a single request is no session), the second finds them
// again the same way and streams the records stage, which yields one record
// at a time. Only the records stage numbers anything.
//
// Sessions end when idle for Options.SessionIdle; the first pass writes
// the count of each ended session to an ends store (sessions.go), which the
// second reads back in order of first request, so neither holds more than
// the sessions under way.

// pipeline drives the stages. What it holds does not grow with the number
// of requests beyond the spool's budget: per distinct model, category and
// prefix block (k-anonymity, under a cap), per session under way and per
// chat request of the last Options.SessionIdle (sessions.go), and per call
// with a span or call id of that window (parent links, records.go).
type pipeline struct {
	o         Options
	key       []byte
	ephemeral bool
	seed      maphash.Seed
	rd        *redactor // for inputs parsed on this goroutine

	problems problems
	stats    Stats
	started  time.Time
	lastTick time.Time
	formats  []string // per input
	names    []string
	spans    []inputSpan
	models   map[string]string
	spool    *spool
	kanon    *kAnon
	// token sources of the requests, in all and per input
	tokensFrom map[string]int64
	perInput   []map[string]int64
}

func newPipeline(o Options) (*pipeline, error) {
	now := time.Now()
	pl := &pipeline{
		started: now, lastTick: now,
		o: o, key: o.Key, seed: maphash.MakeSeed(),
		problems: problems{strict: o.Strict}, models: map[string]string{},
		tokensFrom: map[string]int64{},
		kanon:      newKAnon(o.kNow(), o.MaxKAnonEntries),
		spool:      newSpool(o),
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
func (pl *pipeline) collect(em *emitter) error {
	pl.stats.Ignored += em.ignored
	em.ignored = 0
	err := pl.add(em.out)
	em.out = em.out[:0]
	return err
}

// tick reports progress when ProgressEvery has passed since the last.
func (pl *pipeline) tick(phase string, written int64) {
	if pl.o.Progress == nil {
		return
	}
	now := time.Now()
	if now.Sub(pl.lastTick) < progressEvery {
		return
	}
	pl.lastTick = now
	pl.o.Progress(Progress{Phase: phase, Lines: pl.stats.Lines, Requests: pl.spool.n, Written: written, Elapsed: now.Sub(pl.started)})
}

// add keeps redacted requests in input order.
func (pl *pipeline) add(es []redacted) error {
	for i := range es {
		e := &es[i]
		e.model = pl.intern(e.model)
		pl.kanon.add(e)
		pl.tokensFrom[e.tokSrc]++
		for int(e.input) >= len(pl.perInput) {
			pl.perInput = append(pl.perInput, map[string]int64{})
		}
		pl.perInput[e.input][e.tokSrc]++
		for int(e.input) >= len(pl.spans) {
			pl.spans = append(pl.spans, inputSpan{})
		}
		pl.spans[e.input].add(e.t)
		if err := pl.spool.add(e); err != nil {
			return err
		}
	}
	return nil
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
// and sorts the requests: what is left to run is pl.records(). Call
// pl.close when done with it.
func start(ctx context.Context, o Options, inputs []Input) (pl *pipeline, err error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if pl, err = newPipeline(o); err != nil {
		return nil, err
	}
	for i, in := range inputs {
		if err := pl.readInput(ctx, i, in); err != nil {
			pl.close()
			return nil, err
		}
	}
	pl.rd = nil // its memos are of no use past the parse
	if err := pl.spool.finish(); err != nil {
		pl.close()
		return nil, err
	}
	return pl, nil
}

// close removes the spool's temporary runs.
func (pl *pipeline) close() { pl.spool.close() }

// requests is the number of requests parsed.
func (pl *pipeline) requests() int64 { return pl.spool.n }

// records runs the sessions and records stages over the requests in
// arrival order and yields the records one at a time; pl.stats is complete
// once the stream has run to its end. A failure to read the spool's runs
// back ends the stream with that error.
func (pl *pipeline) records() iter.Seq2[traces.Record, error] {
	return func(yield func(traces.Record, error) bool) {
		// First pass: every session's number of requests, kept for the
		// second in order of first request.
		sess := newSessions(pl.o)
		ends := newEndsStore(pl.spool.tempDir)
		defer ends.close()
		counter := newSessionCounter(pl.o, ends)
		pos := 0
		var cerr error
		err := pl.spool.each(func(e *redacted) bool {
			if id := sess.find(e, pos); id != 0 {
				cerr = counter.add(id, e.t)
			}
			pos++
			return cerr == nil
		})
		err = cmp.Or(err, cerr)
		if err == nil {
			err = counter.finish()
		}
		sess, counter = nil, nil // the second pass has its own
		// The second pass finds the same sessions again (the stage is
		// deterministic) and learns each one's count at its first request.
		again := newSessions(pl.o)
		rs := newRecords(pl.o, again, pl.kanon)
		defer func() {
			pl.stats.Requests = rs.seq
			pl.stats.Categories = rs.nCat
			pl.stats.CategoriesDropped = pl.kanon.dropped()
			pl.stats.KAnonForgotten = pl.kanon.forgotten
			pl.stats.Sessions = int(rs.nSess)
			pl.stats.ParentLinks, pl.stats.ParentsDropped = rs.links, rs.linksDropped
			pl.stats.TokensFrom = pl.tokensFrom
			pl.stats.Problems = pl.problems.list()
			pl.stats.Overlaps = pl.overlaps()
		}()
		if err != nil {
			yield(traces.Record{}, err)
			return
		}
		pos = 0
		stopped := false
		err = pl.spool.each(func(e *redacted) bool {
			if pos&4095 == 0 {
				pl.tick("writing", int64(pos))
			}
			sid := again.find(e, pos)
			if sid != 0 && sid == firstOf(pos) {
				n, ok, err := ends.take(sid)
				if err != nil {
					cerr = err
					return false
				}
				if ok {
					again.count[sid] = n
				}
			}
			pos++
			if !yield(rs.next(e, sid), nil) {
				stopped = true
				return false
			}
			return true
		})
		if err = cmp.Or(err, cerr); err != nil && !stopped {
			yield(traces.Record{}, err)
		}
	}
}

// meta describes the capture: formats, token sources, options and key.
func (pl *pipeline) meta() traces.Meta {
	o := pl.o
	m := traces.NewMeta("capture:" + strings.Join(uniq(pl.formats), "+"))
	m.Tokenizer = strings.Join(byCount(pl.tokensFrom), "+")
	m.BlockSize = o.BlockSize
	m.KThreshold = o.kNow()
	if o.Part {
		m.Set(traces.MetaKAnon, traces.KAnonDeferred)
		m.Set(metaPartK, strconv.Itoa(o.MinCategorySize))
		m.Set(metaPart, strconv.Itoa(o.PartIndex))
		m.Set(metaPartIdle, o.SessionIdle.String())
		m.Set(metaPartArrivals, "unix_ns")
	}
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
	if pl.requests() > 0 {
		m.Set("capture.start", startString(time.Unix(0, pl.spool.minT), o.KeepStart))
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

// inputSpan is the arrival span of one input's requests.
type inputSpan struct {
	n           int64
	first, last int64
}

func (s *inputSpan) add(t int64) {
	if s.n == 0 || t < s.first {
		s.first = t
	}
	if s.n == 0 || t > s.last {
		s.last = t
	}
	s.n++
}

// overlaps lists the pairs of inputs whose spans overlap.
func (pl *pipeline) overlaps() []Overlap {
	var out []Overlap
	for i := range pl.spans {
		for j := i + 1; j < len(pl.spans); j++ {
			a, b := pl.spans[i], pl.spans[j]
			if a.n == 0 || b.n == 0 {
				continue
			}
			if lo, hi := max(a.first, b.first), min(a.last, b.last); lo < hi {
				out = append(out, Overlap{A: pl.names[i], B: pl.names[j], Ns: hi - lo})
			}
		}
	}
	return out
}
