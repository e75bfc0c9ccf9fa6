package replay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// TestPreflight checks the request sent before the clock starts: a target
// that refuses it (here a 404 for every completion: a wrong model or path)
// ends the run at once with the reason and nothing recorded; a server error
// is only reported, and the run goes on to count its failures.
func TestPreflight(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		var posts atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				posts.Add(1)
			}
			http.Error(w, `{"error":{"message":"The model does not exist.","type":"NotFoundError","code":404}}`, 404)
		}))
		defer srv.Close()
		o := DefaultOptions()
		o.URL, o.Model = srv.URL, "nosuch"
		res, err := Run(context.Background(), testTrace(20, time.Millisecond, 4, 2), traces.NewMeta("t"), o)
		if res != nil || err == nil || !strings.Contains(err.Error(), "preflight") || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), `"nosuch"`) {
			t.Fatalf("Run = %v, %v; want a preflight error naming the 404 and the model", res, err)
		}
		if n := posts.Load(); n != 1 {
			t.Errorf("%d requests reached the server, want the preflight only", n)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		// vLLM's 404 for a model it does not serve: the error lists what
		// it serves and says how to send it (the message once ended
		// "every request would" and named nothing the server serves).
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
				w.Write([]byte(`{"object":"list","data":[{"id":"served-a"},{"id":"served-b"}]}`))
				return
			}
			http.Error(w, `{"error":{"message":"The model does not exist.","type":"NotFoundError","code":404}}`, 404)
		}))
		defer srv.Close()
		recs := testTrace(5, time.Millisecond, 4, 2)
		for i := range recs {
			recs[i].Model = "prod-x"
		}
		o := DefaultOptions()
		o.URL = srv.URL
		_, err := Run(context.Background(), recs, traces.NewMeta("t"), o)
		if err == nil {
			t.Fatal("Run succeeded against a server that serves another model")
		}
		for _, want := range []string{`model "prod-x"`, `the server serves "served-a", "served-b", not "prod-x"`,
			"Options.Model", "Options.ModelMap prod-x=served-a", "every request of the run would fail the same way"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "every request would (") {
			t.Errorf("error %q ends mid-sentence", err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		f := newFakeMode(0, func(string) string { return "500" })
		defer f.Close()
		o := DefaultOptions()
		o.URL, o.Model = f.srv.URL, "m"
		var log syncBuffer
		o.Log = &log
		res := mustRun(t, testTrace(5, time.Millisecond, 4, 2), traces.NewMeta("t"), o)
		if res.Summary.Sent != 5 || res.Summary.Failed != 5 {
			t.Errorf("sent %d failed %d, want the run to go on and count 5 failures", res.Summary.Sent, res.Summary.Failed)
		}
		if !strings.Contains(log.String(), "preflight request failed") {
			t.Errorf("Options.Log got %q, want the preflight's failure reported", log.String())
		}
	})
}
