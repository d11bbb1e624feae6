package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/harness/backend"
)

// TestShippedScenarios loads and validates every file in scenarios/ and
// every example's scenario.
func TestShippedScenarios(t *testing.T) {
	files, err := filepath.Glob("../../scenarios/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil || len(examples) == 0 {
		t.Fatalf("no example scenarios in ../../examples (%v)", err)
	}
	files = append(files, examples...)
	if len(files) == 0 {
		t.Fatal("no scenario files found in ../../scenarios")
	}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, "../../"), func(t *testing.T) {
			s, err := Load(f)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if errs := s.Validate(); errs != nil {
				t.Fatalf("Validate: %v", errors.Join(errs...))
			}
			if s.File != f {
				t.Errorf("File = %q, want %q", s.File, f)
			}
		})
	}
}

// TestShippedShape checks what the README and CI rely on: both shipped
// scenarios compare a failing naive control with a passing isolated
// configuration, and their phases fit the time budget (the rest of the budget
// is cluster start and data load).
func TestShippedShape(t *testing.T) {
	for _, tc := range []struct {
		file     string
		topology backend.Topology
		phases   time.Duration // warm-up, solo, drain once, then warm-up, run, drain per configuration
	}{
		{"noisy-neighbor.yaml", backend.TopologyReplica, 150 * time.Second},
		{"ci-gate.yaml", backend.TopologySingle, 65 * time.Second},
		{"replay-incident.yaml", backend.TopologySingle, 45 * time.Second},
	} {
		t.Run(tc.file, func(t *testing.T) {
			s, err := Load(filepath.Join("../../scenarios", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if s.Backend.Topology != tc.topology {
				t.Errorf("topology = %s, want %s", s.Backend.Topology, tc.topology)
			}
			naive, ok := s.Configuration("naive")
			if !ok || naive.Mode != ModeShared || naive.Expect != ExpectFail {
				t.Errorf("naive = %+v, %v; want mode shared, expect fail", naive, ok)
			}
			iso, ok := s.Configuration("isolated")
			if !ok || iso.Mode != ModeIsolated || iso.Expect != ExpectPass {
				t.Errorf("isolated = %+v, %v; want mode isolated, expect pass", iso, ok)
			}
			var heavyDominant, quietInteractive bool
			for _, c := range s.Classes {
				heavyDominant = heavyDominant || (c.IsolationClass == IsolationHeavy && c.Senders == SendersDominant)
				quietInteractive = quietInteractive || (c.IsolationClass == IsolationInteractive && c.Senders != SendersDominant)
			}
			if !heavyDominant || !quietInteractive {
				t.Errorf("classes %+v: want heavy traffic from the dominant tenant and interactive traffic from quiet tenants", s.Classes)
			}
			p := s.Phases
			total := (p.Warmup + p.Solo + p.Drain).Duration() +
				time.Duration(len(s.Configurations))*(p.Warmup+p.Run+p.Drain).Duration()
			if total > tc.phases {
				t.Errorf("phases take %s, want <= %s", total, tc.phases)
			}
		})
	}
}

func TestMinimalTakesDefaults(t *testing.T) {
	s, err := Load("testdata/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Scenario{
		Name:    "minimal",
		Seed:    DefaultSeed,
		Backend: Backend{Kind: BackendLocal, Topology: backend.TopologySingle},
		Tenants: Tenants{Count: 50, DominantShare: 0.6, Distribution: DistributionZipf, Exponent: 1.1},
		Data:    Data{Orders: 200000, Days: 365, Customers: 1000},
		Classes: []Class{{Name: "interactive", IsolationClass: IsolationInteractive, Query: QueryLookup,
			Rate: 10, Arrival: ArrivalPoisson, Senders: SendersAll}},
		Load: LoadSpec{Model: ModelOpen, Users: 100, ThinkTime: Duration(time.Second), RetryQueries: 1, MaxRetries: 3},
		Phases: Phases{Warmup: Duration(2 * time.Second), Solo: Duration(10 * time.Second),
			Run: Duration(20 * time.Second), Drain: Duration(3 * time.Second)},
		Configurations: []Configuration{{Name: "naive", Mode: ModeShared, Expect: ExpectPass,
			Shared: SharedPool{PoolSize: 40, AcquireTimeout: Duration(30 * time.Second)}}},
		Assertions: Assertions{
			QuietP99:        QuietP99{Factor: 1.5, Slack: Duration(5 * time.Millisecond), MinSamples: 100},
			QuietP99AB:      QuietP99AB{Block: Duration(5 * time.Second), Settle: Duration(time.Second)},
			NoisyRejections: true,
			AllowedErrors:   []ErrorClass{"queue_full", "wait_exceeded", "statement_timeout", "replica_conflict", "http_429"},
			CleanAfter:      true,
		},
		File:    "testdata/minimal.yaml",
		derived: true,
	}
	want.Data.Schema = "noisysim"
	s.ix = nil
	// The lookup query is the shipped lookup script.
	if p := s.Classes[0].Program(); p == nil || len(p.Statements()) != 1 || !strings.Contains(p.Statements()[0], "FROM orders WHERE tenant_id = $1 AND id = $2") {
		t.Errorf("lookup's program: %v", p)
	}
	s.Classes[0].program = nil
	if !reflect.DeepEqual(*s, want) {
		t.Errorf("got  %+v\nwant %+v", *s, want)
	}
}

func TestDefaults(t *testing.T) {
	const head = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\n"
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, s *Scenario)
	}{
		{"null takes the default", head + "configurations: [{name: a, mode: shared}]\nphases:\n  warmup:\n  run: ~\n  solo: 1s\n",
			func(t *testing.T, s *Scenario) {
				if s.Phases != (Phases{DefaultWarmup, Duration(time.Second), DefaultRun, DefaultDrain}) {
					t.Errorf("phases = %+v", s.Phases)
				}
			}},
		{"zero given stays zero", head + "configurations: [{name: a, mode: shared}]\nphases: {warmup: 0s, drain: 0s}\nseed: 0\n",
			func(t *testing.T, s *Scenario) {
				if s.Phases.Warmup != 0 || s.Phases.Drain != 0 || s.Seed != 0 {
					t.Errorf("phases = %+v, seed = %d; want zero warm-up, drain and seed", s.Phases, s.Seed)
				}
			}},
		{"pool fields default one by one", head + "configurations:\n  - name: iso\n    mode: isolated\n    interactive: {pool_size: 10, role: {work_mem: 8MB}, limiter: {max_queue: 2}}\n",
			func(t *testing.T, s *Scenario) {
				want := DefaultInteractivePool()
				want.PoolSize, want.Role.WorkMem, want.Limiter.MaxQueue = 10, "8MB", 2
				if got := s.Configurations[0].Interactive; got != want {
					t.Errorf("interactive = %+v, want %+v", got, want)
				}
				if got := s.Configurations[0].Heavy; got != DefaultHeavyPool() {
					t.Errorf("heavy = %+v, want the default", got)
				}
				if s.Configurations[0].Shared != (SharedPool{}) {
					t.Errorf("shared = %+v, want zero in mode isolated", s.Configurations[0].Shared)
				}
			}},
		{"limiter disabled", head + "configurations:\n  - {name: iso, mode: isolated, heavy: {limiter: {enabled: false}}}\n",
			func(t *testing.T, s *Scenario) {
				if l := s.Configurations[0].Heavy.Limiter; l.Enabled {
					t.Errorf("heavy limiter = %+v, want disabled", l)
				}
				if l := s.Configurations[0].Interactive.Limiter; !l.Enabled {
					t.Errorf("interactive limiter = %+v, want enabled", l)
				}
			}},
		{"export batch and isolation class", "name: x\nclasses:\n  - {name: heavy, query: export, rate: 1}\n  - {name: dump, isolation_class: heavy, query: export, rate: 1, batch: 50}\nconfigurations: [{name: a, mode: shared}]\n",
			func(t *testing.T, s *Scenario) {
				if c := s.Classes[0]; c.Batch != DefaultBatch || c.IsolationClass != IsolationHeavy {
					t.Errorf("class 0 = %+v", c)
				}
				if c := s.Classes[1]; c.Batch != 50 {
					t.Errorf("class 1 = %+v", c)
				}
			}},
		{"external topology implied by DSNs", head + "configurations: [{name: a, mode: shared}]\nbackend: {kind: external, primary_dsn: 'postgres://a@h/db', replica_dsn: '${REPLICA}'}\n",
			func(t *testing.T, s *Scenario) {
				if s.Backend.Topology != backend.TopologyReplica {
					t.Errorf("topology = %s, want replica", s.Backend.Topology)
				}
			}},
		{"merge keys count as given", "name: x\nclasses:\n  - &c {name: interactive, query: lookup, rate: 10, senders: quiet}\n  - <<: *c\n    name: other\n    isolation_class: heavy\nconfigurations: [{name: a, mode: shared}]\n",
			func(t *testing.T, s *Scenario) {
				if c := s.Classes[1]; c.Senders != SendersQuiet || c.Rate != 10 || c.IsolationClass != IsolationHeavy {
					t.Errorf("class 1 = %+v", c)
				}
			}},
		{"settings take numbers", head + "configurations: [{name: a, mode: shared}]\nbackend: {settings: {max_connections: 200, fsync: off}}\n",
			func(t *testing.T, s *Scenario) {
				if want := map[string]string{"max_connections": "200", "fsync": "off"}; !reflect.DeepEqual(s.Backend.Settings, want) {
					t.Errorf("settings = %v, want %v", s.Backend.Settings, want)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.yaml), "x.yaml")
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, s)
		})
	}
}

// TestBadInput checks each kind of bad input of the issue: the error matches
// ErrInvalid and names the field at its file:line:col.
func TestBadInput(t *testing.T) {
	tests := []struct {
		file      string
		line, col int
		field     string
		msg       string
	}{
		{"malformed.yaml", 4, 0, "", "malformed YAML: did not find expected key"},
		{"unknown-key.yaml", 4, 3, "tenants.dominant_shar", `unknown key "dominant_shar"; did you mean "dominant_share"?`},
		{"unknown-key.yaml", 6, 50, "classes[0].colour", `unknown key "colour"; known keys: args, arrival, batch,`},
		{"unknown-key.yaml", 9, 1, "phase", `unknown key "phase"; did you mean "phases"?`},
		{"duplicate-key.yaml", 4, 3, "tenants.count", "duplicate key (first at line 3)"},
		{"wrong-type.yaml", 3, 3, "tenants.count", `must be an integer, got "many"`},
		{"shares-sum.yaml", 5, 3, "tenants.shares", "dominant_share 0.6 plus shares 0.5 sum to 1.1; must be <= 1"},
		{"shares-no-room.yaml", 5, 3, "tenants.shares", "sum to 1, leaving nothing for the 2 tenants without a share; must be < 1"},
		{"shares-short.yaml", 5, 3, "tenants.shares", "every tenant has a share but dominant_share 0.6 plus shares 0.3 sum to 0.9; must be 1"},
		{"dominant-share.yaml", 3, 3, "tenants.dominant_share", "must be in (0, 1), got 1.2"},
		{"dominant-share-zero.yaml", 3, 3, "tenants.dominant_share", "must be in (0, 1), got 0"},
		{"rate-zero.yaml", 5, 5, "classes[0].rate", "must be > 0 arrivals per second, got 0"},
		{"rate-negative.yaml", 5, 5, "classes[0].rate", "must be > 0 arrivals per second, got -5"},
		{"duration-zero.yaml", 5, 3, "phases.run", "must be a duration > 0, got 0s"},
		{"duration-negative.yaml", 8, 7, "configurations[0].interactive.acquire_timeout", "must be a duration > 0, got -1s"},
		{"duration-no-unit.yaml", 5, 3, "phases.solo", `got "10" (a unit is required, e.g. "10s" or "10ms")`},
		{"unknown-class.yaml", 4, 5, "classes[0].isolation_class", `unknown isolation class "bulk"; want interactive or heavy`},
		{"unknown-query.yaml", 3, 25, "classes[0].query", `unknown query "scan"; want lookup, page, report, export or sleep`},
		{"unknown-mode.yaml", 6, 5, "configurations[0].mode", `unknown mode "sharded"; want shared or isolated`},
		{"unknown-backend.yaml", 3, 3, "backend.kind", `unknown backend kind "kubernetes"; want local, external or docker`},
		{"unknown-topology.yaml", 3, 3, "backend.topology", `unknown topology "triple"; want single, replica, shards or citus`},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+tc.field, func(t *testing.T) {
			path := "testdata/" + tc.file
			s, err := Load(path)
			if s != nil {
				t.Errorf("Load returned a scenario with error %v", err)
			}
			var e *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &e) {
				t.Fatalf("Load error = %v (%T), want an *Error matching ErrInvalid", err, err)
			}
			src, _ := os.ReadFile(path)
			checkPlaces(t, string(src), e.Problems)
			var found bool
			for _, p := range e.Problems {
				if p.Field == tc.field && p.Line == tc.line && p.Col == tc.col && strings.Contains(p.Msg, tc.msg) {
					found = true
				}
			}
			if !found {
				t.Fatalf("no problem %s:%d:%d: %s: %s in\n%v", path, tc.line, tc.col, tc.field, tc.msg, err)
			}
			prefix := fmt.Sprintf("%s:%d:", path, tc.line)
			if tc.col > 0 {
				prefix += fmt.Sprintf("%d:", tc.col)
			}
			if tc.field != "" {
				prefix += " " + tc.field + ":"
			}
			if !strings.Contains(err.Error(), prefix) {
				t.Errorf("error text lacks %q:\n%v", prefix, err)
			}
		})
	}
}

func TestParseWholeFileProblems(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"empty", "", "x.yaml: file is empty"},
		{"comment only", "# nothing\n", "x.yaml: file is empty"},
		{"not a mapping", "- a\n- b\n", "x.yaml:1:1: must be a mapping"},
		{"two documents", "name: a\n---\nname: b\n", "x.yaml:2:1: a second YAML document"},
		{"tab indentation", "name: a\ntenants:\n\tcount: 3\n", "x.yaml:3: malformed YAML: found character that cannot start any token"},
		{"unclosed list", "name: a\nclasses: [1, 2\n", "x.yaml:2: malformed YAML"},
		{"lists where mappings go", "name: x\nclasses: {name: a}\nconfigurations: 5\n",
			"x.yaml: 2 problems\nx.yaml:2:1: classes: must be a list, got a mapping\nx.yaml:3:1: configurations: must be a list, got 5"},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nh: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\ni: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
			"x.yaml: more than 100000 keys and list items"},
		{"limiter off", "name: x\nclasses: [{name: interactive, query: lookup, rate: 1}]\nconfigurations: [{name: a, mode: isolated, heavy: {limiter: off}}]\n",
			`x.yaml:3:52: configurations[0].heavy.limiter: must be a mapping, got "off"; to run without a limiter write limiter: {enabled: false}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "x.yaml")
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err =\n%v\nwant prefix\n%s", err, tc.want)
			}
		})
	}
}

func TestUnreadableFile(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		_, err := Load("testdata/no-such-file.yaml")
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("err = %v, want ErrInvalid and fs.ErrNotExist", err)
		}
		if want := "testdata/no-such-file.yaml: read file: no such file or directory"; err.Error() != want {
			t.Errorf("err = %q, want %q", err, want)
		}
	})
	t.Run("directory", func(t *testing.T) {
		_, err := Load("testdata")
		var pe *fs.PathError
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
			t.Fatalf("err = %v, want ErrInvalid and a *fs.PathError", err)
		}
	})
}

// TestManyProblems checks that a file with several problems reports every
// one of them, in line order.
func TestManyProblems(t *testing.T) {
	_, err := Load("testdata/many-problems.yaml")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want *Error", err)
	}
	src, _ := os.ReadFile("testdata/many-problems.yaml")
	checkPlaces(t, string(src), e.Problems)
	want := []string{
		"2:1 name",
		"4:3 tenants.count",
		"5:3 tenants.dominant_share",
		"6:3 tenants.shape",
		"8:40 classes[0].rate",
		"9:6 classes[1].name",
		"11:3 phases.warmup",
		"16:14 configurations[0].heavy.role.work_mem",
	}
	var got []string
	for _, p := range e.Problems {
		got = append(got, fmt.Sprintf("%d:%d %s", p.Line, p.Col, p.Field))
		if p.File != "testdata/many-problems.yaml" {
			t.Errorf("problem %v has File %q", p, p.File)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.HasPrefix(err.Error(), "testdata/many-problems.yaml: 8 problems\n") {
		t.Errorf("error text:\n%v", err)
	}
	_, again := Load("testdata/many-problems.yaml")
	if again.Error() != err.Error() {
		t.Errorf("second load differs:\n%v\nvs\n%v", again, err)
	}
}

func TestValidateMore(t *testing.T) {
	const head = "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10}\n"
	const shared = "configurations: [{name: a, mode: shared}]\n"
	tests := []struct {
		name string
		yaml string
		want []string // "line:col field: msg fragment"
	}{
		{"shares", head + shared + "tenants:\n  count: 5\n  shares: {1: 0.1, 7: 0.1, 3: 1.5}\n", []string{
			"7:12 tenants.shares.1: tenant 1 is the dominant tenant",
			"7:20 tenants.shares.7: no such tenant: ids run from 2 to tenants.count (5)",
			"7:28 tenants.shares.3: must be in (0, 1), got 1.5",
		}},
		{"tenants and data", head + shared + "tenants: {count: 10, exponent: 0, distribution: uniform}\ndata: {orders: 5, days: 0, customers: -1}\n", []string{
			"5:22 tenants.exponent: must be > 0, got 0",
			"5:35 tenants.distribution: unknown distribution \"uniform\"; want zipf or pareto",
			"6:8 data.orders: must be >= tenants.count (10)",
			"6:19 data.days: must be >= 1, got 0",
			"6:28 data.customers: must be >= 1, got -1",
		}},
		{"class fields", "name: x\nclasses:\n  - {name: s, query: sleep, rate: 10}\n  - {name: interactive, query: lookup, rate: 10, sleep: 1s, batch: 5, arrival: burst, senders: some}\n  - {name: heavy, query: export, rate: .inf, batch: 0}\n  - {name: other, query: lookup}\n  - {name: 'a b', isolation_class: heavy, query: sleep, rate: 1, sleep: -1ms}\n" + shared, []string{
			"3:5 classes[0].isolation_class: required when the class name is not interactive or heavy",
			"3:5 classes[0].sleep: required with query sleep",
			"4:50 classes[1].sleep: only for query sleep",
			"4:61 classes[1].batch: only for query export",
			"4:71 classes[1].arrival: unknown arrival \"burst\"",
			"4:87 classes[1].senders: unknown senders \"some\"",
			"5:34 classes[2].rate: must be > 0 arrivals per second, got +Inf",
			"5:46 classes[2].batch: must be >= 1, got 0",
			"6:5 classes[3].isolation_class: required",
			"6:5 classes[3].rate: required: arrivals per second, > 0",
			"7:6 classes[4].name: must be letters, digits",
			"7:66 classes[4].sleep: must be a duration > 0, got -1ms",
		}},
		{"configurations", head + "configurations:\n  - {name: naive, mode: shared, heavy: {pool_size: 3}, shared: {pool_size: 10, role: {connection_limit: 5}}}\n  - {name: naive, mode: isolated, shared: {pool_size: 3}, interactive: {target: standby, limiter: {max_queue: 3, max_wait: 0s, max_per_tenant: 0}}}\n  - {mode: isolated, expect: maybe}\n  - {name: b}\n  - {name: a_name_of_43_characters_which_is_too_long_x, mode: shared}\n", []string{
			"5:33 configurations[0].heavy: only for mode isolated",
			"5:87 configurations[0].shared.role.connection_limit: 5 is below the pool_size 10",
			"6:6 configurations[1].name: duplicate configuration name \"naive\" (first at line 5)",
			"6:35 configurations[1].shared: only for mode shared",
			"6:73 configurations[1].interactive.target: unknown target \"standby\"; want primary or replica",
			"6:114 configurations[1].interactive.limiter.max_wait: must be a duration > 0, got 0s",
			"6:128 configurations[1].interactive.limiter.max_per_tenant: must be >= 1, got 0",
			"7:5 configurations[2].name: required",
			"7:22 configurations[2].expect: unknown expectation \"maybe\"",
			"8:5 configurations[3].mode: required: mode shared or isolated",
			"9:6 configurations[4].name: at most 42 characters",
		}},
		// Values of the right form that PostgreSQL refuses for a role
		// (work_mem 64 kB .. 2147483647 kB, timeouts at most 2147483647
		// ms): bad input at validate, not a run that fails after loading
		// its data set.
		{"role settings out of PostgreSQL's range", head + "configurations:\n  - {name: a, mode: shared, shared: {role: {work_mem: 9000TB}}}\n  - {name: b, mode: shared, shared: {role: {work_mem: 100B, statement_timeout: 600h, idle_in_transaction_session_timeout: 596h32m}}}\n  - {name: c, mode: shared, shared: {role: {work_mem: 64kB, statement_timeout: 596h31m23s}}}\n  - {name: d, mode: shared, shared: {role: {work_mem: 2147483647kB}}}\n", []string{
			"5:45 configurations[0].shared.role.work_mem: 9000TB is outside PostgreSQL's range for work_mem, 64kB to 2147483647kB",
			"6:45 configurations[1].shared.role.work_mem: 100B is outside PostgreSQL's range for work_mem, 64kB to 2147483647kB",
			"6:61 configurations[1].shared.role.statement_timeout: 600h0m0s is above PostgreSQL's maximum 596h31m23.647s",
			"6:86 configurations[1].shared.role.idle_in_transaction_session_timeout: 596h32m0s is above PostgreSQL's maximum 596h31m23.647s",
		}},
		{"missing lists", "name: x\n", []string{
			"0:0 classes: required: at least one class",
			"0:0 configurations: required: at least one configuration",
		}},
		{"external backend", head + shared + "backend:\n  kind: external\n  primary_dsn: ${PG\n  topology: replica\n  settings: {a: b}\n", []string{
			"7:3 backend.primary_dsn: unclosed environment reference",
			"8:3 backend.topology: replica needs backend.replica_dsn",
			"9:3 backend.settings: only for kind local",
		}},
		{"node cpu", head + shared + "backend:\n  node_cpu: 0.005\n  node_cpu_roles: {leader: 1, replica: .nan, primary: 2000}\n  topology: replica\n", []string{
			"6:3 backend.node_cpu: bad CPU budget: 0.005 CPU is below the minimum 0.01 CPU",
			"7:20 backend.node_cpu_roles.leader: unknown node role \"leader\"",
			"7:31 backend.node_cpu_roles.replica: bad CPU budget: NaN is not a number of CPUs",
			"7:46 backend.node_cpu_roles.primary: bad CPU budget: 2000 CPU is above the maximum 1024",
		}},
		// A budget or cores for a role the topology starts no node of would apply to nothing.
		{"roles the topology lacks", head + shared + "backend:\n  node_cpu_roles: {replica: 0.5, shard: 1, primary: 1}\n  node_cores: {worker: \"0\"}\n", []string{
			"6:20 backend.node_cpu_roles.replica: topology single has no replica node (its nodes' roles: primary)",
			"6:34 backend.node_cpu_roles.shard: topology single has no shard node (its nodes' roles: primary)",
			"7:16 backend.node_cores.worker: topology single has no worker node (its nodes' roles: primary)",
		}},
		{"node cpu on external", head + shared + "backend: {kind: external, primary_dsn: x, node_cpu: 0.5, node_cpu_roles: {primary: 1}}\n", []string{
			"5:43 backend.node_cpu: only for kind local or docker",
			"5:58 backend.node_cpu_roles: only for kind local or docker",
		}},
		{"node cores", head + shared + "backend:\n  node_cores: {leader: \"0\", replica: \"1-0\", primary: \"4096\"}\n  generator_cores: x\n  topology: replica\n", []string{
			"6:16 backend.node_cores.leader: unknown node role \"leader\"",
			"6:29 backend.node_cores.replica: bad CPU list: \"1-0\": range 1-0 runs backwards",
			"6:45 backend.node_cores.primary: bad CPU list: \"4096\": core 4096 is beyond the kernel's 1024",
			"7:3 backend.generator_cores: bad CPU list: \"x\": \"x\" is not a core number",
		}},
		{"node cores on external", head + shared + "backend: {kind: external, primary_dsn: x, node_cores: {primary: \"0\"}}\n", []string{
			"5:43 backend.node_cores: only for kind local or docker: noisysim cannot pin a server it did not start",
		}},
		{"node cpu optional alone", head + shared + "backend: {node_cpu_optional: true}\n", []string{
			"5:11 backend.node_cpu_optional: set, but no node_cpu",
		}},
		{"external without DSN", head + shared + "backend: {kind: external, replica_dsn: 'x', topology: single}\n", []string{
			"5:1 backend.primary_dsn: required for kind external",
			"5:45 backend.topology: single, but backend.replica_dsn is set",
		}},
		{"local with DSN", head + shared + "backend: {primary_dsn: 'x', settings: {'bad name': '1', work_mem: ''}}\n", []string{
			"5:11 backend.primary_dsn: only for kind external",
			"5:40 backend.settings.bad name: not a PostgreSQL setting name",
			"5:57 backend.settings.work_mem: empty value",
		}},
		{"assertions", head + shared + "assertions: {quiet_p99: {factor: 0, slack: -1ms, min_samples: 0}, allowed_errors: [queue_full, timeout, queue_full]}\n", []string{
			"5:26 assertions.quiet_p99.factor: must be > 0, got 0",
			"5:37 assertions.quiet_p99.slack: must be a duration >= 0, got -1ms",
			"5:50 assertions.quiet_p99.min_samples: must be >= 1, got 0",
			"5:96 assertions.allowed_errors[1]: unknown error class \"timeout\"",
			"5:105 assertions.allowed_errors[2]: duplicate error class \"queue_full\"",
		}},
		// Sizes beyond what a run can hold: an error naming the field, never
		// an exhausted memory, a panic or an overflow in PostgreSQL.
		{"too big", "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 1e300}\n" +
			"configurations: [{name: a, mode: shared, shared: {pool_size: 99999999999, role: {connection_limit: 99999999999}}}]\n" +
			"tenants: {count: 2000000000}\ndata: {orders: 9223372036854775807, days: 100000000}\nphases: {warmup: 2000000h, run: 2000000h}\n" +
			"load: {model: closed, users: 1000000000}\n", []string{
			"3:40 classes[0].rate: must be at most 1e+09 arrivals per second (one per ns), got 1e+300",
			"4:51 configurations[0].shared.pool_size: must be <= 262143",
			"4:82 configurations[0].shared.role.connection_limit: must be <= 262143",
			"5:11 tenants.count: must be <= 100000",
			"6:8 data.orders: must be <= 100000000",
			"6:37 data.days: must be <= 36500",
			"7:10 phases.warmup: must be at most 168h0m0s",
			"7:28 phases.run: must be at most 168h0m0s",
			"8:23 load.users: must be <= 100000",
		}},
		{"rate above one per ns", "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 100}\n  - {name: heavy, query: report, rate: 2e9}\n" + shared +
			"phases: {warmup: 1s, solo: 1s, run: 7d}\n", []string{
			"4:34 classes[1].rate: must be at most 1e+09 arrivals per second (one per ns), got 2e+09",
			"6:32 phases.run: must be a duration such as",
		}},
		{"schema of the user's or of PostgreSQL", head + shared + "data: {schema: public}\n", []string{
			"5:8 data.schema: \"public\" is PostgreSQL's own or the default schema of user tables",
		}},
		{"schema that needs quoting", head + shared + "data: {schema: My-Schema}\n", []string{
			"5:8 data.schema: must be a lower-case identifier",
		}},
		{"load factor and check_top", head + "  - {name: r1, isolation_class: heavy, query: report, rate: 5, load_factor: 3, senders: dominant}\n  - {name: r2, isolation_class: heavy, query: report, load_factor: -1, calibrate: 2m}\n  - {name: r3, isolation_class: heavy, query: report, rate: 1, calibrate: 1s}\n" + shared + "assertions: {quiet_p99: {check_top: many}}\n", []string{
			"4:55 classes[1].rate: excludes load_factor",
			"5:55 classes[2].load_factor: must be > 0",
			"5:55 classes[2].load_factor: only for a class the dominant tenant alone sends (senders: dominant)",
			"5:72 classes[2].calibrate: must be at most 1m0s, got 2m0s",
			"6:64 classes[3].calibrate: only with load_factor",
			"8:26 assertions.quiet_p99.check_top: must be a number of quiet tenants or all",
		}},
		{"replay", head + shared + "load: {model: closed, users: 5}\nreplay: {trace: no-such-trace.jsonl, speed: 0}\n", []string{
			"6:1 replay: replays open loop: load.model closed has no intended starts to replay",
			"6:10 replay.trace: cannot read the file",
			"6:38 replay.speed: must be in (0, 1000], got 0",
		}},
		{"replay without its trace", head + shared + "replay: {speed: 2, reorder: 1s}\n", []string{
			"5:1 replay.trace: required: a trace file written by noisysim run --trace",
			"5:20 replay.reorder: only with replay.log",
		}},
		{"replay of a log", head + shared + "replay:\n  log: scenario_test.go\n  tenant: {application_name: 't:', statement: '('}\n  rules: [{class: nope}, {class: interactive, statement: '[', min_duration: -1s}]\n  default_class: other\n", []string{
			"6:3 replay.log: cannot tell the format from the name: give replay.format, csvlog or jsonlog",
			"7:12 replay.tenant.application_name: needs a group, (...), around the tenant key",
			"7:36 replay.tenant.statement: excludes replay.tenant.application_name",
			"7:36 replay.tenant.statement: not a regular expression",
			"8:11 replay.rules[0]: needs a condition",
			"8:12 replay.rules[0].class: no class \"nope\" in classes",
			"8:47 replay.rules[1].statement: not a regular expression",
			"8:63 replay.rules[1].min_duration: must be a duration >= 0, got -1s",
			"9:3 replay.default_class: no class \"other\" in classes",
		}},
		{"a/b blocks", head + shared + "timeline:\n  - {name: solo, length: 1s, senders: quiet}\n  - {name: ab1_a, length: 1s}\nassertions: {quiet_p99: {window: ab1_a}, quiet_p99_ab: {blocks: 1, block: 0s, settle: -1s}}\n", []string{
			"7:6 timeline[1].name: \"ab1_a\": names ab<N>_* are the A/B blocks'",
			"8:57 assertions.quiet_p99_ab.blocks: must be 0 (off) or 2..100 pairs of blocks, got 1",
			"8:68 assertions.quiet_p99_ab.block: must be a duration > 0",
			"8:79 assertions.quiet_p99_ab.settle: must be a duration >= 0",
		}},
		{"no quiet senders", "name: x\nclasses:\n  - {name: interactive, query: lookup, rate: 10, senders: dominant}\n  - {name: heavy, query: report, rate: 1, senders: dominant}\n" + shared, []string{
			"2:1 classes: no class is sent by the quiet tenants",
		}},
		{"type errors in one flow mapping", head + shared + "tenants: {count: 99999999999999999999999, exponent: abc, dominant_share: [1]}\n", []string{
			"5:11 tenants.count: must be an integer, got 99999999999999999999999",
			"5:43 tenants.exponent: must be a number, got \"abc\"",
			"5:58 tenants.dominant_share: must be a number, got a list",
		}},
		// yaml.v3 would decode 10.7 into an int as 10, and -.inf as the lowest int64.
		{"fractions in integer keys", head + shared + "tenants: {count: 10.7}\nassertions: {quiet_p99: {min_samples: 1e2}, quiet_p99_ab: {blocks: 2.5}}\ndata: {orders: -.inf}\n", []string{
			"5:11 tenants.count: must be an integer, got 10.7",
			"6:60 assertions.quiet_p99_ab.blocks: must be an integer, got 2.5",
			"7:8 data.orders: must be an integer, got -.inf",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, tc.yaml, tc.want)
		})
	}
}

// TestValidateBuiltInGo checks Validate on a Scenario built without a file:
// problems carry field paths but no places.
func TestValidateBuiltInGo(t *testing.T) {
	s := &Scenario{
		Name:    "go",
		Seed:    7,
		Backend: Backend{Kind: BackendLocal, Topology: backend.TopologySingle},
		Tenants: Tenants{Count: 50, DominantShare: 0.6, Distribution: DistributionPareto, Exponent: 1.5},
		Data:    Data{Orders: 1000, Days: 30, Customers: 10},
		Classes: []Class{{Name: "interactive", IsolationClass: IsolationInteractive, Query: QueryLookup,
			Rate: 1, Arrival: ArrivalConstant, Senders: SendersQuiet}},
		Phases: Phases{Solo: Duration(time.Second), Run: Duration(time.Second)},
		Configurations: []Configuration{{Name: "iso", Mode: ModeIsolated, Expect: ExpectPass,
			Interactive: DefaultInteractivePool(), Heavy: DefaultHeavyPool()}},
		Assertions: Assertions{QuietP99: QuietP99{Factor: 2, MinSamples: 1}},
	}
	if errs := s.Validate(); errs != nil {
		t.Fatalf("Validate: %v", errors.Join(errs...))
	}
	s.Tenants.DominantShare = 1
	s.Phases.Run = -Duration(time.Second)
	errs := s.Validate()
	want := []string{
		"tenants.dominant_share: must be in (0, 1), got 1",
		"phases.run: must be a duration > 0, got -1s",
	}
	if len(errs) != len(want) {
		t.Fatalf("Validate = %v, want %q", errs, want)
	}
	for i, err := range errs {
		if err.Error() != want[i] || !errors.Is(err, ErrInvalid) {
			t.Errorf("error %d = %q, want %q matching ErrInvalid", i, err, want[i])
		}
	}
}

func TestOnly(t *testing.T) {
	s, err := Load("../../scenarios/ci-gate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	one, err := s.Only("isolated")
	if err != nil {
		t.Fatal(err)
	}
	if len(one.Configurations) != 1 || one.Configurations[0].Name != "isolated" || len(s.Configurations) != 2 {
		t.Errorf("Only(isolated) = %+v; original has %d", one.Configurations, len(s.Configurations))
	}
	_, err = s.Only("nope")
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Only(nope) = %v, want ErrInvalid", err)
	}
	if want := `configurations: unknown configuration "nope"; the scenario has "naive", "isolated"`; !strings.Contains(err.Error(), want) {
		t.Errorf("Only(nope) = %v, want it to contain %q", err, want)
	}
	if _, ok := s.Configuration("nope"); ok {
		t.Error("Configuration(nope) found something")
	}
	if c, ok := s.Class("report"); !ok || c.Query != QueryReport {
		t.Errorf("Class(report) = %+v, %v", c, ok)
	}
}

func TestResolveDSNs(t *testing.T) {
	t.Setenv("NOISYSIM_TEST_PRIMARY", "postgres://u:p@h:5432/db")
	t.Setenv("NOISYSIM_TEST_EMPTY", "")
	t.Setenv("NOISYSIM_TEST_PW", `a b'c\d@e/f`)
	t.Setenv("NOISYSIM_TEST_HOST", "h:5432")
	tests := []struct {
		name             string
		b                Backend
		primary, replica string
		err              string
	}{
		{"plain", Backend{PrimaryDSN: "host=h dbname=d password=a$b"}, "host=h dbname=d password=a$b", "", ""},
		{"whole", Backend{PrimaryDSN: "${NOISYSIM_TEST_PRIMARY}"}, "postgres://u:p@h:5432/db", "", ""},
		{"part", Backend{PrimaryDSN: "p", ReplicaDSN: "${NOISYSIM_TEST_PRIMARY}?x=1"}, "p", "postgres://u:p@h:5432/db?x=1", ""},
		{"unset", Backend{PrimaryDSN: "${NOISYSIM_TEST_UNSET}"}, "", "", "resolve backend.primary_dsn: invalid scenario: environment variable NOISYSIM_TEST_UNSET is not set"},
		{"empty", Backend{PrimaryDSN: "p", ReplicaDSN: "${NOISYSIM_TEST_EMPTY}"}, "", "", "resolve backend.replica_dsn: invalid scenario: environment variable NOISYSIM_TEST_EMPTY is not set"},
		{"malformed", Backend{PrimaryDSN: "${1X}"}, "", "", `bad environment reference "${1X}"`},
		// A value is substituted as a value: a password with a space, quote,
		// backslash, '@' or '/' must not break the DSN around it (nor leak
		// half of itself into a parse error).
		{"keyword value quoted", Backend{PrimaryDSN: "host=h password=${NOISYSIM_TEST_PW} port=1"}, `host=h password='a b\'c\\d@e/f' port=1`, "", ""},
		{"keyword value at end", Backend{PrimaryDSN: "host=h password= ${NOISYSIM_TEST_PW}"}, `host=h password= 'a b\'c\\d@e/f'`, "", ""},
		{"URL user info encoded", Backend{PrimaryDSN: "postgres://u:${NOISYSIM_TEST_PW}@h:5432/db"}, "postgres://u:a%20b%27c%5Cd%40e%2Ff@h:5432/db", "", ""},
		{"URL host verbatim", Backend{PrimaryDSN: "postgres://u@${NOISYSIM_TEST_HOST}/db"}, "postgres://u@h:5432/db", "", ""},
		{"inside a longer value", Backend{PrimaryDSN: "host=h password=x${NOISYSIM_TEST_PW}"}, "", "", "NOISYSIM_TEST_PW holds a space, quote or backslash"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, r, err := tc.b.ResolveDSNs()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want %q matching ErrInvalid", err, tc.err)
				}
				return
			}
			if err != nil || p != tc.primary || r != tc.replica {
				t.Errorf("ResolveDSNs = %q, %q, %v; want %q, %q", p, r, err, tc.primary, tc.replica)
			}
			if strings.Contains(tc.b.PrimaryDSN, "NOISYSIM_TEST_PW") {
				cfg, err := pgconn.ParseConfig(p)
				if err != nil || cfg.Password != os.Getenv("NOISYSIM_TEST_PW") {
					t.Errorf("driver reads password %q (err %v), want %q", cfg.Password, err, os.Getenv("NOISYSIM_TEST_PW"))
				}
			}
		})
	}
}

func TestDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{{"0", 0}, {"0s", 0}, {"1.5s", 1500 * time.Millisecond}, {"500ms", 500 * time.Millisecond}, {"2m30s", 150 * time.Second}, {"-1s", -time.Second}} {
		s, err := Parse([]byte("name: x\nclasses: [{name: interactive, query: lookup, rate: 1}]\nconfigurations: [{name: a, mode: shared}]\nphases: {drain: "+tc.in+", solo: 1s, run: 1s}\n"), "x.yaml")
		if tc.want < 0 {
			if err == nil || !strings.Contains(err.Error(), "phases.drain: must be a duration >= 0, got -1s") {
				t.Errorf("%s: err = %v", tc.in, err)
			}
			continue
		}
		if err != nil || s.Phases.Drain.Duration() != tc.want {
			t.Errorf("%s: drain = %v, %v; want %v", tc.in, s, err, tc.want)
		}
	}
	if b, _ := Duration(1500 * time.Millisecond).MarshalText(); string(b) != "1.5s" {
		t.Errorf("MarshalText = %s, want 1.5s", b)
	}
}

func TestSizeBytes(t *testing.T) {
	for _, tc := range []struct {
		in   Size
		want int64
		ok   bool
	}{
		{"", 0, true}, {"64MB", 64 << 20, true}, {"512kB", 512 << 10, true}, {"1GB", 1 << 30, true},
		{"100", 100 << 10, true}, {"8 MB", 8 << 20, true}, {"10B", 10, true}, {"2TB", 2 << 40, true},
		{"64mb", 0, false}, {"1.5GB", 0, false}, {"-1MB", 0, false}, {"lots", 0, false}, {"99999999999TB", 0, false},
	} {
		got, err := tc.in.Bytes()
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Size(%q).Bytes() = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Size(%q).Bytes() error %v does not match ErrInvalid", tc.in, err)
		}
	}
}

func TestConfigurationPool(t *testing.T) {
	c := Configuration{Interactive: DefaultInteractivePool(), Heavy: DefaultHeavyPool()}
	if c.Pool(IsolationInteractive) != &c.Interactive || c.Pool(IsolationHeavy) != &c.Heavy || c.Pool("x") != nil {
		t.Error("Pool does not return the class's pool")
	}
}

// checkPlaces checks that each problem's line:col points at its field in src:
// the key itself, or for a missing key, the key or list item that holds it.
func checkPlaces(t *testing.T, src string, ps []Problem) {
	t.Helper()
	lines := strings.Split(src, "\n")
	for _, p := range ps {
		if p.Line == 0 || p.Col == 0 || p.Field == "" {
			continue
		}
		at := lines[p.Line-1][p.Col-1:]
		var ok bool
		for f := p.Field; f != "" && !ok; f = parentPath(f) {
			key := f[strings.LastIndexAny(f, ".]")+1:]
			if strings.HasSuffix(f, "]") {
				before := strings.TrimRight(lines[p.Line-1][:p.Col-1], " ")
				ok = strings.HasSuffix(before, "-") || strings.HasSuffix(before, "[") || strings.HasSuffix(before, ",")
			} else {
				ok = strings.HasPrefix(strings.Trim(at, "'\""), key)
			}
		}
		if !ok {
			t.Errorf("problem %v: %d:%d points at %q, not at its field", p, p.Line, p.Col, at)
		}
	}
}

func TestLoadModel(t *testing.T) {
	base := "name: x\nclasses: [{name: interactive, query: lookup, rate: 1}]\nconfigurations: [{name: a, mode: shared}]\n"
	cases := []struct {
		name, load string
		want       []string // substrings of the problems, in order; none means valid
	}{
		{"open by default", "", nil},
		{"closed", "load: {model: closed, users: 20, think_time: 200ms, retry_queries: 3, max_retries: 2}\n", nil},
		{"unknown model", "load: {model: half}\n", []string{`f.yaml:4:8: load.model: unknown load model "half"`}},
		{"closed fields on open", "load: {users: 5}\n", []string{"f.yaml:4:8: load.users: applies to the closed model only"}},
		{"bad closed values", "load: {model: closed, users: 0, think_time: -1s, retry_queries: 0, max_retries: -1}\n",
			[]string{"load.users: must be >= 1", "load.think_time:", "load.retry_queries: must be >= 1", "load.max_retries: must be >= 0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse([]byte(base+tc.load), "f.yaml")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				if tc.load != "" && sc.Load.Model != ModelClosed {
					t.Errorf("model %q, want closed", sc.Load.Model)
				}
				if tc.load == "" && (sc.Load.Model != ModelOpen || sc.Load.Users != DefaultUsers) {
					t.Errorf("defaults not applied: %+v", sc.Load)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// wantProblems parses src, which must be invalid, and checks its problems:
// each at its field's place, as "line:col field: msg" starting with the
// matching entry of want, in order.
func wantProblems(t *testing.T, src string, want []string) {
	t.Helper()
	_, err := Parse([]byte(src), "x.yaml")
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want *Error", err)
	}
	checkPlaces(t, src, e.Problems)
	var got []string
	for _, p := range e.Problems {
		got = append(got, fmt.Sprintf("%d:%d %s: %s", p.Line, p.Col, p.Field, p.Msg))
	}
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range got {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}
