package replay

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/traces"
)

// Run-record metadata keys: what the operator said about the run (--label,
// --metadata) and what the server said about itself (Options.DescribeServer).
const (
	MetaLabel = "run.label"
	// MetaUserPrefix + KEY holds each --metadata KEY=VALUE.
	MetaUserPrefix = "run.meta."
	// MetaServerModels is the JSON list of /v1/models entries (id, owned_by,
	// root, parent, max_model_len when given).
	MetaServerModels = "server.models"
	// MetaServerVersion is /version's "version" (or its body when not JSON).
	MetaServerVersion = "server.version"
	// MetaServerInfo is the /metrics series whose name ends in _info (build
	// and configuration info gauges such as vllm:cache_config_info), one per
	// series, labels sorted, joined by "; ".
	MetaServerInfo = "server.metrics_info"
)

// describeTimeout bounds each self-description request.
const describeTimeout = 5 * time.Second

// ParseMetadata parses repeated "key=value" strings (--metadata). Keys are
// non-empty and without spaces or '='; a repeated key keeps the last value.
func ParseMetadata(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") {
			return nil, optionErr("metadata", "want key=value, got %q", kv)
		}
		m[k] = strings.TrimSpace(v)
	}
	return m, nil
}

// addRunInfo stores the label, the user metadata and (DescribeServer) the
// server's self-description in m.
func (r *runner) addRunInfo(ctx context.Context, m *traces.Meta) {
	if r.o.Label != "" {
		m.Set(MetaLabel, r.o.Label)
	}
	for k, v := range r.o.Metadata {
		m.Set(MetaUserPrefix+k, v)
	}
	if r.o.DescribeServer {
		for k, v := range DescribeServer(context.WithoutCancel(ctx), r.client, r.base, r.headers()) {
			m.Set(k, v)
		}
	}
}

// DescribeServer asks the server at base (no /v1) about itself: GET
// /v1/models, GET /version and the *_info series of GET /metrics. Each
// answer that came is returned under its Meta key; failures are left out
// (a server without /version is normal). hdr is sent with each request.
func DescribeServer(ctx context.Context, client *http.Client, base string, hdr http.Header) map[string]string {
	out := map[string]string{}
	get := func(path string) ([]byte, bool) {
		ctx, cancel := context.WithTimeout(ctx, describeTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			return nil, false
		}
		for k, v := range hdr {
			if k != "Content-Type" && k != "Accept" {
				req.Header[k] = v
			}
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, false
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		return b, err == nil && resp.StatusCode == http.StatusOK
	}
	if b, ok := get("/v1/models"); ok {
		var lm struct {
			Data []map[string]any `json:"data"`
		}
		if json.Unmarshal(b, &lm) == nil && len(lm.Data) > 0 {
			var keep []map[string]any
			for _, d := range lm.Data {
				e := map[string]any{}
				for _, k := range []string{"id", "owned_by", "root", "parent", "max_model_len"} {
					if v, ok := d[k]; ok && v != nil {
						e[k] = v
					}
				}
				keep = append(keep, e)
			}
			if j, err := json.Marshal(keep); err == nil {
				out[MetaServerModels] = string(j)
			}
		}
	}
	if b, ok := get("/version"); ok {
		var v struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(b, &v) == nil && v.Version != "" {
			out[MetaServerVersion] = v.Version
		} else if s := strings.TrimSpace(string(b)); s != "" && len(s) < 200 && !strings.HasPrefix(s, "{") {
			out[MetaServerVersion] = s
		}
	}
	if b, ok := get("/metrics"); ok {
		if info := infoSeries(b); info != "" {
			out[MetaServerInfo] = info
		}
	}
	return out
}

// infoSeries extracts the Prometheus text-format samples whose metric name
// ends in _info (build and config info gauges), sorted, joined by "; ".
func infoSeries(b []byte) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		name := l
		if i := strings.IndexAny(l, "{ "); i >= 0 {
			name = l[:i]
		}
		if !strings.HasSuffix(name, "_info") {
			continue
		}
		// Drop the sample value (always 1 for info gauges) and timestamp.
		if i := strings.LastIndex(l, "}"); i >= 0 {
			l = l[:i+1]
		} else {
			l = name
		}
		lines = append(lines, l)
		if len(lines) >= 50 {
			break
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "; ")
}
