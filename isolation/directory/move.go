package directory

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sync/errgroup"
)

// Step is one step of a move, in order. The catalog records the last step
// completed; a move run again resumes after it.
type Step string

// Move steps, in order.
const (
	// StepPrepare records the move in the catalog (the tenant's state
	// becomes moving; it stays on the source), checks that the tables have
	// the same shape on both nodes and installs change capture on them.
	StepPrepare Step = "prepare"
	// StepCapture starts capturing the tenant's writes at the source and
	// waits for every transaction older than that to end, so no write can
	// escape both the copy and the capture.
	StepCapture Step = "capture"
	// StepCopy marks the target's rows of the tenant as a copy, empties the
	// target of the tenant (leftovers of an earlier attempt) and copies
	// every table in key-ordered batches. A fresh move refuses, before
	// prepare, a target holding rows of the tenant that no earlier attempt
	// copied there (ErrTargetNotEmpty) unless MoveConfig.Overwrite is set.
	StepCopy Step = "copy"
	// StepCatchUp applies the captured writes at the target, in rounds,
	// until a round finds fewer than MoveConfig.Backlog.
	StepCatchUp Step = "catchup"
	// StepSwitch is the write pause: hold the gates, fence the tenant at
	// the source (waiting for writes in flight), apply the last captured
	// writes, validate every table (row count and checksum), switch the
	// destination in the catalog, resume. A pause that would exceed
	// MaxPause is undone before the switch and tried again.
	StepSwitch Step = "switch"
	// StepGrace waits MoveConfig.Grace so readers routed before the switch
	// finish at the source.
	StepGrace Step = "grace"
	// StepDelete deletes the tenant's rows at the source in key-ordered
	// batches. The source keeps a fenced tombstone: a stale writer's write
	// there fails with FencedSQLState.
	StepDelete Step = "delete"
	// StepDone records the move's figures.
	StepDone Step = "done"
)

// Steps lists the steps in order.
var Steps = []Step{StepPrepare, StepCapture, StepCopy, StepCatchUp, StepSwitch, StepGrace, StepDelete, StepDone}

// Move defaults.
const (
	DefaultTenantColumn  = "tenant_id"
	DefaultBatchRows     = 1000
	DefaultMaxPause      = time.Second
	DefaultPauseAttempts = 3
	DefaultBacklog       = 200
	DefaultCatchUpRounds = 50
	DefaultGrace         = 5 * time.Second
	DefaultDrainTimeout  = 60 * time.Second
)

// MoveConfig configures Move. Zero values take the Default constants.
type MoveConfig struct {
	// Catalog is the directory. Required.
	Catalog *Catalog
	// Nodes maps node names to DSNs of a role that may read and write the
	// tables and create the capture objects (usually the owner). The
	// source and the target must be present.
	Nodes map[string]string
	// Tables are the tables that hold tenant data, e.g. {"tenants",
	// "orders"}. Each must have a primary key that includes TenantColumn,
	// and the same columns on both nodes. Required.
	Tables []string
	// TenantColumn is the column naming the tenant in every table. Its
	// text form is the tenant id the catalog uses.
	TenantColumn string
	// BatchRows is the number of rows per copy or delete batch, and of
	// captured changes per catch-up batch.
	BatchRows int
	// MaxPause bounds the write pause. A pause that would take longer is
	// undone before the switch (the source is unfenced) and tried again
	// after another catch-up, at most PauseAttempts times; then Move
	// returns ErrPauseExceeded.
	MaxPause      time.Duration
	PauseAttempts int
	// Backlog ends catch-up: once a round applies fewer changes, the pause
	// begins. CatchUpRounds bounds the rounds (the pause begins anyway).
	Backlog       int
	CatchUpRounds int
	// Grace is the wait between the switch and the delete at the source.
	// Negative means no wait.
	Grace time.Duration
	// DrainTimeout bounds the wait, when capture starts, for transactions
	// that began before it.
	DrainTimeout time.Duration
	// Gates are held during the write pause: the in-process Routers of the
	// move's own process. Routers elsewhere see the switch at their next
	// poll; their writes at the fenced source fail meanwhile (IsFenced).
	Gates []Gate
	// Overwrite lets a fresh move delete rows of the tenant that the target
	// already holds and no earlier attempt of the move copied there (left
	// by hand, or by a restore). Without it such a move fails with
	// *TargetNotEmptyError before it writes anything.
	Overwrite bool
	// Logger receives an info record per step; nil is silent.
	Logger *slog.Logger
	// BeforeStep, when set, is called before each step runs; an error
	// stops the move right there, as if the process had died (nothing is
	// undone), and Move returns it in a *StepError. For tests.
	BeforeStep func(Step) error
}

// Figures are a move's measured figures. Durations are in seconds, sizes
// in bytes (the text form of the rows copied).
type Figures struct {
	Tenant string `json:"tenant"`
	Source string `json:"source"`
	Target string `json:"target"`
	// AlreadyThere is true when the tenant was already at the target and
	// no data moved.
	AlreadyThere bool `json:"already_there,omitempty"`
	// CancelledTarget is the target of an interrupted move that this run
	// cancelled: the move had not switched and the tenant was moved back
	// to the node it never left (capture stopped, source unfenced, catalog
	// active there). Rows a partial copy left at CancelledTarget stay until
	// a later move there empties it first.
	CancelledTarget string `json:"cancelled_target,omitempty"`
	// ResumedAfter is the step the catalog had recorded when this run
	// resumed an interrupted move; empty for a fresh move.
	ResumedAfter Step    `json:"resumed_after,omitempty"`
	CopiedRows   int64   `json:"copied_rows"`
	CopiedBytes  int64   `json:"copied_bytes"`
	CopySeconds  float64 `json:"copy_seconds"`
	// MBPerSecond is CopiedBytes/2^20 over CopySeconds; RowsPerSecond is
	// CopiedRows over CopySeconds.
	MBPerSecond   float64 `json:"mb_per_second"`
	RowsPerSecond float64 `json:"rows_per_second"`
	// Changes is the number of captured writes applied at the target, in
	// CatchUpRounds rounds before the pause.
	Changes       int64 `json:"changes"`
	CatchUpRounds int   `json:"catch_up_rounds"`
	// PauseSeconds is the write pause that ended in the switch (gate held
	// and source fenced); PauseAttempts counts the pauses tried.
	PauseSeconds  float64 `json:"pause_seconds"`
	PauseAttempts int     `json:"pause_attempts"`
	// Tables are the validation figures taken in the pause.
	Tables []TableDiff `json:"tables,omitempty"`
	// DeletedRows is the number of rows deleted at the source.
	DeletedRows  int64   `json:"deleted_rows"`
	TotalSeconds float64 `json:"total_seconds"`
}

type mover struct {
	cfg     MoveConfig
	log     *slog.Logger
	tenant  string
	source  string
	target  string
	fig     *Figures
	conns   map[string]*pgx.Conn
	tables  []*table // described at the source
	started time.Time
}

// Move moves tenant's rows to the node target and switches the catalog to
// it, under live traffic, step by step (see Steps). Every step is
// idempotent and the catalog records the last one completed, so when a
// move is interrupted (process killed, node stopped, ctx cancelled) the
// catalog still points at a complete copy — the source until the switch,
// the validated target after it — and calling Move again with the same
// tenant and target finishes it. A move interrupted inside the pause
// leaves the source fenced (writes fail, none is lost) until it is run
// again.
//
// An interrupted move may be run again towards another target as long as
// it had not switched (e.g. when its target died); run towards its source
// (the node the tenant never left) it is cancelled (see
// Figures.CancelledTarget).
//
// tenant must be the text form of a value of the tenant column (see
// CheckTenant); anything else is refused before the catalog or a node is
// written.
//
// Errors: ErrMoveInProgress when another mover holds the tenant (or an
// interrupted move past its switch went to another target),
// ErrUnknownNode, ErrInvalidConfig, *TenantError (ErrInvalidTenant),
// *TargetNotEmptyError (ErrTargetNotEmpty),
// *ValidationError, ErrPauseExceeded, and database errors, wrapped in a
// *StepError naming the step.
func Move(ctx context.Context, cfg MoveConfig, tenant, target string) (*Figures, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	m := &mover{cfg: cfg, log: cfg.Logger, tenant: tenant, target: target,
		conns: map[string]*pgx.Conn{}, started: time.Now()}
	defer m.closeConns()

	lock, err := cfg.Catalog.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("move tenant %s: lock: %w", tenant, err)
	}
	defer lock.Release()
	var got bool
	if err := lock.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtextextended('noisysim_directory.move/' || $1, 0))", tenant).Scan(&got); err != nil {
		return nil, fmt.Errorf("move tenant %s: lock: %w", tenant, err)
	}
	if !got {
		return nil, fmt.Errorf("move tenant %s: %w", tenant, ErrMoveInProgress)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = lock.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended('noisysim_directory.move/' || $1, 0))", tenant)
	}()

	snap, err := cfg.Catalog.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("move tenant %s: %w", tenant, err)
	}
	if !slices.Contains(snap.Nodes, target) {
		return nil, fmt.Errorf("move tenant %s: target %q: %w", tenant, target, ErrUnknownNode)
	}
	rec, has, err := cfg.Catalog.move(ctx, tenant)
	if err != nil {
		return nil, fmt.Errorf("move tenant %s: %w", tenant, err)
	}
	// A tenant id the tenant column cannot hold must leave no trace: it is
	// checked before anything is written (only a cancel, which clears an
	// interrupted move, skips it).
	checkTenant := func(nodes ...string) error {
		for _, n := range nodes {
			if _, ok := cfg.Nodes[n]; !ok {
				continue
			}
			c, err := m.conn(ctx, n)
			if err != nil {
				return fmt.Errorf("move tenant %s: %w", tenant, err)
			}
			if err := CheckTenant(ctx, c, cfg.Tables, cfg.TenantColumn, tenant); err != nil {
				return fmt.Errorf("move tenant %s: %w", tenant, err)
			}
			return nil
		}
		return nil
	}
	from := StepPrepare
	switched := slices.Index(Steps, rec.Step) >= slices.Index(Steps, StepSwitch)
	switch {
	case has && rec.Step != StepDone && rec.Target != target && switched:
		return nil, fmt.Errorf("move tenant %s: the interrupted move to %s is past its switch: finish it first (move to %s again): %w",
			tenant, rec.Target, rec.Target, ErrMoveInProgress)
	case has && rec.Step != StepDone && rec.Source == target:
		// Before the switch the tenant never left the source: moving it
		// there cancels the move. (Run as a move, its copy step would
		// empty the source, the target.)
		m.source = target
		if _, ok := cfg.Nodes[target]; !ok {
			return nil, fmt.Errorf("move tenant %s: no DSN for node %s: %w", tenant, target, ErrInvalidConfig)
		}
		if err := m.cancel(ctx); err != nil {
			return nil, fmt.Errorf("move tenant %s: cancel the interrupted move to %s: %w", tenant, rec.Target, err)
		}
		m.log.Info("cancelled interrupted move", "tenant", tenant, "source", target, "old_target", rec.Target, "after", rec.Step)
		return &Figures{Tenant: tenant, Source: target, Target: target, AlreadyThere: true,
			ResumedAfter: rec.Step, CancelledTarget: rec.Target}, nil
	case has && rec.Step != StepDone && rec.Target != target:
		// Before the switch the source is still the tenant's home: start
		// over towards the new target (e.g. the old one died).
		m.source = rec.Source
		if err := checkTenant(m.source, target); err != nil {
			return nil, err
		}
		m.fig = &Figures{ResumedAfter: rec.Step}
		m.log.Info("retargeting interrupted move", "tenant", tenant, "source", m.source, "old_target", rec.Target, "target", target)
	case has && rec.Step != StepDone:
		m.source = rec.Source
		if err := checkTenant(m.source, target); err != nil {
			return nil, err
		}
		from = Steps[slices.Index(Steps, rec.Step)+1]
		m.fig = &Figures{ResumedAfter: rec.Step}
		m.log.Info("resuming move", "tenant", tenant, "source", m.source, "target", target, "after", rec.Step)
	default:
		m.source = snap.Resolve(tenant)
		if err := checkTenant(m.source, target); err != nil {
			return nil, err
		}
		m.fig = &Figures{}
		if m.source == target {
			m.fig = &Figures{Tenant: tenant, Source: target, Target: target, AlreadyThere: true}
			return m.fig, nil
		}
		if m.source == "" {
			return nil, fmt.Errorf("move tenant %s: the catalog places it nowhere: %w", tenant, ErrUnknownNode)
		}
	}
	m.fig.Tenant, m.fig.Source, m.fig.Target = tenant, m.source, target
	for _, n := range []string{m.source, target} {
		if _, ok := cfg.Nodes[n]; !ok {
			return nil, fmt.Errorf("move tenant %s: no DSN for node %s: %w", tenant, n, ErrInvalidConfig)
		}
	}

	if from == StepPrepare {
		if err := m.checkTarget(ctx); err != nil {
			return nil, fmt.Errorf("move tenant %s: %w", tenant, err)
		}
	}
	for _, step := range Steps[slices.Index(Steps, from):] {
		if cfg.BeforeStep != nil {
			if err := cfg.BeforeStep(step); err != nil {
				return nil, &StepError{Tenant: tenant, Step: step, Err: err}
			}
		}
		t0 := time.Now()
		if err := m.run(ctx, step); err != nil {
			return nil, &StepError{Tenant: tenant, Step: step, Err: err}
		}
		m.log.Info("move step done", "tenant", tenant, "step", step, "took", time.Since(t0).Round(time.Millisecond))
	}
	return m.fig, nil
}

// cancel ends an interrupted move that had not switched: the source stops
// capturing the tenant's writes (and is unfenced), the catalog marks the
// tenant active on it and forgets the move. Each part is idempotent.
func (m *mover) cancel(ctx context.Context) error {
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	if _, err := src.Exec(ctx, `DELETE FROM noisysim_directory.capture WHERE tenant_id = $1;`, m.tenant); err != nil {
		return fmt.Errorf("stop capture at %s: %w", m.source, err)
	}
	if _, err := src.Exec(ctx, `DELETE FROM noisysim_directory.changes WHERE tenant_id = $1`, m.tenant); err != nil {
		return fmt.Errorf("drop captured changes at %s: %w", m.source, err)
	}
	return pgx.BeginFunc(ctx, m.cfg.Catalog.pool, func(tx pgx.Tx) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE noisysim_directory.tenants SET node = $2, state = 'active',
			version = (SELECT version FROM noisysim_directory.meta), updated_at = now() WHERE tenant_id = $1`,
			m.tenant, m.source); err != nil {
			return fmt.Errorf("mark tenant active: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM noisysim_directory.moves WHERE tenant_id = $1`, m.tenant); err != nil {
			return fmt.Errorf("forget move: %w", err)
		}
		return nil
	})
}

func (c *MoveConfig) fill() error {
	if c.Catalog == nil || len(c.Tables) == 0 {
		return fmt.Errorf("move: need a catalog and tables: %w", ErrInvalidConfig)
	}
	c.TenantColumn = cmp.Or(c.TenantColumn, DefaultTenantColumn)
	c.BatchRows = cmp.Or(c.BatchRows, DefaultBatchRows)
	c.MaxPause = cmp.Or(c.MaxPause, DefaultMaxPause)
	c.PauseAttempts = cmp.Or(c.PauseAttempts, DefaultPauseAttempts)
	c.Backlog = cmp.Or(c.Backlog, DefaultBacklog)
	c.CatchUpRounds = cmp.Or(c.CatchUpRounds, DefaultCatchUpRounds)
	c.Grace = cmp.Or(c.Grace, DefaultGrace)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DefaultDrainTimeout)
	if c.BatchRows < 0 || c.MaxPause < 0 || c.PauseAttempts < 0 || c.Backlog < 0 || c.CatchUpRounds < 0 {
		return fmt.Errorf("move: negative setting: %w", ErrInvalidConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// sessionSQL makes row text identical on both nodes and lets the mover's
// own writes pass the capture trigger.
const sessionSQL = `SET TimeZone = 'UTC'; SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres';
SET extra_float_digits = 3; SET bytea_output = 'hex'; SET noisysim.directory_bypass = 'on'`

// conn returns the mover's connection to node, opening it on first use.
func (m *mover) conn(ctx context.Context, node string) (*pgx.Conn, error) {
	if c, ok := m.conns[node]; ok && !c.IsClosed() {
		return c, nil
	}
	cfg, err := pgx.ParseConfig(m.cfg.Nodes[node])
	if err != nil {
		return nil, fmt.Errorf("parse DSN of node %s: %w: %w", node, ErrInvalidConfig, err)
	}
	cfg.RuntimeParams["application_name"] = "noisysim-mover"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to node %s: %w", node, err)
	}
	if _, err := c.Exec(ctx, sessionSQL); err != nil {
		c.Close(context.Background())
		return nil, fmt.Errorf("set up session on node %s: %w", node, err)
	}
	m.conns[node] = c
	return c, nil
}

func (m *mover) closeConns() {
	for _, c := range m.conns {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c.Close(ctx)
		cancel()
	}
}

// describeTables reads the tables at the source (and checks the target
// has the same shape when withTarget).
func (m *mover) describeTables(ctx context.Context, withTarget bool) error {
	if m.tables != nil {
		return nil
	}
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	var dst *pgx.Conn
	if withTarget {
		if dst, err = m.conn(ctx, m.target); err != nil {
			return err
		}
	}
	var tables []*table
	for _, name := range m.cfg.Tables {
		t, err := describe(ctx, src, name, m.cfg.TenantColumn)
		if err != nil {
			return err
		}
		if dst != nil {
			o, err := describe(ctx, dst, name, m.cfg.TenantColumn)
			if err != nil {
				return err
			}
			if err := t.sameShape(o); err != nil {
				return err
			}
		}
		tables = append(tables, t)
	}
	m.tables = tables
	return nil
}

// record stores step as the last completed one.
func (m *mover) record(ctx context.Context, step Step) error {
	var fig []byte
	if step == StepDone {
		m.fig.TotalSeconds = time.Since(m.started).Seconds()
		fig, _ = json.Marshal(m.fig)
	}
	_, err := m.cfg.Catalog.pool.Exec(ctx, `UPDATE noisysim_directory.moves SET step = $2, updated_at = now(),
		figures = coalesce($3::jsonb, figures) WHERE tenant_id = $1`, m.tenant, string(step), fig)
	if err != nil {
		return fmt.Errorf("record step %s: %w", step, err)
	}
	return nil
}

func (m *mover) run(ctx context.Context, step Step) error {
	switch step {
	case StepPrepare:
		if err := m.prepare(ctx); err != nil {
			return err
		}
	case StepCapture:
		if err := m.capture(ctx); err != nil {
			return err
		}
	case StepCopy:
		if err := m.copy(ctx); err != nil {
			return err
		}
	case StepCatchUp:
		if err := m.catchUp(ctx); err != nil {
			return err
		}
	case StepSwitch:
		return m.pauseAndSwitch(ctx) // records the step with the switch
	case StepGrace:
		if m.cfg.Grace > 0 {
			select {
			case <-time.After(m.cfg.Grace):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	case StepDelete:
		if err := m.deleteSource(ctx); err != nil {
			return err
		}
	case StepDone:
		// The tenant lives at the target now: its rows there are no
		// longer a copy a later move may delete.
		dst, err := m.conn(ctx, m.target)
		if err != nil {
			return err
		}
		if _, err := dst.Exec(ctx, "DELETE FROM noisysim_directory.copies WHERE tenant_id = $1", m.tenant); err != nil {
			return fmt.Errorf("unmark the copy at the target: %w", err)
		}
	}
	return m.record(ctx, step)
}

func (m *mover) prepare(ctx context.Context) error {
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	for _, n := range []string{m.source, m.target} {
		c, err := m.conn(ctx, n)
		if err != nil {
			return err
		}
		if err := installNode(ctx, c, m.tables); err != nil {
			return fmt.Errorf("node %s: %w", n, err)
		}
	}
	// A tombstone at the target from an earlier move away would fence
	// the tenant's writes there after the switch.
	dst, _ := m.conn(ctx, m.target)
	if _, err := dst.Exec(ctx, `DELETE FROM noisysim_directory.capture WHERE tenant_id = $1;`, m.tenant); err != nil {
		return fmt.Errorf("clear target capture: %w", err)
	}
	if _, err := dst.Exec(ctx, `DELETE FROM noisysim_directory.changes WHERE tenant_id = $1`, m.tenant); err != nil {
		return fmt.Errorf("clear target changes: %w", err)
	}
	return pgx.BeginFunc(ctx, m.cfg.Catalog.pool, func(tx pgx.Tx) error {
		if err := checkNode(ctx, tx, m.source); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO noisysim_directory.moves (tenant_id, source, target, step)
			VALUES ($1, $2, $3, 'new')
			ON CONFLICT (tenant_id) DO UPDATE SET source = EXCLUDED.source, target = EXCLUDED.target,
				attempts = CASE WHEN moves.step = 'done' THEN 1 ELSE moves.attempts + 1 END,
				started_at = CASE WHEN moves.step = 'done' THEN now() ELSE moves.started_at END,
				step = 'new', updated_at = now(), figures = NULL`, m.tenant, m.source, m.target); err != nil {
			return fmt.Errorf("record move: %w", err)
		}
		if err := bump(ctx, tx); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO noisysim_directory.tenants (tenant_id, node, state, version, updated_at)
			SELECT $1, $2, 'moving', version, now() FROM noisysim_directory.meta
			ON CONFLICT (tenant_id) DO UPDATE SET state = 'moving', version = EXCLUDED.version, updated_at = now()`,
			m.tenant, m.source)
		if err != nil {
			return fmt.Errorf("mark tenant moving: %w", err)
		}
		return nil
	})
}

// capture starts capturing the tenant's writes at the source, then waits
// until every transaction that began before is over: those may write
// without seeing the capture row, so the copy must start after them.
func (m *mover) capture(ctx context.Context) error {
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	if err := installNode(ctx, src, m.tables); err != nil {
		return err
	}
	if _, err := src.Exec(ctx, `INSERT INTO noisysim_directory.capture (tenant_id, fenced) VALUES ($1, false)
		ON CONFLICT (tenant_id) DO UPDATE SET fenced = false, since = now()`, m.tenant); err != nil {
		return fmt.Errorf("start capture: %w", err)
	}
	return drainOlder(ctx, src, m.cfg.DrainTimeout)
}

// drainOlder waits until no transaction of the database that started
// before now is still open (other than the caller's).
func drainOlder(ctx context.Context, c *pgx.Conn, limit time.Duration) error {
	var since time.Time
	if err := c.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&since); err != nil {
		return fmt.Errorf("drain older transactions: %w", err)
	}
	deadline := time.Now().Add(limit)
	for {
		var n int
		if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND pid <> pg_backend_pid() AND xact_start < $1`, since).Scan(&n); err != nil {
			return fmt.Errorf("drain older transactions: %w", err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain older transactions: %d still open after %s", n, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (t *table) tenantCond(alias string, param int) string {
	return fmt.Sprintf("%s%s = $%d::text::%s", alias, quoteIdent(t.tenant.name), param, t.tenant.typ)
}

func (t *table) textCols(alias string) string {
	parts := make([]string, len(t.cols))
	for i, c := range t.cols {
		parts[i] = alias + quoteIdent(c.name) + "::text"
	}
	return strings.Join(parts, ", ")
}

func names(cols []column, alias string) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = alias + quoteIdent(c.name)
	}
	return strings.Join(parts, ", ")
}

// keyFromJSON selects the key columns from jsonb_array_elements($n) e.
func (t *table) keyIn(param int) string {
	parts := make([]string, len(t.key))
	for i, c := range t.key {
		parts[i] = fmt.Sprintf("(e->>%s)::%s", literal(c.name), c.typ)
	}
	return fmt.Sprintf("(%s) IN (SELECT %s FROM jsonb_array_elements($%d::jsonb) e)", names(t.key, "t."), strings.Join(parts, ", "), param)
}

// upsert writes rows (text values in column order) at conn.
func (t *table) upsert(ctx context.Context, conn pgxExec, rows [][]*string) error {
	per := max(1, min(len(rows), 60000/len(t.cols)))
	for len(rows) > 0 {
		n := min(per, len(rows))
		var sb strings.Builder
		fmt.Fprintf(&sb, "INSERT INTO %s (%s) VALUES ", t.ident, names(t.cols, ""))
		args := make([]any, 0, n*len(t.cols))
		for i, r := range rows[:n] {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('(')
			for j, c := range t.cols {
				if j > 0 {
					sb.WriteString(", ")
				}
				args = append(args, r[j])
				fmt.Fprintf(&sb, "$%d::text::%s", len(args), c.typ)
			}
			sb.WriteByte(')')
		}
		fmt.Fprintf(&sb, " ON CONFLICT (%s) ", names(t.key, ""))
		var set []string
		for _, c := range t.cols {
			if !slices.Contains(t.key, c) {
				set = append(set, fmt.Sprintf("%s = EXCLUDED.%s", quoteIdent(c.name), quoteIdent(c.name)))
			}
		}
		if len(set) == 0 {
			sb.WriteString("DO NOTHING")
		} else {
			sb.WriteString("DO UPDATE SET " + strings.Join(set, ", "))
		}
		if _, err := conn.Exec(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("write %d rows into %s: %w", n, t.name, err)
		}
		rows = rows[n:]
	}
	return nil
}

type pgxExec interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// scanText reads rows of text values.
func scanText(rows pgx.Rows, ncols int) ([][]*string, int64, error) {
	var out [][]*string
	var bytes int64
	for rows.Next() {
		r := make([]*string, ncols)
		dest := make([]any, ncols)
		for i := range r {
			dest[i] = &r[i]
		}
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return nil, 0, err
		}
		for _, v := range r {
			if v != nil {
				bytes += int64(len(*v))
			}
		}
		out = append(out, r)
	}
	return out, bytes, rows.Err()
}

// copy empties the target of the tenant and copies every table in
// key-ordered batches.
func (m *mover) copy(ctx context.Context) error {
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	dst, err := m.conn(ctx, m.target)
	if err != nil {
		return err
	}
	// Marked before its first row: rows of the tenant at the target are
	// this move's from here on.
	if _, err := dst.Exec(ctx, copiesDDL); err != nil {
		return fmt.Errorf("mark the copy at the target: %w", err)
	}
	if _, err := dst.Exec(ctx, `INSERT INTO noisysim_directory.copies (tenant_id, source) VALUES ($1, $2)
		ON CONFLICT (tenant_id) DO UPDATE SET source = EXCLUDED.source, started_at = now()`, m.tenant, m.source); err != nil {
		return fmt.Errorf("mark the copy at the target: %w", err)
	}
	if _, err := m.deleteTenant(ctx, dst); err != nil {
		return fmt.Errorf("empty the target: %w", err)
	}
	t0 := time.Now()
	for _, t := range m.tables {
		var after []*string
		for {
			var sb strings.Builder
			fmt.Fprintf(&sb, "SELECT %s FROM %s t WHERE %s", t.textCols("t."), t.ident, t.tenantCond("t.", 1))
			args := []any{m.tenant}
			if after != nil {
				ph := make([]string, len(t.rest))
				for i, c := range t.rest {
					args = append(args, after[i])
					ph[i] = fmt.Sprintf("$%d::text::%s", len(args), c.typ)
				}
				fmt.Fprintf(&sb, " AND (%s) > (%s)", names(t.rest, "t."), strings.Join(ph, ", "))
			}
			if len(t.rest) > 0 {
				fmt.Fprintf(&sb, " ORDER BY %s", names(t.rest, "t."))
			}
			fmt.Fprintf(&sb, " LIMIT %d", m.cfg.BatchRows)
			rows, err := src.Query(ctx, sb.String(), args...)
			if err != nil {
				return fmt.Errorf("read batch of %s: %w", t.name, err)
			}
			batch, bytes, err := scanText(rows, len(t.cols))
			if err != nil {
				return fmt.Errorf("read batch of %s: %w", t.name, err)
			}
			if err := t.upsert(ctx, dst, batch); err != nil {
				return err
			}
			m.fig.CopiedRows += int64(len(batch))
			m.fig.CopiedBytes += bytes
			if len(batch) < m.cfg.BatchRows || len(t.rest) == 0 {
				break
			}
			last := batch[len(batch)-1]
			after = make([]*string, len(t.rest))
			for i, c := range t.rest {
				after[i] = last[slices.Index(t.cols, c)]
			}
		}
	}
	m.fig.CopySeconds = time.Since(t0).Seconds()
	if m.fig.CopySeconds > 0 {
		m.fig.MBPerSecond = float64(m.fig.CopiedBytes) / (1 << 20) / m.fig.CopySeconds
		m.fig.RowsPerSecond = float64(m.fig.CopiedRows) / m.fig.CopySeconds
	}
	return nil
}

// copiesDDL creates the copies table of nodeDDL on a node installed
// before it existed.
const copiesDDL = `CREATE TABLE IF NOT EXISTS noisysim_directory.copies (
	tenant_id  text PRIMARY KEY,
	source     text NOT NULL,
	started_at timestamptz NOT NULL DEFAULT now()
)`

// checkTarget refuses a target that holds rows of the tenant unless an
// earlier attempt marked them as its copy or Overwrite is set. It writes
// nothing.
func (m *mover) checkTarget(ctx context.Context) error {
	if m.cfg.Overwrite {
		return nil
	}
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	dst, err := m.conn(ctx, m.target)
	if err != nil {
		return err
	}
	var marked bool
	if err := dst.QueryRow(ctx, "SELECT to_regclass('noisysim_directory.copies') IS NOT NULL").Scan(&marked); err != nil {
		return fmt.Errorf("check the target: %w", err)
	}
	if marked {
		if err := dst.QueryRow(ctx, "SELECT EXISTS (SELECT FROM noisysim_directory.copies WHERE tenant_id = $1)", m.tenant).Scan(&marked); err != nil {
			return fmt.Errorf("check the target: %w", err)
		}
	}
	if marked {
		return nil
	}
	rows := map[string]int64{}
	for _, t := range m.tables {
		var n int64
		if err := dst.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s t WHERE %s", t.ident, t.tenantCond("t.", 1)), m.tenant).Scan(&n); err != nil {
			return fmt.Errorf("check the target: count %s: %w", t.name, err)
		}
		if n > 0 {
			rows[t.name] = n
		}
	}
	if len(rows) > 0 {
		return &TargetNotEmptyError{Tenant: m.tenant, Target: m.target, Rows: rows}
	}
	return nil
}

// deleteTenant deletes the tenant's rows on c in batches and returns how
// many.
func (m *mover) deleteTenant(ctx context.Context, c *pgx.Conn) (int64, error) {
	var total int64
	for _, t := range slices.Backward(m.tables) {
		for {
			tag, err := c.Exec(ctx, fmt.Sprintf(`DELETE FROM %s WHERE ctid = ANY (ARRAY(
				SELECT t.ctid FROM %s t WHERE %s LIMIT %d))`, t.ident, t.ident, t.tenantCond("t.", 1), m.cfg.BatchRows), m.tenant)
			if err != nil {
				return total, fmt.Errorf("delete from %s: %w", t.name, err)
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < int64(m.cfg.BatchRows) {
				break
			}
		}
	}
	return total, nil
}

// applyChanges applies up to limit captured writes (all when limit <= 0)
// at the target and returns how many.
func (m *mover) applyChanges(ctx context.Context, limit int) (int64, error) {
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return 0, err
	}
	dst, err := m.conn(ctx, m.target)
	if err != nil {
		return 0, err
	}
	var total int64
	for {
		n := m.cfg.BatchRows
		if limit > 0 {
			n = min(n, limit-int(total))
		}
		if n <= 0 {
			return total, nil
		}
		rows, err := src.Query(ctx, `SELECT seq, tbl, key::text FROM noisysim_directory.changes
			WHERE tenant_id = $1 ORDER BY seq LIMIT $2`, m.tenant, n)
		if err != nil {
			return total, fmt.Errorf("read captured changes: %w", err)
		}
		var seqs []int64
		keys := map[uint32][]string{}
		seen := map[string]bool{}
		var seq int64
		var oid uint32
		var key string
		if _, err := pgx.ForEachRow(rows, []any{&seq, &oid, &key}, func() error {
			seqs = append(seqs, seq)
			if k := fmt.Sprint(oid, key); !seen[k] {
				seen[k] = true
				keys[oid] = append(keys[oid], key)
			}
			return nil
		}); err != nil {
			return total, fmt.Errorf("read captured changes: %w", err)
		}
		if len(seqs) == 0 {
			return total, nil
		}
		for _, t := range m.tables {
			ks := keys[t.oid]
			if len(ks) == 0 {
				continue
			}
			arr := "[" + strings.Join(ks, ",") + "]"
			rows, err := src.Query(ctx, fmt.Sprintf("SELECT %s FROM %s t WHERE %s", t.textCols("t."), t.ident, t.keyIn(1)), arr)
			if err != nil {
				return total, fmt.Errorf("read changed rows of %s: %w", t.name, err)
			}
			cur, _, err := scanText(rows, len(t.cols))
			if err != nil {
				return total, fmt.Errorf("read changed rows of %s: %w", t.name, err)
			}
			err = pgx.BeginFunc(ctx, dst, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, fmt.Sprintf("DELETE FROM %s t WHERE %s", t.ident, t.keyIn(1)), arr); err != nil {
					return err
				}
				return t.upsert(ctx, tx, cur)
			})
			if err != nil {
				return total, fmt.Errorf("apply changes to %s: %w", t.name, err)
			}
		}
		if _, err := src.Exec(ctx, "DELETE FROM noisysim_directory.changes WHERE seq = ANY ($1)", seqs); err != nil {
			return total, fmt.Errorf("consume captured changes: %w", err)
		}
		total += int64(len(seqs))
		if len(seqs) < n {
			return total, nil
		}
	}
}

func (m *mover) unfence(ctx context.Context) error {
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	_, err = src.Exec(ctx, `INSERT INTO noisysim_directory.capture (tenant_id, fenced) VALUES ($1, false)
		ON CONFLICT (tenant_id) DO UPDATE SET fenced = false`, m.tenant)
	return err
}

// catchUp applies captured writes in rounds until a round finds fewer
// than Backlog.
func (m *mover) catchUp(ctx context.Context) error {
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	// A move interrupted inside its pause left the source fenced.
	if err := m.unfence(ctx); err != nil {
		return fmt.Errorf("unfence source: %w", err)
	}
	for m.fig.CatchUpRounds < m.cfg.CatchUpRounds {
		n, err := m.applyChanges(ctx, 0)
		m.fig.Changes += n
		m.fig.CatchUpRounds++
		if err != nil {
			return err
		}
		if n < int64(m.cfg.Backlog) {
			break
		}
	}
	return nil
}

// errPauseTooLong undoes one pause attempt.
var errPauseTooLong = errors.New("pause too long")

func (m *mover) pauseAndSwitch(ctx context.Context) error {
	if err := m.describeTables(ctx, true); err != nil {
		return err
	}
	for {
		m.fig.PauseAttempts++
		err := m.pauseOnce(ctx)
		if !errors.Is(err, errPauseTooLong) {
			return err
		}
		if m.fig.PauseAttempts >= m.cfg.PauseAttempts {
			return fmt.Errorf("%d pauses longer than %s: %w", m.fig.PauseAttempts, m.cfg.MaxPause, ErrPauseExceeded)
		}
		m.log.Info("pause too long; catching up again", "tenant", m.tenant, "attempt", m.fig.PauseAttempts)
		if _, err := m.applyChanges(ctx, 0); err != nil {
			return err
		}
	}
}

// pauseOnce runs one write pause: it ends in the switch, or undoes itself
// (returning errPauseTooLong or the cause) with the source unfenced,
// unless the switch's outcome is unknown: then the source stays fenced
// (writes fail, none is lost) and the next run settles it.
func (m *mover) pauseOnce(ctx context.Context) (err error) {
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var resumes []func()
	resume := func() {
		for _, r := range resumes {
			r()
		}
		resumes = nil
	}
	defer resume()
	for _, g := range m.cfg.Gates {
		r, err := g.Hold(ctx, m.tenant)
		if err != nil {
			return fmt.Errorf("hold writers: %w", err)
		}
		resumes = append(resumes, r)
	}
	fenced := false
	undo := func(cause error) error {
		if fenced {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if uerr := m.unfence(uctx); uerr != nil {
				return errors.Join(cause, fmt.Errorf("unfence source (it stays fenced until the move runs again): %w", uerr))
			}
		}
		return cause
	}

	// Fencing waits for the write transactions in flight (they hold a
	// FOR SHARE lock on the capture row), at most MaxPause.
	if _, err := src.Exec(ctx, fmt.Sprintf("SET lock_timeout = %d", max(1, m.cfg.MaxPause.Milliseconds()))); err != nil {
		return err
	}
	_, err = src.Exec(ctx, "UPDATE noisysim_directory.capture SET fenced = true WHERE tenant_id = $1", m.tenant)
	if _, rerr := src.Exec(context.Background(), "RESET lock_timeout"); rerr != nil && err == nil {
		err = rerr
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "55P03" {
		return errPauseTooLong
	}
	if err != nil {
		return fmt.Errorf("fence source: %w", err)
	}
	fenced = true
	if _, err := m.applyChanges(ctx, 0); err != nil {
		return undo(err)
	}
	diffs, err := m.validate(ctx)
	if err != nil {
		return undo(err)
	}
	m.fig.Tables = diffs
	var bad []TableDiff
	for _, d := range diffs {
		if d.SourceRows != d.TargetRows || d.SourceSum != d.TargetSum {
			bad = append(bad, d)
		}
	}
	if len(bad) > 0 {
		return undo(&ValidationError{Tenant: m.tenant, Diffs: bad})
	}
	if time.Since(t0) > m.cfg.MaxPause {
		return undo(errPauseTooLong)
	}
	if err := m.switchCatalog(ctx); err != nil {
		// The commit may have happened: read the catalog back.
		node, serr := m.settle()
		switch {
		case serr != nil:
			return fmt.Errorf("switch catalog: %w (outcome unknown: the source stays fenced until the move runs again)", err)
		case node == m.target:
			m.log.Info("switch committed despite an error", "tenant", m.tenant, "err", err)
		default:
			return undo(fmt.Errorf("switch catalog: %w", err))
		}
	}
	resume()
	m.fig.PauseSeconds = time.Since(t0).Seconds()
	return nil
}

func (m *mover) settle() (string, error) {
	var last error
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		node, _, _, err := m.cfg.Catalog.Lookup(ctx, m.tenant)
		cancel()
		if err == nil {
			return node, nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return "", last
}

// switchCatalog points the tenant at the target and records the step, in
// one transaction.
func (m *mover) switchCatalog(ctx context.Context) error {
	return pgx.BeginFunc(ctx, m.cfg.Catalog.pool, func(tx pgx.Tx) error {
		if err := bump(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE noisysim_directory.tenants SET node = $2, state = 'active',
			version = (SELECT version FROM noisysim_directory.meta), updated_at = now() WHERE tenant_id = $1`,
			m.tenant, m.target); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE noisysim_directory.moves SET step = 'switch', updated_at = now() WHERE tenant_id = $1`, m.tenant)
		return err
	})
}

// validate computes each table's row count and checksum for the tenant on
// both nodes, concurrently.
func (m *mover) validate(ctx context.Context) ([]TableDiff, error) {
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return nil, err
	}
	dst, err := m.conn(ctx, m.target)
	if err != nil {
		return nil, err
	}
	out := make([]TableDiff, len(m.tables))
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		for i, t := range m.tables {
			out[i].Table = t.name
			var err error
			if out[i].SourceRows, out[i].SourceSum, err = TableSum(gctx, src, t.name, m.cfg.TenantColumn, m.tenant); err != nil {
				return err
			}
		}
		return nil
	})
	g.Go(func() error {
		for i, t := range m.tables {
			var err error
			if out[i].TargetRows, out[i].TargetSum, err = TableSum(gctx, dst, t.name, m.cfg.TenantColumn, m.tenant); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("validate: %w", err)
	}
	return out, nil
}

// ChecksumSQL is the order-independent checksum of a set of rows: the sum,
// as numeric, of the first 64 bits of md5 of each row's text. Row text
// depends on session settings (TimeZone, DateStyle, extra_float_digits):
// compare sums taken with the same settings.
const ChecksumSQL = `coalesce(sum(('x' || substr(md5(t::text), 1, 16))::bit(64)::bigint::numeric), 0)::text`

// TableSum returns the number of tenant's rows in table on conn and their
// checksum (ChecksumSQL). An empty tenant means every row of the table.
func TableSum(ctx context.Context, conn *pgx.Conn, table, tenantColumn, tenant string) (rows int64, sum string, err error) {
	var tident string
	if err := conn.QueryRow(ctx, "SELECT $1::regclass::text", table).Scan(&tident); err != nil {
		return 0, "", fmt.Errorf("checksum %s: %w", table, err)
	}
	q := fmt.Sprintf("SELECT count(*), %s FROM %s t", ChecksumSQL, tident)
	var args []any
	if tenant != "" {
		var typ string
		if err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = $1::regclass AND attname = $2 AND NOT attisdropped`, table, tenantColumn).Scan(&typ); err != nil {
			return 0, "", fmt.Errorf("checksum %s: tenant column %s: %w", table, tenantColumn, err)
		}
		q += fmt.Sprintf(" WHERE t.%s = $1::text::%s", quoteIdent(tenantColumn), typ)
		args = append(args, tenant)
	}
	if err := conn.QueryRow(ctx, q, args...).Scan(&rows, &sum); err != nil {
		return 0, "", fmt.Errorf("checksum %s: %w", table, err)
	}
	return rows, sum, nil
}

// CheckTenant reports whether tenant is the text form of a value of
// column in every one of tables on conn, as the catalog and Move need it:
// a value the column's type accepts and prints back unchanged (for a
// bigint column "7", never "abc", "1.5", " 7" or "007"). It reads and
// writes nothing else. Errors: a *TenantError (ErrInvalidTenant) for a
// tenant id the column cannot hold, ErrInvalidConfig (wrapped) for a table
// without the column, and database errors.
func CheckTenant(ctx context.Context, conn *pgx.Conn, tables []string, column, tenant string) error {
	for _, name := range tables {
		var typ string
		err := conn.QueryRow(ctx, `SELECT format_type(atttypid, atttypmod) FROM pg_attribute
			WHERE attrelid = $1::regclass AND attname = $2 AND attnum > 0 AND NOT attisdropped`, name, column).Scan(&typ)
		if isNoRows(err) {
			return fmt.Errorf("check tenant: table %s has no column %s: %w", name, column, ErrInvalidConfig)
		}
		if err != nil {
			return fmt.Errorf("check tenant: table %s: %w", name, err)
		}
		te := &TenantError{Tenant: tenant, Table: name, Column: column, Type: typ}
		if tenant == "" {
			return te
		}
		var back string
		err = conn.QueryRow(ctx, fmt.Sprintf("SELECT $1::text::%s::text", typ), tenant).Scan(&back)
		var pg *pgconn.PgError
		if errors.As(err, &pg) && strings.HasPrefix(pg.Code, "22") { // data exception
			te.Err = err
			return te
		}
		if err != nil {
			return fmt.Errorf("check tenant: table %s: %w", name, err)
		}
		if back != tenant {
			te.Canonical = back
			return te
		}
	}
	return nil
}

func (m *mover) deleteSource(ctx context.Context) error {
	if err := m.describeTables(ctx, false); err != nil {
		return err
	}
	src, err := m.conn(ctx, m.source)
	if err != nil {
		return err
	}
	// The fence stays as a tombstone; the bypass lets the mover delete.
	n, err := m.deleteTenant(ctx, src)
	m.fig.DeletedRows += n
	if err != nil {
		return err
	}
	if _, err := src.Exec(ctx, "DELETE FROM noisysim_directory.changes WHERE tenant_id = $1", m.tenant); err != nil {
		return fmt.Errorf("drop captured changes: %w", err)
	}
	return nil
}
