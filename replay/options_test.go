package replay

import (
	"reflect"
	"testing"
)

// WithDefaults is the one place replay's defaults live: DefaultOptions is
// the zero Options with them (and valid once URL is set), and a field the
// caller set keeps its value while the zero ones take their defaults.
func TestWithDefaults(t *testing.T) {
	d := DefaultOptions()
	if !reflect.DeepEqual(d, Options{}.WithDefaults()) {
		t.Errorf("DefaultOptions() = %+v, want Options{}.WithDefaults() = %+v", d, Options{}.WithDefaults())
	}
	d.URL = "http://127.0.0.1:1"
	if err := d.Validate(); err != nil {
		t.Errorf("the defaults with a URL: %v", err)
	}
	dv := reflect.ValueOf(d)
	for i := range dv.NumField() {
		f := dv.Type().Field(i)
		if dv.Field(i).IsZero() || f.Name == "URL" {
			continue // no default to fill
		}
		var o Options
		set := reflect.ValueOf(&o).Elem().Field(i)
		switch set.Kind() {
		case reflect.String:
			set.SetString("set-by-caller")
		case reflect.Int, reflect.Int64:
			set.SetInt(3)
		case reflect.Float64:
			set.SetFloat(3)
		default:
			t.Fatalf("field %s (%s): teach this test its kind", f.Name, set.Kind())
		}
		got := reflect.ValueOf(o.WithDefaults()).Field(i)
		if !got.Equal(set) {
			t.Errorf("WithDefaults changed %s from %v to %v", f.Name, set, got)
		}
		if z := reflect.ValueOf(Options{}.WithDefaults()).Field(i); !z.Equal(dv.Field(i)) {
			t.Errorf("a zero %s became %v, want its default %v", f.Name, z, dv.Field(i))
		}
	}
}
