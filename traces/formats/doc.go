// Package formats converts between tokentrace traces and the formats of
// public traces and of other tools: importers (Import, ImportFrom,
// ImportAll; Importer and ImportFormatList name the formats) turn Mooncake,
// Azure, BurstGPT, Splitwise, Bailian, WEKA, TraceLab, AIPerf, Dynamo,
// inference-perf, SageMaker, SGLang, GuideLLM and vllm files into
// traces.Record streams, and exporters (Export, ExportFile; Exporter and
// ExportFormatList) write a trace for AIPerf, GuideLLM, inference-perf,
// SGLang, vllm, kv-cache-tester and the Mooncake and Azure formats. The
// Record, its checks and tokentrace's own codecs are package traces'.
//
// Importers turn public LLM request traces into Records. Each format has a
// constructor with the ImportFunc signature (NewMooncakeReader,
// NewAzureReader, NewBurstGPTReader, NewSplitwiseReader, NewBailianReader,
// NewWekaReader, NewTraceLabReader) and Import picks one by name. Importers
// stream: they hold one row at a time (plus, for Mooncake, the set of block
// ids seen so far, for Bailian a small entry per request so that later turns
// find their parent, for WEKA traces one conversation, for TraceLab a small
// entry per session), never the whole file.
//
// Every importer validates each row. A malformed row (a missing column, a
// negative or non-integer token count, a line that is not JSON, an
// unparseable timestamp) is a *traces.RowError naming the file and the
// 1-based line, never the row's content. With traces.OpenOptions.Strict the
// first one ends the import; otherwise it is skipped and counted in the
// Reader's Stats (Skipped, FirstSkip). A file whose header lacks a required
// column fails in the constructor whatever Strict says.
//
// Seq numbers the kept rows from 0 in file order.
package formats
