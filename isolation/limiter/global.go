package limiter

import (
	"sync"
	"sync/atomic"
)

// global is the cap across tenants. Slots are taken and returned with
// atomics; mu is taken only when a call has to wait, and by a releaser that
// sees waiters.
type global struct {
	max   int64
	cur   atomic.Int64 // slots taken, including those granted to waiters
	nwait atomic.Int64 // calls registered as waiting (queued or about to be)

	mu    sync.Mutex
	queue waitList
}

// tryAcquire takes a slot if one is free and no call waits for one.
func (g *global) tryAcquire() bool {
	if g.nwait.Load() > 0 {
		return false
	}
	return g.take()
}

// take takes a slot if one is free.
func (g *global) take() bool {
	for {
		c := g.cur.Load()
		if c >= g.max {
			return false
		}
		if g.cur.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// release returns a slot and grants free slots to the queue's head.
//
// No wake-up is lost: a waiter increments nwait before it tries take, and
// release decrements cur before it loads nwait (both sequentially
// consistent), so either the waiter sees the freed slot or release sees the
// waiter and, under mu, finds it queued.
func (g *global) release() {
	g.cur.Add(-1)
	if g.nwait.Load() == 0 {
		return
	}
	g.mu.Lock()
	for g.queue.head != nil && g.take() {
		g.queue.pop().grant()
		g.nwait.Add(-1)
	}
	g.mu.Unlock()
}
