// Prints, as one JSON object, what DuckDB computes over a tokentrace results
// dataset (a glob of Parquet part files): row count, token sums and the p99
// TTFT in milliseconds of successful requests. quantile_cont interpolates
// linearly between order statistics, as tokentrace's percentiles do.
// Usage: node query.mjs 'dir/results-*.parquet'
import { DuckDBInstance } from '@duckdb/node-api';

const glob = process.argv[2];
if (!glob) {
  console.error('usage: node query.mjs GLOB');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const q = `
  select count(*)::BIGINT as requests,
         sum(input_tokens)::BIGINT as input_tokens,
         sum(output_tokens)::BIGINT as output_tokens,
         count(*) filter (where status = 'ok')::BIGINT as ok,
         quantile_cont((first_token_ns - sent_ns) / 1e6, 0.99)
           filter (where status = 'ok' and first_token_ns >= 0 and sent_ns >= 0) as ttft_p99_ms
  from read_parquet(?)`;
const prepared = await con.prepare(q);
prepared.bindVarchar(1, glob);
const reader = await prepared.runAndReadAll();
const row = reader.getRowObjectsJson()[0];
console.log(JSON.stringify({
  requests: Number(row.requests),
  input_tokens: Number(row.input_tokens),
  output_tokens: Number(row.output_tokens),
  ok: Number(row.ok),
  ttft_p99_ms: Number(row.ttft_p99_ms),
}));
