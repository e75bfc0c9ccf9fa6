// Runs the SQL on stdin with DuckDB and prints the rows of its last
// statement as one JSON array (DuckDB's JSON-friendly values: big integers
// and decimals as strings, lists as arrays). Used by cmd/tokentrace
// TestSQLRecipesAgreeWithAnalyze to run the recipes of docs/sql.md as written.
// Usage: node sql.mjs < query.sql
import { DuckDBInstance } from '@duckdb/node-api';

let sql = '';
for await (const chunk of process.stdin) sql += chunk;
if (!sql.trim()) {
  console.error('usage: node sql.mjs < query.sql');
  process.exit(2);
}
const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const reader = await con.runAndReadAll(sql);
console.log(JSON.stringify(reader.getRowObjectsJson()));
