package pools

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Ledger defaults.
const (
	// DefaultShareThreshold is the share of DB time above which a tenant
	// raises an alert once it stays there for a whole window.
	DefaultShareThreshold = 0.30
	// DefaultShareWindow is how long a tenant must stay above the threshold.
	DefaultShareWindow = 10 * time.Second
	// DefaultShareBucket is the width of one bucket of the sliding window.
	DefaultShareBucket = 1 * time.Second
	// DefaultMaxAlerts is how many alerts the ledger keeps (oldest dropped).
	DefaultMaxAlerts = 1000
)

// ErrInvalidConfig is returned (wrapped) for a configuration that cannot work.
var ErrInvalidConfig = errors.New("invalid configuration")

// LedgerConfig configures a Ledger. The zero value is usable: every zero
// field takes its Default constant.
type LedgerConfig struct {
	// ShareThreshold is the share of the DB time of all tenants (0 < x ≤ 1)
	// above which a tenant is "dominant". 0 means DefaultShareThreshold.
	ShareThreshold float64
	// Window is how long a tenant must stay above ShareThreshold before an
	// alert fires. 0 means DefaultShareWindow.
	Window time.Duration
	// Bucket is the resolution of the sliding window: the share is computed
	// per bucket and a tenant "stays above" when it is above in every bucket
	// of the window. 0 means DefaultShareBucket (or Window when Window is
	// smaller).
	Bucket time.Duration
	// OnAlert, when set, is called when an alert fires and again when it
	// clears (Alert.Cleared set). It runs synchronously in the goroutine that
	// recorded the first statement of a new bucket (or called Alerts or
	// Ranking): keep it short and never call back into the ledger.
	OnAlert func(Alert)
	// MaxAlerts bounds the alert history. 0 means DefaultMaxAlerts.
	MaxAlerts int
}

// Usage is the DB time one tenant spent in one class.
type Usage struct {
	Tenant string
	Class  Class
	// DBTime is the sum of statement wall times as seen by the client,
	// including statements that failed or timed out.
	DBTime time.Duration
	// Statements is how many calls were recorded.
	Statements int64
}

// Rank is one tenant's place in the DB-time ranking.
type Rank struct {
	Tenant string
	// DBTime is the tenant's DB time over all classes since the ledger
	// started.
	DBTime time.Duration
	// Share is DBTime divided by the DB time of all tenants, in [0, 1].
	Share float64
	// ByClass is the tenant's DB time per class.
	ByClass map[Class]time.Duration
	// Statements is how many calls were recorded over all classes.
	Statements int64
}

// Alert says that a tenant held more than Threshold of the DB time in every
// bucket of Window.
type Alert struct {
	Tenant string
	// Share is the tenant's share of the DB time over the window that fired
	// the alert, in [0, 1].
	Share     float64
	Threshold float64
	Window    time.Duration
	// Fired is when the alert fired (the end of the window).
	Fired time.Time
	// Cleared is when the tenant first fell back to or below the threshold
	// in a bucket; zero while the alert is active.
	Cleared time.Time
}

// String returns a one-line description.
func (a Alert) String() string {
	s := fmt.Sprintf("tenant %s held %.0f%% of DB time (threshold %.0f%%) for %s",
		a.Tenant, a.Share*100, a.Threshold*100, a.Window)
	if !a.Cleared.IsZero() {
		s += ", cleared"
	}
	return s
}

// Ledger accounts DB time per tenant and class and raises share alerts. It is
// safe for concurrent use. Recording takes one map lookup and one lock per
// tenant; tenants never contend with each other except when a bucket
// completes, once per bucket width, when the alert check runs.
//
// A tenant's entry lives as long as the ledger: memory grows with the number
// of distinct tenants recorded.
type Ledger struct {
	threshold float64
	window    time.Duration
	bucket    time.Duration
	nBuckets  int64
	onAlert   func(Alert)
	maxAlerts int
	origin    time.Time

	tenants sync.Map // string → *tenantUsage

	// evaluated is the index of the last bucket whose window was checked.
	evaluated atomic.Int64

	mu      sync.Mutex // guards the alert state below and serialises checks
	active  map[string]activeAlert
	alerts  []Alert
	dropped int // alerts dropped from the front of the history
}

// activeAlert is an alert that has not cleared yet; seq-dropped is its index
// in the history while it is still there.
type activeAlert struct {
	seq   int
	alert Alert
}

// tenantUsage is one tenant's accounting.
type tenantUsage struct {
	mu      sync.Mutex
	classes []classUsage
	ring    []bucket // len nBuckets+2, indexed by bucket index modulo len
}

type classUsage struct {
	class      Class
	nanos      int64
	statements int64
}

type bucket struct {
	index int64
	nanos int64
}

// NewLedger returns an empty ledger. It returns an error wrapping
// ErrInvalidConfig for a threshold outside (0, 1] or negative durations.
func NewLedger(cfg LedgerConfig) (*Ledger, error) {
	if cfg.ShareThreshold == 0 {
		cfg.ShareThreshold = DefaultShareThreshold
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultShareWindow
	}
	if cfg.Bucket == 0 {
		cfg.Bucket = min(DefaultShareBucket, cfg.Window)
	}
	if cfg.MaxAlerts == 0 {
		cfg.MaxAlerts = DefaultMaxAlerts
	}
	switch {
	case !(cfg.ShareThreshold > 0 && cfg.ShareThreshold <= 1):
		return nil, fmt.Errorf("new ledger: share threshold %v outside (0, 1]: %w", cfg.ShareThreshold, ErrInvalidConfig)
	case cfg.Window < 0 || cfg.Bucket < 0 || cfg.MaxAlerts < 0:
		return nil, fmt.Errorf("new ledger: negative window, bucket or max alerts: %w", ErrInvalidConfig)
	case cfg.Bucket > cfg.Window:
		return nil, fmt.Errorf("new ledger: bucket %s longer than window %s: %w", cfg.Bucket, cfg.Window, ErrInvalidConfig)
	}
	n := int64((cfg.Window + cfg.Bucket - 1) / cfg.Bucket)
	l := &Ledger{
		threshold: cfg.ShareThreshold,
		window:    cfg.Window,
		bucket:    cfg.Bucket,
		nBuckets:  n,
		onAlert:   cfg.OnAlert,
		maxAlerts: cfg.MaxAlerts,
		origin:    time.Now(),
		active:    map[string]activeAlert{},
	}
	l.evaluated.Store(-1)
	return l, nil
}

// Record adds d of DB time for tenant in class. Negative d counts as 0. The
// isolation stack calls it for every statement it runs; callers with their
// own execution path may call it too.
func (l *Ledger) Record(tenant string, class Class, d time.Duration) {
	d = max(d, 0)
	now := l.bucketIndex(time.Now())
	u := l.usage(tenant)

	u.mu.Lock()
	i := slices.IndexFunc(u.classes, func(c classUsage) bool { return c.class == class })
	if i < 0 {
		u.classes = append(u.classes, classUsage{class: class})
		i = len(u.classes) - 1
	}
	u.classes[i].nanos += int64(d)
	u.classes[i].statements++
	b := &u.ring[now%int64(len(u.ring))]
	if b.index != now {
		*b = bucket{index: now}
	}
	b.nanos += int64(d)
	u.mu.Unlock()

	if now-1 > l.evaluated.Load() {
		l.check(now)
	}
}

func (l *Ledger) usage(tenant string) *tenantUsage {
	if v, ok := l.tenants.Load(tenant); ok {
		return v.(*tenantUsage)
	}
	v, _ := l.tenants.LoadOrStore(tenant, &tenantUsage{ring: make([]bucket, l.nBuckets+2)})
	return v.(*tenantUsage)
}

func (l *Ledger) bucketIndex(t time.Time) int64 {
	return int64(t.Sub(l.origin) / l.bucket)
}

// check evaluates every completed bucket up to (not including) current.
func (l *Ledger) check(current int64) {
	l.mu.Lock()
	var notify []Alert
	for k := l.evaluated.Load() + 1; k < current; k++ {
		notify = append(notify, l.checkBucket(k)...)
		l.evaluated.Store(k)
	}
	l.mu.Unlock()
	if l.onAlert != nil {
		for _, a := range notify {
			l.onAlert(a)
		}
	}
}

// checkBucket fires and clears alerts for the window ending with bucket k.
// l.mu is held.
func (l *Ledger) checkBucket(k int64) []Alert {
	first := k - l.nBuckets + 1
	type row struct {
		tenant string
		nanos  []int64 // per bucket of the window
	}
	var rows []row
	totals := make([]int64, l.nBuckets)
	l.tenants.Range(func(key, v any) bool {
		u := v.(*tenantUsage)
		r := row{tenant: key.(string), nanos: make([]int64, l.nBuckets)}
		seen := false
		u.mu.Lock()
		for j := range l.nBuckets {
			idx := first + j
			if idx < 0 {
				continue
			}
			b := u.ring[idx%int64(len(u.ring))]
			if b.index == idx && b.nanos > 0 {
				r.nanos[j] = b.nanos
				totals[j] += b.nanos
				seen = true
			}
		}
		u.mu.Unlock()
		if seen {
			rows = append(rows, r)
		}
		return true
	})

	at := l.origin.Add(time.Duration(k+1) * l.bucket)
	var notify []Alert
	above := map[string]float64{}
	if first >= 0 { // a full window of history exists
		for _, r := range rows {
			var sum, total int64
			ok := true
			for j := range l.nBuckets {
				if totals[j] == 0 || float64(r.nanos[j]) <= l.threshold*float64(totals[j]) {
					ok = false
					break
				}
				sum += r.nanos[j]
				total += totals[j]
			}
			if ok {
				above[r.tenant] = float64(sum) / float64(total)
			}
		}
	}
	// Clear alerts of tenants whose latest bucket is at or below the
	// threshold (or who did nothing in it).
	last := l.nBuckets - 1
	for tenant, act := range l.active {
		var mine int64
		for _, r := range rows {
			if r.tenant == tenant {
				mine = r.nanos[last]
				break
			}
		}
		if totals[last] == 0 || float64(mine) <= l.threshold*float64(totals[last]) {
			delete(l.active, tenant)
			act.alert.Cleared = at
			if i := act.seq - l.dropped; i >= 0 {
				l.alerts[i] = act.alert
			}
			notify = append(notify, act.alert)
		}
	}
	tenants := make([]string, 0, len(above))
	for t := range above {
		if _, ok := l.active[t]; !ok {
			tenants = append(tenants, t)
		}
	}
	slices.Sort(tenants)
	for _, t := range tenants {
		a := Alert{Tenant: t, Share: above[t], Threshold: l.threshold, Window: l.window, Fired: at}
		l.appendAlert(a)
		notify = append(notify, a)
	}
	return notify
}

// appendAlert adds a to the history, dropping the oldest alert when full.
// l.mu is held.
func (l *Ledger) appendAlert(a Alert) {
	seq := l.dropped + len(l.alerts)
	l.active[a.Tenant] = activeAlert{seq: seq, alert: a}
	l.alerts = append(l.alerts, a)
	if len(l.alerts) > l.maxAlerts {
		n := len(l.alerts) - l.maxAlerts
		l.alerts = slices.Delete(l.alerts, 0, n)
		l.dropped += n
	}
}

// catchUp runs the alert check for buckets completed since the last record.
func (l *Ledger) catchUp() {
	now := l.bucketIndex(time.Now())
	if now-1 > l.evaluated.Load() {
		l.check(now)
	}
}

// Alerts returns the alert history, oldest first (at most
// LedgerConfig.MaxAlerts). It first checks the buckets completed since the
// last recorded statement, so alerts clear even when traffic stops.
func (l *Ledger) Alerts() []Alert {
	l.catchUp()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.alerts)
}

// Active returns the tenants with an active alert, sorted.
func (l *Ledger) Active() []string {
	l.catchUp()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.active))
	for t := range l.active {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Usage returns the DB time of every tenant × class recorded so far, sorted
// by tenant then class.
func (l *Ledger) Usage() []Usage {
	var out []Usage
	l.tenants.Range(func(key, v any) bool {
		u := v.(*tenantUsage)
		u.mu.Lock()
		for _, c := range u.classes {
			out = append(out, Usage{Tenant: key.(string), Class: c.class, DBTime: time.Duration(c.nanos), Statements: c.statements})
		}
		u.mu.Unlock()
		return true
	})
	slices.SortFunc(out, func(a, b Usage) int {
		if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
			return c
		}
		return strings.Compare(string(a.Class), string(b.Class))
	})
	return out
}

// Ranking returns the topN tenants by DB time over all classes, largest
// first (ties by tenant name), each with its share of the total. topN ≤ 0
// returns every tenant.
func (l *Ledger) Ranking(topN int) []Rank {
	l.catchUp()
	var (
		ranks []Rank
		total int64
	)
	l.tenants.Range(func(key, v any) bool {
		u := v.(*tenantUsage)
		r := Rank{Tenant: key.(string), ByClass: map[Class]time.Duration{}}
		u.mu.Lock()
		for _, c := range u.classes {
			r.DBTime += time.Duration(c.nanos)
			r.ByClass[c.class] += time.Duration(c.nanos)
			r.Statements += c.statements
		}
		u.mu.Unlock()
		total += int64(r.DBTime)
		ranks = append(ranks, r)
		return true
	})
	slices.SortFunc(ranks, func(a, b Rank) int {
		if a.DBTime != b.DBTime {
			if a.DBTime > b.DBTime {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Tenant, b.Tenant)
	})
	for i := range ranks {
		if total > 0 {
			ranks[i].Share = float64(ranks[i].DBTime) / float64(total)
		}
	}
	if topN > 0 && len(ranks) > topN {
		ranks = ranks[:topN]
	}
	return ranks
}

// Window is one tenant's DB time between two Usage readings.
type Window struct {
	// ByClass is the tenant's DB time per class in the window.
	ByClass map[Class]time.Duration
	// Total is the tenant's DB time over all classes in the window.
	Total time.Duration
	// Share is Total divided by all tenants' DB time in the window, in
	// [0, 1].
	Share float64
}

// UsageWindow returns each tenant's DB time between two readings of Usage
// (after minus before, by tenant and class) and its share of all tenants'
// DB time in that window. Tenants without DB time in the window are left
// out. Use it to rank tenants over a phase of a run rather than since the
// ledger started.
func UsageWindow(before, after []Usage) map[string]*Window {
	type key struct {
		tenant string
		class  Class
	}
	prev := make(map[key]time.Duration, len(before))
	for _, u := range before {
		prev[key{u.Tenant, u.Class}] = u.DBTime
	}
	out := map[string]*Window{}
	var all time.Duration
	for _, u := range after {
		d := u.DBTime - prev[key{u.Tenant, u.Class}]
		if d <= 0 {
			continue
		}
		w := out[u.Tenant]
		if w == nil {
			w = &Window{ByClass: map[Class]time.Duration{}}
			out[u.Tenant] = w
		}
		w.ByClass[u.Class] += d
		w.Total += d
		all += d
	}
	for _, w := range out {
		w.Share = float64(w.Total) / float64(all)
	}
	return out
}
