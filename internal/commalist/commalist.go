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
	err := Each(s, func(item string) error {
		v, err := parse(item)
		if err == nil {
			out = append(out, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Each calls fn with each item of s as Parse would parse it, for a list
// whose items set fields of one value (key=value lists) rather than give
// one value each. It stops at the first error and returns it as fn gave it.
func Each(s string, fn func(item string) error) error {
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if err := fn(item); err != nil {
			return err
		}
	}
	return nil
}
