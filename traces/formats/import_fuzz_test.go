package formats_test

import (
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// fuzzSecret is planted in seeds: no error message may repeat it.
const fuzzSecret = "ZZSECRETZZ"

// fuzzImport runs one importer on data in both modes and checks what must
// hold for any input: no panic; the default mode skips every bad row and
// never fails after the header; strict mode fails only with a *RowError
// naming the file and a line, and its rows are a prefix of the default
// mode's; every record is sane; no error quotes the planted content.
func fuzzImport(t *testing.T, format string, data []byte) {
	fn, err := formats.Importer(format)
	if err != nil {
		t.Fatal(err)
	}
	read := func(strict bool) ([]traces.Record, traces.ReadStats, error, bool) {
		r, err := fn(bytes.NewReader(data), "fuzz.input", openStrict(strict))
		if err != nil {
			return nil, traces.ReadStats{}, err, false
		}
		defer r.Close()
		recs, err := traces.ReadFrom(r)
		return recs, r.Stats(), err, true
	}
	checkErr := func(err error) {
		var re *traces.RowError
		if !errors.As(err, &re) || re.File != "fuzz.input" || re.Line < 1 {
			t.Fatalf("error %v is not a RowError naming fuzz.input and a line", err)
		}
		if strings.Contains(err.Error(), fuzzSecret) {
			t.Fatalf("error %q quotes the input", err)
		}
	}
	loose, st, lerr, opened := read(false)
	if !opened {
		checkErr(lerr) // header problems fail in the constructor
		if _, _, serr, sopened := read(true); sopened || serr == nil {
			t.Fatalf("strict mode opened a file the default mode refused")
		}
		return
	}
	if lerr != nil {
		t.Fatalf("default mode failed after the header: %v", lerr)
	}
	if st.Rows != int64(len(loose)) {
		t.Fatalf("Stats().Rows = %d, read %d", st.Rows, len(loose))
	}
	if st.Skipped > 0 {
		checkErr(st.FirstSkip)
	}
	for i, r := range loose {
		if r.Seq != int64(i) || r.ArrivalNs < 0 || r.InputTokens < 0 || r.OutputTokens < 0 || r.PrefixTokens < 0 || r.PrefixTokens > r.InputTokens {
			t.Fatalf("row %d is not sane: %+v", i, r)
		}
	}
	strict, _, serr, _ := read(true)
	if serr != nil {
		checkErr(serr)
		if st.Skipped == 0 {
			t.Fatalf("strict mode failed (%v) where the default mode skipped nothing", serr)
		}
	} else if st.Skipped != 0 {
		t.Fatalf("strict mode passed where the default mode skipped %d rows", st.Skipped)
	}
	if len(strict) > len(loose) || (len(strict) > 0 && !reflect.DeepEqual(strict, loose[:len(strict)])) {
		t.Fatalf("strict rows (%d) are not a prefix of the default mode's (%d)", len(strict), len(loose))
	}
}

func fuzzSeeds(f *testing.F, files []string, extra ...string) {
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

func FuzzImportMooncake(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/mooncake.jsonl"},
		`{"timestamp": 1.5, "input_length": 10, "output_length": 1, "hash_ids": [3, 3]}`,
		`{"timestamp": "12", "input_length": 10, "output_length": 1}`+"\n"+fuzzSecret+"\n",
		`{"timestamp": 0, "input_length": -1, "output_length": 1, "hash_ids": [0]}`,
		`{"timestamp": 0, "input_length": 1e3, "output_length": 1, "hash_ids": null}`,
		"\n\n{}\n[1,2]\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "mooncake", data) })
}

func FuzzImportAzure(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/azure2023_crlf.csv", "testdata/import/azure2024.csv"},
		"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:17:03.9799600,10,2\r\n"+fuzzSecret+",1,1",
		"TIMESTAMP,ContextTokens,GeneratedTokens,NumImages\n2024-10-15T12:00:00.269Z,10,2,1\n2024-10-15T12:00:00.1Z,1,1,0\n",
		"ContextTokens,TIMESTAMP,GeneratedTokens\n\"5\",2023-11-16 18:17:03,\"1\"\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "azure", data) })
}

func FuzzImportBurstGPT(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/burstgpt_v1.csv", "testdata/import/burstgpt_v3.csv"},
		"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,Conversation log\n6,"+fuzzSecret+"\n",
		"Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n1.5,s,-1,GPT-4,1,0,1,API log\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "burstgpt", data) })
}

func FuzzImportSplitwise(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/splitwise.csv"},
		"arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,374,44\n"+fuzzSecret+",1,1\n",
		"num_prefill_tokens,num_decode_tokens,num_total_tokens,pd_ratio\n74,918,992,0.08\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "splitwise", data) })
}

func FuzzImportBailian(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/bailian.jsonl"},
		`{"chat_id": 1, "parent_chat_id": 1, "timestamp": 0, "input_length": 1, "output_length": 1}`,
		`{"chat_id": 1, "timestamp": "0.5", "input_length": 1, "output_length": 1}`+"\n"+`{"chat_id": 1, "timestamp": 1, "input_length": 1, "output_length": 1}`+"\n"+fuzzSecret+"\n",
		`{"chat_id": 2, "parent_chat_id": 1, "timestamp": 1e2, "input_length": 3, "output_length": 0, "type": "`+fuzzSecret+`", "turn": 9, "hash_ids": null}`,
		"\n\n{}\n[1,2]\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "bailian", data) })
}

func FuzzImportWeka(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/weka.json"},
		`{"requests":[{"t":0,"in":1,"out":1}]}{"requests":[{"t":1,"type":"subagent","requests":[{"t":0,"in":1,"out":1}]}]}`,
		`{"block_size":16,"requests":[{"t":"0.5","in":1,"out":1,"hash_ids":[4294967296]}]}`+"\n"+fuzzSecret+"\n",
		`{"hash_id_scope":"global","requests":[{"t":2,"in":1,"out":1},{"t":1,"in":1,"out":1,"api_time":1e3,"think_time":-1}]}`,
		"\n\n{}\n[1,2]\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "weka", data) })
}

func FuzzImportTraceLab(f *testing.F) {
	fuzzSeeds(f, []string{"testdata/import/tracelab.jsonl"},
		`{"session_id":"s","round_index":"3","input_tokens_total":1e2,"output_tokens":0,"timing_events":[{"event_type":"tool_result","timestamp":"2026-01-01T00:00:00.5+02:00"}]}`,
		`{"session_id":"s","input_tokens_total":1,"output_tokens":1,"timing_events":[{"timestamp":"2026-01-01T00:00:01Z"}]}`+"\n"+`{"session_id":"s","input_tokens_total":1,"output_tokens":1,"timing_events":[{"timestamp":"2025-01-01T00:00:01Z"}]}`+"\n"+fuzzSecret+"\n",
		"\n\n{}\n[1,2]\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "tracelab", data) })
}

func FuzzImportTraceLabCSV(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/tracelab_example_replay.csv"},
		"id,input_len,output_len,arrival_time\n0,1,1,0\n0,2,1,9e18\n"+fuzzSecret+",1,1,1\n",
		"\ufeffid,input_len,output_len,arrival_time,round_idx,tool_wait_after_ms,prefix_len\n7,1,1,1.5,2147483646,9223372036854775807,2147483647\n7,1,1,0,0,1,0\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "tracelab", data) })
}

func FuzzImportSGLangTokens(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/sglang_token_trace.jsonl"},
		`{"input_tokens": [1], "num_output_tokens": "3", "ts": "1e3"}`+"\n"+fuzzSecret+"\n",
		`{"input_tokens": [], "output_tokens": null}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "sglang-tokens", data) })
}

func FuzzImportSGLangAgentic(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/sglang_agentic_trace.json"},
		`{"metadata": 1, "conversations": [[{"messages": [{"role": "user", "content": "`+fuzzSecret+`"}]}], 3, []]}`,
		`{"conversations": {}}`, `[1]`, `{"conversations": [[{"messages": [{}], "prompt_tokens": 1e9, "output_tokens": 2147483647}]]`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "sglang-agentic", data) })
}

func FuzzImportDynamo(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/dynamo_request_trace.jsonl"},
		`{"event":{"schema":"dynamo.request.trace.v1","event_type":"request_end","event_time_unix_ms":1e3,"agent_context":{"session_id":"a","parent_session_id":"a"},"request":{"input_tokens":1,"output_tokens":1,"total_time_ms":2e3}}}`+"\n"+fuzzSecret+"\n",
		`{"schema":"x"}`+"\n"+`{"schema":"dynamo.request.trace.v1","event_type":"request_end","request":{"input_tokens":1,"output_tokens":1,"request_received_ms":9223372036854,"ttft_ms":9e12,"replay":{"trace_block_size":0,"input_sequence_hashes":[-1]}}}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "dynamo", data) })
}

func FuzzImportSageMaker(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/sagemaker_data_capture.jsonl"},
		`{"captureData":{"endpointInput":{"data":"{\"prompt\":\"`+fuzzSecret+`\"}","encoding":"JSON"}},"eventMetadata":{"inferenceTime":"2024-01-01T00:00:00Z"}}`,
		`{"captureData":{"endpointInput":{"data":"!!","encoding":"BASE64"}},"eventMetadata":{"inferenceTime":"1900-01-01T00:00:00Z"}}`+"\n[]\n")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "sagemaker", data) })
}

// Parquet has no lines, so a damaged Baseten file fails as a whole (not
// a RowError per line); what must hold is no panic, sane rows, and no
// error quoting the input.
func FuzzImportBaseten(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/baseten_trace.parquet"}, "PAR1"+fuzzSecret+"PAR1")
	if b, err := os.ReadFile("../../testdata/publictraces/baseten_trace.parquet"); err == nil {
		f.Add(b[:len(b)/2])
		f.Add(append(append([]byte{}, b[:200]...), b[len(b)-600:]...))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := formats.NewBasetenReader(bytes.NewReader(data), "fuzz.input", traces.DefaultOpenOptions())
		if err != nil {
			if strings.Contains(err.Error(), fuzzSecret) {
				t.Fatalf("error %q quotes the input", err)
			}
			return
		}
		defer r.Close()
		recs, err := traces.ReadFrom(r)
		if err != nil && strings.Contains(err.Error(), fuzzSecret) {
			t.Fatalf("error %q quotes the input", err)
		}
		for i, rec := range recs {
			if rec.Seq != int64(i) || rec.ArrivalNs < 0 || rec.InputTokens < 0 || rec.OutputTokens < 0 {
				t.Fatalf("row %d is not sane: %+v", i, rec)
			}
		}
	})
}

func FuzzImportInferencePerf(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/inference-perf_fan_in_dependencies.json"},
		`{"spans":[{"name":"chat","start_time_unix_nano":1,"end_time_unix_nano":1,"attributes":{"gen_ai.usage.input_tokens":"`+fuzzSecret+`"}}]}`,
		`{"spans":[{"name":"chat","start_time":"2026-01-01T00:00:00","end_time":"2026-01-01T00:00:00","attributes":{"gen_ai.input.messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}}]}[]`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "inference-perf", data) })
}

func FuzzImportAIPerfDAG(f *testing.F) {
	fuzzSeeds(f, []string{"../../testdata/publictraces/aiperf_mixed_full.dag.jsonl", "../../testdata/publictraces/aiperf_orchestrator_spine_per_round.dag.jsonl"},
		`{"session_id":"a","turns":[{"messages":[{"role":"user","content":"`+fuzzSecret+`"}],"forks":["a"],"spawns":[{"children":["a"],"join_at":0}],"delay":9e15}]}`,
		`{"session_id":"o","orchestrator":true,"rounds":3,"spawns":["o"]}`+"\n"+`{"session_id":"p","pre_session_spawns":["p"],"turns":[{"messages":[]}]}`)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, "aiperf-dag", data) })
}

// The line formats of AIPerf (sessioned mooncake_trace), vllm's timed trace
// and GuideLLM's trace_synthetic share one reader.
func FuzzImportLines(f *testing.F) {
	fuzzSeeds(f, nil,
		`{"timestamp": 1.5, "input_length": 10, "output_length": 1, "hash_ids": [3], "session_id": "s1"}`+"\n"+`{"session_id": "s1", "delay": 2.5e3, "input_length": 20, "output_length": 2}`+"\n"+fuzzSecret+"\n",
		`{"session_id": "s", "delay": 9223372036854775807, "input_length": 1, "output_length": 1}`+"\n"+`{"session_id": "s", "delay": 9223372036854775807, "input_length": 1, "output_length": 1}`,
		`{"messages": [{"role": "user", "content": "hi"}], "output_length": 4}`, "\n\n{}\n[1,2]\n")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []string{"aiperf", "vllm", "guidellm"} {
			fuzzImport(t, format, data)
		}
	})
}
