package pools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noisysim/noisysim/isolation/limiter"
)

func TestClassify(t *testing.T) {
	pg := func(code, msg string) error {
		return fmt.Errorf("run interactive call: %w", &pgconn.PgError{Code: code, Message: msg})
	}
	for _, tc := range []struct {
		name string
		err  error
		want ErrorClass
	}{
		{"nil", nil, ""},
		{"queue full", fmt.Errorf("acquire: %w", &limiter.LimitError{Reason: limiter.ReasonQueueFull}), ErrorLimitedQueueFull},
		{"wait exceeded", &limiter.LimitError{Reason: limiter.ReasonWaitExceeded}, ErrorLimitedWaitExceeded},
		{"other limiter", fmt.Errorf("mine: %w", limiter.ErrLimited), ErrorLimited},
		{"acquire timeout", &AcquireTimeoutError{Pool: "p"}, ErrorAcquireTimeout},
		{"statement timeout", pg("57014", "canceling statement due to statement timeout"), ErrorStatementTimeout},
		{"statement timeout, localised", pg("57014", "Abbruch der Anweisung wegen Zeitüberschreitung"), ErrorStatementTimeout},
		{"user cancel", pg("57014", "canceling statement due to user request"), ErrorCancelled},
		{"recovery conflict", pg("40001", "canceling statement due to conflict with recovery"), ErrorReplicaConflict},
		{"serialization failure on a primary", pg("40001", "could not serialize access due to concurrent update"), ErrorOther},
		{"terminated", pg("57P01", "terminating connection due to administrator command"), ErrorConnectionLost},
		{"connection exception", pg("08006", "connection failure"), ErrorConnectionLost},
		{"idle in transaction timeout", pg("25P03", "terminating connection due to idle-in-transaction timeout"), ErrorConnectionLost},
		{"too many connections", pg("53300", "too many connections for role \"x\""), ErrorConnect},
		{"bad password", pg("28P01", "password authentication failed"), ErrorConnect},
		{"connect error", &pgconn.ConnectError{}, ErrorConnect},
		{"division by zero", pg("22012", "division by zero"), ErrorOther},
		{"context cancelled", fmt.Errorf("x: %w", context.Canceled), ErrorCancelled},
		{"deadline", context.DeadlineExceeded, ErrorCancelled},
		{"EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), ErrorConnectionLost},
		{"net error", &net.OpError{Op: "read", Err: errors.New("connection reset by peer")}, ErrorConnectionLost},
		{"tag failed", &TagError{Err: errors.New("x")}, ErrorOther},
		{"plain", errors.New("something"), ErrorOther},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify = %q, want %q", tc.name, got, tc.want)
		}
	}
	// On a standby, 40001 is a replica conflict whatever the language.
	if got := classify(&pgconn.PgError{Code: "40001", Message: "Konflikt"}, true); got != ErrorReplicaConflict {
		t.Errorf("40001 on a standby: %q", got)
	}
	if len(errorClassIndex) != numErrorClasses {
		t.Errorf("error classes not distinct: %v", errorClasses)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := func() Config { return onePool("postgres://u@127.0.0.1:1/db", 2) }
	for name, mutate := range map[string]func(*Config){
		"no pools":         func(c *Config) { c.Pools = nil },
		"no classes":       func(c *Config) { c.Classes = nil },
		"unnamed pool":     func(c *Config) { c.Pools[0].Name = "" },
		"duplicate pool":   func(c *Config) { c.Pools = append(c.Pools, c.Pools[0]) },
		"zero size":        func(c *Config) { c.Pools[0].Size = 0 },
		"negative acquire": func(c *Config) { c.Pools[0].AcquireTimeout = -1 },
		"unknown pool":     func(c *Config) { c.Classes[Heavy] = ClassConfig{Pool: "nope"} },
		"empty class":      func(c *Config) { c.Classes[""] = ClassConfig{Pool: string(Interactive)} },
		"negative reset":   func(c *Config) { c.ResetTimeout = -time.Second },
		"bad ledger":       func(c *Config) { c.Ledger.ShareThreshold = 2 },
		"unparseable DSN":  func(c *Config) { c.Pools[0].DSN = "postgres://[::1" },
	} {
		cfg := good()
		mutate(&cfg)
		s, err := New(context.Background(), cfg)
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
		if s != nil {
			s.Close()
		}
	}
	// An unreachable server fails the probe and leaves nothing open.
	cfg := good()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := New(ctx, cfg); err == nil || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("unreachable server: err = %v, want the probe's error", err)
	}
}

// The defaults are the reference design's numbers.
func TestDefaults(t *testing.T) {
	cfg, err := DefaultIsolated("postgres://i@h/db", "postgres://h@replica/db")
	if err != nil {
		t.Fatal(err)
	}
	want := []PoolConfig{
		{Name: "interactive", DSN: "postgres://i@h/db", Size: 30, AcquireTimeout: 1500 * time.Millisecond},
		{Name: "heavy", DSN: "postgres://h@replica/db", Size: 4, AcquireTimeout: 5 * time.Second},
	}
	for i, p := range cfg.Pools {
		if p != want[i] {
			t.Errorf("pool %d = %+v, want %+v", i, p, want[i])
		}
	}
	for class, lc := range map[Class]limiter.Config{
		Interactive: {MaxPerTenant: 4, MaxQueue: 20, MaxWait: 1500 * time.Millisecond},
		Heavy:       {MaxPerTenant: 1, MaxQueue: 5, MaxWait: 10 * time.Second},
	} {
		cc := cfg.Classes[class]
		l, ok := cc.Limiter.(*limiter.Limiter)
		if !ok || cc.Pool != string(class) {
			t.Fatalf("%s: %+v", class, cc)
		}
		got := l.Config()
		if got.MaxPerTenant != lc.MaxPerTenant || got.MaxQueue != lc.MaxQueue || got.MaxWait != lc.MaxWait || got.MaxGlobal != 0 {
			t.Errorf("%s limiter %+v, want %+v", class, got, lc)
		}
	}
	interactive, heavy := DefaultRoles()
	if interactive.Name != "noisysim_interactive" || interactive.StatementTimeout != 3*time.Second ||
		interactive.IdleInTransactionSessionTimeout != 10*time.Second || interactive.WorkMem != "" || interactive.ConnectionLimit != 40 {
		t.Errorf("interactive role %+v", interactive)
	}
	if heavy.StatementTimeout != 120*time.Second || heavy.IdleInTransactionSessionTimeout != 30*time.Second || heavy.WorkMem != "64MB" || heavy.ConnectionLimit != 6 {
		t.Errorf("heavy role %+v", heavy)
	}
	naive := DefaultNaive("postgres://n@h/db")
	if len(naive.Pools) != 1 || naive.Pools[0].Size != 40 || naive.Classes[Interactive].Limiter != nil ||
		naive.Classes[Heavy].Pool != naive.Pools[0].Name || naive.Classes[Interactive].Pool != naive.Pools[0].Name {
		t.Errorf("naive config %+v", naive)
	}
	if r := NaiveRole(); r.StatementTimeout != 0 || r.IdleInTransactionSessionTimeout != 0 || r.ConnectionLimit != 0 {
		t.Errorf("naive role %+v has per-class settings", r)
	}
}

func TestRoleStatementsQuote(t *testing.T) {
	r := RoleConfig{Name: `a"b`, WorkMem: "64MB", ReadTables: []string{`s.t"x`}}
	stmts := r.statements(`d'b`, "SCRAM-SHA-256$4096:c2FsdA==$x:y")
	want := map[string]string{
		"set work_mem":            `ALTER ROLE "a""b" SET work_mem = E'64MB'`,
		"grant connect":           `GRANT CONNECT ON DATABASE "d'b" TO "a""b"`,
		`grant select on s.t"x`:   `GRANT SELECT ON TABLE "s"."t""x" TO "a""b"`,
		"reset statement_timeout": `ALTER ROLE "a""b" RESET statement_timeout`,
	}
	for _, s := range stmts {
		if w, ok := want[s.what]; ok {
			if s.sql != w {
				t.Errorf("%s:\n got %s\nwant %s", s.what, s.sql, w)
			}
			delete(want, s.what)
		}
	}
	if len(want) != 0 {
		t.Errorf("statements missing: %v", want)
	}
	if got := literal(`it's a \ test`); got != `E'it''s a \\ test'` {
		t.Errorf("literal = %s", got)
	}
}
