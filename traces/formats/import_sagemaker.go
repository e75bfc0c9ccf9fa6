package formats

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/internal/intern"
	"github.com/tokentrace/tokentrace/traces"
)

// NewSageMakerReader reads Amazon SageMaker real-time endpoint data capture
// files (the JSON lines Model Monitor's data capture writes; the shape
// AIPerf's sagemaker_data_capture loader reads, ai-dynamo/aiperf
// src/aiperf/dataset/loader/sagemaker_data_capture.py @ 1acb369): one
// object per line,
//
//	{"captureData": {"endpointInput": {"data", "encoding"}, "endpointOutput": {"data", "encoding"}},
//	 "eventMetadata": {"eventId", "inferenceTime"}, "eventVersion"}
//
// where data is the request or response body as JSON text (encoding
// "JSON") or base64 (encoding "BASE64", the default). The request is an
// OpenAI-compatible body ("messages" for chat, "prompt" for completions);
// the response a chat completion, or its server-sent events when the
// endpoint streamed.
//
// Rows map to Records as:
//   - ArrivalNs: inferenceTime (ISO 8601) as an offset from the earliest in
//     the file; the importer reads the whole file when it is opened and
//     hands rows out in arrival order (capture files are hourly and not
//     sorted), holding about 100 bytes per row.
//   - InputTokens: the response's usage.prompt_tokens; without usage, the
//     request text estimated at ChatBytesPerToken bytes per token (noted).
//   - OutputTokens: usage.completion_tokens; without usage, the request's
//     max_tokens or max_completion_tokens (noted).
//   - Model: the request's model; API: chat or completions.
//
// No content is kept. Sessions do not exist in the format (every capture is
// an independent request). A line is malformed when it is not JSON, has no
// inferenceTime or endpointInput, its data does not decode, or neither
// usage nor the request says how long the output was. Malformed lines are
// reported before any row, so strict mode fails without writing one.
func NewSageMakerReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	d := &sagemakerDecoder{name: name}
	d.errs = readObjectLines(r, o, name, &d.line, d.parse)
	d.sortRows()
	return newImportReader(r, d, traces.NewMeta(importSource("sagemaker", name)), o), nil
}

type sagemakerCapture struct {
	CaptureData *struct {
		Input  *sagemakerPayload `json:"endpointInput"`
		Output *sagemakerPayload `json:"endpointOutput"`
	} `json:"captureData"`
	EventMetadata *struct {
		InferenceTime string `json:"inferenceTime"`
	} `json:"eventMetadata"`
}

type sagemakerPayload struct {
	Data     *string `json:"data"`
	Encoding string  `json:"encoding"`
}

// decode returns the payload's body bytes.
func (p *sagemakerPayload) decode() ([]byte, bool) {
	if p == nil || p.Data == nil {
		return nil, false
	}
	switch strings.ToUpper(p.Encoding) {
	case "JSON":
		return []byte(*p.Data), true
	case "", "BASE64":
		b, err := base64.StdEncoding.DecodeString(*p.Data)
		return b, err == nil
	}
	return nil, false // CSV and other encodings carry no OpenAI body
}

type sagemakerRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`
	Prompt              *string       `json:"prompt"`
	MaxTokens           *json.Number  `json:"max_tokens"`
	MaxCompletionTokens *json.Number  `json:"max_completion_tokens"`
}

type sagemakerUsage struct {
	PromptTokens     *json.Number `json:"prompt_tokens"`
	CompletionTokens *json.Number `json:"completion_tokens"`
}

type sagemakerDecoder struct {
	heldRows[traces.Record]
	name   string
	line   int64
	models intern.Strings
	tally  importTally
}

func (d *sagemakerDecoder) notes() []traces.Text { return d.tally.notes() }

// sortRows orders the rows by arrival (capture files are not sorted) and
// re-bases arrivals on the earliest.
func (d *sagemakerDecoder) sortRows() {
	idx := make([]int, len(d.rows))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return d.rows[idx[a]].ArrivalNs < d.rows[idx[b]].ArrivalNs })
	sorted := make([]traces.Record, len(d.rows))
	for i, j := range idx {
		sorted[i] = d.rows[j]
	}
	if len(sorted) > 0 {
		base := sorted[0].ArrivalNs
		for i := range sorted {
			sorted[i].ArrivalNs -= base
		}
	}
	d.rows = sorted
}

func (d *sagemakerDecoder) next(rec *traces.Record) error {
	row, err := d.take()
	if err == nil {
		*rec = row
	}
	return err
}

func (d *sagemakerDecoder) parse(line []byte) error {
	bad := func(format string, a ...any) error { return importRowError(d.name, d.line, format, a...) }
	var c sagemakerCapture
	if err := json.Unmarshal(line, &c); err != nil {
		return bad("not a SageMaker data capture record")
	}
	if c.EventMetadata == nil || c.EventMetadata.InferenceTime == "" {
		return bad("no eventMetadata.inferenceTime")
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(c.EventMetadata.InferenceTime))
	if err != nil || t.Year() < 1970 || t.Year() > 2200 {
		return bad("eventMetadata.inferenceTime is not an ISO 8601 time between 1970 and 2200")
	}
	if c.CaptureData == nil {
		return bad("no captureData.endpointInput")
	}
	body, ok := c.CaptureData.Input.decode()
	if !ok {
		return bad("captureData.endpointInput does not decode (want JSON or BASE64 data)")
	}
	var req sagemakerRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return bad("the captured request is not an OpenAI-compatible JSON body")
	}
	rec := traces.NewRecord()
	rec.ArrivalNs = t.UnixNano()
	rec.Model = d.models.Of(req.Model)
	switch {
	case req.Messages != nil:
		rec.API = traces.APIChat
	case req.Prompt != nil:
		rec.API = traces.APICompletions
	}
	usage := sagemakerFindUsage(c.CaptureData.Output)
	if usage != nil && usage.PromptTokens != nil {
		if rec.InputTokens, err = parseCount(string(*usage.PromptTokens)); err != nil {
			return bad("usage.prompt_tokens: %v", err)
		}
	} else {
		var n int64
		switch {
		case req.Messages != nil:
			if n, ok = chatMessagesTokens(req.Messages); !ok {
				return bad("a message's content is neither text nor a list of parts")
			}
		case req.Prompt != nil:
			n = chatTokens(*req.Prompt)
		default:
			return bad("the captured request has neither messages nor a prompt")
		}
		if n > 1<<31-1 {
			return bad("the estimated prompt is out of range")
		}
		rec.InputTokens = int32(n)
		d.tally.add("%d captures without usage: input tokens estimated from the request text at 4 bytes per token", 1)
	}
	switch {
	case usage != nil && usage.CompletionTokens != nil:
		if rec.OutputTokens, err = parseCount(string(*usage.CompletionTokens)); err != nil {
			return bad("usage.completion_tokens: %v", err)
		}
	case req.MaxTokens != nil || req.MaxCompletionTokens != nil:
		n := req.MaxTokens
		if n == nil {
			n = req.MaxCompletionTokens
		}
		if rec.OutputTokens, err = parseCount(string(*n)); err != nil {
			return bad("max_tokens: %v", err)
		}
		d.tally.add("%d captures without usage: output length taken from the request's max_tokens (a cap, not what was generated)", 1)
	default:
		return bad("no usage.completion_tokens and no max_tokens: the output length is unknown")
	}
	d.rows = append(d.rows, rec)
	return nil
}

// sagemakerFindUsage returns the usage of a captured response: the body's
// "usage", or for a streamed response the last server-sent event that
// carries one; nil when there is none.
func sagemakerFindUsage(p *sagemakerPayload) *sagemakerUsage {
	body, ok := p.decode()
	if !ok {
		return nil
	}
	var whole struct {
		Usage *sagemakerUsage `json:"usage"`
	}
	if json.Unmarshal(body, &whole) == nil {
		return whole.Usage
	}
	var last *sagemakerUsage
	for _, l := range bytes.Split(body, []byte("\n")) {
		l = bytes.TrimSpace(l)
		data, ok := bytes.CutPrefix(l, []byte("data:"))
		if !ok {
			continue
		}
		var ev struct {
			Usage *sagemakerUsage `json:"usage"`
		}
		if json.Unmarshal(bytes.TrimSpace(data), &ev) == nil && ev.Usage != nil {
			last = ev.Usage
		}
	}
	return last
}
