package pools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// Class is a workload class: each class has its own pool (or shares one in
// the naive configuration), role and limiter.
type Class string

// Workload classes.
const (
	// Interactive is short, latency-sensitive work (OLTP requests).
	Interactive Class = "interactive"
	// Heavy is long analytical or batch work, sent to the replica when there
	// is one.
	Heavy Class = "heavy"
)

// DefaultResetTimeout bounds the reset of a connection on return.
const DefaultResetTimeout = 5 * time.Second

// AppNamePrefix starts the startup application_name of every pool's
// connections: "noisysim-<pool name>". A connection shows it while idle.
const AppNamePrefix = "noisysim-"

// PoolConfig configures one connection pool.
type PoolConfig struct {
	// Name identifies the pool in ClassConfig.Pool, Stat and logs.
	Name string
	// DSN is a libpq URL or key=value string; its user is the role the
	// pool's connections log in as. A heavy pool's DSN points at the
	// replica when the topology has one.
	DSN string
	// Size is the pool's maximum number of connections; it must be > 0.
	// Connections are opened on demand.
	Size int32
	// AcquireTimeout bounds the wait for a free connection (and tagging it).
	// 0 means wait as long as the caller's context allows.
	AcquireTimeout time.Duration
	// AppName is the application_name connections log in with and return
	// to after every borrow. Empty means AppNamePrefix + Name. It overrides
	// any application_name in DSN.
	AppName string
	// Node is the shard node this pool reaches, for a Stack with a Router:
	// a class's call goes to the pool named ClassConfig.Pool whose Node is
	// the node the Router returns for the tenant. Pools then share a Name
	// across nodes. Without a Router it must be empty.
	Node string
}

// ClassConfig binds a workload class to its pool and limiter.
type ClassConfig struct {
	// Pool is the Name of one of Config.Pools. Classes may share a pool.
	Pool string
	// Limiter caps each tenant's concurrent calls in this class; nil means
	// no limit. The Stack does not close it.
	Limiter isolation.Limiter
}

// Config configures a Stack.
type Config struct {
	Pools   []PoolConfig
	Classes map[Class]ClassConfig
	// Ledger configures the DB-time ledger's share alert.
	Ledger LedgerConfig
	// SharedLedger, when set, is the ledger the Stack records into instead
	// of a new one (Ledger is then ignored): several stacks, e.g. the
	// instances of one application, accounting in one place.
	SharedLedger *Ledger
	// ResetTimeout bounds the reset run on every returned connection; a
	// connection whose reset fails or times out is closed. 0 means
	// DefaultResetTimeout.
	ResetTimeout time.Duration
	// Logger receives debug records for destroyed connections and an info
	// record per pool at start. nil means silent.
	Logger *slog.Logger
	// Router, when set, resolves each call's tenant to a node (directory
	// sharding): the call runs on that node's pool of its class. nil means
	// one pool per name, as without sharding.
	Router Router
	// OnWork, when set, is called with each call's work on a connection
	// right after its DB time is recorded in the ledger (also for a call
	// that failed or panicked; not for one whose statement never ran),
	// synchronously in the calling goroutine: keep it short. It tells
	// when the work began, which the ledger does not keep (e.g. to spread
	// a long call's DB time over the seconds it ran).
	OnWork func(Work)
}

// Work is one call's work on a connection, as the ledger recorded it.
type Work struct {
	Tenant string
	Class  Class
	// Pool and Node are the pool that served the call (Result.Pool,
	// Result.Node).
	Pool, Node string
	// Began is when the work on the connection began; DBTime how long it
	// took (Result.DBTime).
	Began  time.Time
	DBTime time.Duration
}

// Result describes one completed call.
type Result struct {
	// Rows is the number of rows returned, or affected for INSERT, UPDATE
	// and DELETE (Query only).
	Rows int64
	// DBTime is the wall time of the work on the connection, as the client
	// saw it and as recorded in the ledger.
	DBTime time.Duration
	// Wait is the time from the call to a tagged connection: limiter wait,
	// pool acquire and tagging. Query tags in the same round trip as its
	// statement: its Wait ends at the acquire, and the tag is in DBTime.
	Wait time.Duration
	// Pool is the name of the pool that served the call.
	Pool string
	// Node is the node the Router chose; empty without a Router.
	Node string
}

// Placement says where a class's work runs.
type Placement struct {
	Class Class
	Pool  string
	// Addr is the server's host:port from the pool's DSN.
	Addr string
	// Standby is true when the server was in recovery (a hot standby) when
	// the Stack started.
	Standby bool
}

// String returns e.g. "heavy → pool heavy at 127.0.0.1:5433 (standby)".
func (p Placement) String() string {
	where := "primary"
	if p.Standby {
		where = "standby"
	}
	return fmt.Sprintf("%s → pool %s at %s (%s)", p.Class, p.Pool, p.Addr, where)
}

// Stack is the isolation stack: the only path from a tenant's call to a
// database connection. Each call goes limiter → pool acquire (bounded by the
// pool's AcquireTimeout) → tag (application_name = "t:<tenant>") → run →
// record DB time in the ledger → reset the session → release the
// connection → release the limiter slot. Slots and connections come back on
// error, context cancellation and panic.
//
// A Stack is safe for concurrent use. Close it when done.
type Stack struct {
	pools        []*pool
	classes      map[Class]*class
	router       Router
	ledger       *Ledger
	log          *slog.Logger
	resetTimeout time.Duration
	onWork       func(Work)

	errs sync.Map // errKey → *errCounts

	closed    atomic.Bool
	closeOnce sync.Once
	closing   sync.WaitGroup // destroyed connections still closing

	// tag sets the tenant tag on a borrowed connection and reset restores
	// a returned one (WithConn, Tx); tests replace them to make these steps
	// fail.
	tag   func(ctx context.Context, c *pgx.Conn, tenant string) error
	reset func(ctx context.Context, c *pgx.Conn) error
	// queryTagSQL tags Query's statement in the same round trip and
	// queryReset is the reset that follows it there; tests replace them
	// with failing statements.
	queryTagSQL string
	queryReset  []string
}

type pool struct {
	cfg     PoolConfig
	pgx     *pgxpool.Pool
	addr    string
	standby bool

	borrowed    atomic.Int64
	destroyed   atomic.Int64
	closing     atomic.Int64
	tagFailures atomic.Int64
	dbTime      atomic.Int64 // ns, as the ledger counts it
}

type class struct {
	name    Class
	pool    *pool // without a Router; with one, the first node's pool
	byNode  map[string]*pool
	limiter isolation.Limiter
}

type errKey struct {
	tenant string
	class  Class
}

// errCounts holds one counter per entry of errorClasses.
type errCounts [numErrorClasses]atomic.Int64

// errorClassIndex maps each ErrorClass to its counter.
var errorClassIndex = func() map[ErrorClass]int {
	m := map[ErrorClass]int{}
	for i, ec := range errorClasses {
		m[ec] = i
	}
	return m
}()

// New validates cfg, opens the pools and probes each with one connection
// (to learn whether its server is a standby). It returns an error wrapping
// ErrInvalidConfig for a bad config, or the probe's error; on error nothing
// is left open.
func New(ctx context.Context, cfg Config) (*Stack, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ledger := cfg.SharedLedger
	if ledger == nil {
		var err error
		if ledger, err = NewLedger(cfg.Ledger); err != nil {
			return nil, fmt.Errorf("new isolation stack: %w", err)
		}
	}
	s := &Stack{
		classes:      map[Class]*class{},
		ledger:       ledger,
		log:          cfg.Logger,
		resetTimeout: cmp.Or(cfg.ResetTimeout, DefaultResetTimeout),
		router:       cfg.Router,
		onWork:       cfg.OnWork,
		tag:          setTag,
		reset:        resetSession,
		queryTagSQL:  tagLocalSQL,
		queryReset:   queryReset,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	byName := map[string]*pool{}
	byNode := map[string]map[string]*pool{}
	for _, pc := range cfg.Pools {
		p, err := openPool(ctx, pc)
		if err != nil {
			s.closePools()
			return nil, err
		}
		s.pools = append(s.pools, p)
		if _, ok := byName[pc.Name]; !ok {
			byName[pc.Name] = p
		}
		if byNode[pc.Name] == nil {
			byNode[pc.Name] = map[string]*pool{}
		}
		byNode[pc.Name][pc.Node] = p
		s.log.Info("pool open", "pool", pc.Name, "node", pc.Node, "addr", p.addr, "standby", p.standby, "size", pc.Size)
	}
	for name, cc := range cfg.Classes {
		s.classes[name] = &class{name: name, pool: byName[cc.Pool], byNode: byNode[cc.Pool], limiter: cc.Limiter}
	}
	return s, nil
}

func (cfg Config) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("new isolation stack: %s: %w", fmt.Sprintf(format, args...), ErrInvalidConfig)
	}
	if len(cfg.Pools) == 0 {
		return bad("no pools")
	}
	if len(cfg.Classes) == 0 {
		return bad("no classes")
	}
	names := map[string]bool{}
	seen := map[[2]string]bool{}
	for _, p := range cfg.Pools {
		switch {
		case p.Name == "":
			return bad("pool without a name")
		case cfg.Router == nil && p.Node != "":
			return bad("pool %q: node %q without a Router", p.Name, p.Node)
		case cfg.Router != nil && p.Node == "":
			return bad("pool %q: no node, but the Stack has a Router", p.Name)
		case seen[[2]string{p.Name, p.Node}] && p.Node != "":
			return bad("pool %q defined twice for node %q", p.Name, p.Node)
		case seen[[2]string{p.Name, p.Node}]:
			return bad("pool %q defined twice", p.Name)
		case p.Size <= 0:
			return bad("pool %q: size %d, want > 0", p.Name, p.Size)
		case p.AcquireTimeout < 0:
			return bad("pool %q: negative acquire timeout", p.Name)
		}
		names[p.Name] = true
		seen[[2]string{p.Name, p.Node}] = true
	}
	for c, cc := range cfg.Classes {
		if c == "" {
			return bad("class without a name")
		}
		if !names[cc.Pool] {
			return bad("class %q: unknown pool %q", c, cc.Pool)
		}
	}
	if cfg.ResetTimeout < 0 {
		return bad("negative reset timeout")
	}
	return nil
}

func openPool(ctx context.Context, pc PoolConfig) (*pool, error) {
	config, err := pgxpool.ParseConfig(pc.DSN)
	if err != nil {
		// pgx redacts the password in the DSN it quotes.
		return nil, fmt.Errorf("parse DSN of pool %s: %w: %w", pc.Name, ErrInvalidConfig, err)
	}
	config.MaxConns = pc.Size
	config.MinConns = 0
	config.ConnConfig.RuntimeParams["application_name"] = cmp.Or(pc.AppName, AppNamePrefix+pc.Name)
	p := &pool{
		cfg:  pc,
		addr: net.JoinHostPort(config.ConnConfig.Host, strconv.Itoa(int(config.ConnConfig.Port))),
	}
	p.cfg.AppName = config.ConnConfig.RuntimeParams["application_name"]
	p.pgx, err = pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return nil, fmt.Errorf("open pool %s: %w", pc.Name, err)
	}
	if err := p.pgx.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&p.standby); err != nil {
		p.pgx.Close()
		return nil, fmt.Errorf("probe pool %s at %s: %w", pc.Name, p.addr, err)
	}
	return p, nil
}

// Ledger returns the stack's DB-time ledger.
func (s *Stack) Ledger() *Ledger { return s.ledger }

// Placement returns where class's work runs, and false for an unknown class.
func (s *Stack) Placement(c Class) (Placement, bool) {
	cl, ok := s.classes[c]
	if !ok {
		return Placement{}, false
	}
	return Placement{Class: c, Pool: cl.pool.cfg.Name, Addr: cl.pool.addr, Standby: cl.pool.standby}, true
}

// Query runs one statement for tenant in class and drains its rows. sql is a
// single statement; args are bound as parameters. The returned Result is
// filled as far as the call got, also on error.
//
// Query costs one round trip: the tag, the statement and the reset go in
// one flight and one implicit transaction ("SELECT set_config(
// 'application_name', 't:<tenant>', true)", the statement, then the reset's
// commands, each prepared on the connection, one Sync). pg_stat_activity
// shows the tenant while the statement runs; the reset runs right after it
// on the server, and the transaction's end drops the tag, so the reply
// arrives from a connection that is idle under its pool's name with its
// session state reset. If the tag fails the statement does not run. If the
// statement fails, the transaction is rolled back (the tag and any setting
// it changed with it) and the full reset runs on its own before the
// connection goes back: advisory locks and sequence state outlive a
// rollback. If a command of the reset fails, the statement is rolled back
// with it and the call returns that error. DBTime includes the reset.
//
// The first call of a statement on a connection prepares it (and the
// reset's commands), tagged and reset as WithConn does (three round trips).
// A statement PostgreSQL refuses to run inside a transaction block (SQLSTATE
// 25001, e.g. VACUUM) is run again on its own, tagged and reset as WithConn
// does.
//
// Errors: ErrUnknownClass, ErrClosed, the limiter's rejection (errors.Is
// limiter.ErrLimited), *AcquireTimeoutError, *TagError, the caller's
// context error, or the statement's error (*pgconn.PgError for a server
// error), each wrapped; Classify names them.
func (s *Stack) Query(ctx context.Context, c Class, tenant, sql string, args ...any) (Result, error) {
	var n int64
	drain := func(rows pgx.Rows) error {
		for rows.Next() {
		}
		rows.Close()
		n = rows.CommandTag().RowsAffected()
		return rows.Err()
	}
	if !batchable(args) {
		res, err := s.run(ctx, c, tenant, false, func(ctx context.Context, conn *pgx.Conn) error {
			rows, err := conn.Query(ctx, sql, args...)
			if err != nil {
				return err
			}
			return drain(rows)
		})
		res.Rows = n
		return res, err
	}
	res, err := s.run(ctx, c, tenant, true, func(ctx context.Context, conn *pgx.Conn) error {
		// alone tags conn for the session, runs the statement on its own
		// and has it reset before the connection goes back, as WithConn.
		alone := func(prepare bool) error {
			if err := s.tag(ctx, conn, tenant); err != nil {
				return &batchTagError{err: err}
			}
			if prepare {
				if _, err := conn.Prepare(ctx, sql, sql); err != nil {
					return &syncReset{err: err}
				}
				markPrepared(conn, sql)
				if err := s.prepareReset(ctx, conn); err != nil {
					return &syncReset{err: err}
				}
			}
			rows, err := conn.Query(ctx, sql, args...)
			if err != nil {
				return &syncReset{err: err}
			}
			return &syncReset{err: drain(rows)}
		}
		// The batch must not prepare the statement itself: it would do so
		// in a round trip of its own, before the tag, and a Parse waiting
		// on a lock would show untagged. The first call on a connection
		// prepares it, tagged; later ones find it prepared.
		if !isPrepared(conn, sql) || !s.resetPrepared(conn) {
			return alone(numPrepared(conn) < maxPrepared)
		}
		// One flight, one Sync: Bind and Execute of each prepared
		// statement, straight on the wire (pgx's own batch costs more in
		// the client than the server takes for the whole reset).
		prepared := func(q string) *pgconn.StatementDescription {
			sd, _ := conn.Prepare(ctx, q, q) // prepared on conn: no round trip
			return sd
		}
		var eqb pgx.ExtendedQueryBuilder
		stmt := prepared(sql)
		if err := eqb.Build(conn.TypeMap(), stmt, args); err != nil {
			return &syncReset{err: err} // nothing was sent
		}
		b := &pgconn.Batch{}
		b.ExecStatement(prepared(s.queryTagSQL), [][]byte{[]byte(TagPrefix + tenant)}, nil, nil)
		b.ExecStatement(stmt, eqb.ParamValues, eqb.ParamFormats, nil)
		for _, r := range s.queryReset {
			b.ExecStatement(prepared(r), nil, nil, nil)
		}
		mrr := conn.PgConn().ExecBatch(ctx, b)
		done, err := 0, error(nil) // done: the commands that completed
		for mrr.NextResult() {
			ct, rerr := mrr.ResultReader().Close()
			if rerr != nil {
				err = rerr
				break
			}
			if done == 1 {
				n = ct.RowsAffected()
			}
			done++
		}
		if cerr := mrr.Close(); err == nil {
			err = cerr
		}
		switch {
		case err == nil:
			return nil
		case done == 0:
			return &batchTagError{err: err} // the statement did not run
		case done == 1:
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstateActiveSQLTransaction {
				return alone(false) // not in a transaction block: on its own
			}
			return &syncReset{err: err}
		case done < 2+len(s.queryReset):
			return &syncReset{err: fmt.Errorf("reset after the statement (rolled back with it): %w", err)}
		default:
			return &syncReset{err: fmt.Errorf("commit: %w", err)}
		}
	})
	res.Rows = n
	return res, err
}

// maxPrepared bounds the statements Query prepares on one connection;
// beyond it, new statements run as WithConn runs them.
const maxPrepared = 256

// preparedKey holds, in a connection's CustomData, the set of statements
// Query prepared on it (pgx keeps them until deallocated; the reset does not
// deallocate).
const preparedKey = "noisysim.prepared"

func preparedSet(c *pgx.Conn) map[string]struct{} {
	cd := c.PgConn().CustomData()
	m, _ := cd[preparedKey].(map[string]struct{})
	if m == nil {
		m = map[string]struct{}{}
		cd[preparedKey] = m
	}
	return m
}

func isPrepared(c *pgx.Conn, sql string) bool {
	_, ok := preparedSet(c)[sql]
	return ok
}

func markPrepared(c *pgx.Conn, sql string) { preparedSet(c)[sql] = struct{}{} }
func numPrepared(c *pgx.Conn) int          { return len(preparedSet(c)) }

// sqlstateActiveSQLTransaction is PostgreSQL's "cannot run inside a
// transaction block" (and "within a pipeline").
const sqlstateActiveSQLTransaction = "25001"

// batchable reports whether args can be queued in a pgx.Batch as they are:
// no argument is one of pgx's per-query options.
func batchable(args []any) bool {
	for _, a := range args {
		switch a.(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
			return false
		}
	}
	return true
}

// batchTagError is a failed tag in Query's batch: the statement did not
// run, so run may try another connection.
type batchTagError struct{ err error }

func (e *batchTagError) Error() string { return e.err.Error() }
func (e *batchTagError) Unwrap() error { return e.err }

// syncReset wraps the outcome of work that tagged the connection outside a
// transaction: run resets it before returning, as for WithConn.
type syncReset struct{ err error }

func (e *syncReset) Error() string { return fmt.Sprint(e.err) }
func (e *syncReset) Unwrap() error { return e.err }

// Tx runs fn inside one transaction for tenant in class: it begins with
// opts, commits when fn returns nil and rolls back otherwise (also on
// panic). fn must not keep tx after it returns. Errors are those of Query,
// plus fn's own error (returned as is, wrapped) and the commit's.
func (s *Stack) Tx(ctx context.Context, c Class, tenant string, opts pgx.TxOptions, fn func(ctx context.Context, tx pgx.Tx) error) (Result, error) {
	return s.run(ctx, c, tenant, false, func(ctx context.Context, conn *pgx.Conn) error {
		return pgx.BeginTxFunc(ctx, conn, opts, func(tx pgx.Tx) error { return fn(ctx, tx) })
	})
}

// WithConn runs fn on a tagged connection for tenant in class, outside any
// transaction, for work that needs the rows or several statements. fn must
// not keep conn after it returns, nor change its application_name. Session
// state fn leaves behind (SET, temporary tables, advisory locks, LISTEN,
// cursors) is reset before the connection goes back to the pool; a
// connection left inside a transaction is closed instead.
func (s *Stack) WithConn(ctx context.Context, c Class, tenant string, fn func(ctx context.Context, conn *pgx.Conn) error) (Result, error) {
	return s.run(ctx, c, tenant, false, fn)
}

// run is the one path from a call to a connection. With batched, fn tags
// the connection itself in the same round trip as its statement and resets
// it there (Query): a *batchTagError from fn means the statement did not
// run, and another connection is tried as for a failed tag; unless fn
// returns a *syncReset, no reset is run on return.
func (s *Stack) run(ctx context.Context, c Class, tenant string, batched bool, fn func(context.Context, *pgx.Conn) error) (res Result, err error) {
	cl, ok := s.classes[c]
	if !ok {
		return res, fmt.Errorf("run %q call: %w", c, ErrUnknownClass)
	}
	if s.closed.Load() {
		return res, fmt.Errorf("run %s call: %w", c, ErrClosed)
	}
	start := time.Now()
	defer func() {
		if err != nil {
			s.count(ctx, cl, tenant, err)
		}
	}()

	if cl.limiter != nil {
		release, err := cl.limiter.Acquire(ctx, tenant)
		if err != nil {
			res.Wait = time.Since(start)
			return res, fmt.Errorf("acquire %s slot: %w", c, err)
		}
		if release != nil {
			defer release()
		}
	}

	p := cl.pool
	if s.router != nil {
		node, done, err := s.router.Route(ctx, tenant)
		if err != nil {
			res.Wait = time.Since(start)
			return res, &RouteError{Tenant: tenant, Err: err}
		}
		if done != nil {
			defer done() // after the connection is back
		}
		res.Node = node
		if p = cl.byNode[node]; p == nil {
			res.Wait = time.Since(start)
			return res, &RouteError{Tenant: tenant, Node: node, Err: fmt.Errorf("no %s pool for node %q: %w", c, node, ErrUnknownNode)}
		}
	}
	res.Pool = p.cfg.Name
	if !batched {
		conn, err := s.borrow(ctx, cl, p, tenant, true)
		res.Wait = time.Since(start)
		if err != nil {
			return res, err
		}
		return s.work(ctx, c, tenant, p, conn, false, fn, res)
	}
	// The tag goes with the statement: a connection whose tag fails is
	// destroyed and another tried, at most Size+1 times in all, as borrow
	// does.
	attempts := int(p.cfg.Size) + 1
	var last error
	for range attempts {
		conn, err := s.borrow(ctx, cl, p, tenant, false)
		res.Wait = time.Since(start)
		if err != nil {
			return res, err
		}
		var tagErr *batchTagError
		res, err = s.work(ctx, c, tenant, p, conn, true, fn, res)
		if !errors.As(err, &tagErr) {
			return res, err
		}
		if ctx.Err() != nil {
			return res, fmt.Errorf("tag connection from pool %s: %w", p.cfg.Name, ctx.Err())
		}
		last = tagErr.err
	}
	return res, &TagError{Pool: p.cfg.Name, Attempts: attempts, Err: last}
}

// work runs fn on conn, records its DB time in the ledger and gives conn
// back, also on panic. With batched, a *batchTagError from fn destroys conn
// (counted as a tag failure) and is returned as is.
func (s *Stack) work(ctx context.Context, c Class, tenant string, p *pool, conn *pgxpool.Conn, batched bool, fn func(context.Context, *pgx.Conn) error, in Result) (res Result, err error) {
	res = in
	finished := false
	resetDone := batched
	began := time.Now()
	defer func() {
		// Runs on return and on panic: the ledger never depends on the
		// reset, and the connection goes back before the limiter slot.
		res.DBTime = time.Since(began)
		var tagErr *batchTagError
		if errors.As(err, &tagErr) {
			// The statement did not run: nothing for the ledger.
			p.borrowed.Add(-1)
			p.tagFailures.Add(1)
			s.destroy(p, conn, "tag failed", tagErr.err)
			return
		}
		s.ledger.Record(tenant, c, res.DBTime)
		p.dbTime.Add(int64(res.DBTime))
		if s.onWork != nil {
			s.onWork(Work{Tenant: tenant, Class: c, Pool: p.cfg.Name, Node: p.cfg.Node, Began: began, DBTime: res.DBTime})
		}
		s.giveBack(p, conn, finished, resetDone)
	}()
	err = fn(ctx, conn.Conn())
	finished = true
	var sr *syncReset
	if errors.As(err, &sr) {
		resetDone, err = false, sr.err
	}
	var tagErr *batchTagError
	if errors.As(err, &tagErr) {
		return res, err
	}
	if err != nil {
		return res, fmt.Errorf("run %s call: %w", c, err)
	}
	return res, nil
}

// borrow acquires a connection and tags it for tenant. A connection that
// cannot be tagged is destroyed and another one tried, at most Size+1 times
// in all (so a pool whose every connection is broken still gets one fresh
// attempt), never more.
// Without tag, the caller tags the connection itself.
func (s *Stack) borrow(ctx context.Context, cl *class, p *pool, tenant string, tag bool) (*pgxpool.Conn, error) {
	actx := ctx
	if p.cfg.AcquireTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, p.cfg.AcquireTimeout)
		defer cancel()
	}
	attempts := int(p.cfg.Size) + 1
	var last error
	for range attempts {
		conn, err := p.pgx.Acquire(actx)
		if err != nil {
			if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
				return nil, &AcquireTimeoutError{Class: cl.name, Pool: p.cfg.Name, Timeout: p.cfg.AcquireTimeout}
			}
			return nil, fmt.Errorf("acquire connection from pool %s: %w", p.cfg.Name, err)
		}
		if !tag {
			p.borrowed.Add(1)
			return conn, nil
		}
		if err := s.tag(actx, conn.Conn(), tenant); err != nil {
			p.tagFailures.Add(1)
			s.destroy(p, conn, "tag failed", err)
			if ctx.Err() != nil {
				return nil, fmt.Errorf("tag connection from pool %s: %w", p.cfg.Name, ctx.Err())
			}
			if errors.Is(actx.Err(), context.DeadlineExceeded) {
				return nil, &AcquireTimeoutError{Class: cl.name, Pool: p.cfg.Name, Timeout: p.cfg.AcquireTimeout}
			}
			last = err
			continue
		}
		p.borrowed.Add(1)
		return conn, nil
	}
	return nil, &TagError{Pool: p.cfg.Name, Attempts: attempts, Err: last}
}

// tagSQL sets the tag as a statement of its own, outside any transaction
// of the tenant's, so that no ROLLBACK can undo it. The tenant is a bound
// parameter: any string is safe. PostgreSQL truncates application_name to
// 63 bytes and replaces non-ASCII bytes with '?'.
const tagSQL = "SELECT set_config('application_name', $1, false)"

// tagLocalSQL is Query's tag: local to the implicit transaction it shares
// with the statement, so it ends with the statement, committed or not.
const tagLocalSQL = "SELECT set_config('application_name', $1, true)"

func setTag(ctx context.Context, c *pgx.Conn, tenant string) error {
	_, err := c.Exec(ctx, tagSQL, TagPrefix+tenant)
	return err
}

// resetCommands restore the session to its state at login: what DISCARD
// ALL does except DEALLOCATE ALL and DISCARD PLANS, so pgx's
// prepared-statement cache stays valid, and RESET ROLE. RESET ALL brings
// back the role's ALTER ROLE settings and the startup application_name
// (the pool's AppName); it comes first, so that no setting the borrower
// changed (statement_timeout, lock_timeout) applies to the rest. Each
// undoes a kind of session state no other does (TestResetEachCommandNeeded)
// but RESET ROLE: on PostgreSQL 15, SET SESSION AUTHORIZATION DEFAULT also
// brings back the role at login (TestResetRestoresLoginRole). RESET ROLE
// stays as PostgreSQL documents the way back to that role; in queryReset
// it costs nothing.
var resetCommands = []string{
	"RESET ALL", "CLOSE ALL", "SET SESSION AUTHORIZATION DEFAULT", "RESET ROLE",
	"UNLISTEN *", "SELECT pg_advisory_unlock_all()", "DISCARD TEMP", "DISCARD SEQUENCES",
}

// resetSQL is WithConn's reset: resetCommands in one simple-protocol
// query. Parsed and planned on every call, the separate commands cost less
// there than queryReset's SELECT of three functions (BenchmarkQueryReset).
var resetSQL = strings.Join(resetCommands, "; ")

func resetSession(ctx context.Context, c *pgx.Conn) error {
	_, err := c.Exec(ctx, resetSQL) // no arguments: one simple-protocol round trip
	return err
}

// giveBack resets conn and releases it to its pool, or destroys it when it
// cannot be reused: the work did not finish (panic), the connection broke,
// is still busy or inside a transaction, or the reset failed. With
// resetDone the work already reset the connection (Query, with its
// statement); otherwise the reset is run and waited for here.
func (s *Stack) giveBack(p *pool, conn *pgxpool.Conn, finished, resetDone bool) {
	p.borrowed.Add(-1)
	pc := conn.Conn()
	switch {
	case !finished:
		s.destroy(p, conn, "call panicked", nil)
		return
	case pc.IsClosed():
		s.destroy(p, conn, "connection closed", nil)
		return
	case pc.PgConn().IsBusy():
		s.destroy(p, conn, "connection busy", nil)
		return
	case pc.PgConn().TxStatus() != 'I':
		s.destroy(p, conn, "transaction left open", nil)
		return
	}
	if resetDone {
		conn.Release() // Query reset it with its statement
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.resetTimeout)
	defer cancel()
	if err := s.reset(ctx, pc); err != nil {
		s.destroy(p, conn, "reset failed", err)
		return
	}
	conn.Release()
}

// queryReset is resetCommands as Query runs them after its statement, in
// the statement's transaction, each prepared once per connection
// (prepareReset): SET SESSION AUTHORIZATION DEFAULT, RESET ROLE and the
// advisory unlock go in one SELECT. set_config with a NULL value resets a
// setting as SET ... DEFAULT and RESET do (the same call of PostgreSQL's
// set_config_option, to the value at login), so the SELECT does what the
// three commands do with one Bind and Execute instead of three, each with
// its own Describe for the two that return no rows.
var queryReset = []string{
	"RESET ALL", "CLOSE ALL",
	"SELECT set_config('session_authorization', NULL, false), set_config('role', NULL, false), pg_advisory_unlock_all()",
	"UNLISTEN *", "DISCARD TEMP", "DISCARD SEQUENCES",
}

// resetPreparedKey holds, in a connection's CustomData, the set of Query's
// tag and reset commands prepared on it (named by their text, as Query's
// statements are).
const resetPreparedKey = "noisysim.reset_prepared"

// resetPrepared reports whether Query's tag and every command of
// s.queryReset are prepared on c.
func (s *Stack) resetPrepared(c *pgx.Conn) bool {
	m, _ := c.PgConn().CustomData()[resetPreparedKey].(map[string]struct{})
	if _, ok := m[s.queryTagSQL]; !ok {
		return false
	}
	for _, r := range s.queryReset {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	return true
}

// prepareReset prepares Query's tag and the commands of s.queryReset not
// yet prepared on c.
func (s *Stack) prepareReset(ctx context.Context, c *pgx.Conn) error {
	cd := c.PgConn().CustomData()
	m, _ := cd[resetPreparedKey].(map[string]struct{})
	if m == nil {
		m = map[string]struct{}{}
		cd[resetPreparedKey] = m
	}
	for _, r := range append([]string{s.queryTagSQL}, s.queryReset...) {
		if _, ok := m[r]; ok {
			continue
		}
		if _, err := c.Prepare(ctx, r, r); err != nil {
			return fmt.Errorf("prepare reset %q: %w", r, err)
		}
		m[r] = struct{}{}
	}
	return nil
}

// closeTimeout bounds the close of a connection given up on: the wait for
// its server process to exit (pgx gives its own asynchronous close as long).
const closeTimeout = 15 * time.Second

// destroy takes conn out of service. The call goes on at once; the pool
// keeps counting the connection until its server process has exited: a
// running statement is cancelled, the session terminated, and the socket
// read until the server closes it, which PostgreSQL does only as the
// process exits. Until then the backend still counts against its role's
// CONNECTION LIMIT; freeing the pool's slot earlier (pgx closes a
// connection whose context ended mid-statement asynchronously) would let
// the pool open a replacement beside it and the server refuse that with
// 53300. After closeTimeout the slot is freed anyway.
func (s *Stack) destroy(p *pool, conn *pgxpool.Conn, why string, err error) {
	p.destroyed.Add(1)
	p.closing.Add(1)
	s.closing.Add(1)
	s.log.Debug("connection destroyed", "pool", p.cfg.Name, "reason", why, "err", err)
	go func() {
		defer s.closing.Done()
		defer p.closing.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		pc := conn.Conn()
		if !pc.IsClosed() {
			terminate(ctx, pc.PgConn())
			_ = pc.Close(ctx)
		}
		select {
		case <-pc.PgConn().CleanupDone(): // pgx's own close, if it had one under way
		case <-ctx.Done():
		}
		conn.Hijack() // frees the pool's slot
	}()
}

// terminate cancels pc's running statement, if any, ends its session and
// reads the socket until the server closes it (its process has exited) or
// ctx ends. pc must be open; close it afterwards.
func terminate(ctx context.Context, pc *pgconn.PgConn) {
	if pc.IsBusy() {
		_ = pc.CancelRequest(ctx)
	}
	nc := pc.Conn()
	deadline, _ := ctx.Deadline()
	if nc.SetDeadline(deadline) != nil {
		return
	}
	msg, _ := (&pgproto3.Terminate{}).Encode(nil)
	if _, err := nc.Write(msg); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, nc)
}

// count adds err to tenant × class's error counters.
func (s *Stack) count(ctx context.Context, cl *class, tenant string, err error) {
	k := classify(err, cl.pool.standby)
	switch k {
	case ErrorLimitedQueueFull, ErrorLimitedWaitExceeded, ErrorLimited, ErrorAcquireTimeout:
	default:
		if ctx.Err() != nil {
			k = ErrorCancelled // whatever the server said, the caller left first
		}
	}
	key := errKey{tenant: tenant, class: cl.name}
	v, ok := s.errs.Load(key)
	if !ok {
		v, _ = s.errs.LoadOrStore(key, new(errCounts))
	}
	v.(*errCounts)[errorClassIndex[k]].Add(1)
}

// PoolStat is a snapshot of one pool.
type PoolStat struct {
	Name string
	// Node is the pool's node with a Router, else empty.
	Node    string
	AppName string
	Addr    string
	Standby bool
	// MaxConns, TotalConns, IdleConns and AcquiredConns are pgxpool's
	// counts; AcquireCount, EmptyAcquireCount, CanceledAcquireCount and
	// NewConns (connections opened) are pgxpool's cumulative counters.
	MaxConns, TotalConns, IdleConns, AcquiredConns                  int32
	AcquireCount, EmptyAcquireCount, CanceledAcquireCount, NewConns int64
	// Borrowed is the number of connections the Stack holds for calls now.
	Borrowed int64
	// Destroyed is how many connections the Stack closed instead of
	// returning them (broken, panic, open transaction, failed tag or
	// reset).
	Destroyed int64
	// Closing is how many of those are still closing: their server process
	// has not exited yet, so the pool still counts them (in AcquiredConns
	// and TotalConns) and opens no replacement. WaitClosed waits for 0.
	Closing int64
	// TagFailures is how many borrow-time tag attempts failed.
	TagFailures int64
	// DBTime is the DB time of the calls this pool's connections ran, as
	// the ledger counts it (recorded when each call ends), cumulative: its
	// growth over a span divided by the span is the node's mean busy
	// connections of this pool.
	DBTime time.Duration
}

// ErrorCount is how many calls of one tenant in one class ended with one
// class of error.
type ErrorCount struct {
	Tenant string
	Class  Class
	Error  ErrorClass
	Count  int64
}

// Stat is a snapshot of the Stack.
type Stat struct {
	Pools []PoolStat
	// Placements says where each class runs, sorted by class.
	Placements []Placement
	// Limiters holds, by class, the Stat of each class's limiter that has
	// one (*limiter.Limiter does; other limiters may implement
	// Stat() limiter.Stat).
	Limiters map[Class]limiter.Stat
	// Errors lists the non-zero error counts, sorted by tenant, class and
	// error class. Counters live as long as the Stack: memory grows with
	// the number of distinct tenants that saw an error.
	Errors []ErrorCount
}

// Stat returns a snapshot of pools, placements, limiters and error counts.
func (s *Stack) Stat() Stat {
	var st Stat
	for _, p := range s.pools {
		ps := p.pgx.Stat()
		st.Pools = append(st.Pools, PoolStat{
			Name: p.cfg.Name, Node: p.cfg.Node, AppName: p.cfg.AppName, Addr: p.addr, Standby: p.standby,
			MaxConns: ps.MaxConns(), TotalConns: ps.TotalConns(), IdleConns: ps.IdleConns(), AcquiredConns: ps.AcquiredConns(),
			AcquireCount: ps.AcquireCount(), EmptyAcquireCount: ps.EmptyAcquireCount(), CanceledAcquireCount: ps.CanceledAcquireCount(),
			NewConns: ps.NewConnsCount(),
			Borrowed: p.borrowed.Load(), Destroyed: p.destroyed.Load(), Closing: p.closing.Load(), TagFailures: p.tagFailures.Load(),
			DBTime: time.Duration(p.dbTime.Load()),
		})
	}
	st.Limiters = map[Class]limiter.Stat{}
	for name, cl := range s.classes {
		pl, _ := s.Placement(name)
		st.Placements = append(st.Placements, pl)
		if l, ok := cl.limiter.(interface{ Stat() limiter.Stat }); ok {
			st.Limiters[name] = l.Stat()
		}
	}
	slices.SortFunc(st.Placements, func(a, b Placement) int { return cmp.Compare(a.Class, b.Class) })
	s.errs.Range(func(key, v any) bool {
		k := key.(errKey)
		for _, ec := range errorClasses {
			if n := v.(*errCounts)[errorClassIndex[ec]].Load(); n > 0 {
				st.Errors = append(st.Errors, ErrorCount{Tenant: k.tenant, Class: k.class, Error: ec, Count: n})
			}
		}
		return true
	})
	slices.SortFunc(st.Errors, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Class, b.Class), cmp.Compare(a.Error, b.Error))
	})
	return st
}

// Errors returns tenant's error counts in class, by error class (zero
// counts left out).
func (s *Stack) Errors(tenant string, c Class) map[ErrorClass]int64 {
	out := map[ErrorClass]int64{}
	if v, ok := s.errs.Load(errKey{tenant: tenant, class: c}); ok {
		for _, ec := range errorClasses {
			if n := v.(*errCounts)[errorClassIndex[ec]].Load(); n > 0 {
				out[ec] = n
			}
		}
	}
	return out
}

// WaitClosed waits until every connection the Stack gave up on is closed
// and its server process has exited (Stat's Closing is 0 in every pool), or
// returns ctx.Err(). A call returns as soon as it has failed; the
// connection it leaves behind is closed after it (see PoolStat.Closing).
func (s *Stack) WaitClosed(ctx context.Context) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n := int64(0)
		for _, p := range s.pools {
			n += p.closing.Load()
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d connections to close: %w", n, ctx.Err())
		case <-tick.C:
		}
	}
}

// Close stops new calls (they return ErrClosed) and closes the pools. It
// waits for calls in progress to return their connections and for the
// connections given up on to close. It is idempotent and safe to call from
// several goroutines. It does not close the limiters.
func (s *Stack) Close() {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.closePools()
		s.closing.Wait()
	})
}

func (s *Stack) closePools() {
	for _, p := range s.pools {
		p.pgx.Close()
	}
}

// Warm opens every pool's connections up to its size, in parallel, and
// gives them back idle, as a service in steady state holds its pools: a
// measured window then does not pay for connections opened under a sudden
// load (a server process forked and a password exchange each). No statement
// runs on them. It stops warming a pool at its first failed open (e.g. a
// role's or the server's connection limit) and returns how many it opened
// per pool with the errors joined; the Stack stays usable either way. Call
// it before the Stack serves calls: it holds every connection of a pool at
// once.
func (s *Stack) Warm(ctx context.Context) (opened map[string]int, err error) {
	opened = map[string]int{}
	var errs []error
	for _, p := range s.pools {
		held := make([]*pgxpool.Conn, 0, p.cfg.Size)
		var mu sync.Mutex
		var perr error
		var wg sync.WaitGroup
		for range int(p.cfg.Size) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := p.pgx.Acquire(ctx)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					perr = cmp.Or(perr, err)
					return
				}
				held = append(held, c)
			}()
		}
		wg.Wait()
		for _, c := range held {
			c.Release()
		}
		key := p.cfg.Name
		if p.cfg.Node != "" {
			key += "@" + p.cfg.Node
		}
		opened[key] = int(p.pgx.Stat().TotalConns())
		if perr != nil {
			errs = append(errs, fmt.Errorf("warm pool %s: %w", key, perr))
		}
	}
	return opened, errors.Join(errs...)
}
