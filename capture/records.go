package capture

import (
	"encoding/hex"
	"strconv"

	"github.com/tokentrace/tokentrace/traces"
)

// records is the records stage and the pipeline's one numbering: fed
// requests in arrival order, it numbers sessions, categories and blocks in
// order of first appearance and builds traces.Records. Its state is one
// number per kept category and kept block seen so far, a number and a
// turn count per session until its last request, and the seq of each call
// with a span id of the last SessionIdle (to resolve parent links).
type records struct {
	o     Options
	sess  *sessions
	kanon *kAnon
	seq   int64
	t0    int64

	sessFinal map[sessionID]int64
	sessTurns map[sessionID]int32
	nSess     int64

	catLabel map[*category]string
	nCat     int

	blockFinal map[uint64]int64
	nextBlock  int64

	calls *callSeqs
	// links and linksDropped count the parent links written and dropped.
	links, linksDropped int64
}

func newRecords(o Options, sess *sessions, kanon *kAnon) *records {
	return &records{
		o: o, sess: sess, kanon: kanon,
		sessFinal: map[sessionID]int64{}, sessTurns: map[sessionID]int32{},
		catLabel: map[*category]string{}, blockFinal: map[uint64]int64{},
		calls: newCallSeqs(int64(o.SessionIdle)),
	}
}

// next returns the record of e, whose session is sid.
func (rs *records) next(e *redacted, sid sessionID) traces.Record {
	if rs.seq == 0 && !rs.o.Part {
		rs.t0 = e.t // a part keeps Unix ns: Compose subtracts the first
	}
	r := traces.NewRecord()
	r.Seq = rs.seq
	if rs.o.Part {
		r.Seq |= int64(rs.o.PartIndex) << PartSeqBits
	}
	rs.seq++
	r.ArrivalNs = e.t - rs.t0
	if rs.sess.kept(sid) {
		if rs.sessFinal[sid] == 0 {
			rs.nSess++
			rs.sessFinal[sid] = rs.nSess
		}
		rs.sessTurns[sid]++
		r.Session = rs.sessFinal[sid]
		r.Turn = rs.sessTurns[sid]
		if rs.sess.done(sid, r.Turn) {
			delete(rs.sessFinal, sid)
			delete(rs.sessTurns, sid)
		}
	}
	if rs.o.Part {
		// Every request with a session key carries its digest: only
		// Compose, which sees every part, knows which are sessions.
		r.Session, r.Turn = 0, 0
		if sid != 0 {
			r.Session = int64(e.sessDigest)
		}
	}
	rs.link(&r, e, sid)
	if c, ok := rs.kanon.category(e); ok {
		label, seen := rs.catLabel[c]
		if !seen {
			rs.nCat++
			if rs.o.KeepHashes || rs.o.Part {
				label = hex.EncodeToString(e.cat[:16])
			} else {
				label = "c" + strconv.Itoa(rs.nCat)
			}
			rs.catLabel[c] = label
		}
		r.Category = label
		// The prefix as the category's first request counted it, cut to
		// this prompt: a prefix is part of the prompt (the server's count
		// of a prompt can be shorter than a local count of its prefix).
		r.PrefixTokens = min(c.prefixTokens, max(e.inTok, 0))
	}
	if len(e.blocks) > 0 {
		r.PrefixBlocks = rs.blocks(e)
	}
	r.InputTokens = max(e.inTok, 0)
	r.OutputTokens = max(e.outTok, 0)
	r.Model = e.model
	r.API = e.api
	if e.has {
		r.Run = RunLabel
		r.ScheduledNs, r.SentNs = r.ArrivalNs, r.ArrivalNs
		if e.ttft >= 0 {
			r.FirstTokenNs = r.ArrivalNs + e.ttft
		}
		// The production finish as a request column: a closed-session
		// replay takes the think time from it. The engine's e2e first, else
		// the logged end of the response (a span's or the gateway's).
		if e.e2e >= 0 {
			r.LastTokenNs = r.ArrivalNs + e.e2e
			r.FinishNs = r.LastTokenNs
		} else if e.finish >= 0 {
			r.FinishNs = r.ArrivalNs + e.finish
		}
		r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens = e.srvIn, e.srvOut, e.srvCached
		r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = e.queue, e.prefill, e.decode
		r.Status = e.status
		if r.Status == "" {
			r.Status = traces.StatusOK
		}
		r.HTTPStatus = e.httpStatus
		r.Error = e.errMsg
	}
	return r
}

// maxBlocks bounds the padding of one request's prefix_blocks.
const maxBlocks = 1 << 14

// blocks numbers e's prefix blocks: a kept block by first appearance (or
// its digest bits with KeepHashes), any other a fresh id of its own.
func (rs *records) blocks(e *redacted) []int64 {
	want := len(e.blocks)
	if bs := rs.o.BlockSize; e.inTok >= 0 {
		// Follow the token count in use (usage may differ a little from
		// the tokenizer), bounded against absurd usage numbers.
		want = min((int(e.inTok)+bs-1)/bs, max(len(e.blocks), maxBlocks))
	}
	out := make([]int64, 0, want)
	for j, b := range e.blocks {
		if j >= want {
			break
		}
		if !rs.kanon.block(b) {
			out = append(out, rs.unique())
			continue
		}
		id, ok := rs.blockFinal[b]
		if !ok {
			if rs.o.KeepHashes || rs.o.Part {
				id = int64(b >> 1)
			} else {
				rs.nextBlock++
				id = rs.nextBlock
			}
			rs.blockFinal[b] = id
		}
		out = append(out, id)
	}
	for len(out) < want {
		out = append(out, rs.unique())
	}
	return out
}

// unique is a block id no other block has.
func (rs *records) unique() int64 {
	rs.nextBlock++
	if rs.o.KeepHashes || rs.o.Part {
		return -rs.nextBlock // never collides with a (non-negative) digest prefix
	}
	return rs.nextBlock
}

// link sets r.ParentSeq from e's parent span: the seq of the call whose span
// it is, when that call came earlier, within SessionIdle, and in the same
// session (replay follows links only within a session). Any other parent is
// dropped and counted: a span of another kind, a call not captured (or
// forgotten past SessionIdle), or a call of another session. Then it
// remembers e's own span for the calls it spawns.
func (rs *records) link(r *traces.Record, e *redacted, sid sessionID) {
	if e.span == 0 && e.parent == 0 {
		return
	}
	rs.calls.sweep(e.t)
	if e.parent != 0 {
		if c, ok := rs.calls.get(e.parent, e.t); ok && sid != 0 && c.sid == sid && r.Session != 0 {
			r.ParentSeq = c.seq
			rs.links++
		} else {
			rs.linksDropped++
		}
	}
	if e.span != 0 {
		rs.calls.put(e.span, callSeq{seq: r.Seq, sid: sid, t: e.t})
	}
}

// callSeqs maps the span hashes of the calls of the last idle ns to their
// final seqs: the parent of a call arrives before it, so the records stage
// (which numbers in arrival order) knows the parent's seq when the child
// comes. Entries older than idle are swept as in sessions, so it holds the
// calls of one SessionIdle window (about 50 bytes each).
type callSeqs struct {
	idle      int64
	m         map[uint64]callSeq
	nextSweep int64
}

type callSeq struct {
	seq int64
	sid sessionID
	t   int64
}

func newCallSeqs(idle int64) *callSeqs { return &callSeqs{idle: idle, m: map[uint64]callSeq{}} }

func (c *callSeqs) sweep(t int64) {
	if t < c.nextSweep {
		return
	}
	limit := limitAt(t, c.idle)
	for k, v := range c.m {
		if v.t < limit {
			delete(c.m, k)
		}
	}
	c.nextSweep = t + sweepEvery(c.idle)
}

// get returns the call of span h if it arrived within idle before t.
func (c *callSeqs) get(h uint64, t int64) (callSeq, bool) {
	v, ok := c.m[h]
	return v, ok && v.t >= limitAt(t, c.idle)
}

func (c *callSeqs) put(h uint64, v callSeq) { c.m[h] = v }
