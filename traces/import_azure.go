package traces

import "io"

// NewAzureReader reads an Azure LLM inference trace (Azure/AzurePublicDataset):
// CSV with the columns TIMESTAMP, ContextTokens and GeneratedTokens, found by
// name (extra columns such as the 2025 NumImages are ignored). It reads
//   - 2023 (Splitwise): "2023-11-16 18:17:03.9799600", 7 fractional digits,
//     no time zone (read as UTC), CRLF line endings, no final newline;
//   - 2024 (DynamoLLM): "2024-05-10 00:00:00.009930+00:00" with mixed
//     fractions (also none at all) and a UTC offset;
//   - 2025 (ModServe): "2024-10-15T12:00:00.269Z".
//
// ArrivalNs is the offset from the first row's timestamp, computed in
// integer nanoseconds from the digits (exact to the file's resolution, 100 ns
// for 2023); the absolute start time is not kept. A row earlier than the
// first one is malformed (the files are sorted). InputTokens = ContextTokens,
// OutputTokens = GeneratedTokens.
func NewAzureReader(r io.Reader, name string, o OpenOptions) (Reader, error) {
	c, err := newImportCSV(r, name)
	if err != nil {
		return nil, err
	}
	d := &azureDecoder{c: c, clock: importClock{col: "TIMESTAMP"}}
	if d.ts, err = c.require("TIMESTAMP"); err != nil {
		return nil, err
	}
	if d.lengths, err = c.requireLengths("ContextTokens", "GeneratedTokens"); err != nil {
		return nil, err
	}
	return newImportReader(r, d, NewMeta(importSource("azure", name)), o), nil
}

type azureDecoder struct {
	c       *importCSV
	ts      int
	lengths importLengths
	clock   importClock
}

func (d *azureDecoder) next(rec *Record) error {
	row, err := d.c.row()
	if err != nil {
		return err
	}
	name, line := d.c.name, d.c.line
	t, err := parseWallTime(row[d.ts])
	if err != nil {
		return importRowError(name, line, "TIMESTAMP: %v", err)
	}
	if rec.InputTokens, rec.OutputTokens, err = d.lengths.parse(row); err != nil {
		return err
	}
	rec.ArrivalNs, err = d.clock.offset(d.c, t)
	return err
}
