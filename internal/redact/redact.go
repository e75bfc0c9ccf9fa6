// Package redact takes what may be credentials out of text by value, not
// by where the text came from: every URL in a string (a flag's value, a
// recorded command line, a target spec, an error from an HTTP client, a
// file's metadata) loses its userinfo, its query values and its fragment,
// and a scheme-less "user:password@host" its userinfo. Commands pass what
// they record, print and report through it, so a secret typed into any
// flag never reaches a file, a log line or a message.
package redact

import "strings"

// Mark replaces what is redacted.
const Mark = "(redacted)"

// URLs returns s with the userinfo, query values and fragment of every URL
// in it replaced by Mark (keys kept: "?token=(redacted)"), and the
// userinfo of a scheme-less "user:password@host". Text without URLs is
// returned as it is; redacting twice changes nothing more.
func URLs(s string) string {
	if !strings.Contains(s, "://") && !strings.Contains(s, "@") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if stop(s[i]) {
			b.WriteByte(s[i])
			i++
			continue
		}
		j := i
		for j < len(s) && !stop(s[j]) {
			j++
		}
		b.WriteString(run(s[i:j]))
		i = j
	}
	return b.String()
}

// stop reports whether c ends a run of text that may be a URL.
func stop(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '"', '\'', '`', '<', '>', '\\':
		return true
	}
	return false
}

// run redacts one run of URL characters: each URL in it from its scheme
// to the next URL's scheme, or a scheme-less userinfo.
func run(r string) string {
	starts := schemeStarts(r)
	if len(starts) == 0 {
		return bareUserinfo(r)
	}
	var b strings.Builder
	b.WriteString(r[:starts[0]])
	for k, s := range starts {
		end := len(r)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		b.WriteString(oneURL(r[s:end]))
	}
	return b.String()
}

// schemeStarts are the offsets of the schemes of the "://" in r.
func schemeStarts(r string) []int {
	var out []int
	for off := 0; ; {
		k := strings.Index(r[off:], "://")
		if k < 0 {
			return out
		}
		at := off + k
		s := at
		for s > 0 && schemeChar(r[s-1]) {
			s--
		}
		for s < at && !letter(r[s]) { // a scheme starts with a letter
			s++
		}
		if s < at && (len(out) == 0 || s > out[len(out)-1]) {
			out = append(out, s)
		}
		off = at + 3
	}
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func schemeChar(c byte) bool {
	return letter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// oneURL redacts u, which starts with its scheme.
func oneURL(u string) string {
	k := strings.Index(u, "://") + 3
	rest := u[k:]
	authEnd := strings.IndexAny(rest, "/?#")
	if authEnd < 0 {
		authEnd = len(rest)
	}
	auth, tail := rest[:authEnd], rest[authEnd:]
	if at := strings.LastIndexByte(auth, '@'); at >= 0 {
		auth = Mark + auth[at:]
	}
	return u[:k] + auth + redactTail(tail)
}

// redactTail redacts the query values and the fragment of a URL's path,
// query and fragment.
func redactTail(t string) string {
	q := strings.IndexAny(t, "?#")
	if q < 0 {
		return t
	}
	var b strings.Builder
	b.WriteString(t[:q])
	if t[q] == '?' {
		query := t[q+1:]
		frag := ""
		if h := strings.IndexByte(query, '#'); h >= 0 {
			query, frag = query[:h], query[h:]
		}
		b.WriteByte('?')
		for i, p := range strings.Split(query, "&") {
			if i > 0 {
				b.WriteByte('&')
			}
			key, val, ok := strings.Cut(p, "=")
			switch {
			case ok && val != "":
				b.WriteString(key + "=" + Mark)
			case !ok && p != "":
				b.WriteString(Mark)
			default:
				b.WriteString(p)
			}
		}
		t, q = frag, 0
		if frag == "" {
			return b.String()
		}
	}
	if len(t) > q+1 {
		b.WriteString("#" + Mark)
	} else {
		b.WriteString(t[q:])
	}
	return b.String()
}

// bareUserinfo redacts "user:password@" in a run without a scheme (after
// a "NAME=" prefix, if any): a colon before the '@' tells credentials
// from an address like "alice@example.com".
func bareUserinfo(r string) string {
	at := strings.LastIndexByte(r, '@')
	if at < 0 {
		return r
	}
	from := strings.LastIndexAny(r[:at], "=,;") + 1
	if !strings.Contains(r[from:at], ":") || r[from:at] == Mark {
		return r
	}
	return r[:from] + Mark + r[at:]
}
