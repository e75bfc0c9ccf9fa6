package capture

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A Parquet file given as logs is named as such, under every format, before
// any of its binary "lines" is parsed or counted as malformed.
func TestParquetInputIsNamed(t *testing.T) {
	body := "PAR1\x15\x00\x15\xde\x01\n\xff\xfe binary\x00 rows\nPAR1"
	for _, format := range []string{FormatAuto, FormatOpenAI, FormatVLLM} {
		o := DefaultOptions()
		o.Format = format
		_, err := Capture(context.Background(), o, []Input{{Name: "trace.parquet", R: strings.NewReader(body)}})
		if !errors.Is(err, ErrParquet) || !strings.HasPrefix(err.Error(), "trace.parquet: ") {
			t.Errorf("format %s: %v; want %v naming trace.parquet", format, err, ErrParquet)
		}
	}
}
