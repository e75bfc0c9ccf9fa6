package formats

// mooncakeFast decodes the common shape of a Mooncake line without
// reflection: one flat object whose keys are exactly "timestamp",
// "input_length", "output_length" (JSON numbers) and "hash_ids" (a list of
// JSON integers that fit in int64), in any order, nothing after it but
// spaces. It returns false for anything else (other keys, strings, null,
// escapes, odd spacing it does not know), and the caller falls back to
// encoding/json, so both paths accept and reject the same lines. The
// number fields alias line.
func mooncakeFast(line []byte, f *mooncakeFields) bool {
	*f = mooncakeFields{}
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return false
	}
	i = skipSpace(line, i+1)
	if i < len(line) && line[i] == '}' {
		return skipSpace(line, i+1) == len(line)
	}
	for {
		// key
		if i >= len(line) || line[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(line) && line[j] != '"' {
			if line[j] == '\\' || line[j] < 0x20 {
				return false
			}
			j++
		}
		if j >= len(line) {
			return false
		}
		key := string(line[i+1 : j]) // no allocation: compared only
		i = skipSpace(line, j+1)
		if i >= len(line) || line[i] != ':' {
			return false
		}
		i = skipSpace(line, i+1)
		switch key {
		case "timestamp", "input_length", "output_length":
			end, ok := scanJSONNumber(line, i)
			if !ok {
				return false
			}
			v := line[i:end:end]
			switch key {
			case "timestamp":
				f.ts = v
			case "input_length":
				f.in = v
			default:
				f.out = v
			}
			i = end
		case "hash_ids":
			if i >= len(line) || line[i] != '[' {
				return false
			}
			ids := make([]int64, 0, 16)
			i = skipSpace(line, i+1)
			if i < len(line) && line[i] == ']' {
				i++
			} else {
				for {
					v, end, ok := scanJSONInt64(line, i)
					if !ok {
						return false
					}
					ids = append(ids, v)
					i = skipSpace(line, end)
					if i < len(line) && line[i] == ',' {
						i = skipSpace(line, i+1)
						continue
					}
					if i < len(line) && line[i] == ']' {
						i++
						break
					}
					return false
				}
			}
			f.ids = ids
		default:
			return false
		}
		i = skipSpace(line, i)
		if i >= len(line) {
			return false
		}
		if line[i] == ',' {
			i = skipSpace(line, i+1)
			continue
		}
		if line[i] == '}' {
			return skipSpace(line, i+1) == len(line)
		}
		return false
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// scanJSONNumber returns the end of a JSON number starting at i (RFC 8259
// grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?).
func scanJSONNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// scanJSONInt64 reads a JSON integer (no fraction or exponent) that fits in
// int64.
func scanJSONInt64(b []byte, i int) (int64, int, bool) {
	end, ok := scanJSONNumber(b, i)
	if !ok {
		return 0, 0, false
	}
	s := b[i:end]
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	var v uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, 0, false // fraction or exponent: let encoding/json decide
		}
		if v > (1<<63)/10 {
			return 0, 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, 0, false
		}
		return -int64(v), end, true
	}
	if v > 1<<63-1 {
		return 0, 0, false
	}
	return int64(v), end, true
}
