package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/isolation/pools"
	"github.com/noisysim/noisysim/reports"
)

// Sample is what a watcher hands its policy at each check.
type Sample struct {
	// Phase is the name of the phase the watcher runs in; Elapsed the time
	// since the phase started.
	Phase   string
	Elapsed time.Duration
	// Interval is the time since the previous check (since the phase's
	// start at the first).
	Interval time.Duration
	// Last is the ledger's DB time per tenant over Interval, Phase over
	// the phase so far (pools.UsageWindow; tenants without DB time are
	// absent).
	Last, SoFar map[string]*pools.Window
	// Check counts the checks of the phase, from 1.
	Check int
}

// Policy decides, from samples of the run, which actions to fire. Check
// is called every watch.every during the phase, one call at a time; it
// returns the actions to run now (each run like a timeline action of the
// phase, its result marked with the policy's name), and done once the
// policy has nothing more to do (the watcher then stops). An error stops
// the watcher and is reported beside the phase's actions. ctx ends when
// the phase does (a check then running is abandoned, not reported) or the
// run is stopped.
type Policy interface {
	Check(ctx context.Context, env ActionEnv, s Sample) (fire []scenario.Action, done bool, err error)
}

var (
	policyRunnersMu sync.RWMutex
	policyRunners   = map[string]func(scenario.PolicyConfig) Policy{}
)

// RegisterPolicyRunner makes the harness run watchers with the policy
// named name (a policy registered with scenario.RegisterPolicy), built by
// newPolicy from the watch's config once per phase and configuration. It
// panics on a duplicate name.
func RegisterPolicyRunner(name string, newPolicy func(scenario.PolicyConfig) Policy) {
	policyRunnersMu.Lock()
	defer policyRunnersMu.Unlock()
	if policyRunners[name] != nil {
		panic("harness: policy runner " + name + " registered twice")
	}
	policyRunners[name] = newPolicy
}

func policyFor(w *scenario.Watch) (Policy, error) {
	policyRunnersMu.RLock()
	mk := policyRunners[w.Policy]
	policyRunnersMu.RUnlock()
	if mk == nil || w.Config == nil {
		return nil, fmt.Errorf("%w: policy %q has no runner", scenario.ErrInvalid, w.Policy)
	}
	return mk(w.Config), nil
}

// watch runs the watcher of phase s in the background: every
// s.Watch.Every it samples the ledger, asks the policy and runs the
// actions it fires, until the policy is done, ended is closed (the phase
// ended; a check then running is cancelled) or ctx ends. The phase's
// actions count the watcher as running until it stops.
func (ar *actionRun) watch(ctx context.Context, s *step, ended <-chan struct{}) {
	if s.Watch == nil {
		return
	}
	w := s.Watch
	pol, err := policyFor(w)
	wg := ar.phase(s.Name)
	wg.Add(1)
	ar.wg.Go(func() {
		defer wg.Done()
		fail := func(err error) {
			ar.env.Logger.Warn("watcher stopped", "phase", s.Name, "policy", w.Policy, "error", err)
			ar.keep(reports.ActionResult{Phase: s.Name, Type: "watch", FiredBy: w.Policy,
				At: time.Since(ar.t0).Seconds(), Error: err.Error()})
		}
		if err != nil {
			fail(err)
			return
		}
		// A check still running when the phase ends is cancelled: the
		// watcher stops with its phase, as it does between checks.
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-ended:
				cancel()
			case <-cctx.Done():
			}
		}()
		over := func() {
			if s.Until != "" {
				fail(fmt.Errorf("the phase reached its max (%s) before policy %s was done", s.Max, w.Policy))
			}
		}
		begun := time.Now()
		first := ar.env.Ledger.Usage()
		last, lastAt := first, begun
		tick := time.NewTicker(w.Every.Duration())
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-ended:
				over()
				return
			case <-tick.C:
			}
			now, usage := time.Now(), ar.env.Ledger.Usage()
			smp := Sample{Phase: s.Name, Elapsed: now.Sub(begun), Interval: now.Sub(lastAt), Check: n,
				Last: pools.UsageWindow(last, usage), SoFar: pools.UsageWindow(first, usage)}
			last, lastAt = usage, now
			fire, done, err := pol.Check(cctx, ar.env, smp)
			for _, a := range fire {
				ar.env.Logger.Info("policy fired", "phase", s.Name, "policy", w.Policy, "action", a.Type, "elapsed", smp.Elapsed.Round(time.Millisecond))
				ar.run(ctx, s, a, now, w.Policy)
			}
			switch {
			case err != nil && ctx.Err() != nil:
				return // the run was stopped: no failure of the policy's own
			case err != nil && cctx.Err() != nil:
				over() // the phase ended during the check
				return
			case err != nil:
				fail(err)
				return
			}
			if done {
				return
			}
		}
	})
}
