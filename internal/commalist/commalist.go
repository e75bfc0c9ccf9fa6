// Package commalist parses the comma-separated lists that options are
// given as ("ttft,tpot", "50,90,99", "256/128@1rps,2048/1024@sat").
package commalist

import "strings"

// Parse parses each item of the comma-separated list s, trimmed of white
// space (empty items are skipped), with parse, in order. It stops at the
// first error and returns it as parse gave it; an s with no items gives
// no values and no error.
func Parse[T any](s string, parse func(item string) (T, error)) ([]T, error) {
	var out []T
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		v, err := parse(item)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
