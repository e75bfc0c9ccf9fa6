// Command fastsse is the "fast local server" of tokentrace's replay
// benchmarks: an OpenAI-compatible /v1/completions endpoint that answers
// every POST at once with -tokens one-token SSE chunks, a usage chunk and
// [DONE] (one write, so the cost per request is as small as net/http
// allows). GET /v1/models lists one model. Loopback only by default.
//
// -flush-each writes (and flushes) every chunk separately, so the client
// reads about one chunk per socket read. -hold makes every response send
// one chunk and then wait until POST /release before it sends the usage
// chunk and [DONE]; GET /stats then reports the number of streams held open
// (the client memory benchmark, with the server in its own process).
//
//	go run ./bench/fastsse -addr 127.0.0.1:18080 -tokens 4
//	go run ./bench/fastsse -addr 127.0.0.1:18081 -hold
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	tokens := flag.Int("tokens", 4, "chunks per response")
	flushEach := flag.Bool("flush-each", false, "write and flush every chunk separately")
	hold := flag.Bool("hold", false, "send one chunk, then hold the stream open until POST /release")
	flag.Parse()
	const tokenChunk = `data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" a","logprobs":null,"finish_reason":null,"stop_reason":null}]}` + "\n\n"
	if *hold {
		*tokens = 1
	}
	var body bytes.Buffer
	for i := 0; i < *tokens; i++ {
		body.WriteString(tokenChunk)
	}
	fmt.Fprintf(&body, `data: {"id":"cmpl-x","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":8,"total_tokens":%d,"completion_tokens":%d}}`+"\n\ndata: [DONE]\n\n", 8+*tokens, *tokens)
	b := body.Bytes()
	tail := b[len(tokenChunk)**tokens:]
	var n, open atomic.Int64
	var mu sync.Mutex
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d %d\n", n.Load(), open.Load())
	})
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		close(release)
		release = make(chan struct{})
		mu.Unlock()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		switch {
		case *hold:
			mu.Lock()
			rel := release
			mu.Unlock()
			io.WriteString(w, tokenChunk)
			w.(http.Flusher).Flush()
			open.Add(1)
			select {
			case <-rel:
			case <-r.Context().Done():
			}
			open.Add(-1)
			w.Write(tail)
		case *flushEach:
			for i := 0; i < *tokens; i++ {
				io.WriteString(w, tokenChunk)
				w.(http.Flusher).Flush()
			}
			w.Write(tail)
		default:
			w.Write(b)
		}
	})
	log.Printf("fastsse listening on http://%s (%d tokens per response, hold=%v, flush-each=%v)", *addr, *tokens, *hold, *flushEach)
	log.Fatal(http.ListenAndServe(*addr, mux))
}
