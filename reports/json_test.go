package reports

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func renderJSON(t *testing.T, r *Report) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestJSONGolden(t *testing.T) {
	golden(t, "report.json", renderJSON(t, sampleReport(6)))
}

func TestJSONRoundTrip(t *testing.T) {
	r := sampleReport(6)
	out := renderJSON(t, r)
	var back Report
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if want := normalized(r); !reflect.DeepEqual(&back, want) {
		t.Errorf("decoded report differs from the normalized input:\n got %+v\nwant %+v", back, *want)
	}
	if again := renderJSON(t, &back); !bytes.Equal(again, out) {
		t.Error("re-encoding the decoded report changed the bytes")
	}
}

// TestJSONRequiredFields checks the field names scripts rely on are present,
// even when their values are zero.
func TestJSONRequiredFields(t *testing.T) {
	r := sampleReport(3)
	r.Seed = 0
	r.Passed = false
	r.Configurations[0].Tenants[0].Rejected = 0
	r.Configurations[0].Tenants[0].DBTimeShare = 0
	var doc map[string]any
	if err := json.Unmarshal(renderJSON(t, r), &doc); err != nil {
		t.Fatal(err)
	}
	requireKeys(t, "report", doc, "scenario", "seed", "schedule_hash", "passed", "configurations", "assertions")
	cfgs := doc["configurations"].([]any)
	if len(cfgs) != 2 {
		t.Fatalf("configurations: got %d, want 2", len(cfgs))
	}
	for _, c := range cfgs {
		c := c.(map[string]any)
		requireKeys(t, "configuration", c, "name", "tenants")
		for _, row := range c["tenants"].([]any) {
			requireKeys(t, "tenant row", row.(map[string]any),
				"tenant", "class", "count", "rejected", "p50_ms", "p99_ms", "max_ms", "db_time_share")
		}
	}
	as := doc["assertions"].([]any)
	if len(as) != len(r.Assertions) {
		t.Fatalf("assertions: got %d, want %d", len(as), len(r.Assertions))
	}
	for _, a := range as {
		requireKeys(t, "assertion", a.(map[string]any),
			"name", "configuration", "tenant", "class", "observed", "limit", "passed")
	}
}

func requireKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: missing field %q", what, k)
		}
	}
}

// TestOutputIndependentOfInputOrder shuffles every slice and map the harness
// fills and expects identical bytes from every renderer.
func TestOutputIndependentOfInputOrder(t *testing.T) {
	a := sampleReport(7)
	b := sampleReport(7)
	b.Assertions = slices.Clone(b.Assertions)
	slices.Reverse(b.Assertions)
	for i := range b.Configurations {
		c := &b.Configurations[i]
		c.Tenants = slices.Clone(c.Tenants)
		slices.Reverse(c.Tenants)
		c.Solo = slices.Clone(c.Solo)
		slices.Reverse(c.Solo)
		c.QuietAll = slices.Clone(c.QuietAll)
		slices.Reverse(c.QuietAll)
		c.SoloQuietAll = slices.Clone(c.SoloQuietAll)
		slices.Reverse(c.SoloQuietAll)
		slices.Reverse(c.TopDBTime)
		if c.Stats.RejectedByReason != nil {
			m := map[string]int64{}
			for _, k := range []string{"queue_full", "tenant_cap"} {
				m[k] = c.Stats.RejectedByReason[k]
			}
			c.Stats.RejectedByReason = m
		}
	}
	for name, render := range renderers() {
		var x, y bytes.Buffer
		if err := render(&x, a); err != nil {
			t.Fatal(err)
		}
		if err := render(&y, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Errorf("%s: output depends on input order", name)
		}
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Report)
		field  string // "" means valid
	}{
		{"sample is valid", func(*Report) {}, ""},
		{"empty scenario", func(r *Report) { r.Scenario = "" }, "scenario"},
		{"duplicate configuration", func(r *Report) { r.Configurations[1].Name = "naive" }, "configurations[1].name"},
		{"unknown expectation", func(r *Report) { r.Configurations[0].Expect = "maybe" }, "configurations[0].expect"},
		{"NaN latency", func(r *Report) { r.Configurations[1].Tenants[2].P99 = math.NaN() }, "configurations[1].tenants[2].p99_ms"},
		{"infinite observed", func(r *Report) { r.Assertions[0].Observed = math.Inf(1) }, "assertions[0].observed"},
		{"share as percent", func(r *Report) { r.Configurations[0].Tenants[0].DBTimeShare = 61 }, "configurations[0].tenants[0].db_time_share"},
		{"negative count", func(r *Report) { r.Configurations[0].Solo[0].Count = -1 }, "configurations[0].solo[0].count"},
		{"negative merged count", func(r *Report) { r.Configurations[1].QuietAll[0].Rejected = -2 }, "configurations[1].quiet_all[0].rejected"},
		{"NaN merged solo p99", func(r *Report) { r.Configurations[0].SoloQuietAll[1].P99 = math.NaN() }, "configurations[0].solo_quiet_all[1].p99_ms"},
		{"merged share as percent", func(r *Report) { r.Configurations[0].QuietAll[1].DBTimeShare = 9.5 }, "configurations[0].quiet_all[1].db_time_share"},
		{"merged row of a tenant", func(r *Report) { r.Configurations[0].QuietAll[0].Tenant = "t2" }, "configurations[0].quiet_all[0].tenant"},
		{"merged class twice", func(r *Report) { r.Configurations[1].SoloQuietAll[1].Class = "heavy" }, "configurations[1].solo_quiet_all[1].class"},
		{"tenant row named like the merged rows", func(r *Report) { r.Configurations[0].Tenants[2].Tenant = QuietAll }, "configurations[0].tenants[2].tenant"},
		{"unknown configuration", func(r *Report) { r.Assertions[1].Configuration = "fast" }, "assertions[1].configuration"},
		{"unknown operator", func(r *Report) { r.Assertions[2].Op = "=<" }, "assertions[2].op"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleReport(4)
			tt.mutate(r)
			err := r.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ie *InvalidError
			if !errors.As(err, &ie) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate: got %v, want an *InvalidError wrapping ErrInvalid", err)
			}
			if ie.Field != tt.field {
				t.Errorf("field: got %q, want %q (%v)", ie.Field, tt.field, err)
			}
			var b bytes.Buffer
			if err := WriteJSON(&b, r); !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "write json: ") {
				t.Errorf("WriteJSON: got %v, want a wrapped ErrInvalid", err)
			}
			if b.Len() != 0 {
				t.Error("WriteJSON wrote an invalid report")
			}
		})
	}
	if err := (*Report)(nil).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil report: got %v", err)
	}
}
