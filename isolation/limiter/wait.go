package limiter

import "time"

// waiter is one call waiting in a tenant's or the global queue. granted and
// the links are guarded by the queue's lock.
type waiter struct {
	next, prev *waiter
	ready      chan struct{} // closed by grant
	granted    bool
	deadline   time.Time // zero: no MaxWait
}

// grant gives the waiter the slot it waits for. The caller holds the
// queue's lock and has popped w.
func (w *waiter) grant() {
	w.granted = true
	close(w.ready)
}

// wait blocks until w is granted, done is closed or w's deadline passes.
// The caller then inspects w.granted under the queue's lock.
func (w *waiter) wait(done <-chan struct{}) {
	var expired <-chan time.Time
	if !w.deadline.IsZero() {
		tm := time.NewTimer(time.Until(w.deadline))
		defer tm.Stop()
		expired = tm.C
	}
	select {
	case <-w.ready:
	case <-done:
	case <-expired:
	}
}

// waitList is a FIFO of waiters, linked through the waiters themselves.
type waitList struct {
	head, tail *waiter
	n          int
}

func (q *waitList) push(w *waiter) {
	w.prev = q.tail
	w.next = nil
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
}

// pop removes and returns the head, or nil.
func (q *waitList) pop() *waiter {
	w := q.head
	if w != nil {
		q.remove(w)
	}
	return w
}

// remove unlinks w, which must be in q.
func (q *waitList) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.next, w.prev = nil, nil
	q.n--
}
