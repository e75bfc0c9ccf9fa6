package replay

import (
	"strings"

	"github.com/tokentrace/tokentrace/traces"
)

// ParseModelMap parses repeated "prod-name=served-name" strings
// (--model-map), so traces captured with production model or LoRA adapter
// names replay against a test deployment. Errors name the input ("model map").
func ParseModelMap(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || v == "" {
			return nil, optionErr("model map", "want prod-name=served-name, got %q", kv)
		}
		if old, dup := m[k]; dup && old != v {
			return nil, optionErr("model map", "%q mapped twice (%q and %q)", k, old, v)
		}
		m[k] = v
	}
	return m, nil
}

// MapModel is the model a record is sent with: its mapped name when
// ModelMap has its model, else Model (--model), else its own model, else
// fallback (the server's first model).
func (o *Options) MapModel(rec *traces.Record, fallback string) string {
	if m, ok := o.ModelMap[rec.Model]; ok && rec.Model != "" {
		return m
	}
	if o.Model != "" {
		return o.Model
	}
	if rec.Model != "" {
		return rec.Model
	}
	return fallback
}
