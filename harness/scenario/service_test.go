package scenario

import (
	"strings"
	"testing"
)

const serviceBase = `name: svc
tenants: {count: 5}
configurations: [{name: gate, mode: isolated}]
`

func TestServiceParse(t *testing.T) {
	s, err := Parse([]byte(serviceBase+`service:
  command: [./api, -addr, "127.0.0.1:{port}"]
  env: {DSN: "{interactive_dsn}"}
  ready: {path: /healthz}
classes:
  - name: interactive
    http: {url: "/t/{tenant}/orders/{seq}?n={tenant_n}", headers: {X-Tenant: "{tenant}"}}
    rate: 10
  - name: heavy
    http: {urls: ["http://a:1/r/{tenant}", "http://b:2/r/{tenant}"], balance: sticky, method: POST, body: '{{"t":"{tenant}"}'}
    rate: 1
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := s.Classes[0].HTTP
	if h.Method != "GET" || h.Balance != BalanceRoundRobin || h.Timeout != DefaultHTTPTimeout {
		t.Errorf("defaults: %+v", h)
	}
	vals := map[string]string{"tenant": "7", "seq": "42", "tenant_n": "7"}
	if got := h.Templates()[0].Expand(func(n string) string { return vals[n] }); got != "/t/7/orders/42?n=7" {
		t.Errorf("url %q", got)
	}
	if got := s.Classes[1].HTTP.BodyTemplate().Expand(func(n string) string { return vals[n] }); got != `{"t":"7"}` {
		t.Errorf("body %q", got)
	}
	sv := s.Service
	if sv.Instances != 1 || sv.Ready.Timeout != DefaultReadyTimeout || sv.StopGrace != DefaultStopGrace || !sv.Started() {
		t.Errorf("service defaults: %+v", sv)
	}
	if got := sv.CommandTemplates()[2].Vars(); len(got) != 1 || got[0] != "port" {
		t.Errorf("command vars %v", got)
	}
}

// TestServiceConnectionLimit: with only HTTP classes the roles' connection
// limits bound the service's own pools, not noisysim's (left at their
// default pool_size 30, unused), so a limit below 30 is accepted; with a
// SQL class it is still checked against the pool that class uses.
func TestServiceConnectionLimit(t *testing.T) {
	const conf = "configurations: [{name: gate, mode: isolated, interactive: {role: {connection_limit: 10}}}]\n"
	svc := "name: svc\ntenants: {count: 5}\n" + conf + "service: {command: [x]}\n"
	if _, err := Parse([]byte(svc+"classes: [{name: interactive, rate: 1, http: {url: /x}}]\n"), "s.yaml"); err != nil {
		t.Errorf("only HTTP classes: %v", err)
	}
	_, err := Parse([]byte(svc+"classes: [{name: interactive, rate: 1, http: {url: /x}}, {name: heavy, rate: 1, query: report}, {name: lookup, isolation_class: interactive, rate: 1, query: lookup}]\n"), "s.yaml")
	if err == nil || !strings.Contains(err.Error(), "configurations[0].interactive.role.connection_limit: 10 is below the pool_size 30") {
		t.Errorf("a SQL class: got %v, want the connection_limit below pool_size", err)
	}
}

func TestServiceProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown variable in url", `classes: [{name: interactive, rate: 1, http: {url: "http://x/{tenantt}"}}]`,
			`s.yaml:4:47: classes[0].http.url: unknown variable {tenantt} at offset 9; known: tenant, tenant_n, scale, rows_orders, seq`},
		{"unclosed brace", `classes: [{name: interactive, rate: 1, http: {url: "http://x/{tenant"}}]`,
			`classes[0].http.url: unclosed "{"`},
		{"path without service", `classes: [{name: interactive, rate: 1, http: {url: "/x"}}]`,
			`classes[0].http.url: a path needs a service`},
		{"not a url", `classes: [{name: interactive, rate: 1, http: {url: "ftp://x/"}}]`,
			`classes[0].http.url: must be an http:// or https:// URL`},
		{"url port out of range", `classes: [{name: interactive, rate: 1, http: {url: "http://127.0.0.1:99999/{tenant}"}}]`,
			`classes[0].http.url: port "99999" is not a TCP port (1..65535)`},
		{"url empty port", `classes: [{name: interactive, rate: 1, http: {url: "http://127.0.0.1:/x"}}]`,
			`classes[0].http.url: port "" is not a TCP port`},
		{"service url port out of range", "service: {url: \"http://127.0.0.1:70000\"}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.url: port "70000" is not a TCP port (1..65535)`},
		{"empty program", "service: {command: [\"\", a]}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`s.yaml:4:21: service.command[0]: empty: the program to run`},
		{"http and query", `classes: [{name: interactive, rate: 1, query: lookup, http: {url: "http://x/"}}]`,
			`classes[0]: give one of query, script, sql and http`},
		{"load factor", `classes: [{name: heavy, senders: dominant, load_factor: 2, http: {url: "http://x/"}}]`,
			`classes[0].load_factor: not for an http class`},
		{"bad header", `classes: [{name: interactive, rate: 1, http: {url: "http://x/", headers: {"a b": x}}}]`,
			`classes[0].http.headers.a b: not a valid header name`},
		{"missing command", "service: {env: {A: b}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`s.yaml:4:1: service.command: required`},
		{"unknown variable in env", "service: {command: [x], env: {A: \"{passwrd}\"}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.env.A: unknown variable {passwrd}`},
		{"command and url", "service: {command: [x], url: \"http://x\"}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service: give one of command and url`},
		{"url on a local backend", "service: {url: \"http://127.0.0.1:8080\"}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`s.yaml:4:11: service.url: a service already running uses a database of its own: give backend: {kind: external`},
		{"url with instances", "service: {url: \"http://x:1\", instances: 2}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.instances: only with command`},
		{"too many instances", "service: {command: [x], instances: 99}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.instances: must be`},
		{"no dir", "service: {command: [x], dir: nowhere}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.dir: not a directory`},
		{"no http class", "service: {command: [x]}\nclasses: [{name: interactive, rate: 1, query: lookup}]",
			`service: no class sends to it`},
		{"ready path", "service: {command: [x], ready: {path: healthz}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.ready.path: must start with /`},
		{"share alert threshold", "service: {command: [x], share_alert: {threshold: 1.5}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`s.yaml:4:39: service.share_alert.threshold: must be a share in (0, 1], got 1.5`},
		{"share alert window", "service: {command: [x], share_alert: {window: 1500ms}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.share_alert.window: must be whole seconds, at least 1s`},
		{"unknown service key", "service: {command: [x], stop_grase: 2s}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`s.yaml:4:25: service.stop_grase: unknown key "stop_grase"; did you mean "stop_grace"?`},
		{"unknown http key", `classes: [{name: interactive, rate: 1, http: {url: "http://x/", timout: 1s}}]`,
			`classes[0].http.timout: unknown key "timout"; did you mean "timeout"?`},
		{"share alert not a mapping", "service: {command: [x], share_alert: 0.3}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.share_alert: must be a mapping, got 0.3`},
		{"share alert threshold percent", "service: {command: [x], share_alert: {threshold: 30%}}\nclasses: [{name: interactive, rate: 1, http: {url: /x}}]",
			`service.share_alert.threshold: must be a number, got "30%"`},
		{"unknown error class", "classes: [{name: interactive, rate: 1, query: lookup}]\nassertions: {allowed_errors: [http_418]}",
			`assertions.allowed_errors[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(serviceBase+tc.yaml+"\n"), "s.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseTemplate(t *testing.T) {
	tpl, err := ParseTemplate("a{{b}{x}c{y}", []string{"x", "y"})
	if err != nil {
		t.Fatal(err)
	}
	if got := tpl.Expand(func(n string) string { return strings.ToUpper(n) }); got != "a{b}XcY" {
		t.Errorf("expand %q", got)
	}
	if _, err := ParseTemplate("{}", []string{"x"}); err == nil {
		t.Error("empty name accepted")
	}
}

func TestRetryProblems(t *testing.T) {
	for _, tc := range []struct{ retry, want string }{
		{`{max: 2}`, "classes[0].http.retry.on: required"},
		{`{on: [teapot], max: 2}`, `classes[0].http.retry.on[0]: unknown outcome "teapot"`},
		{`{on: ["429"]}`, "classes[0].http.retry.max: required: the retries after the first attempt, 1..100"},
		{`{on: ["429"], max: 0}`, "classes[0].http.retry.max: must be"},
		{`{on: ["429"], max: 2, honor_retry_after: true}`, `classes[0].http.retry.honor_retry_after: unknown key "honor_retry_after"; did you mean "honour_retry_after"?`},
		{`yes`, `classes[0].http.retry: must be a mapping, got "yes"`},
		{`{on: ["429"], max: 2, backoff: 1s, max_backoff: 10ms}`, "classes[0].http.retry.max_backoff: must be >= backoff"},
		{`{on: ["429"], max: 2, fanout: 0}`, "classes[0].http.retry.fanout: must be"},
		{`{on: ["429"], max: 2, jitter: equal}`, `classes[0].http.retry.jitter: unknown "equal"; want full or none`},
		{`{on: ["429"], max: 2, jitter: 1}`, `classes[0].http.retry.jitter: unknown "1"; want full or none`},
		{`{on: ["429"], max: 2, jitter: ""}`, `classes[0].http.retry.jitter: unknown ""; want full or none`},
	} {
		_, err := Parse([]byte(serviceBase+`classes: [{name: interactive, rate: 1, http: {url: "http://x/", retry: `+tc.retry+`}}]`+"\n"), "s.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.retry, err, tc.want)
		}
	}
}
