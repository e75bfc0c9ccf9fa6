package formats

import (
	"fmt"
	"io"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// NewAzureReader reads an Azure LLM inference trace (Azure/AzurePublicDataset):
// CSV with the columns TIMESTAMP, ContextTokens and GeneratedTokens, found by
// name. It reads
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
//
// Columns tokentrace has no place for are not dropped silently: the 2025
// NumImages (images sent with the request; ContextTokens is taken as it
// is) becomes an import note with the number of rows that had images and
// the images they carried, and any other extra column a note naming it
// (ImportNotes).
func NewAzureReader(r io.Reader, name string, o traces.OpenOptions) (traces.Reader, error) {
	c, err := newImportCSV(r, name, o)
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
	d.images = c.col("NumImages")
	if other := droppedColumns(c, "TIMESTAMP", "ContextTokens", "GeneratedTokens", "NumImages"); len(other) > 0 {
		d.tally.say(fmt.Sprintf("columns dropped (tokentrace has no place for them): %s", strings.Join(other, ", ")))
	}
	return newImportReader(r, d, traces.NewMeta(importSource("azure", name)), o), nil
}

type azureDecoder struct {
	c       *importCSV
	ts      int
	lengths importLengths
	clock   importClock
	images  int // NumImages column, -1 = none
	tally   importTally
	rows    int64
	withImg int64
	imgs    int64
}

func (d *azureDecoder) notes() []traces.Text {
	out := d.tally.notes()
	if d.images >= 0 {
		out = append(out, traces.Plain(fmt.Sprintf("NumImages dropped: %d of %d rows sent images (%d images in all); tokentrace keeps token counts only, and ContextTokens is kept as written", d.withImg, d.rows, d.imgs)))
	}
	return out
}

func (d *azureDecoder) next(rec *traces.Record) error {
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
	if rec.ArrivalNs, err = d.clock.offset(d.c, t); err != nil {
		return err
	}
	d.rows++
	if d.images >= 0 {
		// An unreadable image count does not make the row's tokens wrong:
		// it is counted as a row without images.
		if n, err := parseCount(row[d.images]); err == nil && n > 0 {
			d.withImg++
			d.imgs += int64(n)
		}
	}
	return nil
}
