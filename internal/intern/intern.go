// Package intern shares one string per distinct label (model, category,
// ...) among the rows a reader decodes, so that a trace of millions of
// rows holds each label once.
package intern

// maxStrings bounds a Strings: past it, new labels are returned as they
// are, not kept (a column of distinct values would otherwise grow
// without bound).
const maxStrings = 4096

// Strings is a set of shared strings; the zero value is empty and ready.
type Strings struct {
	m map[string]string
}

// OfBytes returns the shared string equal to b (allocating only the first
// time it is seen).
func (in *Strings) OfBytes(b []byte) string {
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxStrings {
		in.m[s] = s
	}
	return s
}

// Of returns the shared string equal to s.
func (in *Strings) Of(s string) string {
	if v, ok := in.m[s]; ok {
		return v
	}
	if in.m == nil {
		in.m = map[string]string{}
	}
	if len(in.m) < maxStrings {
		in.m[s] = s
	}
	return s
}
