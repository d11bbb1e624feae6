package scenario

import (
	"maps"
	"slices"
	"sync"
)

// registry maps the names of a kind of timeline step (an action, a
// policy) to the constructors of their settings; safe for concurrent use.
type registry[T any] struct {
	what string // "action", "policy": for the panic message
	mu   sync.RWMutex
	m    map[string]func() T
}

func newRegistry[T any](what string) *registry[T] {
	return &registry[T]{what: what, m: map[string]func() T{}}
}

// add registers mk under name; it panics on an empty or duplicate name (a
// programmer error).
func (r *registry[T]) add(name string, mk func() T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name == "" || r.m[name] != nil {
		panic("scenario: " + r.what + " " + name + " registered twice or without a name")
	}
	r.m[name] = mk
}

// get returns the constructor registered under name, or nil.
func (r *registry[T]) get(name string) func() T {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.m[name]
}

// names lists the registered names, sorted.
func (r *registry[T]) names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.m))
}
