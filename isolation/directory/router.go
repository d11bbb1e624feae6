package directory

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultPollInterval is how often a Router reads the catalog's version.
const DefaultPollInterval = 200 * time.Millisecond

// RouterConfig configures a Router.
type RouterConfig struct {
	// Catalog is the catalog to follow. Required; the Router does not close
	// it.
	Catalog *Catalog
	// PollInterval is how often the catalog version is read; a change
	// reloads the whole catalog. 0 means DefaultPollInterval. A negative
	// value disables polling: the cache then changes only on Refresh (and
	// on a Hold's resume).
	PollInterval time.Duration
	// Logger receives a debug record per reload; nil is silent.
	Logger *slog.Logger
}

// Router resolves tenants to nodes from a cached catalog snapshot. The
// cache is reloaded when the catalog's version changes (polled every
// PollInterval) and on Refresh, so a Router started before a move follows
// it. Route implements the routing seam of the isolation stack
// (pools.Router): the stack asks it for each call's node.
//
// Hold pauses a tenant's new calls for a move's write pause; a Mover given
// the Router as its Gate uses it. A Router is safe for concurrent use;
// Close it when done.
type Router struct {
	cat  *Catalog
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	snap     Snapshot
	held     map[string]chan struct{} // closed on resume
	inFlight map[string]int
	stats    RouterStat

	closeOnce sync.Once
}

// RouterStat is a snapshot of a Router's counters.
type RouterStat struct {
	// Version is the catalog version cached now.
	Version int64
	// Reloads counts catalog reloads after the first; PollErrors failed
	// polls (the cache is kept).
	Reloads, PollErrors int64
	// Routed counts Route calls that returned a node; Held those that
	// waited on a Hold first.
	Routed, Held int64
	// Holding lists the tenants held now.
	Holding []string
}

// NewRouter loads the catalog and starts polling it. Errors: the first
// load's, wrapped.
func NewRouter(ctx context.Context, cfg RouterConfig) (*Router, error) {
	if cfg.Catalog == nil {
		return nil, fmt.Errorf("new router: no catalog: %w", ErrInvalidConfig)
	}
	r := &Router{
		cat: cfg.Catalog, log: cfg.Logger,
		stop: make(chan struct{}), done: make(chan struct{}),
		held: map[string]chan struct{}{}, inFlight: map[string]int{},
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	snap, err := r.cat.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("new router: %w", err)
	}
	r.snap = snap
	every := cmp.Or(cfg.PollInterval, DefaultPollInterval)
	if every < 0 {
		close(r.done)
		return r, nil
	}
	go r.poll(every)
	return r, nil
}

func (r *Router) poll(every time.Duration) {
	defer close(r.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(every, time.Second))
		err := r.refreshIfChanged(ctx)
		cancel()
		if err != nil {
			r.mu.Lock()
			r.stats.PollErrors++
			r.mu.Unlock()
			r.log.Debug("poll catalog", "err", err)
		}
	}
}

func (r *Router) refreshIfChanged(ctx context.Context) error {
	v, err := r.cat.Version(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	same := v == r.snap.Version
	r.mu.Unlock()
	if same {
		return nil
	}
	return r.Refresh(ctx)
}

// Refresh reloads the catalog now. The cache only moves forward: a
// snapshot older than the cached one is dropped.
func (r *Router) Refresh(ctx context.Context) error {
	snap, err := r.cat.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("refresh router: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if snap.Version > r.snap.Version {
		r.snap = snap
		r.stats.Reloads++
		r.log.Debug("catalog reloaded", "version", snap.Version)
	}
	return nil
}

// Node returns tenant's node from the cache, without waiting on a Hold;
// "" when the catalog places it nowhere.
func (r *Router) Node(tenant string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap.Resolve(tenant)
}

// Snapshot returns the cached catalog snapshot. Its maps must not be
// modified.
func (r *Router) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.snap
}

// Route returns the node for one call of tenant and a function to call
// when the call is over. While tenant is held (Hold), Route waits until
// the hold is resumed, then resolves with the refreshed cache; it returns
// ctx's error, wrapped, if ctx ends first. Errors: ErrUnknownNode (wrapped)
// when the catalog places tenant nowhere (an empty ring).
func (r *Router) Route(ctx context.Context, tenant string) (string, func(), error) {
	waited := false
	for {
		r.mu.Lock()
		ch, held := r.held[tenant]
		if !held {
			node := r.snap.Resolve(tenant)
			if node == "" {
				r.mu.Unlock()
				return "", nil, fmt.Errorf("route tenant %s: empty ring: %w", tenant, ErrUnknownNode)
			}
			r.inFlight[tenant]++
			r.stats.Routed++
			if waited {
				r.stats.Held++
			}
			r.mu.Unlock()
			var once sync.Once
			return node, func() { once.Do(func() { r.leave(tenant) }) }, nil
		}
		r.mu.Unlock()
		waited = true
		select {
		case <-ch:
		case <-ctx.Done():
			return "", nil, fmt.Errorf("route tenant %s: held by a move: %w", tenant, ctx.Err())
		}
	}
}

func (r *Router) leave(tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[tenant]--; r.inFlight[tenant] <= 0 {
		delete(r.inFlight, tenant)
	}
}

// InFlight returns the number of tenant's calls routed and not yet over.
func (r *Router) InFlight(tenant string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight[tenant]
}

// Hold makes tenant's new Route calls wait until resume is called; calls
// already routed go on (the move's fence on the source node stops their
// writes). resume refreshes the cache from the catalog (bounded by 5 s;
// on failure the cache stays and the poll catches up) and then lets the
// waiting calls through; it is idempotent. A second Hold of a held tenant
// returns an error.
func (r *Router) Hold(ctx context.Context, tenant string) (resume func(), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[tenant]; ok {
		return nil, fmt.Errorf("hold tenant %s: already held: %w", tenant, ErrMoveInProgress)
	}
	ch := make(chan struct{})
	r.held[tenant] = ch
	var once sync.Once
	return func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := r.Refresh(ctx); err != nil {
				r.log.Debug("refresh on resume", "tenant", tenant, "err", err)
			}
			cancel()
			r.mu.Lock()
			delete(r.held, tenant)
			r.mu.Unlock()
			close(ch)
		})
	}, nil
}

// Stat returns a snapshot of the Router's counters.
func (r *Router) Stat() RouterStat {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Version = r.snap.Version
	for t := range r.held {
		st.Holding = append(st.Holding, t)
	}
	return st
}

// Close stops polling and lets any held calls through. It is idempotent.
func (r *Router) Close() {
	r.closeOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		for t, ch := range r.held {
			delete(r.held, t)
			close(ch)
		}
		r.mu.Unlock()
	})
}

// Gate pauses a tenant's new calls in one process during a move's write
// pause: *Router implements it.
type Gate interface {
	Hold(ctx context.Context, tenant string) (resume func(), err error)
}

var _ Gate = (*Router)(nil)

// IsFenced reports whether err is a write refused by a fenced node
// (SQLSTATE FencedSQLState), or matches ErrFenced.
func IsFenced(err error) bool {
	var pg *pgconn.PgError
	return errors.Is(err, ErrFenced) || (errors.As(err, &pg) && pg.Code == FencedSQLState)
}
