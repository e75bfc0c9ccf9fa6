package formats_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/tokentrace/tokentrace/traces"
	"github.com/tokentrace/tokentrace/traces/formats"
)

// What an importer cannot keep is said with counts, never dropped
// silently: each case imports content and lists the notes it must give.
func TestImportNotes(t *testing.T) {
	for _, tc := range []struct {
		name, format, content string
		want                  []string
	}{
		{"Azure 2025's NumImages is counted (rows with images, images in all); other extra columns are named.",
			"azure", "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens,Region\n2024-10-15T12:00:00.269Z,2,10,3,eu\n2024-10-15T12:00:01Z,0,10,3,eu\n2024-10-15T12:00:02Z,5,1,1,us\n",
			[]string{"columns dropped (tokentrace has no place for them): Region",
				"NumImages dropped: 2 of 3 rows sent images (7 images in all); tokentrace keeps token counts only, and ContextTokens is kept as written"}},
		{"Azure 2023/2024 columns are all read: nothing to say.",
			"azure", "TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,1,1\n", nil},
		{"BurstGPT v1 (6 columns): Total tokens is named as dropped and the failed rows (0 response tokens) are counted.",
			"burstgpt", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n3,ChatGPT,391,22,413,Conversation log\n41,GPT-4,388,0,388,API log\n",
			[]string{"columns dropped (Total tokens is Request + Response tokens; tokentrace has no place for the others): Total tokens",
				"1 rows failed in the source (0 response tokens): kept as real load with status http_error and 0 output tokens (export ExportOptions.OKOnly drops them)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := formats.ImportFrom(context.Background(), tc.format, strings.NewReader(tc.content), "in", openStrict(true))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if _, err := traces.ReadFrom(r); err != nil {
				t.Fatal(err)
			}
			if got := noteStrings(r); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("notes:\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}
