package scenario

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the HTTP target and the service.
const (
	DefaultHTTPMethod            = http.MethodGet
	DefaultHTTPTimeout  Duration = Duration(10 * time.Second)
	DefaultBalance               = BalanceRoundRobin
	DefaultInstances             = 1
	DefaultReadyTimeout Duration = Duration(30 * time.Second)
	DefaultStopGrace    Duration = Duration(5 * time.Second)
	// MaxInstances bounds service.instances.
	MaxInstances = 16
)

// HTTPBalance says how an HTTP class spreads its requests over several
// instances (urls, or service.instances).
type HTTPBalance string

// Balances.
const (
	// BalanceRoundRobin sends each request to the next instance.
	BalanceRoundRobin HTTPBalance = "round_robin"
	// BalanceSticky sends every request of a tenant to one instance
	// (tenant n to instance (n-1) mod instances).
	BalanceSticky HTTPBalance = "sticky"
)

// HTTPTarget is a class that sends an HTTP request per arrival instead of
// SQL: the service under test runs the queries. Its outcomes count as the
// SQL classes' do: 2xx succeeds; 429 is a rejection (http_429) whose
// Retry-After is read as seconds or an HTTP date; other 4xx are http_4xx,
// 5xx http_5xx, no answer within Timeout timeout, and a broken connection
// or refused dial transport.
type HTTPTarget struct {
	// Method is the request method. Default GET.
	Method string `yaml:"method"`
	// URL is a template: "{name}" is replaced by a variable (tenant,
	// tenant_n, scale, rows_<name> as in scripts, and seq, the arrival's
	// number), "{{" by "{". A URL starting with "/" is a path on each
	// instance of the scenario's service. Exactly one of URL and URLs.
	URL string `yaml:"url"`
	// URLs are several instances' URL templates, chosen per request by
	// Balance.
	URLs []string `yaml:"urls"`
	// Balance is round_robin (default) or sticky (per tenant).
	Balance HTTPBalance `yaml:"balance"`
	// Headers are request headers, values templated as URL
	// ("X-Tenant: {tenant}").
	Headers map[string]string `yaml:"headers"`
	// Body is the request body, templated as URL. Empty sends none.
	Body string `yaml:"body"`
	// Timeout bounds one request, from its send to the end of its body,
	// rounded up by at most 1% of it (10 ms at most). Default 10s.
	Timeout Duration `yaml:"timeout"`
	// Retry, when present, models a client that retries: a retry storm
	// is the service's load as much as the arrivals are.
	Retry *Retry `yaml:"retry"`

	url     []Template
	headers map[string]Template
	body    Template
}

// Backoff jitter of a retry policy.
const (
	JitterFull = "full"
	JitterNone = "none"
)

// Retry is an HTTP client's retry policy. An arrival's latency runs from
// its intended start to its last attempt's answer; its outcome is its last
// attempt's.
type Retry struct {
	// On lists the outcomes retried: 429, 4xx, 5xx, timeout, transport.
	// Required, at least one.
	On []string `yaml:"on"`
	// Max is the most retries after the first attempt, 1..100. Required.
	Max int `yaml:"max"`
	// Backoff is the first retry's delay, doubled per retry up to
	// MaxBackoff, drawn as Jitter says (full: uniform in [0, delay], seeded
	// by the arrival). Default 100ms.
	Backoff Duration `yaml:"backoff"`
	// MaxBackoff caps the delay. Default 2s.
	MaxBackoff Duration `yaml:"max_backoff"`
	// Jitter is JitterFull (default: a uniform draw in [0, delay]) or
	// JitterNone (exactly delay: backoff, 2 × backoff, 4 × backoff, …).
	Jitter string `yaml:"jitter"`
	// HonourRetryAfter waits a 429's or 503's Retry-After instead of the backoff
	// when it is given (capped by MaxBackoff). Default false: a client
	// that ignores it.
	HonourRetryAfter bool `yaml:"honour_retry_after"`
	// Fanout is the number of requests each attempt sends at once (a page
	// that calls the route several times), 1..100; the attempt fails when
	// any of them does. Default 1.
	Fanout int `yaml:"fanout"`
}

// Retry outcomes.
var retryOutcomes = []string{"429", "4xx", "5xx", "timeout", "transport"}

// Templates returns the parsed URL templates (one per instance, or one
// for a path on the service); nil before validation.
func (h *HTTPTarget) Templates() []Template { return h.url }

// HeaderTemplates returns the parsed header values by name.
func (h *HTTPTarget) HeaderTemplates() map[string]Template { return h.headers }

// BodyTemplate returns the parsed body.
func (h *HTTPTarget) BodyTemplate() Template { return h.body }

// Template is a parsed "{name}" template: literal parts and variables
// alternating, starting with a literal.
type Template struct {
	Parts []string // literal, var, literal, var, ..., literal
}

// Vars returns the variables of t in order.
func (t Template) Vars() []string {
	var out []string
	for i := 1; i < len(t.Parts); i += 2 {
		out = append(out, t.Parts[i])
	}
	return out
}

// Expand returns t with each variable replaced by value(name).
func (t Template) Expand(value func(string) string) string {
	if len(t.Parts) == 1 {
		return t.Parts[0]
	}
	var b strings.Builder
	for i, p := range t.Parts {
		if i%2 == 0 {
			b.WriteString(p)
		} else {
			b.WriteString(value(p))
		}
	}
	return b.String()
}

// ParseTemplate parses s: "{name}" is a variable (letters, digits, '_'),
// "{{" a literal "{". An unclosed or empty "{" and a name not in vars are
// errors naming it.
func ParseTemplate(s string, vars []string) (Template, error) {
	t := Template{Parts: []string{""}}
	var lit strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			lit.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			lit.WriteByte('{')
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return Template{}, fmt.Errorf("unclosed \"{\" at offset %d (write \"{{\" for a literal brace)", i)
		}
		name := s[i+1 : i+end]
		if !slices.Contains(vars, name) {
			return Template{}, fmt.Errorf("unknown variable {%s} at offset %d; known: %s", name, i, strings.Join(vars, ", "))
		}
		t.Parts[len(t.Parts)-1] = lit.String()
		lit.Reset()
		t.Parts = append(t.Parts, name, "")
		i += end
	}
	t.Parts[len(t.Parts)-1] = lit.String()
	return t, nil
}

// HTTPVars returns the variables an HTTP class's templates may use: the
// script builtins and seq.
func (s *Scenario) HTTPVars() []string { return append(s.Builtins(), "seq") }

// Service is the service under test: a command noisysim starts for each
// configuration, against the run's database, before the configuration's
// timeline, and stops after it (process group kill, on every path); or
// the URL of a service already running.
type Service struct {
	// Command is the argv of one instance, each word templated with the
	// service variables (ServiceVars); no shell. Exactly one of Command
	// and URL.
	Command []string `yaml:"command"`
	// URL is the base URL of a service already running; noisysim starts
	// nothing and cannot hand it the run's DSNs.
	URL string `yaml:"url"`
	// Instances is the number of instances started, each on its own port.
	// Default 1, at most MaxInstances.
	Instances int `yaml:"instances"`
	// Port is the first instance's port (instance i on Port+i); 0 (the
	// default) takes a free port per instance. A taken port exits 2.
	Port int `yaml:"port"`
	// Dir is the working directory, relative to the scenario file.
	// Default: the scenario file's directory.
	Dir string `yaml:"dir"`
	// Env is added to noisysim's own environment, values templated.
	Env map[string]string `yaml:"env"`
	// Migrate is an argv run once before the first configuration (a
	// build, migrations), templated; its failure stops the run (exit 2).
	Migrate []string `yaml:"migrate"`
	// Ready is how noisysim knows an instance is up.
	Ready Ready `yaml:"ready"`
	// StopGrace is how long an instance has after SIGTERM before SIGKILL.
	// Default 5s.
	StopGrace Duration `yaml:"stop_grace"`
	// ShareAlert raises an alert in the report when a tenant holds more
	// than its threshold of the sampled active-backend time in every
	// second of its window.
	ShareAlert ShareAlert `yaml:"share_alert"`

	command, migrate []Template
	env              map[string]Template
}

// ShareAlert is the share alert of the sampled database activity (the
// report's activity.alerts), as isolation/pools.Ledger raises it from
// noisysim's own stack: a tenant above Threshold of all active-backend
// time in every second of Window.
type ShareAlert struct {
	// Threshold is the share, 0 < x <= 1. Default 0.30
	// (pools.DefaultShareThreshold).
	Threshold float64 `yaml:"threshold"`
	// Window is how long the tenant must stay above it, in whole seconds,
	// at least 1s. Default 10s (pools.DefaultShareWindow).
	Window Duration `yaml:"window"`
}

// Defaults of ShareAlert: those of isolation/pools.Ledger.
const (
	DefaultShareAlertThreshold          = 0.30
	DefaultShareAlertWindow    Duration = Duration(10 * time.Second)
)

// Ready is a service's readiness check: an HTTP path answering 2xx, or
// (when Path is empty) the port accepting connections.
type Ready struct {
	// Path is an HTTP path polled on each instance until it answers 2xx.
	// Empty: the port accepting a TCP connection is enough.
	Path string `yaml:"path"`
	// Timeout bounds the wait per instance. Default 30s.
	Timeout Duration `yaml:"timeout"`
}

// ServiceVars returns the variables of service templates.
func ServiceVars() []string {
	return []string{"port", "instance", "base_url", "configuration", "interactive_dsn", "heavy_dsn", "shared_dsn",
		"replica_dsn", "admin_dsn", "schema", "tenants", "dir", "work"}
}

// CommandTemplates returns the parsed command words; nil before validation.
func (s *Service) CommandTemplates() []Template { return s.command }

// MigrateTemplates returns the parsed migrate words.
func (s *Service) MigrateTemplates() []Template { return s.migrate }

// EnvTemplates returns the parsed environment values by name.
func (s *Service) EnvTemplates() map[string]Template { return s.env }

// Started reports whether noisysim starts the service (Command given).
func (s *Service) Started() bool { return s != nil && len(s.Command) > 0 }

// HasHTTP reports whether a class sends HTTP requests.
func (s *Scenario) HasHTTP() bool {
	for i := range s.Classes {
		if s.Classes[i].HTTP != nil {
			return true
		}
	}
	return false
}

// OnlyHTTP reports whether every class sends HTTP requests: then the
// service runs the queries, and noisysim's own pools carry none.
func (s *Scenario) OnlyHTTP() bool {
	for i := range s.Classes {
		if s.Classes[i].HTTP == nil {
			return false
		}
	}
	return len(s.Classes) > 0
}

func (s *Scenario) applyServiceDefaults() {
	for i := range s.Classes {
		h := s.Classes[i].HTTP
		if h == nil {
			continue
		}
		if h.Method == "" {
			h.Method = DefaultHTTPMethod
		}
		if h.Balance == "" {
			h.Balance = DefaultBalance
		}
		if h.Timeout == 0 && !s.ix.has(fmt.Sprintf("classes[%d].http.timeout", i)) {
			h.Timeout = DefaultHTTPTimeout
		}
		if r := h.Retry; r != nil {
			p := fmt.Sprintf("classes[%d].http.retry.", i)
			if r.Backoff == 0 && !s.ix.has(p+"backoff") {
				r.Backoff = Duration(100 * time.Millisecond)
			}
			if r.MaxBackoff == 0 && !s.ix.has(p+"max_backoff") {
				r.MaxBackoff = Duration(2 * time.Second)
			}
			if r.Fanout == 0 && !s.ix.has(p+"fanout") {
				r.Fanout = 1
			}
			if r.Jitter == "" && !s.ix.has(p+"jitter") { // jitter: "" is an error, not full
				r.Jitter = JitterFull
			}
		}
	}
	if sv := s.Service; sv != nil {
		if sv.Instances == 0 && !s.ix.has("service.instances") {
			sv.Instances = DefaultInstances
		}
		if sv.Ready.Timeout == 0 && !s.ix.has("service.ready.timeout") {
			sv.Ready.Timeout = DefaultReadyTimeout
		}
		if sv.StopGrace == 0 && !s.ix.has("service.stop_grace") {
			sv.StopGrace = DefaultStopGrace
		}
		if sv.ShareAlert.Threshold == 0 && !s.ix.has("service.share_alert.threshold") {
			sv.ShareAlert.Threshold = DefaultShareAlertThreshold
		}
		if sv.ShareAlert.Window == 0 && !s.ix.has("service.share_alert.window") {
			sv.ShareAlert.Window = DefaultShareAlertWindow
		}
	}
}

// template parses one templated field, recording a problem on failure.
func (c *checker) template(field, s string, vars []string) Template {
	t, err := ParseTemplate(s, vars)
	if err != nil {
		c.add(field, "%v", err)
	}
	return t
}

// http checks class i's http target.
func (c *checker) http(p string, cl *Class) {
	h := cl.HTTP
	if h == nil {
		return
	}
	if other := c.s.sqlOnly(); other != "" {
		c.add(p+".http", "http is only for the noisy-neighbour scenario; a %s scenario runs its own queries", other)
		return
	}
	if c.present(p + ".load_factor") {
		c.add(p+".load_factor", "not for an http class: calibration measures noisysim's own stack; give rate")
	}
	vars := c.s.HTTPVars()
	if !httpMethod(h.Method) {
		c.add(p+".http.method", "must be an HTTP method such as GET or POST, got %q", h.Method)
	}
	switch {
	case h.URL != "" && len(h.URLs) > 0:
		c.add(p+".http", "give one of url and urls")
	case h.URL == "" && len(h.URLs) == 0:
		c.add(p+".http.url", "required: the URL template, e.g. \"/tenants/{tenant}/orders\" on the service, or a full URL")
	case h.URL != "":
		n := len(c.ps)
		t := c.template(p+".http.url", h.URL, vars)
		if len(c.ps) > n {
			// the template's own problem says enough
		} else if strings.HasPrefix(h.URL, "/") {
			if c.s.Service == nil {
				c.add(p+".http.url", "a path needs a service: give service (command or url), or a full URL")
			}
		} else {
			c.absURL(p+".http.url", t)
		}
		h.url = []Template{t}
	default:
		h.url = nil
		for j, u := range h.URLs {
			f := fmt.Sprintf("%s.http.urls[%d]", p, j)
			n := len(c.ps)
			t := c.template(f, u, vars)
			if len(c.ps) == n {
				c.absURL(f, t)
			}
			h.url = append(h.url, t)
		}
	}
	oneOf(c, p+".http.balance", "balance", h.Balance, BalanceRoundRobin, BalanceSticky)
	h.headers = map[string]Template{}
	for _, name := range sortedKeys(h.Headers) {
		f := p + ".http.headers." + name
		if !validHeaderName(name) {
			c.add(f, "not a valid header name")
		}
		h.headers[name] = c.template(f, h.Headers[name], vars)
	}
	h.body = c.template(p+".http.body", h.Body, vars)
	c.positive(p+".http.timeout", h.Timeout)
	if r := h.Retry; r != nil {
		rp := p + ".http.retry"
		if len(r.On) == 0 {
			c.add(rp+".on", "required: the outcomes retried, of %s", strings.Join(retryOutcomes, ", "))
		}
		for j, o := range r.On {
			if !slices.Contains(retryOutcomes, o) {
				c.add(fmt.Sprintf("%s.on[%d]", rp, j), "unknown outcome %q; want one of %s", o, strings.Join(retryOutcomes, ", "))
			}
		}
		if r.Max == 0 && !c.present(rp+".max") {
			c.add(rp+".max", "required: the retries after the first attempt, 1..100")
		} else {
			c.between(rp+".max", r.Max, 1, 100)
		}
		c.positive(rp+".backoff", r.Backoff)
		if r.MaxBackoff < r.Backoff {
			c.add(rp+".max_backoff", "must be >= backoff (%s), got %s", r.Backoff, r.MaxBackoff)
		}
		c.between(rp+".fanout", r.Fanout, 1, 100)
		if r.Jitter != JitterFull && r.Jitter != JitterNone {
			c.add(rp+".jitter", "unknown %q; want %s or %s", r.Jitter, JitterFull, JitterNone)
		}
	}
}

// absURL checks that an expanded template is an http(s) URL.
func (c *checker) absURL(field string, t Template) {
	u, err := url.Parse(t.Expand(func(string) string { return "1" }))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		c.add(field, "must be an http:// or https:// URL (or a path starting with / on the service)")
		return
	}
	if !validPort(u) {
		c.add(field, "port %q is not a TCP port (1..65535)", u.Port())
	}
}

// validPort reports whether u has no port, or one in 1..65535: url.Parse
// takes any digits.
func validPort(u *url.URL) bool {
	p := u.Port()
	if p == "" {
		return !strings.HasSuffix(u.Host, ":")
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

func httpMethod(m string) bool {
	return m != "" && strings.IndexFunc(m, func(r rune) bool { return r < 'A' || r > 'Z' }) < 0
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// service checks the service section.
func (c *checker) service(s *Scenario) {
	sv := s.Service
	if sv == nil {
		return
	}
	if other := s.sqlOnly(); other != "" {
		c.add("service", "only for the noisy-neighbour scenario, not a %s scenario", other)
		return
	}
	if !s.HasHTTP() {
		c.add("service", "no class sends to it: give a class http: {url: \"/path\"}")
	}
	vars := ServiceVars()
	switch {
	case len(sv.Command) > 0 && sv.URL != "":
		c.add("service", "give one of command and url")
		return
	case sv.URL != "":
		if u, err := url.Parse(sv.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			c.add("service.url", "must be an http:// or https:// base URL, got %q", sv.URL)
		} else if !validPort(u) {
			c.add("service.url", "port %q is not a TCP port (1..65535)", u.Port())
		}
		if s.Backend.Kind != BackendExternal {
			// Its database is not one noisysim starts: pg_stat_activity of
			// a cluster the service never reaches would pass tagged_only
			// on no backends at all.
			c.add("service.url", "a service already running uses a database of its own: give backend: {kind: external, primary_dsn: ...} naming it, or command: for noisysim to start the service against the cluster it starts")
		}
		for _, f := range []string{"instances", "port", "dir", "env", "migrate", "stop_grace"} {
			if c.present("service." + f) {
				c.add("service."+f, "only with command: noisysim does not start a service given by url")
			}
		}
	case len(sv.Command) == 0:
		c.add("service.command", "required: the argv of the service (or url: a running service)")
		return
	}
	if len(sv.Command) > 0 && sv.Command[0] == "" {
		c.add("service.command[0]", "empty: the program to run (a path, or a name looked up in PATH)")
	}
	sv.command = nil
	for i, w := range sv.Command {
		sv.command = append(sv.command, c.template(fmt.Sprintf("service.command[%d]", i), w, vars))
	}
	sv.migrate = nil
	for i, w := range sv.Migrate {
		sv.migrate = append(sv.migrate, c.template(fmt.Sprintf("service.migrate[%d]", i), w, vars))
	}
	sv.env = map[string]Template{}
	for _, name := range sortedKeys(sv.Env) {
		f := "service.env." + name
		if !envName.MatchString(name) {
			c.add(f, "not an environment variable name (letters, digits, '_')")
		}
		sv.env[name] = c.template(f, sv.Env[name], vars)
	}
	if sv.Started() {
		c.between("service.instances", sv.Instances, 1, MaxInstances)
		if sv.Port != 0 {
			c.between("service.port", sv.Port, 1, 65535-max(sv.Instances, 1)+1)
		}
		if sv.Dir != "" {
			if st, err := statDir(s.Path(sv.Dir)); err != nil || !st {
				c.add("service.dir", "not a directory: %s", s.Path(sv.Dir))
			}
		}
		c.positive("service.stop_grace", sv.StopGrace)
	}
	if a := sv.ShareAlert; !(a.Threshold > 0 && a.Threshold <= 1) {
		c.add("service.share_alert.threshold", "must be a share in (0, 1], got %g", a.Threshold)
	}
	if w := sv.ShareAlert.Window.Duration(); w < time.Second || w%time.Second != 0 {
		c.add("service.share_alert.window", "must be whole seconds, at least 1s (the alert judges each second), got %s", sv.ShareAlert.Window)
	}
	if sv.Ready.Path != "" && !strings.HasPrefix(sv.Ready.Path, "/") {
		c.add("service.ready.path", "must start with /, got %q", sv.Ready.Path)
	}
	c.positive("service.ready.timeout", sv.Ready.Timeout)
}

// Where returns "file:line:col" of a field of the file, or the field's
// path when the scenario was built in Go: for errors found at run time
// (a port taken).
func (s *Scenario) Where(field string) string {
	line, col := s.ix.pos(field)
	if line == 0 {
		return field
	}
	return s.File + ":" + strconv.Itoa(line) + ":" + strconv.Itoa(col) + ": " + field
}

// Problem returns a Problem of field with its place in the file (none
// when the scenario was built in Go, or is a copy made by Only): for bad
// input found after validation (a scenario the simulator does not model).
func (s *Scenario) Problem(field, format string, args ...any) Problem {
	line, col := s.ix.pos(field)
	return Problem{File: s.File, Line: line, Col: col, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// PortFree reports whether a TCP port on 127.0.0.1 can be listened on.
func PortFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func statDir(p string) (bool, error) {
	st, err := os.Stat(p)
	if err != nil {
		return false, err
	}
	return st.IsDir(), nil
}
