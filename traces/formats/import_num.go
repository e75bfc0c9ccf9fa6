package formats

import (
	"errors"
	"math"
	"strings"
	"time"
)

// Number parsing for the importers. Times are parsed as decimal digits into
// integers, never through float64, so a 7-digit fraction of a second is
// exact to 100 ns and a float artefact such as 5.8926549999999995 s rounds to
// the nearest nanosecond. Error messages never quote the input.

var (
	errNumEmpty    = errors.New("empty")
	errNumSyntax   = errors.New("not a decimal number")
	errNumNegative = errors.New("negative")
	errNumRange    = errors.New("out of range")
	errNumFraction = errors.New("not an integer")
)

// parseScaled parses a non-negative decimal number ("12", "12.5", "1.5e3",
// "+7") and returns value × 10^scale rounded half-up to an integer.
func parseScaled(s string, scale int) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errNumEmpty
	}
	neg := false
	switch s[0] {
	case '-':
		neg = true
		s = s[1:]
	case '+':
		s = s[1:]
	}
	// Split mantissa digits and exponent.
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, ok := parseSmallInt(s[i+1:])
		if !ok {
			return 0, errNumSyntax
		}
		exp = e
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	if intPart == "" && frac == "" {
		return 0, errNumSyntax
	}
	if !allDigits(intPart) || !allDigits(frac) || (hasDot && intPart == "" && frac == "") {
		return 0, errNumSyntax
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, nil // zero, also "-0"
	}
	if neg {
		return 0, errNumNegative
	}
	// value = digits × 10^k
	k := scale + exp - len(frac)
	if k < 0 {
		drop := -k
		if drop >= len(digits) {
			// Everything is below one unit: rounds to 0 or 1.
			if drop == len(digits) && digits[0] >= '5' {
				return 1, nil
			}
			return 0, nil
		}
		keep := digits[:len(digits)-drop]
		roundUp := digits[len(digits)-drop] >= '5'
		v, ok := digitsToInt(keep)
		if !ok {
			return 0, errNumRange
		}
		if roundUp {
			if v == math.MaxInt64 {
				return 0, errNumRange
			}
			v++
		}
		return v, nil
	}
	if len(digits)+k > 19 {
		return 0, errNumRange
	}
	v, ok := digitsToInt(digits)
	if !ok {
		return 0, errNumRange
	}
	for ; k > 0; k-- {
		if v > math.MaxInt64/10 {
			return 0, errNumRange
		}
		v *= 10
	}
	return v, nil
}

// parseCount parses a token count: a non-negative integer that fits in
// int32. An integral decimal such as "12.0" (pandas writes those) is accepted.
func parseCount(s string) (int32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errNumEmpty
	}
	if i := strings.IndexByte(s, '.'); i >= 0 && strings.IndexAny(s, "eE") < 0 {
		if strings.Trim(s[i+1:], "0") != "" {
			return 0, errNumFraction
		}
		s = s[:i]
		if s == "" || s == "-" || s == "+" {
			s += "0"
		}
	}
	v, err := parseScaled(s, 0)
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt32 {
		return 0, errNumRange
	}
	return int32(v), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// digitsToInt converts a non-empty run of ASCII digits, checking overflow.
func digitsToInt(s string) (int64, bool) {
	var v int64
	for i := 0; i < len(s); i++ {
		d := int64(s[i] - '0')
		if v > (math.MaxInt64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// parseSmallInt parses an optionally signed exponent of at most 4 digits.
func parseSmallInt(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" || len(s) > 4 || !allDigits(s) {
		return 0, false
	}
	v, _ := digitsToInt(s)
	if neg {
		return -int(v), true
	}
	return int(v), true
}

// parseWallTime parses the Azure trace timestamps into Unix nanoseconds:
// "2023-11-16 18:17:03.9799600" (2023: 7 fractional digits, no zone, read
// as UTC), "2024-05-10 00:00:00.009930+00:00" and "2024-05-10 00:00:00+00:00"
// (2024: mixed fractions, UTC offset), and "2024-10-15T12:00:00.269Z" (2025).
// The fraction is read as integer digits (up to 9), so it is exact.
func parseWallTime(s string) (int64, error) {
	s = strings.TrimSpace(s)
	// YYYY-MM-DD?HH:MM:SS
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':' {
		return 0, errors.New("not a YYYY-MM-DD HH:MM:SS timestamp")
	}
	num := func(a, b int) int {
		v := 0
		for i := a; i < b; i++ {
			if s[i] < '0' || s[i] > '9' {
				return -1
			}
			v = v*10 + int(s[i]-'0')
		}
		return v
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec := num(11, 13), num(14, 16), num(17, 19)
	if year < 1900 || year > 2200 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 60 {
		return 0, errors.New("timestamp field out of range")
	}
	rest := s[19:]
	var nsec int64
	if rest != "" && rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		frac := rest[1:i]
		if frac == "" || len(frac) > 9 {
			return 0, errors.New("timestamp fraction must have 1 to 9 digits")
		}
		v, _ := digitsToInt(frac)
		for j := len(frac); j < 9; j++ {
			v *= 10
		}
		nsec = v
		rest = rest[i:]
	}
	var offset int64 // seconds east of UTC
	switch {
	case rest == "" || rest == "Z" || rest == "z":
	case (rest[0] == '+' || rest[0] == '-') && (len(rest) == 6 && rest[3] == ':' || len(rest) == 5 || len(rest) == 3):
		digits := strings.ReplaceAll(rest[1:], ":", "")
		if len(digits) == 2 {
			digits += "00"
		}
		if len(digits) != 4 || !allDigits(digits) {
			return 0, errors.New("bad UTC offset")
		}
		h := int64(digits[0]-'0')*10 + int64(digits[1]-'0')
		m := int64(digits[2]-'0')*10 + int64(digits[3]-'0')
		if h > 23 || m > 59 {
			return 0, errors.New("bad UTC offset")
		}
		offset = h*3600 + m*60
		if rest[0] == '-' {
			offset = -offset
		}
	default:
		return 0, errors.New("unexpected text after the timestamp")
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day {
		return 0, errors.New("no such date")
	}
	return (t.Unix()-offset)*int64(time.Second) + nsec, nil
}
