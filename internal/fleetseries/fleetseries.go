// Package fleetseries reads a fleet's replicas and their pools from the
// labels of its servers' metric series. postmortem's Prometheus reader
// (capture/prom) and replay's /metrics scraper (replay/scrape) both read
// them through it, so a series read either way has the same instances,
// the same roles and the same pooled counts: under prefill/decode
// disaggregation a request finishes on a prefill replica and then on the
// decode replica that answers it, and a pooled count of finished requests
// counts it once.
package fleetseries

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// PrefillRole is the role value of a prefill pool (llm-d's llm-d.ai/role
// and tokentrace sim's role label): its replicas finish each request once
// more, before the decode replica that answers it.
const PrefillRole = "prefill"

// The series a fleet exports beyond an engine's, read per replica:
//   - NIXLTransferTime is vLLM's NIXL connector's histogram of KV pulls, as
//     the pulling (decode) side observes them (NixlPromMetrics in
//     vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py;
//     llm-d's model server metrics reference lists the same name).
//   - RouterDecisions is the requests a router sent each replica
//     (tokentrace sim's router; llm-d's router exports request totals per
//     model and pool averages, not per replica). Its samples carry the
//     "_total" suffix.
const (
	NIXLTransferTime = "vllm:nixl_xfer_time_seconds"
	RouterDecisions  = "tokentrace_router_decisions"
)

// IsPrefill reports whether role names a prefill pool.
func IsPrefill(role string) bool { return strings.EqualFold(role, PrefillRole) }

// Disaggregated reports whether roles (instance → role) has a prefill
// pool and another.
func Disaggregated(roles map[string]string) bool {
	var prefill, other bool
	for _, r := range roles {
		if IsPrefill(r) {
			prefill = true
		} else if r != "" {
			other = true
		}
	}
	return prefill && other
}

// CountsInPool reports whether a series of a replica with role counts in
// a pooled count of finished requests (a per-request count, or the
// denominator of a per-request mean) of a fleet that is disaggregated or
// not: a prefill replica's does not, as the decode replica that answers
// each of its requests finishes it too. A per-request mean's numerator
// sums every replica's series, so it is the time a request spent in that
// phase on both pools.
func CountsInPool(role string, disaggregated bool) bool {
	return !disaggregated || !IsPrefill(role)
}

// MeanCarry turns a per-request histogram's increases, step by step, into
// its mean per step. Under disaggregation a pooled mean's numerator (the
// time on both pools) grows when the prefill pool finishes a request and
// its denominator (each request once) when the decode pool does, often a
// step later: a step's numerator whose denominator did not grow is carried
// to the next step whose did, so that over the series no second is lost
// and the means weighted by the requests finished add up to the totals.
// On one server both grow together and nothing is carried.
type MeanCarry struct{ pending float64 }

// Mean is the step's mean of sum over count, with what was carried; ok is
// false (and sum carried) when count did not grow.
func (c *MeanCarry) Mean(sum, count float64) (mean float64, ok bool) {
	if !(count > 0) {
		if sum > 0 {
			c.pending += sum
		}
		return 0, false
	}
	mean = (sum + c.pending) / count
	c.pending = 0
	return mean, true
}

// Catalog gathers the instances that a set of series names, with their
// roles, one series at a time (Add), and says what makes the labels
// unusable (Problem).
type Catalog struct {
	roles      map[string]string
	labelled   bool // a series had a role
	unlabelled int  // series without an instance
	conflicts  []string
}

// Add counts one series whose instance label holds instance ("" when it
// has none) and whose role label holds role ("" when it has none).
func (c *Catalog) Add(instance, role string) {
	if instance == "" {
		c.unlabelled++
		return
	}
	if c.roles == nil {
		c.roles = map[string]string{}
	}
	c.labelled = c.labelled || role != ""
	prev, seen := c.roles[instance]
	if seen && prev != role {
		c.conflicts = append(c.conflicts, fmt.Sprintf("%s has %q and %q", instance, prev, role))
	}
	if !seen || role != "" {
		c.roles[instance] = role
	}
}

// Instances are the instances seen, sorted.
func (c *Catalog) Instances() []string {
	out := make([]string, 0, len(c.roles))
	for in := range c.roles {
		out = append(out, in)
	}
	sort.Strings(out)
	return out
}

// Roles maps each instance to its role ("" when its series had none).
func (c *Catalog) Roles() map[string]string { return c.roles }

// Disaggregated reports whether the instances seen form a prefill pool
// and another.
func (c *Catalog) Disaggregated() bool { return Disaggregated(c.roles) }

// Unlabelled counts the series without the instance label.
func (c *Catalog) Unlabelled() int { return c.unlabelled }

// NoRole lists, sorted, the instances whose series had no role, when
// others had one (they belong to no pool).
func (c *Catalog) NoRole() []string {
	if !c.labelled {
		return nil
	}
	var none []string
	for in, r := range c.roles {
		if r == "" {
			none = append(none, in)
		}
	}
	sort.Strings(none)
	return none
}

// Names are the two labels a Catalog was read with and the options that
// set them, for Problem's messages.
type Names struct {
	// Instance is the label that tells the replicas apart, set by the
	// option InstanceOption; Role ("" = none) holds each replica's role,
	// set by RoleOption.
	Instance, InstanceOption string
	Role, RoleOption         string
	// InstanceOptional and RoleOptional say that a label no series
	// carries is no problem (a default label that one server's series
	// do not have: they are read as one instance, or without roles).
	InstanceOptional, RoleOptional bool
}

// Problem says what makes the labels unusable, nil when nothing does: an
// instance or role label that no series carries (unless optional), or an
// instance label under which one instance has two roles (it does not tell
// the replicas apart). The text names the label and its option (a
// traces.OptionRef the error wraps) and ends so that the caller can go on
// with the series it looked at ("is on none of the 4 series …").
func (c *Catalog) Problem(n Names) error {
	if c.unlabelled == 0 && len(c.roles) == 0 {
		return nil // no series at all: nothing to say about their labels
	}
	switch {
	case len(c.roles) == 0 && !n.InstanceOptional:
		return fmt.Errorf("instance label %q (%w) is on none", n.Instance, traces.OptionRef(n.InstanceOption))
	case n.Role != "" && !c.labelled && !n.RoleOptional:
		return fmt.Errorf("role label %q (%w) is on none", n.Role, traces.OptionRef(n.RoleOption))
	case len(c.conflicts) > 0:
		cs := slices.Clone(c.conflicts)
		slices.Sort(cs)
		cs = slices.Compact(cs)
		return fmt.Errorf("instance label %q (%w) does not tell the replicas apart (%s): name the label that does, e.g. pod; it is on all", n.Instance, traces.OptionRef(n.InstanceOption), strings.Join(cs, "; "))
	}
	return nil
}

// Labels gathers the label names and values of a set of series, for a
// message that says which labels the series do have.
type Labels map[string]map[string]bool

// Add records one label of a series.
func (l Labels) Add(name, value string) {
	if l[name] == nil {
		l[name] = map[string]bool{}
	}
	l[name][value] = true
}

// labelValuesShown is how many values of a label String lists.
const labelValuesShown = 4

// String lists the labels by name with their first values:
// "job=vllm; pod=decode-0, decode-1, decode-2, prefill-0, … (9 values)".
func (l Labels) String() string {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteString("; ")
		}
		vs := make([]string, 0, len(l[k]))
		for v := range l[k] {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		more := ""
		if len(vs) > labelValuesShown {
			more = fmt.Sprintf(", … (%d values)", len(vs))
			vs = vs[:labelValuesShown]
		}
		fmt.Fprintf(&b, "%s=%s%s", k, strings.Join(vs, ", "), more)
	}
	return b.String()
}
