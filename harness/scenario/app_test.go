package scenario

import (
	"strings"
	"testing"
)

const appBase = `name: app
tenants: {count: 5}
classes: [{name: interactive, rate: 1, query: lookup}]
`

func TestAppParse(t *testing.T) {
	s, err := Parse([]byte(appBase+"configurations: [{name: a, mode: isolated, app: {}}]\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if a := s.Configurations[0].App; a.Instances != 1 || a.Limiter != AppPerInstance {
		t.Errorf("defaults: %+v", a)
	}
	for _, tc := range []struct {
		app       App
		cap, want int
	}{
		{App{Instances: 3, Limiter: AppDivided}, 4, 2},
		{App{Instances: 4, Limiter: AppDivided}, 4, 1},
		{App{Instances: 12, Limiter: AppDivided}, 4, 1},
		{App{Instances: 3, Limiter: AppPerInstance}, 4, 4},
		{App{Instances: 3, Limiter: AppGlobal}, 4, 4},
	} {
		if got := tc.app.Share(tc.cap); got != tc.want {
			t.Errorf("%+v share of %d: %d, want %d", tc.app, tc.cap, got, tc.want)
		}
	}
}

func TestAppProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"no instances", `configurations: [{name: a, mode: isolated, app: {instances: 0}}]`,
			`s.yaml:4:50: configurations[0].app.instances: must be`},
		{"unknown mode", `configurations: [{name: a, mode: isolated, app: {limiter: globl}}]`,
			`s.yaml:4:50: configurations[0].app.limiter: unknown app limiter "globl"; want per_instance, divided or global`},
		{"bad url", `configurations: [{name: a, mode: isolated, app: {limiter: global, redis_url: "http://x"}}]`,
			`configurations[0].app.redis_url: not a Redis URL`},
		{"url without global", `configurations: [{name: a, mode: isolated, app: {limiter: divided, redis_url: "redis://x:1"}}]`,
			`configurations[0].app.redis_url: only for limiter global`},
		{"shared mode", `configurations: [{name: a, mode: shared, app: {instances: 2}}]`,
			`configurations[0].app: only for mode isolated`},
		{"global with max_global", `configurations: [{name: a, mode: isolated, app: {limiter: global}, interactive: {limiter: {max_global: 3}}}]`,
			`configurations[0].interactive.limiter.max_global: not with app.limiter global`},
		{"connection limit", `configurations: [{name: a, mode: isolated, app: {instances: 4}, interactive: {pool_size: 5, role: {connection_limit: 10}}}]`,
			`configurations[0].interactive.role.connection_limit: must be at least app.instances × pool_size = 20`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(appBase+tc.yaml+"\n"), "s.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
