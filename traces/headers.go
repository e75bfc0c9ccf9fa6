package traces

// HTTP headers between a fleet and the client that replays against it: a
// fleet's front (tokentrace sim's router) sets the response headers on
// every generation request, and replay records their values into the
// Replica, PrefillReplica and RouteReason columns when its options name
// no other headers; the session header goes the other way, from the
// client to a session-affine router.
const (
	// ReplicaHeader names the replica that served a request (under
	// prefill/decode disaggregation the decode replica).
	ReplicaHeader = "X-Sim-Replica"
	// PrefillReplicaHeader names the replica that computed the prompt of
	// a disaggregated request.
	PrefillReplicaHeader = "X-Sim-Prefill-Replica"
	// RouteReasonHeader is why the router chose the replica (the
	// route_reason values).
	RouteReasonHeader = "X-Sim-Route-Reason"
	// SessionHeader is the request header whose value keeps a session on
	// one replica under session affinity (what replay sends with
	// --session-affinity, and vLLM's own session header).
	SessionHeader = "X-Session-ID"
)
