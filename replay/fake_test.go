package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// fakeReq is what the fake server saw of one request.
type fakeReq struct {
	ID         string
	Path       string
	Model      string
	Prompt     []int
	Content    string
	MaxTokens  int
	MinTokens  int
	IgnoreEOS  bool
	Continuous bool
	// ReturnTokenIDs: the body asked for vLLM's return_token_ids; the
	// fake then returns output token k as id 500+k.
	ReturnTokenIDs bool
	Auth           string
	Header         http.Header
	At             time.Time
}

// fake is an OpenAI-compatible streaming server for tests: it answers every
// request with MaxTokens one-token chunks (Delay apart), a usage chunk and
// [DONE]. Mode, when set, picks a misbehaviour per request id.
type fake struct {
	Delay time.Duration
	// Mode returns "", "500", "reset", "hang", "garbage", "error-event",
	// "keepalive", "no-done" or "flat-500" for a request id.
	Mode    func(id string) string
	mu      sync.Mutex
	reqs    []fakeReq
	srv     *httptest.Server
	started chan struct{}
}

func newFake(delay time.Duration) *fake { return newFakeMode(delay, nil) }

// mustRun is Run of recs with meta m and o; an error fails the test.
func mustRun(t *testing.T, recs []traces.Record, m traces.Meta, o Options) *Result {
	t.Helper()
	res, err := Run(context.Background(), recs, m, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// options are the default options aimed at f, model "m".
func (f *fake) options() Options {
	o := DefaultOptions()
	o.URL, o.Model = f.srv.URL, "m"
	return o
}

// newFakeMode sets Mode before the server starts (the race detector does
// not see the happens-before edge a socket gives).
func newFakeMode(delay time.Duration, mode func(id string) string) *fake {
	f := &fake{Delay: delay, Mode: mode}
	f.srv = httptest.NewServer(f)
	return f
}

func (f *fake) Close() { f.srv.CloseClientConnections(); f.srv.Close() }

// requests are the completions the run sent for its records (not the
// preflight request).
func (f *fake) requests() []fakeReq {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeReq
	for _, r := range f.reqs {
		if !strings.HasSuffix(r.ID, "-preflight") {
			out = append(out, r)
		}
	}
	return out
}

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"fake-model","object":"model"}]}`)
		return
	}
	if r.URL.Path == "/tokenize" {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		n := 5 // template overhead
		for _, m := range body.Messages {
			n += len(strings.Fields(m.Content))
		}
		fmt.Fprintf(w, `{"count":%d,"max_model_len":8192,"tokens":[]}`, n)
		return
	}
	var body struct {
		Model    string `json:"model"`
		Prompt   []int  `json:"prompt"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens      int  `json:"max_tokens"`
		ReturnTokenIDs bool `json:"return_token_ids"`
		MinTokens      int  `json:"min_tokens"`
		IgnoreEOS      bool `json:"ignore_eos"`
		Stream         bool `json:"stream"`
		StreamOptions  struct {
			IncludeUsage bool `json:"include_usage"`
			Continuous   bool `json:"continuous_usage_stats"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json","type":"BadRequestError","code":400}}`, 400)
		return
	}
	fr := fakeReq{ID: r.Header.Get("X-Request-Id"), Path: r.URL.Path, Model: body.Model, Prompt: body.Prompt,
		MaxTokens: body.MaxTokens, MinTokens: body.MinTokens, IgnoreEOS: body.IgnoreEOS,
		Continuous: body.StreamOptions.Continuous, ReturnTokenIDs: body.ReturnTokenIDs, Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), At: time.Now()}
	prompt := len(body.Prompt)
	if len(body.Messages) > 0 {
		fr.Content = body.Messages[0].Content
		prompt = 5 + len(strings.Fields(fr.Content))
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, fr)
	f.mu.Unlock()
	mode := ""
	if f.Mode != nil {
		mode = f.Mode(fr.ID)
	}
	switch mode {
	case "500":
		w.WriteHeader(500)
		fmt.Fprint(w, `{"error":{"message":"secret prompt text","type":"InternalServerError","code":500}}`)
		return
	case "flat-500":
		w.WriteHeader(503)
		fmt.Fprint(w, `{"object":"error","message":"secret","type":"ServiceUnavailable","param":null,"code":503}`)
		return
	case "hang":
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	fl := w.(http.Flusher)
	bw := bufio.NewWriter(w)
	n := body.MaxTokens
	for i := 0; i < n; i++ {
		if f.Delay > 0 {
			time.Sleep(f.Delay)
		}
		if mode == "keepalive" {
			bw.WriteString(": keep-alive\n\n")
		}
		if i == n/2 {
			switch mode {
			case "reset":
				bw.Flush()
				fl.Flush()
				hj, ok := w.(http.Hijacker)
				if ok {
					conn, _, err := hj.Hijack()
					if err == nil {
						if tc, ok := conn.(*net.TCPConn); ok {
							tc.SetLinger(0)
						}
						conn.Close()
					}
				}
				return
			case "garbage":
				bw.WriteString("data: {\"choices\":[{\"text\":\"x\"\n\n")
				bw.Flush()
				fl.Flush()
				return
			case "error-event":
				bw.WriteString(`data: {"error":{"message":"secret","type":"InternalServerError","code":500}}` + "\n\ndata: [DONE]\n\n")
				bw.Flush()
				fl.Flush()
				return
			case "no-done":
				bw.Flush()
				fl.Flush()
				return
			}
		}
		usage := ""
		if body.StreamOptions.Continuous {
			usage = `,"usage":{"prompt_tokens":` + strconv.Itoa(prompt) + `,"completion_tokens":` + strconv.Itoa(i+1) + `,"total_tokens":0}`
		}
		if len(body.Messages) > 0 {
			if i == 0 {
				bw.WriteString(`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
			}
			fmt.Fprintf(bw, `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok"},"logprobs":null,"finish_reason":null}]%s}`+"\n\n", usage)
		} else {
			ids := ""
			if body.ReturnTokenIDs {
				ids = `,"token_ids":[` + strconv.Itoa(500+i) + `]`
			}
			fmt.Fprintf(bw, `data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null%s}]%s}`+"\n\n", ids, usage)
		}
		bw.Flush()
		fl.Flush()
	}
	fmt.Fprintf(bw, `data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}}`+"\n\ndata: [DONE]\n\n", prompt, prompt+n, n)
	bw.Flush()
	fl.Flush()
}
