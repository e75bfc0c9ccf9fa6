package capture

import (
	"encoding/json"
	"math"

	"github.com/tokentrace/tokentrace/traces"
)

// OTLP JSON (an OpenTelemetry collector's file exporter: one
// ExportTraceServiceRequest per line) holding vLLM "llm_request" spans.

type otlpAttr struct {
	Key   string `json:"key"`
	Value struct {
		StringValue *string  `json:"stringValue"`
		IntValue    rawValue `json:"intValue"`
		DoubleValue rawValue `json:"doubleValue"`
	} `json:"value"`
}

type otlpSpan struct {
	TraceID    string     `json:"traceId"`
	SpanID     string     `json:"spanId"`
	ParentID   string     `json:"parentSpanId"`
	Name       string     `json:"name"`
	Start      rawValue   `json:"startTimeUnixNano"`
	End        rawValue   `json:"endTimeUnixNano"`
	Attributes []otlpAttr `json:"attributes"`
	Status     struct {
		Code rawValue `json:"code"`
	} `json:"status"`
}

type otlpScope struct {
	Spans []otlpSpan `json:"spans"`
}

type otlpDoc struct {
	ResourceSpans []struct {
		ScopeSpans []otlpScope `json:"scopeSpans"`
		// Older exporters.
		InstrumentationLibrarySpans []otlpScope `json:"instrumentationLibrarySpans"`
	} `json:"resourceSpans"`
}

// SpanName is the vLLM span capture reads.
const SpanName = "llm_request"

type otlpParser struct{ em *emitter }

func (p *otlpParser) end() []LineError { return nil }

func (p *otlpParser) parse(line []byte, lineNo int64) (string, string) {
	var doc otlpDoc
	if err := json.Unmarshal(line, &doc); err != nil {
		return jsonErrKind(err)
	}
	if doc.ResourceSpans == nil {
		return KindMissing, "resourceSpans"
	}
	var kind, field string
	var spans []*otlpSpan
	for _, rs := range doc.ResourceSpans {
		for _, ss := range append(rs.ScopeSpans, rs.InstrumentationLibrarySpans...) {
			for i := range ss.Spans {
				spans = append(spans, &ss.Spans[i])
			}
		}
	}
	onLine := map[spanRef]*otlpSpan{}
	for _, s := range spans {
		if s.SpanID != "" {
			onLine[spanRef{s.TraceID, s.SpanID}] = s
		}
	}
	for _, s := range spans {
		if k, f := p.span(s, lineNo, onLine); k != "" && kind == "" {
			kind, field = k, f
		}
	}
	return kind, field
}

type spanRef struct{ trace, span string }

// maxAncestors bounds the walk from a span up to its nearest llm_request
// ancestor through the spans of its line.
const maxAncestors = 64

// parentCall returns the span id of s's nearest ancestor that may be a
// captured call: up through the spans of the same line (an export batch),
// the first llm_request span, or the first ancestor not on the line (the
// records stage finds out whether it is a captured call). "" = none: s is
// a root, or every ancestor on its line leads to a root.
func parentCall(s *otlpSpan, line map[spanRef]*otlpSpan) string {
	id := s.ParentID
	for range maxAncestors {
		if id == "" || id == s.SpanID {
			return ""
		}
		a, ok := line[spanRef{s.TraceID, id}]
		if !ok || a.Name == SpanName {
			return id
		}
		id = a.ParentID
	}
	return "" // a cycle among the line's spans: no parent
}

func (p *otlpParser) span(s *otlpSpan, lineNo int64, line map[spanRef]*otlpSpan) (string, string) {
	if s.Name != SpanName {
		p.em.ignored++
		return "", ""
	}
	start, ok := rawInt64(s.Start)
	if !ok || start <= 0 {
		return KindBadValue, "startTimeUnixNano"
	}
	in, out := int64(-1), int64(-1)
	secs := map[string]int64{}
	model, conv := "", ""
	for _, a := range s.Attributes {
		switch a.Key {
		case "gen_ai.conversation.id", "session.id":
			if a.Value.StringValue != nil && conv == "" {
				conv = *a.Value.StringValue
			}
		case "gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens":
			in, _ = attrInt(&a)
		case "gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens":
			out, _ = attrInt(&a)
		case "gen_ai.response.model", "gen_ai.request.model":
			if a.Value.StringValue != nil && model == "" {
				model = *a.Value.StringValue
			}
		case "gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e", "gen_ai.latency.time_in_queue",
			"gen_ai.latency.time_in_model_prefill", "gen_ai.latency.time_in_model_decode":
			if v, ok := attrSeconds(&a); ok {
				secs[a.Key] = v
			}
		}
	}
	if in < 0 {
		return KindMissing, "gen_ai.usage.prompt_tokens"
	}
	q := newRequest(lineNo, start, model)
	// A conversation or session id names the session; else the calls of
	// one trace (an agent's run) are one.
	if q.session("session", conv); q.sessID == "" {
		q.session("trace", s.TraceID)
	}
	if s.SpanID != "" {
		q.scope, q.spanID, q.parentID = s.TraceID, s.SpanID, parentCall(s, line)
	}
	if end, ok := rawInt64(s.End); ok && end >= start {
		q.finish = end - start
	}
	q.usageIn, q.srvIn = int32(in), int32(in)
	if out >= 0 {
		q.usageOut, q.srvOut = int32(out), int32(out)
	}
	q.has = true
	q.status = traces.StatusOK
	if c := rawString(s.Status.Code); c == "2" || c == "STATUS_CODE_ERROR" {
		q.status, q.errMsg = traces.StatusHTTPError, "span status error"
	}
	get := func(k string) int64 {
		if v, ok := secs[k]; ok {
			return v
		}
		return -1
	}
	q.ttft = get("gen_ai.latency.time_to_first_token")
	q.e2e = get("gen_ai.latency.e2e")
	q.queue = get("gen_ai.latency.time_in_queue")
	q.prefill = get("gen_ai.latency.time_in_model_prefill")
	q.decode = get("gen_ai.latency.time_in_model_decode")
	p.em.emit(&q) // no prompt: always valid
	return "", ""
}

// rawInt64 reads an int64 from a JSON number or string (OTLP JSON encodes
// 64-bit integers as strings).
func rawInt64(raw rawValue) (int64, bool) {
	s := rawString(raw)
	if s == "" {
		return 0, false
	}
	v, ok := decimalNs(s, 1)
	return v, ok
}

func attrInt(a *otlpAttr) (int64, bool) {
	if v, ok := rawInt64(a.Value.IntValue); ok && v >= 0 && v <= math.MaxInt32 {
		return v, true
	}
	if v, ok := rawDecimalNs(a.Value.DoubleValue, 1); ok && v <= math.MaxInt32 {
		return v, true
	}
	return -1, false
}

// attrSeconds reads a latency attribute in seconds as nanoseconds.
func attrSeconds(a *otlpAttr) (int64, bool) {
	if v, ok := rawDecimalNs(a.Value.DoubleValue, 1e9); ok {
		return v, true
	}
	if v, ok := rawDecimalNs(a.Value.IntValue, 1e9); ok {
		return v, true
	}
	return 0, false
}
