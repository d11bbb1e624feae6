package scenario

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Action is one step of the timeline: an operation started At after the
// start of the phase that lists it. Type selects its kind in the action
// registry; the other keys of its mapping are the kind's own settings,
// decoded strictly into Config.
//
//	actions:
//	  - {type: terminate_sessions, at: 2s, tenant: 1}
type Action struct {
	// Type names the kind of action: one of ActionTypes. Required.
	Type string
	// At delays the action from its phase's start, >= 0 and within the
	// phase. Default 0s.
	At Duration
	// Config holds the kind's settings; nil for an unknown Type.
	Config ActionConfig
}

// ActionConfig is the settings of one kind of action. Validate returns
// its problems, each naming its key (relative to the action, e.g.
// "tenant") and what is wrong; s is the whole scenario, for checks against
// the backend or the tenants.
type ActionConfig interface {
	Validate(s *Scenario) []ActionProblem
}

// ActionProblem is one problem of an action's settings.
type ActionProblem struct {
	// Key is the action's key at fault, e.g. "tenant"; empty for the
	// action as a whole.
	Key string
	Msg string
}

var actions = newRegistry[ActionConfig]("action")

// RegisterAction makes an action kind known to scenario files under name:
// newConfig returns a pointer to a zero struct whose yaml-tagged fields are
// the kind's keys. It panics on an empty or duplicate name (a programmer
// error).
func RegisterAction(name string, newConfig func() ActionConfig) {
	actions.add(name, newConfig)
}

// ActionTypes lists the registered action kinds, sorted.
func ActionTypes() []string {
	return actions.names()
}

// UnmarshalYAML reads type and at, then the rest of the mapping into the
// kind's config; an unknown key is an error at its place.
func (a *Action) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, "must be a mapping with a type, e.g. {type: terminate_sessions, tenant: 1}, got "+describe(n))
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "type":
			a.Type = v.Value
		case "at":
			if err := v.Decode(&a.At); err != nil {
				return err
			}
		default:
			rest.Content = append(rest.Content, k, v)
		}
	}
	mk := actions.get(a.Type)
	if mk == nil {
		return nil // Validate names the type
	}
	a.Config = mk()
	return decodeStrict(rest, a.Config, "action "+a.Type, "type, at")
}

// MarshalYAML writes the action back as one mapping.
func (a Action) MarshalYAML() (any, error) {
	m := map[string]any{"type": a.Type, "at": a.At.String()}
	if a.Config != nil {
		var n yaml.Node
		if err := n.Encode(a.Config); err != nil {
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

// actions checks the actions of phase p (timeline[i]).
func (c *checker) actions(s *Scenario, i int, p *Phase) {
	for j, a := range p.Actions {
		f := fmt.Sprintf("timeline[%d].actions[%d]", i, j)
		switch {
		case a.Type == "":
			c.add(f, "required: type, one of %s", strings.Join(ActionTypes(), ", "))
			continue
		case a.Config == nil:
			c.add(f+".type", "unknown action %q; known actions: %s", a.Type, strings.Join(ActionTypes(), ", "))
			continue
		}
		if a.At < 0 {
			c.add(f+".at", "must be a duration >= 0, got %s", a.At)
		} else if span := p.Span(); span > 0 && a.At >= span {
			c.add(f+".at", "must be within the phase (%s), got %s", p.spanText(), a.At)
		}
		for _, ap := range a.Config.Validate(s) {
			field := f
			if ap.Key != "" {
				field += "." + ap.Key
			}
			c.add(field, "%s", ap.Msg)
		}
	}
}

// ActionTerminateSessions is the type of TerminateSessions.
const ActionTerminateSessions = "terminate_sessions"

// TerminateSessions ends, on every node, the sessions of the isolation
// stack's roles that run a tenant's work (application_name t:<tenant>),
// with pg_terminate_backend: a backend killed under the tenant, as a crash
// or an operator would. Sessions of other roles are never touched.
type TerminateSessions struct {
	// Tenant is the tenant whose sessions end, 1..tenants.count. Required.
	Tenant int `yaml:"tenant"`
}

// Validate checks the tenant.
func (t *TerminateSessions) Validate(s *Scenario) []ActionProblem {
	switch {
	case t.Tenant == 0:
		return []ActionProblem{{Key: "tenant", Msg: "required: the tenant whose sessions end, 1.." + fmt.Sprint(s.Tenants.Count)}}
	case t.Tenant < 1 || (s.Tenants.Count >= 2 && t.Tenant > s.Tenants.Count):
		return []ActionProblem{{Key: "tenant", Msg: fmt.Sprintf("no such tenant %d: ids run from 1 to tenants.count (%d)", t.Tenant, s.Tenants.Count)}}
	}
	return nil
}

func init() {
	RegisterAction(ActionTerminateSessions, func() ActionConfig { return &TerminateSessions{} })
}
