package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/jsonlex"
	"github.com/tokentrace/tokentrace/traces"
)

// FaultHeader names a request header that forces a fault on that request,
// whatever the configured rates: "500", "503", "429", "disconnect",
// "stream-error" or "stall".
const FaultHeader = "X-Sim-Fault"

// maxBodyBytes bounds a request body.
const maxBodyBytes = 64 << 20

func (s *Server) routes() {
	post := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
				return
			}
			h(w, r)
		}
	}
	get := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
				return
			}
			h(w, r)
		}
	}
	s.mux.HandleFunc("/v1/completions", post(func(w http.ResponseWriter, r *http.Request) { s.serveGen(w, r, traces.APICompletions) }))
	s.mux.HandleFunc("/v1/chat/completions", post(func(w http.ResponseWriter, r *http.Request) { s.serveGen(w, r, traces.APIChat) }))
	s.mux.HandleFunc("/tokenize", post(s.serveTokenize))
	s.mux.HandleFunc("/metrics", get(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		s.st.writeProm(w, s.o.Model)
	}))
	s.mux.HandleFunc("/health", get(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	s.mux.HandleFunc("/version", get(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"version":"sim"}`))
	}))
	s.mux.HandleFunc("/v1/models", get(s.serveModels))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeDetail(w, http.StatusNotFound, "Not Found") })
}

// apiError is an error response in vLLM's shape.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, a ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "BadRequestError", msg: fmt.Sprintf(format, a...)}
}

// errorType is the "type" vLLM puts in the error body for a status.
func errorType(status int) string {
	switch status {
	case 400:
		return "BadRequestError"
	case 404:
		return "NotFoundError"
	case 429:
		return "TooManyRequestsError"
	case 503:
		return "ServiceUnavailableError"
	default:
		return "InternalServerError"
	}
}

// appendErrorBody appends vLLM's error JSON: {"error":{"message","type","param","code"}}
// (or the flat pre-0.10.1 shape).
func (s *Server) appendErrorBody(dst []byte, e *apiError) []byte {
	if s.o.FlatErrors {
		dst = append(dst, `{"object":"error","message":`...)
	} else {
		dst = append(dst, `{"error":{"message":`...)
	}
	dst = jsonlex.AppendString(dst, e.msg)
	dst = append(dst, `,"type":`...)
	dst = jsonlex.AppendString(dst, e.typ)
	dst = append(dst, `,"param":null,"code":`...)
	dst = strconv.AppendInt(dst, int64(e.status), 10)
	if s.o.FlatErrors {
		return append(dst, '}')
	}
	return append(dst, "}}"...)
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, s.appendErrorBody(nil, e))
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// writeDetail is FastAPI's error shape for unknown routes and methods.
func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, append(jsonlex.AppendString([]byte(`{"detail":`), detail), '}'))
}

// genBody is the part of a completions or chat request the simulator reads.
type genBody struct {
	Model               *string         `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           *int            `json:"min_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage         *bool `json:"include_usage"`
		ContinuousUsageStats *bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
	N         *int   `json:"n"`
	Priority  int    `json:"priority"`
	RequestID string `json:"request_id"`
	CacheSalt string `json:"cache_salt"`
	// ReturnTokenIDs is vLLM's return_token_ids: each choice carries the
	// ids of the tokens it generated ("token_ids").
	ReturnTokenIDs bool `json:"return_token_ids"`
	// KVTransferParams are vLLM's KV connector parameters: a decode
	// replica gets do_remote_prefill (pull the prompt's KV from the
	// prefill replica that computed it).
	KVTransferParams *struct {
		DoRemotePrefill bool `json:"do_remote_prefill"`
	} `json:"kv_transfer_params"`
}

// genRequest is a parsed, validated generation request.
type genRequest struct {
	api        string
	prompts    [][]int32
	params     genParams
	stream     bool
	usage      bool
	continuous bool
	salt       string
	returnIDs  bool
	remote     bool // kv_transfer_params.do_remote_prefill
}

func missing(field string) *apiError {
	return badRequest("[{'type': 'missing', 'loc': ('body', '%s'), 'msg': 'Field required'}]", field)
}

// parseGen parses and validates a request body like vLLM's protocol models.
func (s *Server) parseGen(body []byte, api string) (*genRequest, *apiError) {
	var b genBody
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&b); err != nil {
		return nil, badRequest("[{'type': 'json_invalid', 'loc': ('body',), 'msg': 'JSON decode error: %s'}]", jsonErrMsg(err))
	}
	if b.Model != nil && !s.serves(*b.Model) {
		return nil, &apiError{status: http.StatusNotFound, typ: "NotFoundError", msg: fmt.Sprintf("The model `%s` does not exist.", *b.Model)}
	}
	g := &genRequest{api: api, stream: b.Stream, salt: b.CacheSalt, returnIDs: b.ReturnTokenIDs,
		remote: b.KVTransferParams != nil && b.KVTransferParams.DoRemotePrefill}
	var err *apiError
	if api == traces.APIChat {
		if len(b.Messages) == 0 || string(b.Messages) == "null" {
			return nil, missing("messages")
		}
		var msgs []ChatMessage
		if msgs, err = parseMessages(b.Messages); err != nil {
			return nil, err
		}
		g.prompts = [][]int32{ChatTokens(msgs)}
	} else {
		if len(b.Prompt) == 0 || string(b.Prompt) == "null" {
			return nil, missing("prompt")
		}
		if g.prompts, err = parsePrompt(b.Prompt); err != nil {
			return nil, err
		}
	}
	mt := b.MaxTokens
	if api == traces.APIChat && b.MaxCompletionTokens != nil {
		mt = b.MaxCompletionTokens
	}
	switch {
	case mt != nil && *mt < 1:
		return nil, badRequest("max_tokens must be at least 1, got %d.", *mt)
	case mt != nil:
		g.params.maxTokens = *mt
	case api == traces.APICompletions:
		g.params.maxTokens = 16 // vLLM's completions default
	}
	if b.MinTokens != nil {
		if *b.MinTokens < 0 {
			return nil, badRequest("min_tokens must be greater than or equal to 0, got %d.", *b.MinTokens)
		}
		if mt != nil && *b.MinTokens > *mt {
			return nil, badRequest("min_tokens must be less than or equal to max_tokens=%d, got %d.", *mt, *b.MinTokens)
		}
		g.params.minTokens = *b.MinTokens
	}
	g.params.ignoreEOS = b.IgnoreEOS
	if b.N != nil && *b.N != 1 {
		return nil, badRequest("n=%d is not supported by the simulator (only n=1).", *b.N)
	}
	if b.Priority != 0 && s.o.Policy != "priority" {
		return nil, badRequest("Got priority %d but Priority scheduling is not enabled.", b.Priority)
	}
	g.params.priority = b.Priority
	if b.StreamOptions != nil {
		if !b.Stream {
			return nil, badRequest("Stream options can only be defined when `stream=True`.")
		}
		g.usage = b.StreamOptions.IncludeUsage != nil && *b.StreamOptions.IncludeUsage
		g.continuous = g.usage && b.StreamOptions.ContinuousUsageStats != nil && *b.StreamOptions.ContinuousUsageStats
	}
	return g, nil
}

func jsonErrMsg(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %s has the wrong type (%s)", te.Field, te.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end of input"
	}
	return "malformed body"
}

// parsePrompt accepts str | list[str] | list[int] | list[list[int]].
func parsePrompt(raw json.RawMessage) ([][]int32, *apiError) {
	raw = bytes.TrimSpace(raw)
	bad := badRequest("prompt must be a string, a list of strings, a list of token ids or a list of lists of token ids")
	switch raw[0] {
	case '"':
		var t string
		if json.Unmarshal(raw, &t) != nil {
			return nil, bad
		}
		if t == "" {
			return nil, badRequest("Prompt cannot be empty.")
		}
		return [][]int32{TextTokens(t)}, nil
	case '[':
	default:
		return nil, bad
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, bad
	}
	if len(items) == 0 {
		return nil, badRequest("Prompt cannot be empty.")
	}
	switch items[0][0] {
	case '"':
		var ts []string
		if json.Unmarshal(raw, &ts) != nil {
			return nil, bad
		}
		out := make([][]int32, len(ts))
		for i, t := range ts {
			if t == "" {
				return nil, badRequest("Prompt cannot be empty.")
			}
			out[i] = TextTokens(t)
		}
		return out, nil
	case '[':
		var ids [][]int64
		if json.Unmarshal(raw, &ids) != nil {
			return nil, bad
		}
		out := make([][]int32, len(ids))
		for i, l := range ids {
			var err *apiError
			if out[i], err = tokenIDs(l); err != nil {
				return nil, err
			}
		}
		return out, nil
	default:
		var ids []int64
		if json.Unmarshal(raw, &ids) != nil {
			return nil, bad
		}
		t, err := tokenIDs(ids)
		if err != nil {
			return nil, err
		}
		return [][]int32{t}, nil
	}
}

func tokenIDs(ids []int64) ([]int32, *apiError) {
	if len(ids) == 0 {
		return nil, badRequest("Prompt cannot be empty.")
	}
	out := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= DefaultVocabSize {
			return nil, badRequest("Token id %d is out of vocabulary", id)
		}
		out[i] = int32(id)
	}
	return out, nil
}

// parseMessages accepts messages whose content is a string, null, or a list
// of {"type":"text","text":...} parts.
func parseMessages(raw json.RawMessage) ([]ChatMessage, *apiError) {
	var ms []struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, badRequest("messages must be a list of {role, content} objects: %s", jsonErrMsg(err))
	}
	if len(ms) == 0 {
		return nil, badRequest("messages must not be empty.")
	}
	out := make([]ChatMessage, len(ms))
	for i, m := range ms {
		if m.Role == nil {
			return nil, badRequest("[{'type': 'missing', 'loc': ('body', 'messages', %d, 'role'), 'msg': 'Field required'}]", i)
		}
		out[i].Role = *m.Role
		c := bytes.TrimSpace(m.Content)
		switch {
		case len(c) == 0 || string(c) == "null":
		case c[0] == '"':
			json.Unmarshal(c, &out[i].Content)
		case c[0] == '[':
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(c, &parts) != nil {
				return nil, badRequest("messages[%d].content: unsupported content parts", i)
			}
			var sb strings.Builder
			for j, p := range parts {
				if j > 0 {
					sb.WriteByte('\n')
				}
				sb.WriteString(p.Text)
			}
			out[i].Content = sb.String()
		default:
			return nil, badRequest("messages[%d].content must be a string or a list of parts", i)
		}
	}
	return out, nil
}

// fault is what happens to a request besides normal service.
type fault int

const (
	faultNone fault = iota
	faultFail
	faultDisconnect
	faultStreamError
	faultStall
)

// pickFault draws the request's fault from the seeded rates, or takes it
// from the FaultHeader.
func (s *Server) pickFault(r *http.Request, rid string) (fault, int) {
	switch h := r.Header.Get(FaultHeader); h {
	case "":
	case "500", "503", "429":
		st, _ := strconv.Atoi(h)
		return faultFail, st
	case "disconnect":
		return faultDisconnect, 0
	case "stream-error":
		return faultStreamError, 0
	case "stall":
		return faultStall, 0
	}
	u := func(k uint64) float64 {
		return float64(mix64(uint64(s.o.Seed)^strHash(rid)^k*0xA24BAED4963EE407)>>11) / (1 << 53)
	}
	switch {
	case s.o.FailRate > 0 && u(1) < s.o.FailRate:
		return faultFail, s.o.FailStatus
	case s.o.DisconnectRate > 0 && u(2) < s.o.DisconnectRate:
		return faultDisconnect, 0
	case s.o.StreamErrorRate > 0 && u(3) < s.o.StreamErrorRate:
		return faultStreamError, 0
	case s.o.StallRate > 0 && u(4) < s.o.StallRate:
		return faultStall, 0
	}
	return faultNone, 0
}

// serveGen serves /v1/completions and /v1/chat/completions.
func (s *Server) serveGen(w http.ResponseWriter, hr *http.Request, api string) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, maxBodyBytes+1))
	if err != nil {
		return // client gone
	}
	if len(body) > maxBodyBytes {
		s.writeError(w, badRequest("request body larger than %d bytes", maxBodyBytes))
		return
	}
	g, aerr := s.parseGen(body, api)
	rid := hr.Header.Get("X-Request-Id")
	if rid == "" && g != nil {
		var b struct {
			RequestID string `json:"request_id"`
		}
		json.Unmarshal(body, &b)
		rid = b.RequestID
	}
	if rid == "" {
		rid = s.newID()
	}
	if s.o.RequestIDHeaders {
		w.Header().Set("X-Request-Id", rid)
	}
	if aerr != nil {
		s.writeError(w, aerr)
		return
	}
	flt, failStatus := s.pickFault(hr, rid)
	reqs := make([]*request, len(g.prompts))
	notify := make(chan struct{}, 1)
	for i, p := range g.prompts {
		id := rid
		if len(g.prompts) > 1 {
			id = rid + "-" + itoa(i)
		}
		r, err := buildRequest(s.o, id, s.seq.Add(1)-1, api, p, g.salt, g.params)
		r.arrival = s.now()
		r.remote = g.remote
		if api == traces.APIChat {
			r.extID = "chatcmpl-" + rid
		} else {
			r.extID = "cmpl-" + rid + "-" + itoa(i)
		}
		if s.otlp != nil {
			r.traceID, r.parentSpan, _ = parseTraceparent(hr.Header.Get("traceparent"))
			r.traceState = hr.Header.Get("tracestate")
		}
		r.notify = notify
		reqs[i] = r
		var cl *errContextLength
		if errors.As(err, &cl) {
			s.record(refusedRecord(r, 400, "context length exceeded"))
			s.writeError(w, badRequest("%s", cl.msg))
			return
		}
	}
	if q := s.o.MaxQueuedRequests; q > 0 && flt != faultFail {
		s.st.mu.Lock()
		n := s.st.running + s.st.waiting
		s.st.mu.Unlock()
		s.mu.Lock()
		n += len(s.pending)
		s.mu.Unlock()
		if n+len(reqs) > q {
			for _, r := range reqs {
				s.record(refusedRecord(r, http.StatusServiceUnavailable, "queue full"))
			}
			s.writeError(w, &apiError{status: http.StatusServiceUnavailable, typ: "ServiceUnavailableError",
				msg: fmt.Sprintf("The server's request queue is full (max_num_queued_reqs=%d). Please retry later.", q)})
			return
		}
	}
	if flt == faultFail {
		for _, r := range reqs {
			s.record(refusedRecord(r, failStatus, "injected failure"))
		}
		msg := map[int]string{500: "Internal server error (injected by tokentrace sim).",
			503: "The server is overloaded (injected by tokentrace sim).", 429: "Too many requests (injected by tokentrace sim)."}[failStatus]
		s.writeError(w, &apiError{status: failStatus, typ: errorType(failStatus), msg: msg})
		return
	}
	s.submit(reqs...)
	c := &call{s: s, g: g, reqs: reqs, rid: rid, created: time.Now().Unix(), fault: flt}
	c.prefix = c.appendHead(nil, "chat.completion.chunk")
	if g.stream {
		c.stream(hr.Context(), w)
	} else {
		c.complete(hr.Context(), w)
	}
}

func refusedRecord(r *request, status int, msg string) traces.Record {
	t := traces.NewRecord()
	t.Seq, t.ArrivalNs, t.RequestID, t.Model, t.API = r.seq, r.arrival, r.id, r.model, r.api
	t.InputTokens, t.OutputTokens = int32(r.promptLen), 0
	t.Run, t.Status, t.HTTPStatus, t.Error = "sim", traces.StatusHTTPError, int32(status), msg
	return t
}

// call is one HTTP generation request in flight.
type call struct {
	s       *Server
	g       *genRequest
	reqs    []*request
	rid     string
	created int64
	fault   fault
	prefix  []byte // {"id":...,"choices":[
}

func (c *call) extID() string {
	if c.g.api == traces.APIChat {
		return "chatcmpl-" + c.rid
	}
	return "cmpl-" + c.rid
}

// appendHead appends a response's fixed head: id, object (chatObject on
// the chat API, text_completion on completions), created, model and the
// opening of choices.
func (c *call) appendHead(dst []byte, chatObject string) []byte {
	object := "text_completion"
	if c.g.api == traces.APIChat {
		object = chatObject
	}
	dst = append(dst, `{"id":`...)
	dst = jsonlex.AppendString(dst, c.extID())
	dst = append(dst, `,"object":"`...)
	dst = append(dst, object...)
	dst = append(dst, `","created":`...)
	dst = strconv.AppendInt(dst, c.created, 10)
	dst = append(dst, `,"model":`...)
	dst = jsonlex.AppendString(dst, c.s.o.Model)
	return append(dst, `,"choices":[`...)
}

// appendUsage appends a usage object. full = the final usage (omits
// prompt_tokens_details unless set); completionsNull = the completions
// serializer's "prompt_tokens_details":null on continuous usage.
func (c *call) appendUsage(dst []byte, prompt, completion, cached int, detailsNull bool) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(prompt+completion), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(completion), 10)
	switch {
	case cached > 0 && c.s.o.PromptTokensDetails:
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, int64(cached), 10)
		dst = append(dst, '}')
	case detailsNull:
		dst = append(dst, `,"prompt_tokens_details":null`...)
	}
	return append(dst, '}')
}

// appendMetrics appends vLLM's per-request metrics object; omitNull drops
// undefined fields (the streaming serializer) instead of writing null.
func appendMetrics(dst []byte, f *finalInfo, omitNull bool) []byte {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	ttft, gen := f.firstTok-f.firstSched, f.lastTok-f.firstTok
	dst = append(dst, `{"time_to_first_token_ms":`...)
	dst = appendPyFloat(dst, ms(ttft))
	dst = append(dst, `,"generation_time_ms":`...)
	dst = appendPyFloat(dst, ms(gen))
	dst = append(dst, `,"queue_time_ms":`...)
	dst = appendPyFloat(dst, ms(f.firstSched-f.arrival))
	if f.outTokens > 1 {
		dst = append(dst, `,"mean_itl_ms":`...)
		dst = appendPyFloat(dst, ms(gen)/float64(f.outTokens-1))
	} else if !omitNull {
		dst = append(dst, `,"mean_itl_ms":null`...)
	}
	if inf := f.lastTok - f.firstSched; inf > 0 {
		dst = append(dst, `,"tokens_per_second":`...)
		dst = appendPyFloat(dst, float64(f.outTokens)/(float64(inf)/1e9))
	} else if !omitNull {
		dst = append(dst, `,"tokens_per_second":null`...)
	}
	return append(dst, '}')
}

func finishReason(r *request, done bool) string {
	if !done {
		return ""
	}
	return r.fin.finishReason
}

// appendContentChunk appends one SSE event carrying output tokens [from, to)
// of prompt i; reason != "" marks the last one.
func (c *call) appendContentChunk(dst []byte, i int, r *request, from, to int, reason string) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, c.prefix...)
	if c.g.api == traces.APIChat {
		dst = append(dst, `{"index":0,"delta":{"content":"`...)
		dst = appendFillerEscaped(dst, from, to)
		dst = append(dst, `"},"logprobs":null,"finish_reason":`...)
		if reason == "" {
			dst = append(dst, `null`...)
		} else {
			dst = append(dst, '"')
			dst = append(dst, reason...)
			dst = append(dst, `","stop_reason":null`...)
		}
		dst = c.appendTokenIDs(dst, from, to)
		dst = append(dst, `}]`...)
		if c.g.continuous {
			dst = append(dst, `,"usage":`...)
			dst = c.appendUsage(dst, r.promptLen, to, 0, false)
		}
		return append(dst, "}\n\n"...)
	}
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `,"text":"`...)
	dst = appendFillerEscaped(dst, from, to)
	dst = append(dst, `","logprobs":null,"finish_reason":`...)
	if reason == "" {
		dst = append(dst, `null`...)
	} else {
		dst = append(dst, '"')
		dst = append(dst, reason...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"stop_reason":null`...)
	dst = c.appendTokenIDs(dst, from, to)
	dst = append(dst, `}],"usage":`...)
	if c.g.continuous {
		dst = c.appendUsage(dst, r.promptLen, to, 0, true)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, "}\n\n"...)
}

// appendTokenIDs appends a choice's "token_ids" field (the ids of output
// tokens [from, to)) when the request asked for return_token_ids.
func (c *call) appendTokenIDs(dst []byte, from, to int) []byte {
	if !c.g.returnIDs {
		return dst
	}
	dst = append(dst, `,"token_ids":[`...)
	dst = appendOutputIDs(dst, from, to)
	return append(dst, ']')
}

// appendFillerEscaped appends filler text inside a JSON string (the filler
// vocabulary needs no escaping).
func appendFillerEscaped(dst []byte, from, to int) []byte { return appendFiller(dst, from, to) }

func (c *call) totals() (prompt, out, cached int) {
	for _, r := range c.reqs {
		prompt += r.promptLen
		out += r.fin.outTokens
		cached += max(r.fin.cachedTokens, 0)
	}
	return
}

// stream writes the SSE response as the engine publishes tokens: at each
// wake-up the tokens published since the last, then a fault's effect,
// and once every prompt ended the usage and [DONE].
func (c *call) stream(ctx context.Context, w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	st := &sseStream{w: w, sent: make([]int, len(c.reqs)), closed: make([]bool, len(c.reqs)), buf: make([]byte, 0, 512)}
	st.fl, _ = w.(http.Flusher)
	st.flush()
	notify := c.reqs[0].notify
	defer c.ackAll()
	for {
		select {
		case <-notify:
		case <-ctx.Done():
			c.abortAll(traces.StatusDisconnect)
			return
		case <-c.s.stop:
			return
		}
		allDone := c.appendPublished(st)
		if len(st.buf) > 0 {
			if _, err := w.Write(st.buf); err != nil {
				c.abortAll(traces.StatusDisconnect)
				return
			}
			st.buf = st.buf[:0]
			st.flush()
		}
		for i, r := range c.reqs {
			if n, _ := r.published(); n == st.sent[i] {
				c.s.ack(r)
			}
		}
		if c.injectFault(ctx, st, allDone) {
			return
		}
		if allDone {
			c.appendEnd(st)
			w.Write(st.buf)
			st.flush()
			return
		}
	}
}

// sseStream is a stream's state: the output tokens sent of each prompt,
// the prompts whose last chunk went, whether the chat role chunk and a
// stall happened, and the events not yet written.
type sseStream struct {
	w                 http.ResponseWriter
	fl                http.Flusher
	sent              []int
	closed            []bool
	roleSent, stalled bool
	buf               []byte
}

func (st *sseStream) flush() {
	if st.fl != nil {
		st.fl.Flush()
	}
}

// appendPublished appends a chunk for each prompt with tokens published
// since the last (the chat API's role chunk first) and reports whether
// every prompt ended.
func (c *call) appendPublished(st *sseStream) (allDone bool) {
	allDone = true
	for i, r := range c.reqs {
		n, done := r.published()
		if !done {
			allDone = false
		}
		if st.closed[i] || (n <= st.sent[i] && !done) {
			continue
		}
		if done && r.fin.aborted {
			st.closed[i] = true
			continue
		}
		if c.g.api == traces.APIChat && !st.roleSent {
			st.buf = c.appendRoleChunk(st.buf, r)
			st.roleSent = true
		}
		st.buf = c.appendContentChunk(st.buf, i, r, st.sent[i], n, finishReason(r, done))
		st.sent[i] = n
		st.closed[i] = done
	}
	return allDone
}

// appendRoleChunk appends the chat API's first event: the assistant role
// with empty content.
func (c *call) appendRoleChunk(dst []byte, r *request) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, c.prefix...)
	dst = append(dst, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`...)
	if c.g.continuous {
		dst = append(dst, `,"usage":`...)
		dst = c.appendUsage(dst, r.promptLen, 0, 0, false)
	}
	return append(dst, "}\n\n"...)
}

// injectFault applies the call's fault once its moment came: a stall
// pauses after the first token; a disconnect cuts the connection, and a
// stream error ends the stream with an error event, after half the
// tokens. It reports whether the stream is over.
func (c *call) injectFault(ctx context.Context, st *sseStream, allDone bool) bool {
	switch c.fault {
	case faultStall:
		if st.stalled || st.sent[0] == 0 || allDone {
			return false
		}
		st.stalled = true
		t := time.NewTimer(c.s.o.StallDuration)
		select {
		case <-t.C:
			return false
		case <-ctx.Done():
			t.Stop()
			c.abortAll(traces.StatusDisconnect)
			return true
		}
	case faultDisconnect, faultStreamError:
		if allDone || st.sent[0] < max(1, c.reqs[0].maxOut/2) {
			return false
		}
		if c.fault == faultDisconnect {
			c.abortAll(traces.StatusDisconnect)
			panic(http.ErrAbortHandler)
		}
		c.abortAll(traces.StatusStreamError)
		st.buf = append(st.buf, "data: "...)
		st.buf = c.s.appendErrorBody(st.buf, &apiError{status: 500, typ: "InternalServerError",
			msg: "Engine error mid-stream (injected by tokentrace sim)."})
		st.buf = append(st.buf, "\n\ndata: [DONE]\n\n"...)
		st.w.Write(st.buf)
		return true
	}
	return false
}

// appendEnd appends a finished stream's last events: the usage (with the
// per-request metrics of a single prompt) when asked for, then [DONE].
func (c *call) appendEnd(st *sseStream) {
	if c.g.usage {
		prompt, out, cached := c.totals()
		st.buf = append(st.buf, "data: "...)
		st.buf = append(st.buf, c.prefix...)
		st.buf = append(st.buf, `],"usage":`...)
		st.buf = c.appendUsage(st.buf, prompt, out, cached, false)
		if c.s.o.PerRequestMetrics && len(c.reqs) == 1 {
			st.buf = append(st.buf, `,"metrics":`...)
			st.buf = appendMetrics(st.buf, &c.reqs[0].fin, true)
		}
		st.buf = append(st.buf, "}\n\n"...)
	}
	st.buf = append(st.buf, "data: [DONE]\n\n"...)
}

func (c *call) abortAll(status string) {
	for _, r := range c.reqs {
		c.s.abort(r, status)
		c.s.ack(r)
	}
}

func (c *call) ackAll() {
	for _, r := range c.reqs {
		c.s.ack(r)
	}
}

// complete writes a non-streaming response once every prompt finished.
func (c *call) complete(ctx context.Context, w http.ResponseWriter) {
	defer c.ackAll()
	for {
		c.ackAll()
		all := true
		for _, r := range c.reqs {
			if !r.done.Load() {
				all = false
			}
		}
		if all {
			break
		}
		select {
		case <-c.reqs[0].notify:
		case <-ctx.Done():
			c.abortAll(traces.StatusDisconnect)
			return
		case <-c.s.stop:
			return
		}
	}
	switch c.fault {
	case faultDisconnect:
		panic(http.ErrAbortHandler)
	case faultStreamError:
		c.s.writeError(w, &apiError{status: 500, typ: "InternalServerError", msg: "Engine error (injected by tokentrace sim)."})
		return
	case faultStall:
		t := time.NewTimer(c.s.o.StallDuration)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	b := c.appendHead(nil, "chat.completion")
	for i, r := range c.reqs {
		if i > 0 {
			b = append(b, ',')
		}
		if c.g.api == traces.APIChat {
			b = append(b, `{"index":0,"message":{"role":"assistant","content":"`...)
			b = appendFillerEscaped(b, 0, r.fin.outTokens)
			b = append(b, `","tool_calls":[]},"logprobs":null,"finish_reason":"`...)
			b = append(b, r.fin.finishReason...)
			b = append(b, `","stop_reason":null`...)
			b = c.appendTokenIDs(b, 0, r.fin.outTokens)
			b = append(b, '}')
		} else {
			b = append(b, `{"index":`...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, `,"text":"`...)
			b = appendFillerEscaped(b, 0, r.fin.outTokens)
			b = append(b, `","logprobs":null,"finish_reason":"`...)
			b = append(b, r.fin.finishReason...)
			b = append(b, `","stop_reason":null,"prompt_logprobs":null`...)
			b = c.appendTokenIDs(b, 0, r.fin.outTokens)
			b = append(b, '}')
		}
	}
	prompt, out, cached := c.totals()
	b = append(b, `],"usage":`...)
	b = c.appendUsage(b, prompt, out, cached, true)
	if c.g.api == traces.APIChat {
		b = append(b, `,"prompt_logprobs":null`...)
	}
	if c.s.o.PerRequestMetrics {
		b = append(b, `,"metrics":`...)
		if len(c.reqs) == 1 {
			b = appendMetrics(b, &c.reqs[0].fin, false)
		} else {
			b = append(b, "null"...)
		}
	}
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

// PromptHashes returns the chained hashes of the full blockSize-token
// blocks of the first prompt of a completions or chat request body (api is
// traces.APICompletions or traces.APIChat), as the engine keys its prefix
// cache (cache_salt included): what a prefix-aware router scores. It
// returns nil when the body does not parse.
func PromptHashes(api string, body []byte, blockSize int) []uint64 {
	var b struct {
		Prompt    json.RawMessage `json:"prompt"`
		Messages  json.RawMessage `json:"messages"`
		CacheSalt string          `json:"cache_salt"`
	}
	if json.Unmarshal(body, &b) != nil || blockSize <= 0 {
		return nil
	}
	var toks []int32
	if api == traces.APIChat {
		if len(b.Messages) == 0 {
			return nil
		}
		msgs, err := parseMessages(b.Messages)
		if err != nil {
			return nil
		}
		toks = ChatTokens(msgs)
	} else {
		if len(bytes.TrimSpace(b.Prompt)) == 0 {
			return nil
		}
		ps, err := parsePrompt(b.Prompt)
		if err != nil || len(ps) == 0 {
			return nil
		}
		toks = ps[0]
	}
	return blockHashes(toks, blockSize, b.CacheSalt)
}

// serveTokenize is vLLM's POST /tokenize.
func (s *Server) serveTokenize(w http.ResponseWriter, hr *http.Request) {
	var b struct {
		Model            *string         `json:"model"`
		Prompt           *string         `json:"prompt"`
		Messages         json.RawMessage `json:"messages"`
		AddSpecialTokens *bool           `json:"add_special_tokens"`
		ReturnTokenStrs  bool            `json:"return_token_strs"`
	}
	body, err := io.ReadAll(io.LimitReader(hr.Body, maxBodyBytes))
	if err != nil {
		return
	}
	if err := json.Unmarshal(body, &b); err != nil {
		s.writeError(w, badRequest("[{'type': 'json_invalid', 'loc': ('body',), 'msg': 'JSON decode error: %s'}]", jsonErrMsg(err)))
		return
	}
	if b.Model != nil && !s.serves(*b.Model) {
		s.writeError(w, &apiError{status: 404, typ: "NotFoundError", msg: fmt.Sprintf("The model `%s` does not exist.", *b.Model)})
		return
	}
	var toks []int32
	var strs []string
	switch {
	case b.Prompt != nil:
		toks = Tokenize(*b.Prompt)
		strs = TokenStrings(*b.Prompt)
		if b.AddSpecialTokens == nil || *b.AddSpecialTokens {
			toks = append([]int32{TokenBOS}, toks...)
			strs = append([]string{"<|begin_of_text|>"}, strs...)
		}
	case len(b.Messages) > 0:
		msgs, aerr := parseMessages(b.Messages)
		if aerr != nil {
			s.writeError(w, aerr)
			return
		}
		toks = ChatTokens(msgs)
	default:
		s.writeError(w, missing("prompt"))
		return
	}
	out := []byte(`{"count":`)
	out = strconv.AppendInt(out, int64(len(toks)), 10)
	out = append(out, `,"max_model_len":`...)
	out = strconv.AppendInt(out, int64(s.o.MaxModelLen), 10)
	out = append(out, `,"tokens":[`...)
	for i, t := range toks {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(t), 10)
	}
	out = append(out, `],"token_strs":`...)
	if b.ReturnTokenStrs && strs != nil {
		out = append(out, '[')
		for i, p := range strs {
			if i > 0 {
				out = append(out, ',')
			}
			out = jsonlex.AppendString(out, p)
		}
		out = append(out, ']')
	} else {
		out = append(out, "null"...)
	}
	writeJSON(w, http.StatusOK, append(out, '}'))
}

// serves says whether a request naming model is served (else vLLM's 404).
func (s *Server) serves(model string) bool { return s.o.AnyModel || model == s.o.Model }

// serveModels is vLLM's GET /v1/models.
func (s *Server) serveModels(w http.ResponseWriter, _ *http.Request) {
	created := strconv.FormatInt(s.start.Unix(), 10)
	b := []byte(`{"object":"list","data":[{"id":`)
	b = jsonlex.AppendString(b, s.o.Model)
	b = append(b, `,"object":"model","created":`+created+`,"owned_by":"vllm","root":`...)
	b = jsonlex.AppendString(b, s.o.Model)
	b = append(b, `,"parent":null,"max_model_len":`...)
	b = strconv.AppendInt(b, int64(s.o.MaxModelLen), 10)
	b = append(b, `,"permission":[{"id":"modelperm-sim","object":"model_permission","created":`+created+
		`,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,`+
		`"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}`...)
	writeJSON(w, http.StatusOK, b)
}
