// Command fastsse is the "fast local server" of tokentrace's replay
// benchmarks: an OpenAI-compatible /v1/completions endpoint that answers
// every POST at once with -tokens one-token SSE chunks, a usage chunk and
// [DONE] (one write, so the cost per request is as small as net/http
// allows). GET /v1/models lists one model. Loopback only by default.
//
//	go run ./bench/fastsse -addr 127.0.0.1:18080 -tokens 4
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	tokens := flag.Int("tokens", 4, "chunks per response")
	flag.Parse()
	var body bytes.Buffer
	for i := 0; i < *tokens; i++ {
		body.WriteString(`data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}]}` + "\n\n")
	}
	fmt.Fprintf(&body, `data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n", 8+*tokens, *tokens)
	b := body.Bytes()
	var n atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "%d\n", n.Load()) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(b)
	})
	log.Printf("fastsse listening on http://%s (%d tokens per response)", *addr, *tokens)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
