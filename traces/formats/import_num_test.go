package formats

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
)

// parseScaled reads decimals exactly and rounds half-up below the scale.
func TestParseScaled(t *testing.T) {
	for _, tc := range []struct {
		in    string
		scale int
		want  int64
		err   error
	}{
		{"0", 9, 0, nil},                                // zero
		{"0.0", 9, 0, nil},                              // zero with a fraction
		{"-0", 9, 0, nil},                               // negative zero is zero
		{"4.314579", 9, 4_314_579_000, nil},             // Vidur arrival
		{"5.8926549999999995", 9, 5_892_655_000, nil},   // float artefact rounds up
		{"5.8926550000000004", 9, 5_892_655_000, nil},   // and down
		{"1.2e1", 9, 12_000_000_000, nil},               // exponent
		{"1.5E-3", 9, 1_500_000, nil},                   // negative exponent
		{"3052", 6, 3_052_000_000, nil},                 // Mooncake ms
		{"+7", 0, 7, nil},                               // plus sign
		{".5", 0, 1, nil},                               // half rounds up
		{"0.4999", 0, 0, nil},                           // below half rounds down
		{"19440110.0", 9, 19_440_110_000_000_000, nil},  // BurstGPT v3 seconds
		{"9223372036.854775807", 9, math.MaxInt64, nil}, // the largest value
		{"9223372036.854775808", 9, 0, errNumRange},     // one more
		{"1e400", 0, 0, errNumRange},                    // exponent too large
		{"1e99999", 0, 0, errNumSyntax},                 // exponent too long
		{"-1", 0, 0, errNumNegative},                    // negative
		{"", 0, 0, errNumEmpty},                         // empty
		{".", 0, 0, errNumSyntax},                       // no digits
		{"1.2.3", 0, 0, errNumSyntax},                   // two dots
		{"NaN", 0, 0, errNumSyntax},                     // not a number
		{"12abc", 0, 0, errNumSyntax},                   // trailing text
		{"1e", 0, 0, errNumSyntax},                      // empty exponent
		{"0.000000000000000000000000001", 9, 0, nil},    // far below a nanosecond
	} {
		got, err := parseScaled(tc.in, tc.scale)
		if got != tc.want || err != tc.err {
			t.Errorf("parseScaled(%q, %d) = %d, %v; want %d, %v", tc.in, tc.scale, got, err, tc.want, tc.err)
		}
	}
}

// parseCount accepts integral decimals and rejects fractions, negatives
// and values beyond int32.
func TestParseCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int32
		err  error
	}{
		{"472", 472, nil},
		{"12.0", 12, nil},
		{" 7 ", 7, nil},
		{"2147483647", math.MaxInt32, nil},
		{"2147483648", 0, errNumRange},
		{"12.5", 0, errNumFraction},
		{"-3", 0, errNumNegative},
		{"", 0, errNumEmpty},
		{"x", 0, errNumSyntax},
	} {
		got, err := parseCount(tc.in)
		if got != tc.want || err != tc.err {
			t.Errorf("parseCount(%q) = %d, %v; want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// parseWallTime reads the Azure timestamp layouts exactly.
func TestParseWallTime(t *testing.T) {
	ref := time.Date(2023, 11, 16, 18, 17, 3, 979_960_000, time.UTC).UnixNano()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2023-11-16 18:17:03.9799600", ref, true},       // 2023
		{"2023-11-16T18:17:03.97996Z", ref, true},        // ISO with Z
		{"2023-11-16 20:17:03.9799600+02:00", ref, true}, // offset east
		{"2023-11-16 17:17:03.9799600-0100", ref, true},  // offset without colon
		{"2023-11-16 18:17:03.979960000", ref, true},     // 9 digits
		{"2024-05-10 00:00:00+00:00", time.Date(2024, 5, 10, 0, 0, 0, 0, time.UTC).UnixNano(), true},
		{"2023-11-16 18:17:03.9799600001", 0, false}, // 10 digits
		{"2023-02-30 00:00:00", 0, false},            // no such date
		{"2023-11-16 24:00:00", 0, false},            // hour 24
		{"2023-11-16 18:17", 0, false},               // too short
		{"2023-11-16 18:17:03.", 0, false},           // empty fraction
		{"2023-11-16 18:17:03 UTC", 0, false},        // zone name
		{"2023-11-16 18:17:03+25:00", 0, false},      // bad offset
		{"20231116 18:17:03.000000", 0, false},       // compact date
	} {
		got, err := parseWallTime(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseWallTime(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// FuzzParseScaled checks parseScaled against math/big on every input it
// accepts.
func FuzzParseScaled(f *testing.F) {
	for _, s := range []string{"0", "4.314579", "5.8926549999999995", "1.2e1", "1e-3", "9223372036.854775807", ".5", "-0", "00012.000"} {
		f.Add(s, 9)
	}
	f.Fuzz(func(t *testing.T, s string, scale int) {
		if scale < 0 || scale > 12 {
			return
		}
		got, err := parseScaled(s, scale)
		if err != nil {
			switch err {
			case errNumEmpty, errNumSyntax, errNumNegative, errNumRange:
			default:
				t.Fatalf("parseScaled(%q) error %v is not one of the fixed, content-free errors", s, err)
			}
			return
		}
		if got < 0 {
			t.Fatalf("parseScaled(%q) = %d < 0", s, got)
		}
		r, ok := new(big.Rat).SetString(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "+")))
		if !ok {
			return // big.Rat is stricter about some forms; nothing to compare
		}
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
		// round half up
		r.Add(r, big.NewRat(1, 2))
		want := new(big.Int).Quo(r.Num(), r.Denom())
		if r.Sign() < 0 {
			return
		}
		if !want.IsInt64() || want.Int64() != got {
			t.Fatalf("parseScaled(%q, %d) = %d, want %s", s, scale, got, want)
		}
	})
}

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
