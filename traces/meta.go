package traces

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tokentrace/tokentrace/internal/redact"
)

// SchemaVersion is the version of the record schema this package writes,
// "major.minor". Readers accept any minor version of SchemaMajor and reject
// other majors with ErrSchemaVersion. Adding a column bumps the minor version;
// renaming or retyping one would bump the major.
const SchemaVersion = "1.0"

// SchemaMajor is the major version readers accept.
const SchemaMajor = 1

// ErrSchemaVersion is returned when a file's schema major version is not
// SchemaMajor.
var ErrSchemaVersion = errors.New("unsupported trace schema version")

// ErrKAnonDeferred is returned when a file is a capture part whose
// k-anonymity was deferred (Meta.KAnonDeferred): not a finished trace until
// capture.Compose has read all the parts and applied it.
var ErrKAnonDeferred = errors.New("capture part with k-anonymity deferred (not a finished trace: compose all the parts first)")

// Extra keys of a capture part (capture.Options.Part).
const (
	// MetaKAnon is "deferred" in a capture part whose categories and
	// blocks are not yet thresholded.
	MetaKAnon = "capture.kanon"
	// KAnonDeferred is MetaKAnon's value in such a part.
	KAnonDeferred = "deferred"
)

// Meta is a file's metadata. In Parquet it lives in the key/value metadata
// under "tokentrace.<key>"; in JSONL it is the first line ({"tokentrace_meta":
// {...}}); in CSV it is a leading "#tokentrace " comment line holding the same
// JSON object.
type Meta struct {
	// SchemaVersion is "major.minor"; writers set it to SchemaVersion.
	SchemaVersion string `json:"schema_version"`
	// Source says where the rows came from ("mooncake:conversation_trace.jsonl",
	// "capture:openai-jsonl", "synth:gen", "replay").
	Source string `json:"source,omitempty"`
	// Tokenizer names how token counts were obtained ("usage", "o200k_base", ...).
	Tokenizer string `json:"tokenizer,omitempty"`
	// BlockSize is the token size of one PrefixBlocks entry (0 = no blocks).
	BlockSize int `json:"block_size,omitempty"`
	// KeyFingerprint identifies the capture key (never the key itself).
	KeyFingerprint string `json:"key_fingerprint,omitempty"`
	// KThreshold is the k-anonymity threshold applied to categories.
	KThreshold int `json:"k_threshold,omitempty"`
	// Command is the tokentrace command line that made the file (secrets removed).
	Command string `json:"command,omitempty"`
	// Extra holds free key/values (replay target, speed, labels, ...).
	Extra map[string]string `json:"extra,omitempty"`
}

// NewMeta returns a Meta with the current schema version and the given source.
func NewMeta(source string) Meta {
	return Meta{SchemaVersion: SchemaVersion, Source: source}
}

// Set stores a free key/value in Extra.
func (m *Meta) Set(key, value string) {
	if m.Extra == nil {
		m.Extra = map[string]string{}
	}
	m.Extra[key] = value
}

// KAnonDeferred reports whether m is a capture part whose k-anonymity is
// deferred to capture.Compose (see ErrKAnonDeferred).
func (m *Meta) KAnonDeferred() bool { return m.Get(MetaKAnon) == KAnonDeferred }

// Get returns a free key/value from Extra.
func (m *Meta) Get(key string) string { return m.Extra[key] }

// CheckVersion returns an error wrapping ErrSchemaVersion unless the version's
// major is SchemaMajor. An empty version is accepted as the current one
// (files written by other tools with our column names).
func (m *Meta) CheckVersion() error {
	if m.SchemaVersion == "" {
		return nil
	}
	major, _, _ := strings.Cut(m.SchemaVersion, ".")
	n, err := strconv.Atoi(major)
	if err != nil || n != SchemaMajor {
		return fmt.Errorf("%w %q (this tokentrace reads %d.x; upgrade tokentrace)", ErrSchemaVersion, m.SchemaVersion, SchemaMajor)
	}
	return nil
}

// Redacted is m with what may be credentials taken out of its text: the
// userinfo, query values and fragment of every URL in its command line,
// source and free values (internal/redact). Every codec writes and reads
// metadata through it, so a secret recorded by mistake is never stored,
// and one an older writer stored is never shown again.
func (m Meta) Redacted() Meta {
	m.Source, m.Tokenizer, m.Command = redact.URLs(m.Source), redact.URLs(m.Tokenizer), redact.URLs(m.Command)
	if len(m.Extra) > 0 {
		extra := make(map[string]string, len(m.Extra))
		for k, v := range m.Extra {
			extra[k] = redact.URLs(v)
		}
		m.Extra = extra
	}
	return m
}

// KeyValues flattens m into "tokentrace."-prefixed key/value pairs, sorted by
// key, as stored in Parquet metadata.
func (m *Meta) KeyValues() [][2]string {
	r := m.Redacted()
	m = &r
	kv := [][2]string{{"tokentrace.schema_version", m.SchemaVersion}}
	add := func(k, v string) {
		if v != "" {
			kv = append(kv, [2]string{"tokentrace." + k, v})
		}
	}
	add("source", m.Source)
	add("tokenizer", m.Tokenizer)
	if m.BlockSize != 0 {
		add("block_size", strconv.Itoa(m.BlockSize))
	}
	add("key_fingerprint", m.KeyFingerprint)
	if m.KThreshold != 0 {
		add("k_threshold", strconv.Itoa(m.KThreshold))
	}
	add("command", m.Command)
	keys := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv = append(kv, [2]string{"tokentrace.extra." + k, m.Extra[k]})
	}
	return kv
}

// MetaFromKeyValues is the inverse of KeyValues; keys without the
// "tokentrace." prefix are ignored.
func MetaFromKeyValues(kv [][2]string) (Meta, error) {
	var m Meta
	for _, p := range kv {
		k, ok := strings.CutPrefix(p[0], "tokentrace.")
		if !ok {
			continue
		}
		v := p[1]
		switch k {
		case "schema_version":
			m.SchemaVersion = v
		case "source":
			m.Source = v
		case "tokenizer":
			m.Tokenizer = v
		case "key_fingerprint":
			m.KeyFingerprint = v
		case "command":
			m.Command = v
		case "block_size", "k_threshold":
			n, err := strconv.Atoi(v)
			if err != nil {
				return m, fmt.Errorf("metadata %s %q: %w", k, v, err)
			}
			if k == "block_size" {
				m.BlockSize = n
			} else {
				m.KThreshold = n
			}
		default:
			if e, ok := strings.CutPrefix(k, "extra."); ok {
				m.Set(e, v)
			}
		}
	}
	return m.Redacted(), nil
}
