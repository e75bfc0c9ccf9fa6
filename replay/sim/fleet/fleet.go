// Package fleet simulates a serving fleet: replicas of the simulated vLLM
// engine (package replay/sim) behind a router, optionally split into a
// prefill pool and a decode pool whose KV caches move between them
// (prefill/decode disaggregation, as llm-d runs vLLM with the NIXL
// connector).
//
// A fleet is described by sim.Options.Fleet, so every place that takes the
// simulator's options or its configuration keys (sim.ApplyConfig:
// "replicas=4,router=prefix-aware", "prefill-replicas=2,decode-replicas=6,
// kv-transfer-latency=2ms", "replica-3.step-fixed=24ms") takes a fleet.
// Simulate runs one offline in virtual time, reading requests as a stream;
// Start serves one behind one OpenAI-compatible endpoint in real time.
// Both also run plain options (one engine, no router), so a caller needs
// one path.
//
// The router: round-robin, least outstanding requests, session affinity,
// or prefix-aware scoring modelled on llm-d's inference scheduler (see
// prefixWeight in router.go for what is modelled and from where). Under
// disaggregation it picks a prefill and a decode replica for each request
// when it arrives (llm-d's EPP runs its prefill and decode profiles
// together); the prefill replica computes the prompt and one token (the
// max_tokens=1 request of llm-d's routing sidecar), then the decode
// replica admits the request, takes its KV blocks, pulls the KV over the
// shared link (a fixed latency, a per-token time, a bandwidth cap shared
// equally by the pulls in flight), recomputes the last prompt token and
// decodes, as vLLM does with its NIXL connector.
//
// Every request leaves one truth row (traces.Record) with the replica that
// served it (Replica; under disaggregation the decode replica, and
// PrefillReplica), why the router chose it (RouteReason), and the timings
// of each side. For a disaggregated request:
//
//	server_queue_ns        = prefill replica: first scheduled − arrival
//	server_prefill_ns      = prefill replica: first token − first scheduled
//	                         + decode replica: first token − scheduled after the pull (the last prompt token)
//	server_kv_transfer_ns  = decode replica: KV arrived − blocks taken (the pull)
//	server_decode_queue_ns = decode replica: blocks taken − arrival there
//	                         + scheduled after the pull − KV arrived
//	server_decode_ns       = decode replica: last token − first token
//
// so first_token_ns − arrival_ns = queue + prefill + kv_transfer +
// decode_queue, and last_token_ns − arrival_ns adds decode. Aggregated
// replicas' rows have the single engine's columns (server_kv_transfer_ns
// and server_decode_queue_ns NotReported).
package fleet

import (
	"fmt"
	"io"
	"strconv"

	"github.com/tokentrace/tokentrace/replay/sim"
)

// replica is one replica of a fleet: its description and the router's
// view of it.
type replica struct {
	spec   sim.ReplicaSpec
	member *member
}

// layout is a fleet's replicas and the router's pools over them, shared by
// Simulate and Start.
type layout struct {
	o     sim.Options
	plain bool // not a fleet: one engine, no router
	reps  []replica
	// pool routes aggregated replicas, or prefills; decode routes decode
	// replicas (nil when aggregated).
	pool, decode *pool
	// pdReasons names the route reason of each pair of choices.
	pdReasons [nReasons][nReasons]string
}

// newLayout resolves o's replicas; waiting reports a replica's queue (for
// the prefix-aware router).
func newLayout(o sim.Options, waiting func(rep int) int) (*layout, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	l := &layout{o: o}
	if !o.IsFleet() {
		l.plain = true
		l.reps = []replica{{spec: sim.ReplicaSpec{Options: o}}}
		l.pool = newPool(sim.RouterRoundRobin, []int{0}, nil, waiting)
		l.reps[0].member = l.pool.members[0]
		return l, nil
	}
	specs, err := o.ReplicaSpecs()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	blocks := func(rep int) int { return specs[rep].Options.NumGPUBlocks }
	var agg, pre, dec []int
	for i, sp := range specs {
		l.reps = append(l.reps, replica{spec: sp})
		switch sp.Role {
		case sim.RolePrefill:
			pre = append(pre, i)
		case sim.RoleDecode:
			dec = append(dec, i)
		default:
			agg = append(agg, i)
		}
	}
	if o.Disaggregated() {
		l.pool = newPool(o.Fleet.Router, pre, blocks, waiting)
		l.decode = newPool(o.Fleet.Router, dec, blocks, waiting)
	} else {
		l.pool = newPool(o.Fleet.Router, agg, blocks, waiting)
	}
	for _, p := range []*pool{l.pool, l.decode} {
		if p == nil {
			continue
		}
		for _, m := range p.members {
			l.reps[m.rep].member = m
		}
	}
	for i := range reasons {
		for j := range reasons {
			l.pdReasons[i][j] = reasons[i] + "/" + reasons[j]
		}
	}
	return l, nil
}

// route is a request's routing: the serving (decode) replica, the prefill
// replica (-1 when the serving one prefills) and the reason.
type route struct {
	rep, pre int
	reason   string
}

// route chooses the replica(s) for a request with the prompt's block
// hashes and session, at time now.
func (l *layout) route(hashes []uint64, session int64, now int64) route {
	if l.plain {
		l.pool.members[0].outstanding++
		return route{rep: 0, pre: -1}
	}
	m, why := l.pool.pick(hashes, session, now)
	if l.decode == nil {
		return route{rep: m.rep, pre: -1, reason: reasons[why]}
	}
	d, dwhy := l.decode.pick(hashes, session, now)
	return route{rep: d.rep, pre: m.rep, reason: l.pdReasons[why][dwhy]}
}

// metricsSources are the replicas' metrics with their pod and role labels
// (none for plain options: one engine's /metrics).
func (l *layout) metricsSources(meter func(rep int) sim.Meter) []sim.MetricsSource {
	srcs := make([]sim.MetricsSource, len(l.reps))
	for i, r := range l.reps {
		srcs[i].Meter = meter(i)
		if !l.plain {
			srcs[i].Labels = [][2]string{{"pod", r.spec.Name}, {"role", r.spec.Role}}
		}
	}
	return srcs
}

// writeRouterMetrics writes the router's families: requests routed to
// each replica by reason, requests in flight per replica, and the KV link
// (tokentrace's own names: neither vLLM nor the gateway exports these per
// replica).
func (l *layout) writeRouterMetrics(w io.Writer, pulls func() (active int, tokens float64)) error {
	if l.plain {
		return nil
	}
	b := make([]byte, 0, 4096)
	lab := func(r *replica) []byte {
		b = append(b, `{pod="`...)
		b = append(b, r.spec.Name...)
		b = append(b, `",role="`...)
		b = append(b, r.spec.Role...)
		return append(b, '"')
	}
	b = append(b, "# HELP tokentrace_router_decisions_total Requests the router sent to each replica, by the reason of its choice.\n# TYPE tokentrace_router_decisions_total counter\n"...)
	for i := range l.reps {
		r := &l.reps[i]
		for k, reason := range reasons {
			n := r.member.decisions[k]
			if n == 0 && !l.usesReason(k) {
				continue
			}
			b = append(b, "tokentrace_router_decisions_total"...)
			b = lab(r)
			b = append(b, `,reason="`...)
			b = append(b, reason...)
			b = append(b, `"} `...)
			b = appendFloat(b, float64(n))
			b = append(b, '\n')
		}
	}
	b = append(b, "# HELP tokentrace_router_outstanding_requests Requests the router sent to each replica that have not finished there.\n# TYPE tokentrace_router_outstanding_requests gauge\n"...)
	for i := range l.reps {
		r := &l.reps[i]
		b = append(b, "tokentrace_router_outstanding_requests"...)
		b = lab(r)
		b = append(b, "} "...)
		b = appendFloat(b, float64(r.member.outstanding))
		b = append(b, '\n')
	}
	if l.decode != nil && pulls != nil {
		active, tokens := pulls()
		b = append(b, "# HELP tokentrace_kv_transfers_active KV pulls in flight between the prefill and the decode pool.\n# TYPE tokentrace_kv_transfers_active gauge\ntokentrace_kv_transfers_active "...)
		b = appendFloat(b, float64(active))
		b = append(b, "\n# HELP tokentrace_kv_transfer_tokens_total Tokens of KV cache pulled from the prefill to the decode pool.\n# TYPE tokentrace_kv_transfer_tokens_total counter\ntokentrace_kv_transfer_tokens_total "...)
		b = appendFloat(b, tokens)
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}

// usesReason reports whether the fleet's router can give reason k (its
// series are written even at 0, so rates work from the start).
func (l *layout) usesReason(k int) bool {
	switch l.o.Fleet.Router {
	case sim.RouterRoundRobin:
		return k == rRoundRobin
	case sim.RouterLeastOutstanding:
		return k == rLeastOutstanding
	case sim.RouterSessionAffinity:
		return k == rSession || k == rSessionNew || k == rNoSession
	}
	return k == rPrefix || k == rLoad
}

// appendFloat formats v as Prometheus' Python client does ("3.0").
func appendFloat(b []byte, v float64) []byte {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		b = strconv.AppendInt(b, int64(v), 10)
		return append(b, ".0"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
