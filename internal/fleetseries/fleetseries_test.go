package fleetseries

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// TestCatalogProblem: what makes a fleet's labels unusable, one case per
// rule, and what the catalog reads when nothing does.
func TestCatalogProblem(t *testing.T) {
	type series struct{ instance, role string }
	names := Names{Instance: "pod", InstanceOption: "Opts.Instance", Role: "role", RoleOption: "Opts.Role"}
	for _, c := range []struct {
		why       string
		series    []series
		names     func(n Names) Names
		want      string // in the problem ("" = none)
		instances []string
		disagg    bool
	}{
		{"a prefill pool and a decode pool, told apart by pod", []series{{"prefill-0", "prefill"}, {"decode-0", "decode"}, {"decode-1", "decode"}}, nil,
			"", []string{"decode-0", "decode-1", "prefill-0"}, true},
		{"replicas of one role are not disaggregated", []series{{"a", "prefill-decode"}, {"b", "prefill-decode"}}, nil,
			"", []string{"a", "b"}, false},
		{"a prefill pool alone is not disaggregated", []series{{"p0", "Prefill"}, {"p1", "prefill"}}, nil,
			"", []string{"p0", "p1"}, false},
		{"no series at all says nothing of the labels", nil, nil, "", []string{}, false},
		{"an instance label on no series", []series{{"", "prefill"}, {"", "decode"}}, nil,
			`instance label "pod" (Opts.Instance) is on none`, []string{}, false},
		{"an optional instance label on no series is no problem", []series{{"", ""}}, func(n Names) Names { n.InstanceOptional, n.Role = true, ""; return n },
			"", []string{}, false},
		{"a role label on no series", []series{{"a", ""}, {"b", ""}}, nil,
			`role label "role" (Opts.Role) is on none`, []string{"a", "b"}, false},
		{"an optional role label on no series is no problem", []series{{"a", ""}, {"b", ""}}, func(n Names) Names { n.RoleOptional = true; return n },
			"", []string{"a", "b"}, false},
		{"an instance with two roles: the label does not tell the replicas apart", []series{{"10.0.0.1:8000", "prefill"}, {"10.0.0.1:8000", "decode"}, {"10.0.0.1:8000", "decode"}}, nil,
			`instance label "pod" (Opts.Instance) does not tell the replicas apart (10.0.0.1:8000 has "prefill" and "decode"): name the label that does`, []string{"10.0.0.1:8000"}, false},
	} {
		var cat Catalog
		for _, s := range c.series {
			cat.Add(s.instance, s.role)
		}
		n := names
		if c.names != nil {
			n = c.names(n)
		}
		got := ""
		if err := cat.Problem(n); err != nil {
			got = err.Error()
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: problem %q, want %q", c.why, got, c.want)
		}
		if c.want != "" {
			continue
		}
		if in := cat.Instances(); !slices.Equal(in, c.instances) || cat.Disaggregated() != c.disagg {
			t.Errorf("%s: instances %v, disaggregated %v; want %v, %v", c.why, in, cat.Disaggregated(), c.instances, c.disagg)
		}
	}
}

// TestCountsInPool: under disaggregation a prefill replica's finished
// requests stay out of the pooled count, as the decode replica finishes
// each of them too; without it every replica's count.
func TestCountsInPool(t *testing.T) {
	for _, c := range []struct {
		role   string
		disagg bool
		want   bool
	}{
		{"prefill", true, false}, {"PREFILL", true, false}, {"decode", true, true}, {"", true, true},
		{"prefill", false, true}, {"prefill-decode", false, true},
	} {
		if got := CountsInPool(c.role, c.disagg); got != c.want {
			t.Errorf("CountsInPool(%q, %v) = %v, want %v", c.role, c.disagg, got, c.want)
		}
	}
}

// TestNoRoleAndUnlabelled: instances without a role when others have
// one, and series without the instance label, are listed and counted.
func TestNoRoleAndUnlabelled(t *testing.T) {
	var cat Catalog
	cat.Add("b", "")
	cat.Add("a", "decode")
	cat.Add("c", "")
	cat.Add("", "decode")
	if got := cat.NoRole(); !slices.Equal(got, []string{"b", "c"}) || cat.Unlabelled() != 1 {
		t.Errorf("no role %v, unlabelled %d; want [b c], 1", got, cat.Unlabelled())
	}
	var none Catalog
	none.Add("a", "")
	if got := none.NoRole(); got != nil {
		t.Errorf("without any role: no role %v, want none listed", got)
	}
}

// TestLabelsString lists each label with its first values and how many
// it has past them.
func TestLabelsString(t *testing.T) {
	l := Labels{}
	for _, p := range []string{"decode-0", "decode-1", "decode-2", "prefill-0", "prefill-1"} {
		l.Add("pod", p)
	}
	l.Add("job", "vllm")
	l.Add("job", "vllm")
	want := "job=vllm; pod=decode-0, decode-1, decode-2, prefill-0, … (5 values)"
	if got := l.String(); got != want {
		t.Errorf("Labels = %q, want %q", got, want)
	}
}

// TestMeanCarry: the time a step adds without a finished request waits for
// the next step with one; a step's mean is then its time and the carried
// time over its requests, and nothing is carried on.
func TestMeanCarry(t *testing.T) {
	var c MeanCarry
	steps := []struct {
		sum, count float64
		want       float64
		ok         bool
	}{
		{2, 2, 1, true},     // one server's step: 1 s each
		{6, 0, 0, false},    // the prefill pool finished; the decode pool not yet
		{0.6, 6, 1.1, true}, // (6 + 0.6) s over the 6 requests
		{0.5, 1, 0.5, true}, // nothing left to carry
		{0, 0, 0, false},
	}
	for i, s := range steps {
		got, ok := c.Mean(s.sum, s.count)
		if ok != s.ok || math.Abs(got-s.want) > 1e-12 {
			t.Errorf("step %d: Mean(%g, %g) = %g, %v; want %g, %v", i, s.sum, s.count, got, ok, s.want, s.ok)
		}
	}
}
