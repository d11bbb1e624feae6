package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/harness/scenario"
	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// calPool is the pool a calibrated class's offered concurrency is set
// against (scenario.Scenario.CalibrationPool).
type calPool struct {
	size int
	name string
}

// calibrationPools returns the pool of each calibrated class of sc, taken
// before --only keeps one configuration, so that every run of the
// scenario sets the same rate from the same service time.
func calibrationPools(sc *scenario.Scenario) map[string]calPool {
	out := map[string]calPool{}
	for i := range sc.Classes {
		c := &sc.Classes[i]
		if c.Calibrated() {
			size, name := sc.CalibrationPool(c)
			out[c.Name] = calPool{size: size, name: name}
		}
	}
	return out
}

// minCalibrationSamples is the fewest queries calibration measures, even
// past classes[].calibrate.
const minCalibrationSamples = 5

// calibrate measures, on the loaded data set and before any configuration
// runs, each calibrated class's service time: its query for the dominant
// tenant, one at a time on one connection to the primary, for the class's
// calibrate duration (at least minCalibrationSamples queries, after one
// unmeasured). It sets the class's rate to load_factor × pool / mean
// service time and lays the timeline out again at those rates.
func (r *runner) calibrate(ctx context.Context) error {
	rates := map[string]float64{}
	for i := range r.sc.Classes {
		c := &r.sc.Classes[i]
		if !c.Calibrated() {
			continue
		}
		pool := r.calPools[c.Name]
		if pool.size <= 0 {
			return fmt.Errorf("%w: class %s: load_factor needs a configuration whose pool it would share", scenario.ErrInvalid, c.Name)
		}
		r.setPhase("calibrate", c.Name, c.Calibrate.Duration())
		times, took, err := r.serviceTimes(ctx, c)
		if err != nil {
			return fmt.Errorf("%w: calibrate class %s: %w", ErrRun, c.Name, err)
		}
		cal := calibration(c, pool, times, took)
		if err := checkCalibratedRate(r.sc, i, cal); err != nil {
			return err
		}
		rates[c.Name] = cal.Rate
		r.calibrated = append(r.calibrated, cal)
		r.log.Info("calibrated", "class", c.Name, "service_mean_ms", cal.ServiceMean, "rate", cal.Rate)
	}
	if len(rates) == 0 {
		return nil
	}
	return r.schedule(rates)
}

// checkCalibratedRate returns an error if the rate calibrated for
// classes[i] is not one noisysim can send: above workload.MaxRate, the
// load_factor is too large for the class's service time (bad input, at the
// key's file:line:col); not above 0, the run went wrong (ErrRun).
func checkCalibratedRate(sc *scenario.Scenario, i int, cal reports.Calibration) error {
	switch {
	case cal.Rate > workload.MaxRate:
		return fmt.Errorf("%w: %s: %g × pool %d / service time %.3f ms is a rate of %.3g/s, above the %.0g/s noisysim sends: give a smaller load_factor",
			scenario.ErrInvalid, sc.Where(fmt.Sprintf("classes[%d].load_factor", i)), cal.LoadFactor, cal.Pool, cal.ServiceMean, cal.Rate, workload.MaxRate)
	case !(cal.Rate > 0):
		return fmt.Errorf("%w: calibrate class %s: rate %g/s from a service time of %.3f ms is outside (0, %g]", ErrRun, cal.Class, cal.Rate, cal.ServiceMean, workload.MaxRate)
	}
	return nil
}

// classQuery names what class c runs: its query kind, script or "sql".
func classQuery(c *scenario.Class) string {
	switch {
	case c.Script != "":
		return c.Script
	case c.SQL != "":
		return "sql"
	}
	return string(c.Query)
}

// calibration sets class c's rate from its measured service times: the
// offered concurrency rate × mean service time is load_factor × pool.
func calibration(c *scenario.Class, pool calPool, times []time.Duration, took time.Duration) reports.Calibration {
	var sum time.Duration
	for _, t := range times {
		sum += t
	}
	mean := sum / time.Duration(len(times))
	sorted := slices.Sorted(slices.Values(times))
	return reports.Calibration{
		Class: c.Name, Query: classQuery(c), Samples: int64(len(times)), Seconds: took.Seconds(),
		ServiceMean: ms(mean), ServiceP50: ms(sorted[(len(sorted)-1)/2]),
		LoadFactor: c.LoadFactor, Pool: pool.size, PoolName: pool.name,
		Rate: c.LoadFactor * float64(pool.size) / mean.Seconds(),
	}
}

// serviceTimes runs class c's query for the dominant tenant one at a time
// and returns each one's time.
func (r *runner) serviceTimes(ctx context.Context, c *scenario.Class) ([]time.Duration, time.Duration, error) {
	conn, err := pgx.Connect(ctx, r.primary.DSN())
	if err != nil {
		return nil, 0, fmt.Errorf("connect to primary %s: %w", r.primary.RedactedDSN(), err)
	}
	defer conn.Close(context.Background())
	prog := c.Program()
	if prog == nil {
		return nil, 0, fmt.Errorf("%w: class %s has no script (validate the scenario first)", ErrRun, c.Name)
	}
	one := func(seq int64) error {
		rng := rand.New(rand.NewPCG(uint64(r.sc.Seed), uint64(seq)))
		err := prog.Run(ctx, scriptConn{conn}, rng, r.bind[scenario.DominantTenant-1])
		if err != nil && !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.Background(), "ROLLBACK")
		}
		return err
	}
	if err := one(0); err != nil { // caches warmed, not measured
		return nil, 0, err
	}
	var times []time.Duration
	t0 := time.Now()
	limit := c.Calibrate.Duration()
	for seq := int64(1); time.Since(t0) < limit || len(times) < minCalibrationSamples; seq++ {
		s := time.Now()
		if err := one(seq); err != nil {
			return nil, 0, err
		}
		times = append(times, time.Since(s))
	}
	return times, time.Since(t0), nil
}
