package replay

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/traces"
)

// Who served each request. A fleet's gateway or router can name the
// replica that served a request in a response header; replay copies it to
// the results' replica column (and the prefill replica and the router's
// reason to theirs), so analyze can blame the tail on replicas and pools.
// The header names are the user's (Options.ReplicaHeader, ...): no
// standard one exists. The simulator's fleet sets X-Sim-Replica,
// X-Sim-Prefill-Replica and X-Sim-Route-Reason (traces.ReplicaHeader, ...),
// read unless the options name others.

// Metadata keys of the replica columns' source.
const (
	// MetaReplicaHeader is Options.ReplicaHeader; MetaReplicaMissing how
	// many responses lacked it.
	MetaReplicaHeader  = "replay.replica_header"
	MetaReplicaMissing = "replay.replica_header_missing"
)

// keptHeaders are the response headers whose values fill a result row's
// fleet columns, in this order (Options.replicaHeaders).
const (
	keptReplica = iota
	keptPrefill
	keptReason
	nKept
)

// replicaHeaders are the names of the headers the run keeps, by kept*
// index. tokentrace sim's fleet names its replicas in headers of its own,
// which no other server sets: they are read wherever the options name no
// other, so a replay of `tokentrace sim --replicas` keeps them with no
// option (and a disaggregated response's timings are read as the decode
// side's, see decodeSide). Only a header the options name is counted as
// missing (replicaNote).
func (o *Options) replicaHeaders() []string {
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	return []string{keptReplica: or(o.ReplicaHeader, traces.ReplicaHeader), keptPrefill: or(o.PrefillReplicaHeader, traces.PrefillReplicaHeader),
		keptReason: or(o.RouteReasonHeader, traces.RouteReasonHeader)}
}

// keepFleetColumns fills rec's replica, prefill_replica and route_reason
// columns from a response's headers: get(i) is the value of the i-th of
// names.
func keepFleetColumns(rec *traces.Record, names []string, get func(i int) string) {
	for i, n := range names {
		if n == "" {
			continue
		}
		v := get(i)
		if len(v) > maxFleetValue {
			v = v[:maxFleetValue] // a name, not a document
		}
		switch i {
		case keptReplica:
			rec.Replica = v
		case keptPrefill:
			rec.PrefillReplica = v
		case keptReason:
			rec.RouteReason = v
		}
	}
}

// maxFleetValue bounds a replica name or route reason kept from a header.
const maxFleetValue = 256

// netHTTPKept is get for keepFleetColumns over a net/http response.
func netHTTPKept(h http.Header, names []string) func(i int) string {
	return func(i int) string { return h.Get(names[i]) }
}

// decodeSide reads the engine timings of a disaggregated request (one that
// named a prefill replica) as the decode replica's, which answered it
// (vLLM's metrics object and llm_request span come from the engine the
// client's stream came from): see otlp.DecodeSide.
func decodeSide(rec *traces.Record) {
	if rec.PrefillReplica != "" {
		otlp.DecodeSide(rec)
	}
}

// replicaNote records the replica header's use in the metadata and, when
// responses lacked it, says so once on Options.Log.
func (r *runner) replicaNote(m *traces.Meta, s *Summary) {
	h := r.o.ReplicaHeader
	if h == "" {
		return
	}
	s.ReplicaHeader = h
	m.Set(MetaReplicaHeader, h)
	m.Set(MetaReplicaMissing, strconv.Itoa(s.ReplicaMissing))
	if r.o.Log == nil || s.ReplicaMissing == 0 {
		return
	}
	if s.ReplicaNamed == 0 {
		fmt.Fprintf(r.o.Log, "replay: the replica header %s was in none of the %d responses: the replica column is empty (does the gateway set it on responses? see docs/commands.md, replay)\n",
			h, s.ReplicaMissing)
		return
	}
	fmt.Fprintf(r.o.Log, "replay: %d of %d responses lacked the replica header %s: their replica column is empty\n",
		s.ReplicaMissing, s.ReplicaMissing+s.ReplicaNamed, h)
}
