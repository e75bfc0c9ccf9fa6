package traces

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzMooncakeFastPath checks that whenever the reflection-free parser
// accepts a line, encoding/json accepts it too and decodes the same fields.
func FuzzMooncakeFastPath(f *testing.F) {
	for _, s := range []string{
		`{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3]}`,
		`{"hash_ids":[],"timestamp":1.5e3,"input_length":0,"output_length":-1}`,
		`{"timestamp": 1, "timestamp": 2, "hash_ids": [9223372036854775807, -9223372036854775808]}`,
		`{"timestamp": 01}`,
		`{"input_length": 5, "hash_ids": [1.0]}`,
		`{}`,
		`{"chat_id": 3, "timestamp": 0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var fast mooncakeFields
		if !mooncakeFast(line, &fast) {
			return
		}
		var slow mooncakeRow
		if err := json.Unmarshal(line, &slow); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json says %v", line, err)
		}
		want := slow.fields()
		if !bytes.Equal(fast.ts, want.ts) || !bytes.Equal(fast.in, want.in) || !bytes.Equal(fast.out, want.out) ||
			(fast.ts == nil) != (want.ts == nil) || (fast.in == nil) != (want.in == nil) || (fast.out == nil) != (want.out == nil) {
			t.Fatalf("%q: fast %q/%q/%q, encoding/json %q/%q/%q", line, fast.ts, fast.in, fast.out, want.ts, want.in, want.out)
		}
		if len(fast.ids) != len(want.ids) || (len(fast.ids) > 0 && !reflect.DeepEqual(fast.ids, want.ids)) {
			t.Fatalf("%q: fast ids %v, encoding/json %v", line, fast.ids, want.ids)
		}
	})
}
