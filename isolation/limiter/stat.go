package limiter

// TenantStat is a snapshot of one tenant. Within one snapshot
// Admitted − Released == InFlight, and every call made so far is counted
// exactly once in Admitted, RejectedQueueFull, RejectedWaitExceeded,
// Cancelled or Queued.
type TenantStat struct {
	// InFlight is the number of admitted calls not yet released.
	InFlight int
	// Queued is the number of calls waiting for admission, including those
	// already handed a tenant slot that are resuming or waiting for the
	// global cap.
	Queued int
	// Admitted and Released count admissions and releases.
	Admitted, Released int64
	// RejectedQueueFull and RejectedWaitExceeded count rejections by reason.
	RejectedQueueFull, RejectedWaitExceeded int64
	// RejectedUnavailable counts rejections of a distributed limiter that
	// could not reach its store and fails closed; always 0 for Limiter.
	RejectedUnavailable int64
	// Cancelled counts calls whose context ended before admission.
	Cancelled int64
}

// Rejected is the number of rejections of any reason.
func (s TenantStat) Rejected() int64 {
	return s.RejectedQueueFull + s.RejectedWaitExceeded + s.RejectedUnavailable
}

// Add adds o's figures to s (to sum several limiters' snapshots).
func (s *TenantStat) Add(o TenantStat) {
	s.add(o)
	s.RejectedUnavailable += o.RejectedUnavailable
}

func (s *TenantStat) add(o TenantStat) {
	s.InFlight += o.InFlight
	s.Queued += o.Queued
	s.addCounters(counters{o.Admitted, o.Released, o.RejectedQueueFull, o.RejectedWaitExceeded, o.Cancelled})
}

func (s *TenantStat) addCounters(c counters) {
	s.Admitted += c.admitted
	s.Released += c.released
	s.RejectedQueueFull += c.rejectedQueueFull
	s.RejectedWaitExceeded += c.rejectedWaitExceeded
	s.Cancelled += c.cancelled
}

// Stat is a snapshot of a Limiter. Each tenant's figures are consistent with
// each other; tenants are read one after another, not at one instant.
type Stat struct {
	// Tenants has every tenant with counters (in use, idle or swept), except
	// those dropped by ForgetIdle.
	Tenants map[string]TenantStat
	// Total sums Tenants and the counts of forgotten tenants. Total.InFlight
	// is the number of calls running across all tenants.
	Total TenantStat
	// Records is the number of tenant records held (see Limiter, Memory).
	Records int
}

// snapshot reads t; the caller holds l.statMu (read).
func (t *tenant) snapshot() (TenantStat, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead {
		return TenantStat{}, false
	}
	s := TenantStat{InFlight: t.inFlight, Queued: t.queue.n + t.reserved}
	s.addCounters(t.c)
	return s, true
}

// Stat returns a snapshot of every tenant and the totals.
func (l *Limiter) Stat() Stat {
	l.statMu.RLock()
	defer l.statMu.RUnlock()
	st := Stat{Tenants: make(map[string]TenantStat, len(l.retired))}
	for name, c := range l.retired {
		var s TenantStat
		s.addCounters(c)
		st.Tenants[name] = s
	}
	l.tenants.Range(func(_, v any) bool {
		t := v.(*tenant)
		if s, ok := t.snapshot(); ok {
			st.Records++
			sum := st.Tenants[t.name]
			sum.add(s)
			st.Tenants[t.name] = sum
		}
		return true
	})
	for _, s := range st.Tenants {
		st.Total.add(s)
	}
	st.Total.addCounters(l.forgotten)
	return st
}

// TenantStat returns a snapshot of one tenant; zero for a tenant never seen
// (or forgotten and not seen since).
func (l *Limiter) TenantStat(name string) TenantStat {
	l.statMu.RLock()
	defer l.statMu.RUnlock()
	var s TenantStat
	s.addCounters(l.retired[name])
	if v, ok := l.tenants.Load(name); ok {
		if live, ok := v.(*tenant).snapshot(); ok {
			s.add(live)
		}
	}
	return s
}
