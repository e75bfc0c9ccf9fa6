package replay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseMetadataAndModelMap(t *testing.T) {
	m, err := ParseMetadata([]string{"gpu=h100", "note=a, b", "empty="})
	if err != nil || m["gpu"] != "h100" || m["note"] != "a, b" || m["empty"] != "" || len(m) != 3 {
		t.Errorf("ParseMetadata: %v, %v", m, err)
	}
	for _, bad := range []string{"novalue", "=x", "a b=c"} {
		if _, err := ParseMetadata([]string{bad}); err == nil || !strings.HasPrefix(err.Error(), "replay: metadata") {
			t.Errorf("ParseMetadata(%q): %v", bad, err)
		}
	}
	mm, err := ParseModelMap([]string{"prod=served", "lora-a = base"})
	if err != nil || mm["prod"] != "served" || mm["lora-a"] != "base" {
		t.Errorf("ParseModelMap: %v, %v", mm, err)
	}
	for _, bad := range [][]string{{"prod"}, {"=x"}, {"x="}, {"a=b", "a=c"}} {
		if _, err := ParseModelMap(bad); err == nil || !strings.HasPrefix(err.Error(), "replay: model map") {
			t.Errorf("ParseModelMap(%q): %v", bad, err)
		}
	}
}

func TestDescribeServer(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"object":"list","data":[{"id":"m","object":"model","owned_by":"vllm","root":"/models/m","max_model_len":8192,"permission":[{}]}]}`))
	})
	mux.HandleFunc("/version", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"version":"0.11.0"}`)) })
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("# HELP vllm:cache_config_info x\n# TYPE vllm:cache_config_info gauge\n" +
			"vllm:cache_config_info{block_size=\"16\",gpu_memory_utilization=\"0.9\"} 1.0\n" +
			"vllm:num_requests_running{model_name=\"m\"} 3.0\npython_info{implementation=\"CPython\",version=\"3.12.3\"} 1.0\n"))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	got := DescribeServer(context.Background(), srv.Client(), srv.URL, http.Header{"Authorization": {"Bearer k"}})
	want := map[string]string{
		MetaServerModels:  `[{"id":"m","max_model_len":8192,"owned_by":"vllm","root":"/models/m"}]`,
		MetaServerVersion: "0.11.0",
		MetaServerInfo:    `python_info{implementation="CPython",version="3.12.3"}; vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.9"}`,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// A server without these endpoints gives nothing, and no error.
	empty := httptest.NewServer(http.NotFoundHandler())
	defer empty.Close()
	if got := DescribeServer(context.Background(), empty.Client(), empty.URL, nil); len(got) != 0 {
		t.Errorf("404 server described as %v", got)
	}
}
