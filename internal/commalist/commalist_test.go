package commalist

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestParse checks the items parse sees and what Parse returns; one case
// per rule.
func TestParse(t *testing.T) {
	errBad := errors.New("bad item")
	atoi := func(item string) (int, error) {
		if item == "x" {
			return 0, errBad
		}
		return strconv.Atoi(item)
	}
	for _, c := range []struct {
		doc     string
		s       string
		want    []int
		wantErr error
	}{
		{doc: "Items come back in order.", s: "3,1,2", want: []int{3, 1, 2}},
		{doc: "White space around an item is trimmed before parse sees it.", s: " 4 ,\t5\n", want: []int{4, 5}},
		{doc: "Empty and blank items are skipped.", s: ",6,, ,7,", want: []int{6, 7}},
		{doc: "An empty list gives no values and no error.", s: "", want: nil},
		{doc: "A list of blanks gives no values and no error.", s: " , ,", want: nil},
		{doc: "The first error stops the parse and comes back as parse gave it.", s: "1,x,2", wantErr: errBad},
	} {
		got, err := Parse(c.s, atoi)
		if !errors.Is(err, c.wantErr) || (c.wantErr != nil && got != nil) {
			t.Errorf("%s Parse(%q) = %v, %v; want error %v", c.doc, c.s, got, err, c.wantErr)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s Parse(%q) = %v, want %v", c.doc, c.s, got, c.want)
		}
	}
}

// TestEach checks the items fn sees, up to the first error; one case per
// rule.
func TestEach(t *testing.T) {
	errBad := errors.New("bad item")
	for _, c := range []struct {
		doc     string
		s       string
		want    []string
		wantErr error
	}{
		{doc: "Each sees the items Parse would parse, trimmed, in order, without the empty ones.", s: " a=1 ,, b=2,", want: []string{"a=1", "b=2"}},
		{doc: "An empty list calls fn never and gives no error.", s: "", want: nil},
		{doc: "The first error stops the walk, so fn sees no item after it, and comes back as fn gave it.", s: "a,x,b", want: []string{"a", "x"}, wantErr: errBad},
	} {
		var got []string
		err := Each(c.s, func(item string) error {
			got = append(got, item)
			if item == "x" {
				return errBad
			}
			return nil
		})
		if !errors.Is(err, c.wantErr) || !slices.Equal(got, c.want) {
			t.Errorf("%s Each(%q) saw %q, %v; want %q, %v", c.doc, c.s, got, err, c.want, c.wantErr)
		}
	}
}

// FuzzParse checks that parse only sees non-empty trimmed items without a
// comma, no more than the list has, in the list's order, and at least one
// when the list holds more than commas and white space.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "a,b", " a , ,b,", ",,,", "ttft, tpot ,itl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := Parse(s, func(item string) (string, error) {
			if item == "" || strings.TrimSpace(item) != item || strings.Contains(item, ",") {
				t.Errorf("Parse(%q) passed item %q", s, item)
			}
			return item, nil
		})
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if len(got) > strings.Count(s, ",")+1 {
			t.Errorf("Parse(%q) = %d items, more than the list has", s, len(got))
		}
		if strings.TrimSpace(strings.ReplaceAll(s, ",", "")) != "" && len(got) == 0 {
			t.Errorf("Parse(%q) = no items from a list with text in it", s)
		}
		rest := s
		for _, item := range got {
			i := strings.Index(rest, item)
			if i < 0 {
				t.Fatalf("Parse(%q) = %q: %q is not in the list after the items before it", s, got, item)
			}
			rest = rest[i+len(item):]
		}
	})
}
