// Command stalls reads a Go execution trace of a replay (tokentrace
// --exectrace FILE replay ...) and lists where the dispatcher goroutine
// stood still: each interval it was not running (waiting on a lock or a
// channel, runnable but not scheduled, preempted by the collector or
// sysmon, in a system call), grouped by cause, with the stop-the-world
// phases that overlapped them.
//
// First it prints the dispatcher's scheduling delay: the time it was
// runnable and waited for a P (what `go tool trace -pprof=sched` charges
// to its stacks), in all and per 4 s of the traced span, by what made it
// runnable (preempted by the runtime, its own yield, woken from a wait,
// back from a system call without a P), and how many times it came back
// on another OS thread than the one it left; from its first event until
// sending is over (it waits for the last responses).
//
//	go run ./bench/stalls run.trace
//	go run ./bench/stalls -min 0.5ms -top 10 run.trace
//
// It parses `go tool trace -d=parsed`, the toolchain's own dump, so it
// needs no library; the dump's format is the toolchain's and may change
// between Go releases.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

var header = regexp.MustCompile(`^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$`)

type event struct {
	t     int64
	m     string // the OS thread that emitted it
	g     string // the goroutine running when it was emitted
	kind  string
	rest  string
	stack []string // function names, innermost first
}

func main() {
	minGap := flag.Duration("min", 100*time.Microsecond, "list stalls at least this long")
	top := flag.Int("top", 8, "how many of the longest stalls to show")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: stalls [-min 100µs] [-top 8] TRACE")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	evs, err := parse(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "stalls:", err)
		os.Exit(1)
	}
	d := dispatcher(evs)
	if d == "" {
		fmt.Fprintln(os.Stderr, "stalls: no goroutine runs replay's dispatch loop in", flag.Arg(0))
		os.Exit(1)
	}
	schedDelay(evs, d)
	report(evs, d, *minGap, *top)
}

// schedDelay prints the dispatcher goroutine d's time runnable, by what
// made it runnable, and its thread changes.
func schedDelay(evs []event, d string) {
	mark := "GoID=" + d + " "
	type agg struct {
		n          int
		sum, worst int64
	}
	by := map[string]*agg{}
	var keys []string
	var from, first, last, total int64
	why, lastM := "", ""
	moves := 0
	for _, e := range evs {
		if e.kind != "StateTransition" || !strings.HasPrefix(e.rest, mark) {
			continue
		}
		if first == 0 {
			first = e.t
		}
		last = e.t
		if draining(e.stack) {
			break // sending is over: the rest is waiting for responses
		}
		fromTo, reason, _ := strings.Cut(strings.TrimPrefix(e.rest, mark), " Reason=")
		was, to, _ := strings.Cut(fromTo, "->")
		switch {
		case to == "Runnable":
			from = e.t
			switch r := strings.Trim(reason, `"`); {
			case was == "Running" && r == "runtime.Gosched":
				why = "its own yield (runtime.Gosched)"
			case was == "Running":
				why = "preempted (" + r + ")"
			case was == "Syscall":
				why = "back from a system call without a P"
			default:
				why = "woken from a wait"
			}
		case to == "Running" && from != 0:
			a := by[why]
			if a == nil {
				a = &agg{}
				by[why] = a
				keys = append(keys, why)
			}
			a.n++
			a.sum += e.t - from
			a.worst = max(a.worst, e.t-from)
			total += e.t - from
			from = 0
		}
		if to == "Running" || to == "Syscall" {
			if lastM != "" && e.m != lastM {
				moves++
			}
			lastM = e.m
		}
	}
	span := float64(last-first) / 1e9
	per4 := 0.0
	if span > 0 {
		per4 = float64(total) / 1e6 * 4 / span
	}
	fmt.Printf("dispatcher goroutine %s: scheduling delay %.2f ms over %.2f s of sending (%.2f ms per 4 s); on another thread %d times\n", d, float64(total)/1e6, span, per4, moves)
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]].sum > by[keys[j]].sum })
	fmt.Printf("%6s %10s %10s  %s\n", "count", "max_ms", "total_ms", "made runnable by")
	for _, k := range keys {
		a := by[k]
		fmt.Printf("%6d %10.3f %10.2f  %s\n", a.n, float64(a.worst)/1e6, float64(a.sum)/1e6, k)
	}
	fmt.Println()
}

// draining tells whether stack is the dispatcher's after sending, waiting
// for the responses in flight.
func draining(stack []string) bool {
	for _, f := range stack {
		if strings.Contains(f, "drainLoop") {
			return true
		}
	}
	return false
}

func parse(path string) ([]event, error) {
	cmd := exec.Command("go", "tool", "trace", "-d=parsed", path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("go tool trace: %w", err)
	}
	var evs []event
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := header.FindStringSubmatch(line); m != nil {
			t, _ := strconv.ParseInt(m[5], 10, 64)
			evs = append(evs, event{t: t, m: m[1], g: m[3], kind: m[4], rest: strings.TrimSpace(m[6])})
			continue
		}
		// Stack frames: "\tfunc @ 0x..." then "\t\tfile:line".
		if n := len(evs); n > 0 && strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "\t\t") && len(evs[n-1].stack) < 6 {
			f, _, _ := strings.Cut(strings.TrimSpace(line), " @")
			evs[n-1].stack = append(evs[n-1].stack, f)
		}
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("go tool trace -d=parsed %s: %w", path, err)
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	return evs, nil
}

// dispatcher is the goroutine that emitted the most events with
// replay's dispatch loop on its stack.
func dispatcher(evs []event) string {
	n := map[string]int{}
	for _, e := range evs {
		for _, f := range e.stack {
			if strings.Contains(f, "replay.(*runner).dispatch") {
				n[e.g]++
				break
			}
		}
	}
	best := ""
	for g, c := range n {
		if best == "" || c > n[best] {
			best = g
		}
	}
	return best
}

type stall struct {
	from, to int64
	cause    string
	stw      string
}

func report(evs []event, d string, minGap time.Duration, top int) {
	mark := "GoID=" + d + " "
	var stalls []stall
	var open *stall
	var stw []stall // stop-the-world ranges
	var stwStart = map[string]int64{}
	for _, e := range evs {
		if strings.Contains(e.rest, "stop-the-world") {
			name := e.rest
			if i := strings.Index(name, `Name="`); i >= 0 {
				name = name[i+6:]
				name = name[:strings.IndexByte(name, '"')]
			}
			if e.kind == "RangeBegin" {
				stwStart[name] = e.t
			} else if e.kind == "RangeEnd" {
				stw = append(stw, stall{from: stwStart[name], to: e.t, cause: name})
			}
			continue
		}
		if e.kind != "StateTransition" || !strings.HasPrefix(e.rest, mark) {
			continue
		}
		tr := strings.TrimPrefix(e.rest, mark)
		fromTo, reason, _ := strings.Cut(tr, " Reason=")
		from, to, _ := strings.Cut(fromTo, "->")
		switch {
		case from == "Running" && to != "Running":
			cause := to
			if r := strings.Trim(reason, `"`); r != "" {
				cause += " (" + r + ")"
			}
			if len(e.stack) > 0 {
				cause += " at " + short(e.stack)
			}
			open = &stall{from: e.t, cause: cause}
		case to == "Running" && open != nil:
			open.to = e.t
			stalls = append(stalls, *open)
			open = nil
		}
	}
	for i := range stalls {
		for _, w := range stw {
			if w.from < stalls[i].to && w.to > stalls[i].from {
				stalls[i].stw = fmt.Sprintf("%s %.2f ms", w.cause, float64(w.to-w.from)/1e6)
			}
		}
	}
	type agg struct {
		n          int
		sum, worst int64
	}
	by := map[string]*agg{}
	var keys []string
	kept := stalls[:0]
	for _, s := range stalls {
		if time.Duration(s.to-s.from) < minGap {
			continue
		}
		kept = append(kept, s)
		a := by[s.cause]
		if a == nil {
			a = &agg{}
			by[s.cause] = a
			keys = append(keys, s.cause)
		}
		a.n++
		a.sum += s.to - s.from
		a.worst = max(a.worst, s.to-s.from)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]].worst > by[keys[j]].worst })
	fmt.Printf("dispatcher goroutine %s: %d stalls of %v or more\n", d, len(kept), minGap)
	fmt.Printf("%6s %10s %10s  %s\n", "count", "max_ms", "total_ms", "cause")
	for _, k := range keys {
		a := by[k]
		fmt.Printf("%6d %10.3f %10.1f  %s\n", a.n, float64(a.worst)/1e6, float64(a.sum)/1e6, k)
	}
	sort.Slice(kept, func(i, j int) bool { return kept[i].to-kept[i].from > kept[j].to-kept[j].from })
	t0 := evs[0].t
	fmt.Printf("\nlongest:\n")
	for i, s := range kept {
		if i == top {
			break
		}
		w := ""
		if s.stw != "" {
			w = "; during " + s.stw
		}
		fmt.Printf("  %8.3f ms at %8.3f s: %s%s\n", float64(s.to-s.from)/1e6, float64(s.from-t0)/1e9, s.cause, w)
	}
}

// short names the innermost frames that say where a goroutine stopped,
// skipping the runtime's.
func short(stack []string) string {
	var out []string
	for _, f := range stack {
		if strings.HasPrefix(f, "runtime.") && len(out) == 0 {
			continue
		}
		if i := strings.LastIndexByte(f, '/'); i >= 0 {
			f = f[i+1:]
		}
		out = append(out, f)
		if len(out) == 2 {
			break
		}
	}
	return strings.Join(out, " < ")
}
