package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tokentrace/tokentrace/replay/internal/h1"
	"github.com/tokentrace/tokentrace/replay/otlp"
	"github.com/tokentrace/tokentrace/traces"
)

var readBufPool = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// requestID is the X-Request-Id of a record: deterministic from run and seq.
func requestID(run string, seq int64) string {
	return run + "-" + strconv.FormatInt(seq, 10)
}

// begin returns the result row of it, outcome columns cleared.
func (r *runner) begin(it *item) *traces.Record {
	rec := new(traces.Record)
	r.beginInto(rec, it)
	return rec
}

// beginInto makes rec the result row of it, outcome columns cleared.
func (r *runner) beginInto(rec *traces.Record, it *item) {
	r.beginRow(rec, it)
	rec.RequestID = requestID(r.o.Run, rec.Seq)
}

// beginRow is beginInto without the request id, which allocates: the
// event loop's collector sets it (collect.go).
func (r *runner) beginRow(rec *traces.Record, it *item) {
	*rec = *it.rec
	rec.ClearOutcome()
	rec.ChunkNs, rec.ChunkTokens = nil, nil
	rec.Run = r.o.Run
	rec.ScheduledNs = int64(it.sched)
}

// complete records a finished request and, in closed-session mode, queues
// the session's next turn.
func (r *runner) complete(it *item, rec *traces.Record) {
	r.finished(rec)
	if r.graph != nil {
		end := rec.LastTokenNs
		if end < 0 {
			end = int64(time.Since(r.t0))
		}
		r.observeText(it, rec)
		grown := it.grow
		it.grow = nil
		if grown != nil && !rec.OK() {
			grown = nil // nothing to extend: the follow-up starts afresh
		}
		if grown != nil {
			grown.outTokens = max(int(rec.OutputTokens), 1) // what was asked
			if rec.ServerOutputTokens > 0 {
				grown.outTokens = int(rec.ServerOutputTokens)
			}
			if grown.api == traces.APIChat && rec.ServerPromptTokens > 0 {
				grown.promptTokens = int(rec.ServerPromptTokens)
			}
		}
		r.followUp(it.rec, rec, time.Duration(end), grown)
	}
}

// fastBodyMax bounds the request bodies the dispatcher writes itself: a
// body this small fits in an idle connection's socket send buffer, so the
// write does not block the dispatcher.
const fastBodyMax = 12 << 10

// startFast sends it from the calling (dispatcher) goroutine on an idle
// keep-alive connection, with no goroutine hand-off: the connection's reader
// goroutine reads the response and completes the request. It returns
// false, having sent nothing, when the fast path does not apply: net/http
// transport, a concurrency cap (its wait belongs to a worker), a large body,
// or no idle connection (dialing would block the dispatcher).
func (r *runner) startFast(it *item) bool {
	h := r.tr.h1
	if h == nil || r.sem != nil || len(it.body) > fastBodyMax {
		return false
	}
	// Nothing here allocates in the steady state (the request is rendered
	// into a recycled buffer, the result row is made by the reader), so the
	// dispatcher is never drafted into GC mark assists, which can park the
	// assisting goroutine.
	fr, _ := r.fast.Get().(*fastReq)
	if fr == nil {
		fr = &fastReq{r: r}
		fr.Init(fr.complete, fr.release)
	}
	fr.it = it
	b := r.renderRequest(fr.req[:0], h, it)
	fr.req = b
	fr.Prepare(r.reqCtx, r.o.Timeout, r.t0, &fr.sentNs, b)
	r.live.inflight.Add(1)
	if !h.Start(&fr.Job, false) {
		r.live.inflight.Add(-1)
		r.fast.Put(fr)
		// No idle connection: a worker dials (dispatch hands it the P).
		// Dialing on a goroutine started here instead left it queued behind
		// the dispatcher, which keeps its P, until another P was free: with
		// CPU-bound goroutines in the process that took tens of ms.
		return false
	}
	return true
}

// renderRequest appends it's whole HTTP/1.1 request, head and body.
func (r *runner) renderRequest(b []byte, h *h1.Client, it *item) []byte {
	b = h.AppendHead(b, it.path, r.headers())
	b = append(b, "X-Request-Id: "...)
	b = append(b, r.o.Run...)
	b = append(b, '-')
	b = strconv.AppendInt(b, it.rec.Seq, 10)
	b = append(b, "\r\n"...)
	if r.o.TraceParent {
		tp, _ := otlp.TraceParentFor(requestID(r.o.Run, it.rec.Seq))
		b = append(b, "Traceparent: "...)
		b = append(b, tp...)
		b = append(b, "\r\n"...)
	}
	if r.o.SessionHeader != "" && it.rec.Session != 0 {
		b = append(b, r.o.SessionHeader...)
		b = append(b, ": "...)
		b = append(b, sessionID(r.o.Run, it.rec.Session)...)
		b = append(b, "\r\n"...)
	}
	b = h1.EndHead(b, len(it.body))
	return append(b, it.body...)
}

// fastReq is a request on the dispatcher's fast path, recycled through
// runner.fast.
type fastReq struct {
	h1.Job
	r      *runner
	it     *item
	sentNs int64
	req    []byte // the rendered request, reused
}

// complete runs on the connection's reader goroutine: it makes the result
// row and records it.
func (fr *fastReq) complete(resp *h1.Response, err error) {
	r := fr.r
	rec := r.begin(fr.it)
	rec.SentNs = fr.sentNs
	if err != nil {
		rec.Status, rec.Error = classify(err, r.reqCtx, r.reqCtx)
	} else {
		keepFleetColumns(rec, r.keep, resp.Kept) // replica.go
		handleResponse(resp.StatusCode(), resp, r.t0, rec, r.reqCtx, r.reqCtx, fr.it.grow)
	}
	r.live.inflight.Add(-1)
	r.complete(fr.it, rec)
	r.wg.Done()
}

func (fr *fastReq) release() {
	fr.it = nil
	if cap(fr.req) > 2*fastBodyMax {
		fr.req = nil // an unusually long head: do not keep it
	}
	fr.r.fast.Put(fr)
}

// do sends one request and records its outcome.
func (r *runner) do(it *item) {
	rec := r.begin(it)

	if r.sem != nil {
		select {
		case r.sem <- struct{}{}:
			defer func() { <-r.sem }()
		case <-r.sendCtx.Done():
			r.notSent(it)
			return
		}
	}
	if r.sendCtx.Err() != nil {
		// stopped between dispatch and here: not sent
		r.notSent(it)
		return
	}
	r.live.inflight.Add(1)
	sendOne(r.reqCtx, r.tr, it.path, it.body, r.headers(), r.o.Timeout, r.t0, r.extras(), rec, it.grow)
	r.live.inflight.Add(-1)
	r.complete(it, rec)
}

func (r *runner) notSent(it *item) {
	if r.graph != nil {
		r.sched.outstanding.Add(-int64(r.graph.drop(it.rec)))
		r.sched.poke()
	}
}

// headers returns the per-request headers (shared, read only).
func (r *runner) headers() http.Header {
	r.hdrOnce.Do(func() {
		h := http.Header{}
		for k, v := range r.o.Headers {
			h[http.CanonicalHeaderKey(k)] = v
		}
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "text/event-stream")
		if r.o.APIKey != "" {
			h.Set("Authorization", "Bearer "+r.o.APIKey)
		}
		r.hdr = h
	})
	return r.hdr
}

func (r *runner) finished(rec *traces.Record) {
	r.live.record(rec)
	r.mu.Lock()
	r.done.add(rec)
	r.sum.add(rec)
	r.mu.Unlock()
}

// transport sends requests: h1 for plain-http targets, else net/http.
type transport struct {
	base   string
	h1     *h1.Client
	client *http.Client
}

// sendOne sends body to path and fills rec's outcome columns (offsets from
// t0), and grow (when not nil) with what the server returned. ctx
// cancellation is recorded as client_error "cancelled".
func sendOne(ctx context.Context, tr *transport, path string, body []byte, hdr http.Header, timeout time.Duration, t0 time.Time, ex extras, rec *traces.Record, grow *turnCtx) {
	extra := requestExtra(rec, ex)
	var (
		status int
		rbody  io.ReadCloser
	)
	// rctx tells a timeout from a cancellation in classify. h1 enforces the
	// timeout with a connection deadline, without a context per request.
	rctx := ctx
	if tr.h1 != nil {
		rec.SentNs = int64(time.Since(t0))
		resp, err := tr.h1.Do(ctx, timeout, path, hdr, extra, body)
		if err != nil {
			rec.Status, rec.Error = classify(err, rctx, ctx)
			return
		}
		keepFleetColumns(rec, ex.keep, resp.Kept) // replica.go
		status, rbody = resp.StatusCode(), resp
	} else {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodPost, tr.base+path, bytes.NewReader(body))
		if err != nil {
			rec.Status, rec.Error = traces.StatusClientError, "bad request URL"
			return
		}
		req.Header = hdr.Clone()
		for _, kv := range extra {
			req.Header.Set(kv[0], kv[1])
		}
		rec.SentNs = int64(time.Since(t0))
		resp, err := tr.client.Do(req)
		if err != nil {
			rec.Status, rec.Error = classify(err, rctx, ctx)
			return
		}
		keepFleetColumns(rec, ex.keep, netHTTPKept(resp.Header, ex.keep))
		status, rbody = resp.StatusCode, resp.Body
	}
	handleResponse(status, rbody, t0, rec, rctx, ctx, grow)
}

// extras are the per-request headers asked for beside X-Request-Id, and
// the response headers to keep.
type extras struct {
	traceParent   bool   // a W3C traceparent derived from the request id
	sessionHeader string // the session id under this name ("" = none)
	// keep names the response headers of the fleet columns (replica.go).
	keep []string
}

func (r *runner) extras() extras {
	return extras{traceParent: r.o.TraceParent, sessionHeader: r.o.SessionHeader, keep: r.keep}
}

// sessionID is the value of Options.SessionHeader for a record of session
// s: the run label and the session, so two runs never share an id.
func sessionID(run string, s int64) string { return run + "-s" + strconv.FormatInt(s, 10) }

// requestExtra is the per-request headers: X-Request-Id and, when asked, a
// traceparent derived from it and the session id.
func requestExtra(rec *traces.Record, ex extras) [][2]string {
	extra := [][2]string{{"X-Request-Id", rec.RequestID}}
	if ex.traceParent {
		tp, _ := otlp.TraceParentFor(rec.RequestID)
		extra = append(extra, [2]string{"Traceparent", tp})
	}
	if ex.sessionHeader != "" && rec.Session != 0 {
		extra = append(extra, [2]string{ex.sessionHeader, sessionID(rec.Run, rec.Session)})
	}
	return extra
}

// handleResponse reads a response (its header arrived with status) into
// rec (and what it returned into grow, when not nil) and closes it.
func handleResponse(status int, rbody io.ReadCloser, t0 time.Time, rec *traces.Record, rctx, ctx context.Context, grow *turnCtx) {
	defer rbody.Close()
	rec.HTTPStatus = int32(status)
	if status != http.StatusOK {
		rec.Status = traces.StatusHTTPError
		rec.Error = "HTTP " + strconv.Itoa(status)
		b, _ := io.ReadAll(io.LimitReader(rbody, 8<<10))
		var c chunk
		if parseChunk(bytes.TrimSpace(b), &c) == nil && c.isError {
			rec.Error += errSuffix(&c)
		}
		return
	}
	readStream(rbody, t0, rec, rctx, ctx, grow)
	decodeSide(rec) // replica.go
}

func errSuffix(c *chunk) string {
	s := ""
	if c.errType != "" {
		s += " " + c.errType
	}
	if c.errCode != "" {
		s += " (code " + c.errCode + ")"
	}
	return s
}

// readStream consumes an SSE body into rec, and what it returned (text,
// token ids) into grow when not nil.
func readStream(body io.Reader, t0 time.Time, rec *traces.Record, rctx, ctx context.Context, grow *turnCtx) {
	bp := readBufPool.Get().(*[]byte)
	sr := &sseReader{r: body, buf: *bp, max: 16 << 20}
	defer func() {
		if len(sr.buf) == len(*bp) {
			readBufPool.Put(bp)
		}
	}()
	var st stream
	st.start(rec, grow)
	var now int64
	for {
		payload, fresh, err := sr.next()
		if fresh {
			now = int64(time.Since(t0))
		}
		if err != nil {
			st.fail(err, rctx, ctx)
			break
		}
		if !st.payload(payload, now) {
			break
		}
	}
	st.end()
}

// stream is what readStream knows while it reads a stream into a record;
// the event loop (loop.go) feeds it the same way as bytes arrive.
type stream struct {
	rec        *traces.Record
	grow       *turnCtx
	c          chunk
	prevCT     int64
	tokUnknown bool
	gotDone    bool
	sawChoices bool
	// The request asked for exactly rec.OutputTokens tokens (max_tokens); a
	// server that keeps streaming past overrunLimit has clearly ignored it,
	// and reading on would only hold the run up.
	asked, overrunLimit int64
}

func (s *stream) start(rec *traces.Record, grow *turnCtx) {
	*s = stream{rec: rec, grow: grow, asked: int64(rec.OutputTokens)}
	s.overrunLimit = 2*s.asked + 16
}

// fail records why the stream ended without a payload: the body's end
// (io.EOF) or a read error.
func (s *stream) fail(err error, rctx, ctx context.Context) {
	rec := s.rec
	if err == io.EOF {
		if !s.gotDone {
			rec.Status, rec.Error = traces.StatusDisconnect, "stream ended before [DONE]"
		}
	} else if errors.Is(err, errLineTooLong) {
		rec.Status, rec.Error = traces.StatusStreamError, "SSE line too long"
	} else {
		rec.Status, rec.Error = classify(err, rctx, ctx)
	}
}

// payload takes one data payload, completed by a read at now (a run
// offset); false when reading should stop (rec.Status says why).
func (s *stream) payload(payload []byte, now int64) bool {
	rec, c := s.rec, &s.c
	if len(payload) == 6 && string(payload) == "[DONE]" {
		s.gotDone = true
		return true
	}
	if s.gotDone {
		return true // tolerate trailing data after [DONE]
	}
	if err := parseChunk(payload, c); err != nil {
		rec.Status, rec.Error = traces.StatusStreamError, "malformed SSE chunk"
		return false
	}
	if c.isError {
		rec.Status, rec.Error = traces.StatusStreamError, "error event in stream"+errSuffix(c)
		if c.errCode != "" {
			if n, err := strconv.Atoi(c.errCode); err == nil && n >= 100 && n < 600 {
				rec.HTTPStatus = int32(n)
			}
		}
		return false
	}
	delta := int64(-1)
	if c.completionTokens >= 0 {
		delta = c.completionTokens - s.prevCT
		s.prevCT = c.completionTokens
	}
	if c.choices {
		s.sawChoices = true
	}
	if s.grow != nil && c.choices {
		s.grow.capture(c)
	}
	if c.choices && (c.content || delta > 0) {
		if rec.FirstTokenNs < 0 {
			rec.FirstTokenNs = now
		}
		rec.LastTokenNs = now
		rec.ChunkNs = append(rec.ChunkNs, now)
		if delta > 0 && !s.tokUnknown {
			rec.ChunkTokens = append(rec.ChunkTokens, int32(delta))
		} else {
			s.tokUnknown = true
		}
	}
	if c.promptTokens >= 0 {
		rec.ServerPromptTokens = int32(c.promptTokens)
	}
	if c.completionTokens >= 0 {
		rec.ServerOutputTokens = int32(c.completionTokens)
	}
	if c.cachedTokens >= 0 {
		rec.ServerCachedTokens = int32(c.cachedTokens)
	}
	if got := max(int64(rec.ServerOutputTokens), int64(len(rec.ChunkNs))); s.asked > 0 && got > s.overrunLimit {
		rec.Status = traces.StatusStreamError
		rec.Error = fmt.Sprintf("length mismatch: more than %d tokens for max_tokens %d (stopped reading)", s.overrunLimit, s.asked)
		return false
	}
	if c.hasMetrics() {
		rec.ServerQueueNs = msToNs(c.queueMs)
		rec.ServerPrefillNs = msToNs(c.ttftMs)
		rec.ServerDecodeNs = msToNs(c.genMs)
	}
	return true
}

// end settles the record's status once the stream is over.
func (s *stream) end() {
	rec := s.rec
	if s.tokUnknown || len(rec.ChunkTokens) != len(rec.ChunkNs) {
		rec.ChunkTokens = nil
	}
	if rec.Status == "" {
		if len(rec.ChunkNs) == 0 && rec.ServerOutputTokens <= 0 {
			rec.Status, rec.Error = traces.StatusStreamError, "stream carried no tokens"
			if !s.sawChoices {
				rec.Error = "stream carried no choices"
			}
		} else if got := max(int64(rec.ServerOutputTokens), int64(len(rec.ChunkNs))); s.asked > 0 && got > s.asked {
			// max_tokens was not honoured: the latencies are not those of
			// the recorded request.
			rec.Status = traces.StatusStreamError
			rec.Error = fmt.Sprintf("length mismatch: %d tokens for max_tokens %d", got, s.asked)
		} else {
			rec.Status = traces.StatusOK
		}
	}
}

func msToNs(ms float64) int64 {
	if math.IsNaN(ms) || ms < 0 {
		return traces.NotReported
	}
	return int64(math.Round(ms * 1e6))
}

// classify maps a transport error to a status and a short content-free
// message.
func classify(err error, rctx, ctx context.Context) (status, msg string) {
	switch {
	case ctx.Err() != nil:
		return traces.StatusClientError, "cancelled after drain"
	case rctx.Err() == context.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, os.ErrDeadlineExceeded) || os.IsTimeout(err):
		return traces.StatusTimeout, "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return traces.StatusDisconnect, "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return traces.StatusDisconnect, "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return traces.StatusDisconnect, "broken pipe"
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return traces.StatusDisconnect, "unexpected EOF"
	default:
		return traces.StatusDisconnect, "transport error"
	}
}

// resolveModel picks the model when neither --model nor the records name
// one: the first entry of GET /v1/models.
func (r *runner) resolveModel(ctx context.Context, need bool) error {
	r.model = r.o.Model
	if r.model != "" {
		return nil
	}
	if !need {
		return nil
	}
	models, err := r.servedModels(ctx)
	if err != nil {
		return fmt.Errorf("%w (set %w)", err, traces.OptionRef("Options.Model"))
	}
	r.defaultModel = models[0]
	return nil
}

// servedModels lists the ids of GET /v1/models; an error when there are
// none, saying why.
func (r *runner) servedModels(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.base+"/v1/models", nil)
	if err != nil {
		return nil, optionErr("Options.URL", "list models: bad URL") // the parse error would show the URL's credentials
	}
	for k, v := range r.headers() {
		req.Header[k] = v
	}
	resp, err := r.client.Do(req)
	if err != nil {
		_, msg := classify(err, ctx, context.Background())
		return nil, fmt.Errorf("replay: list models at %s: %s", RedactURL(r.o.URL), msg)
	}
	defer resp.Body.Close()
	var lm struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&lm) != nil || len(lm.Data) == 0 {
		return nil, fmt.Errorf("replay: list models at %s: HTTP %d, no model found", RedactURL(r.o.URL), resp.StatusCode)
	}
	ids := make([]string, 0, len(lm.Data))
	for _, d := range lm.Data {
		ids = append(ids, d.ID)
	}
	return ids, nil
}

// chatCalibration maps a target token count to a word count for chat
// prompts: tokens = overhead + perWord·words.
type chatCalibration struct {
	overhead int
	perWord  float64
	source   string
}

func (c chatCalibration) words(tokens int) int {
	if c.perWord <= 0 {
		c.perWord = 1
	}
	n := int(math.Round(float64(tokens-c.overhead) / c.perWord))
	return max(n, 1)
}

// calibrate measures the chat template overhead and tokens per word through
// POST /tokenize (vLLM's chat form). Without /tokenize the overhead is 0.
func (r *runner) calibrate(ctx context.Context) chatCalibration {
	model := r.model
	if model == "" {
		model = r.defaultModel
	}
	probe := &traces.Record{Seq: -1}
	count := func(n int) (int, bool) {
		var b []byte
		b = append(b, `{"model":`...)
		b = strconv.AppendQuote(b, model)
		b = append(b, `,"messages":[{"role":"user","content":"`...)
		b = r.prompts.appendWords(b, probe, n, 0xca1)
		b = append(b, `"}],"add_generation_prompt":true}`...)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(cctx, http.MethodPost, r.base+"/tokenize", bytes.NewReader(b))
		if err != nil {
			return 0, false
		}
		for k, v := range r.headers() {
			req.Header[k] = v
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return 0, false
		}
		defer resp.Body.Close()
		var tr struct {
			Count int `json:"count"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&tr) != nil || tr.Count <= 0 {
			return 0, false
		}
		return tr.Count, true
	}
	c1, ok1 := count(200)
	c2, ok2 := count(400)
	if !ok1 || !ok2 || c2 <= c1 {
		return chatCalibration{perWord: 1, source: "none (no /tokenize)"}
	}
	per := float64(c2-c1) / 200
	over := int(math.Round(float64(c1) - 200*per))
	return chatCalibration{overhead: over, perWord: per,
		source: fmt.Sprintf("/tokenize: overhead %d tokens, %.3f tokens/word", over, per)}
}

// warmup sends o.Warmup requests shaped like the first records, with unique
// prompts and no shared prefixes, before the clock starts; they are not
// recorded.
// preflight sends one tiny request before the clock starts. A target that
// cannot be reached, or that refuses the request (a 4xx other than 408 and
// 429: a wrong model, path or key), would fail every request of the run:
// that ends the run here, with the reason. Server errors and broken streams
// may be transient: they are reported on Options.Log and the run goes on
// (Summary and the max-failed check judge them).
func (r *runner) preflight(ctx context.Context, sel []*traces.Record) error {
	if r.o.NoPreflight {
		return nil
	}
	src := *sel[0]
	src.PrefixBlocks, src.Category, src.PrefixTokens = nil, "", 0
	src.InputTokens, src.OutputTokens = min(max(src.InputTokens, 1), 16), 1
	it := &item{rec: &src}
	r.build(it)
	api := r.o.API
	if !r.o.ForceAPI && src.API != "" {
		api = src.API
	}
	it.body = r.body(&src, api, it.model, 0x3a3b0000)
	rec := traces.NewRecord()
	rec.RequestID = r.o.Run + "-preflight"
	sendOne(ctx, r.tr, it.path, it.body, r.headers(), min(r.o.Timeout, time.Minute), time.Now(), extras{}, &rec, nil)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	refused := rec.HTTPStatus >= 400 && rec.HTTPStatus < 500 && rec.HTTPStatus != 408 && rec.HTTPStatus != 429
	unreachable := rec.HTTPStatus == 0 && (rec.Error == "connection refused" || rec.Error == "transport error")
	switch {
	case refused || unreachable:
		failed := fmt.Sprintf("replay: preflight: a 1-token %s request for model %q to %s failed (%s: %s), so every request of the run would fail the same way",
			api, it.model, RedactURL(r.o.URL), rec.Status, rec.Error)
		skip := traces.OptionRef("Options.NoPreflight")
		if rec.HTTPStatus == http.StatusNotFound {
			return fmt.Errorf("%s%w (%w skips this check)", failed, r.notFoundHint(ctx, it.model, sel[0].Model), skip)
		}
		return fmt.Errorf("%s (%w skips this check)", failed, skip)
	case rec.Status != traces.StatusOK && r.o.Log != nil:
		fmt.Fprintf(r.o.Log, "replay: preflight request failed (%s: %s); going on, the run will count such failures\n", rec.Status, rec.Error)
	}
	return nil
}

// notFoundHint explains a preflight's 404 (vLLM's answer to a model it
// does not serve): the models the server lists, and how to send one of
// them (Options.Model, or Options.ModelMap from the trace's own name). The
// options it names are traces.OptionRefs in its tree.
func (r *runner) notFoundHint(ctx context.Context, sent, traceModel string) error {
	model := traces.OptionRef("Options.Model")
	models, err := r.servedModels(ctx)
	if err != nil {
		return fmt.Errorf("; a 404 usually means a model the server does not serve, and its models could not be listed (%v): set %w to one it serves", err, model)
	}
	if slices.Contains(models, sent) {
		return fmt.Errorf("; the server lists %q, so the path is wrong: %w is the base URL, without /v1", sent, traces.OptionRef("Options.URL"))
	}
	const most = 8
	quoted := make([]string, 0, most)
	for _, m := range models[:min(len(models), most)] {
		quoted = append(quoted, strconv.Quote(m))
	}
	list := strings.Join(quoted, ", ")
	if len(models) > most {
		list += fmt.Sprintf(" and %d more", len(models)-most)
	}
	if traceModel != "" && traceModel == sent {
		return fmt.Errorf("; the server serves %s, not %q: set %w to the one to send, or map the trace's model name with %w %s=%s",
			list, sent, model, traces.OptionRef("Options.ModelMap"), traceModel, models[0])
	}
	return fmt.Errorf("; the server serves %s, not %q: set %w to the one to send", list, sent, model)
}

func (r *runner) warmup(ctx context.Context, sel []*traces.Record) {
	if r.o.Warmup <= 0 || len(sel) == 0 {
		return
	}
	var wg sync.WaitGroup
	lim := make(chan struct{}, 16)
	for i := 0; i < r.o.Warmup; i++ {
		src := *sel[i%len(sel)]
		src.PrefixBlocks, src.Category, src.PrefixTokens = nil, "", 0
		it := &item{rec: &src}
		r.build(it)
		api := r.o.API
		if !r.o.ForceAPI && src.API != "" {
			api = src.API
		}
		it.body = r.body(&src, api, it.model, 0x3a3a0000+uint64(i))
		wg.Add(1)
		lim <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-lim }()
			rec := traces.NewRecord()
			rec.RequestID = r.o.Run + "-warmup-" + strconv.Itoa(i)
			sendOne(ctx, r.tr, it.path, it.body, r.headers(), r.o.Timeout, time.Now(), extras{}, &rec, nil)
		}(i)
	}
	wg.Wait()
}
