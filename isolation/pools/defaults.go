package pools

import (
	"fmt"
	"time"

	"github.com/noisysim/noisysim/isolation/limiter"
)

// Pool and limiter settings of the reference design. The role settings are
// the Interactive*/Heavy* constants in roles.go.
const (
	InteractivePoolSize       = 30
	InteractiveAcquireTimeout = 1500 * time.Millisecond
	InteractivePerTenant      = 4
	InteractiveQueue          = 20
	InteractiveMaxWait        = 1500 * time.Millisecond

	HeavyPoolSize       = 4
	HeavyAcquireTimeout = 5 * time.Second
	HeavyPerTenant      = 1
	HeavyQueue          = 5
	HeavyMaxWait        = 10 * time.Second

	// NaivePoolSize is the one shared pool of the naive configuration.
	NaivePoolSize = 40
	// NaivePoolName names that pool; its connections show
	// "noisysim-naive" while idle.
	NaivePoolName = "naive"
)

// DefaultIsolated returns the reference design's isolated configuration:
// a pool and a limiter per class, interactiveDSN and heavyDSN logging in as
// the roles of DefaultRoles (create them with EnsureRoles). heavyDSN points
// at the replica when the topology has one, else at the primary. The
// limiters are new; the caller may replace them. It fails only if the
// limiter package rejects the constants.
func DefaultIsolated(interactiveDSN, heavyDSN string) (Config, error) {
	interactive, err := limiter.New(limiter.Config{
		MaxPerTenant: InteractivePerTenant, MaxQueue: InteractiveQueue, MaxWait: InteractiveMaxWait,
	})
	if err != nil {
		return Config{}, fmt.Errorf("default isolated config: interactive limiter: %w", err)
	}
	heavy, err := limiter.New(limiter.Config{
		MaxPerTenant: HeavyPerTenant, MaxQueue: HeavyQueue, MaxWait: HeavyMaxWait,
	})
	if err != nil {
		return Config{}, fmt.Errorf("default isolated config: heavy limiter: %w", err)
	}
	return Config{
		Pools: []PoolConfig{
			{Name: string(Interactive), DSN: interactiveDSN, Size: InteractivePoolSize, AcquireTimeout: InteractiveAcquireTimeout},
			{Name: string(Heavy), DSN: heavyDSN, Size: HeavyPoolSize, AcquireTimeout: HeavyAcquireTimeout},
		},
		Classes: map[Class]ClassConfig{
			Interactive: {Pool: string(Interactive), Limiter: interactive},
			Heavy:       {Pool: string(Heavy), Limiter: heavy},
		},
	}, nil
}

// DefaultNaive returns the naive configuration, the "before" picture: both
// classes share one pool of NaivePoolSize on dsn (logging in as NaiveRole,
// without per-class timeouts), with no limiter and no acquire timeout.
func DefaultNaive(dsn string) Config {
	return Config{
		Pools: []PoolConfig{{Name: NaivePoolName, DSN: dsn, Size: NaivePoolSize}},
		Classes: map[Class]ClassConfig{
			Interactive: {Pool: NaivePoolName},
			Heavy:       {Pool: NaivePoolName},
		},
	}
}
