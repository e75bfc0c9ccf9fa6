package kmerge

import (
	"cmp"
	"errors"
	"slices"
	"testing"
)

type kv struct{ k, src, i int }

// sliceSource yields the values through one reused variable, as the run
// readers do, so a merge that read ahead would hand out overwritten values.
func sliceSource(vs []kv) Source[*kv] {
	var cur kv
	i := 0
	return func() (*kv, bool, error) {
		if i == len(vs) {
			return nil, false, nil
		}
		cur = vs[i]
		i++
		return &cur, true, nil
	}
}

// TestMerge is a table of sorted runs and their merge.
func TestMerge(t *testing.T) {
	run := func(src int, keys ...int) []kv {
		var out []kv
		for i, k := range keys {
			out = append(out, kv{k, src, i})
		}
		return out
	}
	tests := []struct {
		name string
		runs [][]kv
	}{
		{"runs interleave by key", [][]kv{run(0, 1, 4, 7), run(1, 2, 5, 8), run(2, 3, 6, 9)}},
		{"equal keys come from the earlier run first, in their run's order", [][]kv{run(0, 1, 1, 2), run(1, 1, 2, 2), run(2, 1)}},
		{"empty runs are skipped", [][]kv{nil, run(1, 3), nil, run(3, 1, 2)}},
		{"no runs", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var srcs []Source[*kv]
			var want []kv
			for _, r := range tc.runs {
				srcs = append(srcs, sliceSource(r))
				want = append(want, r...)
			}
			slices.SortStableFunc(want, func(a, b kv) int { return cmp.Or(cmp.Compare(a.k, b.k), cmp.Compare(a.src, b.src)) })
			m, err := New(srcs, func(a, b *kv) int { return cmp.Compare(a.k, b.k) })
			if err != nil {
				t.Fatal(err)
			}
			var got []kv
			for {
				if p, ok, _ := m.Peek(); ok && len(got) > 0 && p.k < got[len(got)-1].k {
					t.Fatalf("peek %+v after %+v", *p, got[len(got)-1])
				}
				v, ok, err := m.Next()
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, *v)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("merged %v\nwant %v", got, want)
			}
		})
	}
}

// A source's error ends the merge with it.
func TestMergeError(t *testing.T) {
	boom := errors.New("boom")
	n := 0
	bad := func() (int, bool, error) {
		if n++; n > 1 {
			return 0, false, boom
		}
		return 1, true, nil
	}
	m, err := New([]Source[int]{bad}, cmp.Compare[int])
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := m.Next(); v != 1 || !ok || err != nil {
		t.Fatalf("first: %v %v %v", v, ok, err)
	}
	if _, _, err := m.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the source's", err)
	}
}
