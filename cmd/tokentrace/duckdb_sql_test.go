package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
)

// sqlRecipes returns the DuckDB recipes of docs/sql.md by name: the
// ```sql blocks whose first line is "-- duckdb: NAME".
func sqlRecipes(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/sql.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^```sql\n(-- duckdb: ([a-z]+)\n.*?)^```").FindAllStringSubmatch(string(b), -1) {
		out[m[2]] = m[1]
	}
	for _, want := range []string{"latency", "goodput", "tail"} {
		if out[want] == "" {
			t.Fatalf("docs/sql.md has no `-- duckdb: %s` recipe", want)
		}
	}
	return out
}

// duckSQL runs sql with a real DuckDB (deploy/duckdb/sql.mjs) and returns
// its rows; it skips the test where node or @duckdb/node-api is missing.
func duckSQL(t *testing.T) func(sql string) []map[string]any {
	t.Helper()
	node, dir := duckNode(t)
	return func(sql string) []map[string]any {
		t.Helper()
		cmd := exec.Command(node, "sql.mjs")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(sql)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("duckdb: %v\n%s\n%s", err, stderr.String(), sql)
		}
		var rows []map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&rows); err != nil {
			t.Fatalf("duckdb output %q: %v", b, err)
		}
		return rows
	}
}

// num reads a DuckDB JSON value (a number or a numeric string) as float64.
func num(t *testing.T, v any) float64 {
	t.Helper()
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			t.Fatal(err)
		}
		return f
	case string:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil {
			t.Fatalf("not a number: %q", x)
		}
		return f
	case nil:
		return math.NaN()
	}
	t.Fatalf("not a number: %T %v", v, v)
	return 0
}

// analyzeFigures is the part of analyze --json the recipes compute.
type analyzeFigures struct {
	Requests     int64   `json:"requests"`
	Completed    int64   `json:"completed"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	DurationS    float64 `json:"duration_s"`
	Goodput      float64 `json:"goodput"`
	GoodRequests int64   `json:"good_requests"`
	GoodRatio    float64 `json:"goodput_ratio"`
	TTFT         dist    `json:"ttft_ms"`
	TPOT         dist    `json:"tpot_ms"`
	E2E          dist    `json:"e2e_ms"`
	Attribution  *struct {
		TailRequests int                `json:"tail_requests"`
		Source       string             `json:"source"`
		Share        map[string]float64 `json:"share"`
	} `json:"attribution"`
	Value string `json:"value"`
}

type dist struct {
	Count  int     `json:"count"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Approx bool    `json:"approx"`
}

// TestSQLRecipesAgreeWithAnalyze runs docs/sql.md's DuckDB recipes, as
// written, on a results dataset of three parts named as a distributed run
// names them (results-N.parquet: a replay in three shards against the
// simulator, each with its results-N.metrics.parquet beside it, two
// classes, rows spread over two replicas) and checks them against
// `tokentrace analyze --json --by class` and `--by replica` of the same
// parts: counts, token sums, goodput and the tail's shares equal (to float
// rounding), percentiles equal to analyze's exact ones and within its
// stated 2^-11 relative error of its log-histogram ones.
func TestSQLRecipesAgreeWithAnalyze(t *testing.T) {
	query := duckSQL(t)
	recipes := sqlRecipes(t)
	dir := t.TempDir()
	recs := make([]traces.Record, 90)
	for i := range recs {
		r := traces.NewRecord()
		r.Seq, r.ArrivalNs = int64(i), int64(i)*4e6
		r.InputTokens, r.OutputTokens = int32(64+37*(i%9)), int32(1+i%6) // some single-token replies: no TPOT
		r.Class = []string{"interactive", "batch"}[i%2]
		r.Model = []string{"m-a", "m-b"}[(i/3)%2]
		recs[i] = r
	}
	trace := filepath.Join(dir, "trace.jsonl")
	writeTrace(t, trace, traces.NewMeta("test"), recs)
	resDir := filepath.Join(dir, "run")
	os.Mkdir(resDir, 0o755)
	var parts []string
	for k := range 3 {
		part := filepath.Join(resDir, fmt.Sprintf("results-%d.parquet", k))
		runMain(t, "replay", "--quiet", "--speed", "2", "--max-lateness", "10s", "--shard", fmt.Sprintf("%d/3", k), "--out", part, trace)
		// Name the replica that served each row, as results behind a
		// router carry it (the replay client does not learn it).
		res, m, err := traces.ReadAll(part)
		if err != nil {
			t.Fatal(err)
		}
		for i := range res {
			res[i].Replica = fmt.Sprintf("replica-%d", res[i].Seq%2)
		}
		writeTrace(t, part, m, res)
		parts = append(parts, part)
		// The metrics series beside it: the recipes' glob must skip it.
		if _, err := os.Stat(filepath.Join(resDir, fmt.Sprintf("results-%d.metrics.parquet", k))); err != nil {
			t.Fatalf("the replay wrote no metrics series beside %s: %v", part, err)
		}
	}
	const slo = "ttft=150ms,tpot=40ms,e2e=400ms" // the goodput recipe's bounds are set below to the same
	analyzeBy := func(by string, extra ...string) (all analyzeFigures, groups map[string]analyzeFigures) {
		args := append([]string{"analyze", "--json", "--by", by, "--slo", slo}, extra...)
		so, _ := runMain(t, append(args, parts...)...)
		var rep struct {
			analyzeFigures
			Groups []analyzeFigures `json:"groups"`
		}
		if err := json.Unmarshal([]byte(so), &rep); err != nil {
			t.Fatalf("analyze JSON: %v", err)
		}
		groups = map[string]analyzeFigures{}
		for _, g := range rep.Groups {
			groups[g.Value] = g
		}
		return rep.analyzeFigures, groups
	}
	analyzeJSON := func(extra ...string) (analyzeFigures, map[string]analyzeFigures) { return analyzeBy("class", extra...) }
	all, byClass := analyzeJSON()
	if all.Requests != 90 || len(byClass) != 2 {
		t.Fatalf("analyze: %d requests, %d classes; want 90 and 2", all.Requests, len(byClass))
	}
	analyzeReplicas := func(extra ...string) map[string]analyzeFigures {
		_, g := analyzeBy("replica", extra...)
		if len(g) != 2 {
			t.Fatalf("analyze --by replica: %d groups, want 2", len(g))
		}
		return g
	}
	byReplicaFig := analyzeReplicas()
	sql := func(name string) []map[string]any {
		s := strings.ReplaceAll(recipes[name], "'results-*[0-9].parquet'", "'"+filepath.Join(resDir, "results-*[0-9].parquet")+"'")
		s = strings.Replace(s, "SELECT 500e6 AS max_ttft_ns, 50e6 AS max_tpot_ns, 10e9 AS max_e2e_ns", "SELECT 150e6 AS max_ttft_ns, 40e6 AS max_tpot_ns, 400e6 AS max_e2e_ns", 1)
		rows := query(s)
		if len(rows) != 5 {
			t.Fatalf("recipe %s: %d rows, want the run, 2 classes and 2 replicas: %v", name, len(rows), rows)
		}
		return rows
	}
	oursIn := func(row map[string]any, all analyzeFigures, byClass, byReplica map[string]analyzeFigures) (analyzeFigures, string) {
		v, _ := row["value"].(string)
		switch row["dim"] {
		case "class":
			return byClass[v], v
		case "replica":
			return byReplica[v], v
		}
		return all, "all"
	}
	ours := func(row map[string]any) (analyzeFigures, string) { return oursIn(row, all, byClass, byReplicaFig) }
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s: DuckDB %.9g, analyze %.9g (tolerance %g)", what, got, want, tol)
		}
	}
	exact := func(what string, got, want float64) { t.Helper(); near(what, got, want, 1e-9*max(1, math.Abs(want))) }

	latency := sql("latency")
	for _, row := range latency {
		a, who := ours(row)
		exact(who+" requests", num(t, row["requests"]), float64(a.Requests))
		exact(who+" completed", num(t, row["completed"]), float64(a.Completed))
		exact(who+" input tokens", num(t, row["input_tokens"]), float64(a.InputTokens))
		exact(who+" output tokens", num(t, row["output_tokens"]), float64(a.OutputTokens))
		for _, m := range []struct {
			name string
			d    dist
		}{{"ttft_ms", a.TTFT}, {"tpot_ms", a.TPOT}, {"e2e_ms", a.E2E}} {
			ps, ok := row[m.name].([]any)
			if !ok || len(ps) != 3 {
				t.Fatalf("%s %s = %v", who, m.name, row[m.name])
			}
			if m.d.Approx {
				t.Fatalf("%s %s: analyze sketched a %d-value sample", who, m.name, m.d.Count)
			}
			for i, w := range []float64{m.d.P50, m.d.P90, m.d.P99} {
				exact(fmt.Sprintf("%s %s p%s", who, m.name, []string{"50", "90", "99"}[i]), num(t, ps[i]), w)
			}
		}
	}
	for _, row := range sql("goodput") {
		a, who := ours(row)
		exact(who+" good requests", num(t, row["good_requests"]), float64(a.GoodRequests))
		exact(who+" duration", num(t, row["duration_s"]), a.DurationS)
		exact(who+" goodput", num(t, row["goodput_rps"]), a.Goodput)
		exact(who+" goodput ratio", num(t, row["goodput_ratio"]), a.GoodRatio)
		if who == "all" && (a.GoodRequests == 0 || a.GoodRequests == a.Completed) {
			t.Errorf("the SLO judges every request alike (%d good of %d): the check shows nothing", a.GoodRequests, a.Completed)
		}
	}
	for _, row := range sql("tail") {
		a, who := ours(row)
		if a.Attribution == nil || a.Attribution.Source != "server" {
			t.Fatalf("%s: analyze's attribution %+v, want it from server timings", who, a.Attribution)
		}
		exact(who+" tail requests", num(t, row["tail_requests"]), float64(a.Attribution.TailRequests))
		for _, c := range []string{"lateness", "queue", "prefill", "decode", "other"} {
			exact(who+" tail "+c+" share", num(t, row[c]), a.Attribution.Share[c])
		}
	}

	// Against analyze's log-histogram percentiles (fewer exact rows than
	// rows): within its stated relative error.
	sk, skByClass := analyzeJSON("--exact-rows", "8")
	skByReplica := analyzeReplicas("--exact-rows", "8")
	if !sk.TTFT.Approx {
		t.Fatalf("analyze --exact-rows 8 did not sketch")
	}
	for _, row := range latency {
		a, who := oursIn(row, sk, skByClass, skByReplica)
		for _, m := range []struct {
			name string
			d    dist
		}{{"ttft_ms", a.TTFT}, {"tpot_ms", a.TPOT}, {"e2e_ms", a.E2E}} {
			ps := row[m.name].([]any)
			for i, w := range []float64{m.d.P50, m.d.P90, m.d.P99} {
				got := num(t, ps[i])
				near(fmt.Sprintf("sketched %s %s p%s", who, m.name, []string{"50", "90", "99"}[i]), got, w, math.Ldexp(math.Abs(got), -11)+1e-9)
			}
		}
	}
}
