package scenario

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// DefaultWatchEvery is how often a phase's watcher consults its policy
// when watch.every is left out.
const DefaultWatchEvery = Duration(500 * time.Millisecond)

// Watch is a phase's watcher: every Every during the phase, the harness
// hands the policy named Policy a sample of the run (the ledger's DB time
// per tenant, the phase's elapsed time) and runs the actions it fires,
// until it reports done or the phase ends. The other keys of its mapping
// are the policy's own settings, decoded strictly into Config.
//
//	watch: {policy: promote, every: 500ms, tenant: 1, threshold: 0.25}
type Watch struct {
	// Policy names the kind of policy: one of PolicyNames. Required.
	Policy string
	// Every is the period of the policy's checks, > 0 and within the
	// phase. Default 500ms.
	Every Duration
	// Config holds the policy's settings; nil for an unknown Policy.
	Config PolicyConfig
}

// PolicyConfig is the settings of one kind of policy. Validate returns its
// problems, each naming its key (relative to the watch, e.g. "threshold")
// and what is wrong; s is the whole scenario.
type PolicyConfig interface {
	Validate(s *Scenario) []ActionProblem
}

// ShareWatcher is a PolicyConfig that acts on one tenant's share of all
// DB time (the promote policy): the report draws its threshold on the
// DB-time share plot. Optional, found by type assertion.
type ShareWatcher interface {
	// ShareThreshold returns the tenant watched (1..tenants.count) and
	// the share, 0..1, it acts above.
	ShareThreshold() (tenant int, threshold float64)
}

var _ ShareWatcher = (*Promote)(nil)

var policies = newRegistry[PolicyConfig]("policy")

// RegisterPolicy makes a policy kind known to scenario files under name:
// newConfig returns a pointer to a struct whose yaml-tagged fields are the
// kind's keys, holding the kind's defaults (a key the file leaves out keeps
// its value). It panics on an empty or duplicate name (a programmer error).
func RegisterPolicy(name string, newConfig func() PolicyConfig) {
	policies.add(name, newConfig)
}

// PolicyNames lists the registered policy kinds, sorted.
func PolicyNames() []string {
	return policies.names()
}

// UnmarshalYAML reads policy and every, then the rest of the mapping into
// the policy's config; an unknown key is an error at its place.
func (w *Watch) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, "must be a mapping with a policy, e.g. {policy: promote, tenant: 1}, got "+describe(n))
	}
	w.Every = DefaultWatchEvery
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "policy":
			w.Policy = v.Value
		case "every":
			if err := v.Decode(&w.Every); err != nil {
				return err
			}
		default:
			rest.Content = append(rest.Content, k, v)
		}
	}
	mk := policies.get(w.Policy)
	if mk == nil {
		return nil // Validate names the policy
	}
	w.Config = mk()
	return decodeStrict(rest, w.Config, "policy "+w.Policy, "policy, every")
}

// decodeStrict decodes the mapping rest into cfg (a pointer to a struct),
// refusing a key that is none of cfg's fields: the error names the key at
// its place, what (e.g. "action terminate_sessions") and its keys, the
// common ones first.
func decodeStrict(rest *yaml.Node, cfg any, what, common string) error {
	// Decode first, so the keys given are read even beside an unknown one.
	if err := rest.Decode(cfg); err != nil {
		return err
	}
	known := map[string]bool{}
	t := reflect.TypeOf(cfg).Elem()
	for i := range t.NumField() {
		if name := yamlName(t.Field(i)); name != "" {
			known[name] = true
		}
	}
	for i := 0; i < len(rest.Content); i += 2 {
		if k := rest.Content[i]; !known[k.Value] {
			names := slices.Sorted(func(yield func(string) bool) {
				for n := range known {
					if !yield(n) {
						return
					}
				}
			})
			return typeError(rest.Content[i+1], fmt.Sprintf("unknown key %q of %s; its keys are %s, %s", k.Value, what, common, strings.Join(names, ", ")))
		}
	}
	return nil
}

// MarshalYAML writes the watch back as one mapping.
func (w Watch) MarshalYAML() (any, error) {
	m := map[string]any{"policy": w.Policy, "every": w.Every.String()}
	if w.Config != nil {
		var n yaml.Node
		if err := n.Encode(w.Config); err != nil {
			return nil, err
		}
		var extra map[string]any
		if err := n.Decode(&extra); err != nil {
			return nil, err
		}
		for k, v := range extra {
			m[k] = v
		}
	}
	return m, nil
}

// watch checks the watcher of phase p (timeline[i]).
func (c *checker) watch(s *Scenario, i int, p *Phase) {
	w := p.Watch
	if w == nil {
		return
	}
	f := fmt.Sprintf("timeline[%d].watch", i)
	switch {
	case w.Policy == "":
		c.add(f, "required: policy, one of %s", strings.Join(PolicyNames(), ", "))
		return
	case w.Config == nil:
		c.add(f+".policy", "unknown policy %q; known policies: %s", w.Policy, strings.Join(PolicyNames(), ", "))
		return
	}
	if span := p.Span(); w.Every <= 0 {
		c.add(f+".every", "must be a duration > 0, got %s", w.Every)
	} else if span > 0 && w.Every > span {
		c.add(f+".every", "must be within the phase (%s), got %s", p.spanText(), w.Every)
	}
	for _, ap := range w.Config.Validate(s) {
		field := f
		if ap.Key != "" {
			field += "." + ap.Key
		}
		c.add(field, "%s", ap.Msg)
	}
}
