package sim

import (
	"fmt"
	"io"
	"strconv"

	"github.com/tokentrace/tokentrace/sim/engine"
)

// replica is one replica of a fleet: its description and the router's
// view of it.
type replica struct {
	spec   ReplicaSpec
	member *member
}

// layout is a fleet's replicas and the router's pools over them, shared by
// Simulate and Start.
type layout struct {
	o     Options
	plain bool // not a fleet: one engine, no router
	reps  []replica
	// pool routes aggregated replicas, or prefills; decode routes decode
	// replicas (nil when aggregated).
	pool, decode *pool
	// reasons are the router policy's route reasons; pdReasons name
	// those of each pair of choices under disaggregation.
	reasons   []string
	pdReasons [][]string
}

// newLayout resolves o's replicas; waiting reports a replica's queue (for
// the prefix-aware router).
func newLayout(o Options, waiting func(rep int) int) (*layout, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	l := &layout{o: o}
	if !o.IsFleet() {
		l.plain = true
		l.reps = []replica{{spec: ReplicaSpec{Options: o.engineOptions()}}}
		l.pool = newPool(RouterRoundRobin, []int{0}, nil, waiting)
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
		case RolePrefill:
			pre = append(pre, i)
		case RoleDecode:
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
	l.reasons = l.pool.policy.reasons
	if l.decode != nil {
		for _, p := range l.reasons {
			var pd []string
			for _, d := range l.reasons {
				pd = append(pd, p+"/"+d)
			}
			l.pdReasons = append(l.pdReasons, pd)
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
		return route{rep: m.rep, pre: -1, reason: l.reasons[why]}
	}
	d, dwhy := l.decode.pick(hashes, session, now)
	return route{rep: d.rep, pre: m.rep, reason: l.pdReasons[why][dwhy]}
}

// metricsSources are the replicas' metrics with their pod and role labels
// (none for plain options: one engine's /metrics).
func (l *layout) metricsSources(meter func(rep int) engine.Meter) []engine.MetricsSource {
	srcs := make([]engine.MetricsSource, len(l.reps))
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
		for k, name := range l.reasons {
			n := r.member.decisions[k]
			b = append(b, "tokentrace_router_decisions_total"...)
			b = lab(r)
			b = append(b, `,reason="`...)
			b = append(b, name...)
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

// appendFloat formats v as Prometheus' Python client does ("3.0").
func appendFloat(b []byte, v float64) []byte {
	if v == float64(int64(v)) && v < 1e15 && v > -1e15 {
		b = strconv.AppendInt(b, int64(v), 10)
		return append(b, ".0"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
