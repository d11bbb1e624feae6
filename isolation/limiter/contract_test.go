package limiter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/noisysim/noisysim/isolation"
	"github.com/noisysim/noisysim/isolation/limiter"
)

// The isolation.Limiter contract, checked on every implementation noisysim
// ships: admission with a release func, ctx.Err() for a done context.
func TestIsolationLimiterContract(t *testing.T) {
	lim := mustNew(t, limiter.Config{MaxPerTenant: 1})
	impls := []struct {
		name string
		l    isolation.Limiter
	}{
		{"limiter", lim},
		{"Unlimited", isolation.Unlimited()},
		{"LimiterFunc", isolation.LimiterFunc(lim.Acquire)},
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) {
			release, err := impl.l.Acquire(context.Background(), "t")
			if err != nil || release == nil {
				t.Fatalf("Acquire: release nil %v, err %v; want a release func", release == nil, err)
			}
			release()
			release()
			release, err = impl.l.Acquire(done, "t")
			if !errors.Is(err, context.Canceled) || release != nil {
				t.Errorf("Acquire(done ctx): release nil %v, err %v; want nil, context.Canceled", release == nil, err)
			}
		})
	}
	if got := lim.TenantStat("t"); got.Admitted != 2 || got.Released != 2 || got.Cancelled != 2 {
		t.Errorf("limiter stat %+v", got)
	}
}
