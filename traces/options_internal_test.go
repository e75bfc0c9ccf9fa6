package traces

// with is o changed by set: tests build options from their constructor.
func with[T any](o T, set func(*T)) T {
	set(&o)
	return o
}
