// Package traces is tokentrace's one contract: the Record every stage reads
// and writes, its file Meta, and the codecs (Parquet, JSONL, JSONL+zstd,
// CSV). Importers and exporters of public traces and of other tools'
// formats live in traces/formats.
//
// Captured, synthetic, imported and replayed rows all share one schema, so a
// capture can be compared with its replay by the same tools. Columns carry
// their unit in the name; times are int64 nanoseconds offset from the start of
// the trace (request columns) or of the run (outcome columns).
package traces

import "time"

// API values of Record.API.
const (
	APICompletions = "completions"
	APIChat        = "chat"
)

// Status values of Record.Status. An empty status means the row carries no
// outcome (a trace that was never replayed).
const (
	StatusOK          = "ok"
	StatusHTTPError   = "http_error"
	StatusStreamError = "stream_error"
	StatusTimeout     = "timeout"
	StatusDisconnect  = "disconnect"
	StatusClientError = "client_error"
)

// Statuses lists every valid non-empty Status value.
var Statuses = []string{StatusOK, StatusHTTPError, StatusStreamError, StatusTimeout, StatusDisconnect, StatusClientError}

// NotReported marks an outcome number the server or client did not report
// (server usage, server timings, first/last token of a request that never
// produced one).
const NotReported = -1

// Record is one request: what was (or is to be) sent, and optionally what
// happened to it. This struct is the schema's one declaration: its fields in
// order are the columns, the parquet tag names each column and its Parquet
// encoding, and the trace tag its role in the text codecs (columns.go):
//
//   - request: a request column; CSV writes it even at its default
//   - always: JSONL writes it even at its default (a request column too)
//   - outcome: an outcome column
//   - unreported: a number that reads as NotReported when a file lacks it
//
// Every codec (Parquet, JSONL, CSV) and the column table of docs/schema.md
// are driven from it.
//
// Never rename or retype a column: add new ones (see SchemaVersion).
type Record struct {
	// Request columns (capture, synth, import).

	// Seq is the row's order in the trace (in a trace captured in parts,
	// the part index sits in the top bits: increasing, not dense).
	Seq int64 `parquet:"seq,delta" json:"seq" trace:"request,always"`
	// ArrivalNs is the arrival offset from the trace start.
	ArrivalNs int64 `parquet:"arrival_ns,delta" json:"arrival_ns" trace:"request,always"`
	// Session is an opaque session number (0 = none), renumbered in order of
	// first appearance (in a trace captured in parts, a keyed digest).
	Session int64 `parquet:"session,delta" json:"session" trace:"request"`
	// Turn is the turn within the session (0 = single-shot).
	Turn int32 `parquet:"turn,delta" json:"turn" trace:"request"`
	// Category is the k-anonymous prefix category label ("" = no shared prefix).
	Category string `parquet:"category,dict" json:"category" trace:"request"`
	// PrefixTokens is the length of the category's shared prefix in tokens.
	PrefixTokens int32 `parquet:"prefix_tokens,delta" json:"prefix_tokens" trace:"request"`
	// PrefixBlocks are optional chained block ids (Mooncake hash_ids style);
	// the block size is Meta.BlockSize.
	PrefixBlocks []int64 `parquet:"prefix_blocks,list" json:"prefix_blocks" trace:"request"`
	// InputTokens is the prompt length, prefix included (≥ 0).
	InputTokens int32 `parquet:"input_tokens,delta" json:"input_tokens" trace:"request,always"`
	// OutputTokens is the target output length (≥ 0).
	OutputTokens int32 `parquet:"output_tokens,delta" json:"output_tokens" trace:"request,always"`
	// Model is the model or LoRA adapter name.
	Model string `parquet:"model,dict" json:"model" trace:"request"`
	// API is chat or completions (APIChat, APICompletions; "" = the
	// replayer's default).
	API string `parquet:"api,dict" json:"api" trace:"request"`
	// Class is the traffic class, e.g. "interactive" or "batch" ("" = default).
	Class string `parquet:"class,dict" json:"class" trace:"request"`
	// SystemTokens is how many of the prompt's leading tokens are a system
	// prompt the workload's sessions share, and ToolTokens how many tool
	// definitions follow it (kv-cache-tester's system_tokens and
	// tool_tokens; 0 = not known): together the warm prefix a replayer
	// keeps cached across sessions.
	SystemTokens int32 `parquet:"system_tokens,delta" json:"system_tokens" trace:"request"`
	ToolTokens   int32 `parquet:"tool_tokens,delta" json:"tool_tokens" trace:"request"`
	// InputKinds says what the prompt adds to the call's context: "text"
	// (a message), "tool_result", several joined by "+" ("" = not known).
	InputKinds string `parquet:"input_kinds,dict" json:"input_kinds" trace:"request"`
	// FinishNs is when the call finished in production, on the arrival_ns
	// clock (NotReported = unknown): with it a closed-session replay knows
	// the think time, next arrival − this finish, instead of guessing.
	FinishNs int64 `parquet:"finish_ns,delta" json:"finish_ns" trace:"request,unreported"`
	// ThinkNs is an explicit think time: how long after its dependencies
	// finished the call was sent (NotReported = derive it from FinishNs).
	ThinkNs int64 `parquet:"think_ns,delta" json:"think_ns" trace:"request,unreported"`
	// ParentSeq is the seq of the call this one continues or was spawned by
	// (the previous turn, or the call that started a subagent or parallel
	// tool call; NotReported = none). A session with any parent_seq or
	// after_seqs is replayed as the graph they draw.
	ParentSeq int64 `parquet:"parent_seq,delta" json:"parent_seq" trace:"request,unreported"`
	// AfterSeqs are the seqs of every call this one waits for (a join);
	// empty = only ParentSeq.
	AfterSeqs []int64 `parquet:"after_seqs,list" json:"after_seqs" trace:"request"`

	// Outcome columns (replay, or capture when the logs hold them). Offsets
	// are from the run start; NotReported (-1) where unknown.

	// Run is the run label ("production" for captured outcomes).
	Run string `parquet:"run,dict" json:"run" trace:"outcome"`
	// ScheduledNs is when the request was due to be sent.
	ScheduledNs int64 `parquet:"scheduled_ns,delta" json:"scheduled_ns" trace:"outcome,unreported"`
	// SentNs is when the request was actually sent; lateness = sent − scheduled.
	SentNs int64 `parquet:"sent_ns,delta" json:"sent_ns" trace:"outcome,unreported"`
	// FirstTokenNs is the arrival of the first chunk that carried tokens.
	FirstTokenNs int64 `parquet:"first_token_ns,delta" json:"first_token_ns" trace:"outcome,unreported"`
	// LastTokenNs is the arrival of the last chunk that carried tokens.
	LastTokenNs int64 `parquet:"last_token_ns,delta" json:"last_token_ns" trace:"outcome,unreported"`
	// ChunkNs is the arrival offset of every streamed chunk that carried
	// tokens: when the socket read that completed it returned, or where the
	// replayer reads with the kernel's receive timestamps (open loop,
	// plain http, Linux) when its last bytes reached the machine, which no
	// client scheduling delay moves. Chunks that one read returns share
	// its time.
	ChunkNs []int64 `parquet:"chunk_ns,list" json:"chunk_ns" trace:"outcome"`
	// ChunkTokens is the tokens per chunk, where the server tells (same length
	// as ChunkNs, or empty).
	ChunkTokens []int32 `parquet:"chunk_tokens,list" json:"chunk_tokens" trace:"outcome"`
	// ServerPromptTokens is usage.prompt_tokens.
	ServerPromptTokens int32 `parquet:"server_prompt_tokens,delta" json:"server_prompt_tokens" trace:"outcome,unreported"`
	// ServerOutputTokens is usage.completion_tokens.
	ServerOutputTokens int32 `parquet:"server_output_tokens,delta" json:"server_output_tokens" trace:"outcome,unreported"`
	// ServerCachedTokens is usage.prompt_tokens_details.cached_tokens.
	ServerCachedTokens int32 `parquet:"server_cached_tokens,delta" json:"server_cached_tokens" trace:"outcome,unreported"`
	// ServerQueueNs is the server's own queueing time for the request.
	ServerQueueNs int64 `parquet:"server_queue_ns,delta" json:"server_queue_ns" trace:"outcome,unreported"`
	// ServerPrefillNs is the server's own prefill time (scheduled → first token).
	ServerPrefillNs int64 `parquet:"server_prefill_ns,delta" json:"server_prefill_ns" trace:"outcome,unreported"`
	// ServerDecodeNs is the server's own decode time (first → last token).
	ServerDecodeNs int64 `parquet:"server_decode_ns,delta" json:"server_decode_ns" trace:"outcome,unreported"`
	// ServerPreemptions is how often the server preempted the request
	// (the simulator's truth; vLLM does not report it per request).
	ServerPreemptions int32 `parquet:"server_preemptions,delta" json:"server_preemptions" trace:"outcome,unreported"`
	// ServerKVTransferNs is how long the serving replica waited for the
	// request's KV cache to arrive from the prefill replica that computed
	// it (prefill/decode disaggregation; NotReported where the prompt was
	// prefilled where it was decoded).
	ServerKVTransferNs int64 `parquet:"server_kv_transfer_ns,delta" json:"server_kv_transfer_ns" trace:"outcome,unreported"`
	// ServerDecodeQueueNs is the decode replica's own queueing time under
	// prefill/decode disaggregation: waiting for KV blocks and a batch slot
	// there, before and after the transfer (NotReported without
	// disaggregation, where ServerQueueNs is the one queue).
	ServerDecodeQueueNs int64 `parquet:"server_decode_queue_ns,delta" json:"server_decode_queue_ns" trace:"outcome,unreported"`
	// Replica is the name of the replica that served the request behind a
	// router (under prefill/decode disaggregation, the decode replica); "" =
	// not known, or no fleet.
	Replica string `parquet:"replica,dict" json:"replica" trace:"outcome"`
	// PrefillReplica is the name of the replica that computed the prompt
	// under prefill/decode disaggregation ("" = none: Replica did it).
	PrefillReplica string `parquet:"prefill_replica,dict" json:"prefill_replica" trace:"outcome"`
	// RouteReason is why the router chose the replica: round-robin,
	// least-outstanding, session, session-new, no-session, prefix or load;
	// under disaggregation "PREFILL/DECODE", the reasons of both choices
	// ("" = not known).
	RouteReason string `parquet:"route_reason,dict" json:"route_reason" trace:"outcome"`
	// Status is ok, http_error, stream_error, timeout, disconnect or
	// client_error (Statuses), or "" when the row carries no outcome.
	Status string `parquet:"status,dict" json:"status" trace:"outcome"`
	// HTTPStatus is the HTTP status code (0 = no response).
	HTTPStatus int32 `parquet:"http_status,delta" json:"http_status" trace:"outcome"`
	// Error is a short, content-free error message.
	Error string `parquet:"error,dict" json:"error" trace:"outcome"`
	// RequestID is the X-Request-Id sent.
	RequestID string `parquet:"request_id" json:"request_id" trace:"outcome"`
}

// ClearOutcome sets every outcome column to "nothing happened yet": empty
// strings and lists, NotReported numbers. Decoders start every row from this
// state so a missing column reads as not reported, never as zero.
func (r *Record) ClearOutcome() {
	r.Run = ""
	r.ScheduledNs, r.SentNs, r.FirstTokenNs, r.LastTokenNs = NotReported, NotReported, NotReported, NotReported
	r.ChunkNs = r.ChunkNs[:0]
	r.ChunkTokens = r.ChunkTokens[:0]
	r.ServerPromptTokens, r.ServerOutputTokens, r.ServerCachedTokens = NotReported, NotReported, NotReported
	r.ServerQueueNs, r.ServerPrefillNs, r.ServerDecodeNs = NotReported, NotReported, NotReported
	r.ServerPreemptions = NotReported
	r.ServerKVTransferNs, r.ServerDecodeQueueNs = NotReported, NotReported
	r.Replica, r.PrefillReplica, r.RouteReason = "", "", ""
	r.Status = ""
	r.HTTPStatus = 0
	r.Error = ""
	r.RequestID = ""
}

// NewRecord returns an empty Record as a decoder reads a row with no
// columns: no outcome (ClearOutcome: NotReported numbers, empty strings),
// FinishNs, ThinkNs and ParentSeq NotReported, and nil chunk lists.
func NewRecord() Record {
	var r Record
	r.ClearOutcome()
	r.clearRequestAbsent()
	r.ChunkNs, r.ChunkTokens = nil, nil
	return r
}

// clearRequestAbsent sets the request columns that read as NotReported
// when absent (finish_ns, think_ns, parent_seq) to NotReported.
func (r *Record) clearRequestAbsent() {
	r.FinishNs, r.ThinkNs, r.ParentSeq = NotReported, NotReported, NotReported
}

// HasOutcome reports whether the row was replayed or captured with an outcome.
func (r *Record) HasOutcome() bool { return r.Status != "" }

// OK reports whether the request succeeded.
func (r *Record) OK() bool { return r.Status == StatusOK }

// Metric helpers implement the metric definitions (docs/schema.md) once, so replay's end-of-run
// summary, inspect and analyze agree. Each returns ok=false when the metric is
// undefined for the row.

// between is to − from, defined when both times were reported.
func between(from, to int64) (time.Duration, bool) {
	if from < 0 || to < 0 {
		return 0, false
	}
	return time.Duration(to - from), true
}

// Lateness is sent − scheduled: how late the client was.
func (r *Record) Lateness() (time.Duration, bool) { return between(r.ScheduledNs, r.SentNs) }

// TTFT is first token − sent.
func (r *Record) TTFT() (time.Duration, bool) { return between(r.SentNs, r.FirstTokenNs) }

// TTFTScheduled is first token − scheduled: TTFT including client lateness,
// the coordinated-omission-safe view.
func (r *Record) TTFTScheduled() (time.Duration, bool) { return between(r.ScheduledNs, r.FirstTokenNs) }

// E2E is last token − sent.
func (r *Record) E2E() (time.Duration, bool) { return between(r.SentNs, r.LastTokenNs) }

// E2EScheduled is last token − scheduled.
func (r *Record) E2EScheduled() (time.Duration, bool) { return between(r.ScheduledNs, r.LastTokenNs) }

// ReceivedOutputTokens is the output length the request produced: the
// server's usage when reported, else the sum of chunk token counts, else the
// number of chunks. fromServer says which.
func (r *Record) ReceivedOutputTokens() (n int, fromServer bool) {
	if r.ServerOutputTokens >= 0 {
		return int(r.ServerOutputTokens), true
	}
	if len(r.ChunkTokens) > 0 {
		s := 0
		for _, t := range r.ChunkTokens {
			s += int(t)
		}
		return s, false
	}
	return len(r.ChunkNs), false
}

// TPOT is (E2E − TTFT) / (output tokens − 1), for more than one output token.
func (r *Record) TPOT() (time.Duration, bool) {
	ttft, ok1 := r.TTFT()
	e2e, ok2 := r.E2E()
	n, _ := r.ReceivedOutputTokens()
	if !ok1 || !ok2 || n <= 1 {
		return 0, false
	}
	return (e2e - ttft) / time.Duration(n-1), true
}
