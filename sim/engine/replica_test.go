package engine

import (
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// pull is one OnRemote call: the request, the tokens to pull and when.
type pull struct {
	q      *Request
	tokens int
	at     int64
}

// replicaRun is a Replica with its finished rows and pulls recorded.
type replicaRun struct {
	rp    *Replica
	rows  []traces.Record
	pulls []pull
}

func newReplicaRun(t *testing.T, o Options, remoteKV bool) *replicaRun {
	t.Helper()
	rp, err := NewReplica(o)
	if err != nil {
		t.Fatal(err)
	}
	x := &replicaRun{rp: rp}
	rp.OnFinish = func(_ *Request, r traces.Record) { x.rows = append(x.rows, r) }
	if remoteKV {
		rp.OnRemote = func(q *Request, tokens int, now int64) { x.pulls = append(x.pulls, pull{q, tokens, now}) }
	}
	return x
}

// drain runs the replica's steps from now until it has nothing to run
// and returns the time the last one ended.
func (x *replicaRun) drain(now int64) int64 {
	for end, ok := x.rp.Plan(now); ok; end, ok = x.rp.Plan(end) {
		x.rp.Commit()
		now = end
	}
	return now
}

func arrival(t *testing.T, o Options, q Arrival, seq int64) *Request {
	t.Helper()
	x, err := NewRequest(o, q, seq)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestRemotePrefill: a request whose prompt a prefill replica computed
// takes its blocks at admission, pulls all but its last prompt token's KV
// (less what the decode replica caches), and once the KV lands computes
// the last prompt token alone; its row has the decode side's times.
func TestRemotePrefill(t *testing.T) {
	o := stepOptions()
	for _, tc := range []struct {
		why string
		// warm runs this prompt locally first, so the decode replica
		// caches its blocks.
		warm      []int32
		prompt    []int32
		tokens    int // pulled
		cached    int32
		lastStep  step // the step after the KV landed
		landAfter int64
	}{
		{
			why:    "A cold replica pulls 19 of a 20-token prompt and computes the 20th.",
			prompt: prompt(50, 20), tokens: 19, landAfter: 3000,
			lastStep: step{1, 0, 20, 1, 0},
		},
		{
			why:  "A replica that caches the prompt's first 4 blocks (all but the last, which holds the last token) pulls 3 tokens.",
			warm: prompt(51, 20), prompt: prompt(51, 20), tokens: 3, cached: 16, landAfter: 3000,
			lastStep: step{1, 0, 20, 1, 0},
		},
		{
			why:    "A 1-token prompt has no KV to pull: it is scheduled at once.",
			prompt: prompt(52, 1), tokens: 0, landAfter: 0,
			lastStep: step{1, 0, 1, 1, 0},
		},
	} {
		t.Run(tc.why, func(t *testing.T) {
			x := newReplicaRun(t, o, true)
			now := int64(0)
			if tc.warm != nil {
				x.rp.Add(arrival(t, o, Arrival{Prompt: tc.warm, MaxTokens: 1, IgnoreEOS: true}, 0), 0)
				now = x.drain(0) + 1000
			}
			q := arrival(t, o, Arrival{Prompt: tc.prompt, MaxTokens: 2, IgnoreEOS: true}, 1)
			x.rp.AddRemote(q, now)
			if x.rp.Waiting() != 1 || x.rp.Idle() {
				t.Fatalf("waiting %d idle %v after AddRemote, want 1 and busy", x.rp.Waiting(), x.rp.Idle())
			}
			if tc.tokens > 0 {
				if _, ok := x.rp.Plan(now); ok {
					t.Fatal("a step planned while the KV is on its way")
				}
				if len(x.pulls) != 1 || x.pulls[0].q != q || x.pulls[0].tokens != tc.tokens || x.pulls[0].at != now {
					t.Fatalf("pulls %+v, want one of %d tokens at %d", x.pulls, tc.tokens, now)
				}
				if x.rp.Waiting() != 1 || x.rp.Idle() || x.rp.Running() != 0 {
					t.Fatalf("while pulling: waiting %d running %d idle %v; want 1, 0, busy (vLLM counts pulls as waiting)", x.rp.Waiting(), x.rp.Running(), x.rp.Idle())
				}
				x.rp.KVArrived(q, now+tc.landAfter)
			} else if len(x.pulls) != 0 {
				t.Fatalf("pulls %+v, want none", x.pulls)
			}
			landed := now + tc.landAfter
			end, ok := x.rp.Plan(landed)
			if !ok {
				t.Fatal("nothing planned once the KV landed")
			}
			st := x.rp.e
			if got := (step{st.prefillTokens, st.decodeSeqs, st.ctxTokens, len(st.running), st.numWaiting()}); got != tc.lastStep {
				t.Errorf("the step after the KV landed: %+v, want %+v", got, tc.lastStep)
			}
			x.rp.Commit()
			last := x.drain(end)
			r := x.rows[len(x.rows)-1]
			if r.ServerQueueNs != traces.NotReported || r.ServerKVTransferNs != tc.landAfter || r.ServerDecodeQueueNs != 0 ||
				r.ServerCachedTokens != tc.cached || r.ServerPrefillNs != end-landed || r.ServerDecodeNs != last-end || r.OutputTokens != 2 {
				t.Errorf("row: queue %d pull %d decode-queue %d cached %d prefill %d decode %d tokens %d; want NotReported %d 0 %d %d %d 2",
					r.ServerQueueNs, r.ServerKVTransferNs, r.ServerDecodeQueueNs, r.ServerCachedTokens, r.ServerPrefillNs, r.ServerDecodeNs, r.OutputTokens,
					tc.landAfter, tc.cached, end-landed, last-end)
			}
		})
	}
}

// TestRemoteWaitsForBlocks: a remote request is admitted, and its pull
// begins, only when the blocks of its whole prompt fit; meanwhile it keeps
// its place and is counted as waiting. Its decode queue is the wait for
// blocks.
func TestRemoteWaitsForBlocks(t *testing.T) {
	o := stepOptions()
	o.NumGPUBlocks, o.MaxModelLen = 6, 24
	x := newReplicaRun(t, o, true)
	x.rp.Add(arrival(t, o, Arrival{Prompt: prompt(60, 16), MaxTokens: 2, IgnoreEOS: true}, 0), 0)
	q := arrival(t, o, Arrival{Prompt: prompt(61, 16), MaxTokens: 2, IgnoreEOS: true}, 1)
	x.rp.AddRemote(q, 0)
	end, ok := x.rp.Plan(0) // the local prompt takes 4 of 6 blocks
	if !ok || len(x.pulls) != 0 || x.rp.Waiting() != 1 {
		t.Fatalf("first step: planned %v, pulls %+v, waiting %d; want the local prompt alone, the remote one waiting", ok, x.pulls, x.rp.Waiting())
	}
	x.rp.Commit()
	freed := x.drain(end)
	if len(x.pulls) != 1 || x.pulls[0].at != freed || x.pulls[0].tokens != 15 {
		t.Fatalf("pulls %+v, want one of 15 tokens once the local request finished at %d", x.pulls, freed)
	}
	x.rp.KVArrived(q, freed+500)
	x.drain(freed + 500)
	r := x.rows[len(x.rows)-1]
	if r.ServerDecodeQueueNs != freed || r.ServerKVTransferNs != 500 {
		t.Errorf("decode queue %d pull %d, want %d (the wait for blocks) and 500", r.ServerDecodeQueueNs, r.ServerKVTransferNs, freed)
	}
	if c := x.rp.Meter().Counters(); c.KVPulls != 1 || c.Finished != 2 {
		t.Errorf("counters %+v, want 1 pull and 2 finished", c)
	}
}

// TestRemoteWithoutPuller: with no OnRemote the KV lands at admission, and
// the request runs as if it had been pulled in no time.
func TestRemoteWithoutPuller(t *testing.T) {
	o := stepOptions()
	x := newReplicaRun(t, o, false)
	q := arrival(t, o, Arrival{Prompt: prompt(70, 20), MaxTokens: 3, IgnoreEOS: true}, 0)
	x.rp.AddRemote(q, 100)
	end := x.drain(100)
	r := x.rows[0]
	if r.ServerKVTransferNs != 0 || r.ServerDecodeQueueNs != 0 || r.FirstTokenNs != 100+stepTime(o, 1, 0, 20) || r.LastTokenNs != end {
		t.Errorf("row %+v; want no pull, no decode queue, the last prompt token computed in the first step", r)
	}
}

// TestPrefillPart: the prefill share of a request is the same prompt with
// one output token, and appending output hashes to it leaves the
// request's own hashes alone.
func TestPrefillPart(t *testing.T) {
	o := stepOptions()
	q := arrival(t, o, Arrival{ID: "p", Prompt: prompt(80, 18), MaxTokens: 30, IgnoreEOS: true}, 4)
	p := q.PrefillPart()
	if p.PromptTokens() != 18 || p.r.maxOut != 1 || p.r.seq != 4 || p.r.id != "p" || len(p.BlockHashes()) != 4 {
		t.Fatalf("prefill part: %d prompt tokens, %d out, seq %d, id %q, %d hashes", p.PromptTokens(), p.r.maxOut, p.r.seq, p.r.id, len(p.BlockHashes()))
	}
	before := append([]uint64(nil), q.BlockHashes()...)
	x := newReplicaRun(t, o, false)
	x.rp.Add(p, 0)
	x.drain(0)
	if len(x.rows) != 1 || x.rows[0].OutputTokens != 1 {
		t.Fatalf("rows %+v, want the prefill part's one token", x.rows)
	}
	if got := q.BlockHashes(); len(got) != len(before) || got[len(got)-1] != before[len(before)-1] {
		t.Errorf("the request's hashes changed after its prefill part ran: %v, were %v", got, before)
	}
}
