package scenario_test

import (
	"errors"
	"fmt"

	"github.com/noisysim/noisysim/harness/scenario"
)

func ExampleLoad() {
	s, err := scenario.Load("../../scenarios/ci-gate.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Name, "seed", s.Seed, "topology", s.Backend.Topology)
	for _, c := range s.Classes {
		rate := fmt.Sprintf("%g/s", c.Rate)
		if c.Calibrated() { // set by the run from the query's measured service time
			rate = fmt.Sprintf("load factor %g (calibrated for %s)", c.LoadFactor, c.Calibrate)
		}
		fmt.Printf("class %s: %s on %s, %s from %s tenants\n", c.Name, c.Query, c.IsolationClass, rate, c.Senders)
	}
	for _, c := range s.Configurations {
		fmt.Printf("configuration %s: mode %s, expect %s\n", c.Name, c.Mode, c.Expect)
	}
	iso, _ := s.Configuration("isolated")
	fmt.Println("heavy limiter per tenant:", iso.Heavy.Limiter.MaxPerTenant, "max wait:", iso.Heavy.Limiter.MaxWait)
	// Output:
	// ci-gate seed 42 topology single
	// class lookup: lookup on interactive, 200/s from all tenants
	// class page: page on interactive, 100/s from all tenants
	// class report: report on heavy, load factor 3 (calibrated for 2s) from dominant tenants
	// configuration naive: mode shared, expect fail
	// configuration isolated: mode isolated, expect pass
	// heavy limiter per tenant: 1 max wait: 10s
}

func ExampleLoad_problems() {
	_, err := scenario.Load("testdata/unknown-key.yaml")
	if errors.Is(err, scenario.ErrInvalid) { // the CLI exits 2
		fmt.Println(err)
	}
	// Output:
	// testdata/unknown-key.yaml: 3 problems
	// testdata/unknown-key.yaml:4:3: tenants.dominant_shar: unknown key "dominant_shar"; did you mean "dominant_share"?
	// testdata/unknown-key.yaml:6:50: classes[0].colour: unknown key "colour"; known keys: args, arrival, batch, calibrate, http, isolation_class, load_factor, name, query, rate, script, senders, sleep, sql
	// testdata/unknown-key.yaml:9:1: phase: unknown key "phase"; did you mean "phases"?
}

func ExampleParse() {
	src := []byte(`
name: tiny
tenants: {count: 10, dominant_share: 0.5}
classes:
  - {name: interactive, query: sleep, sleep: 5ms, rate: 100}
configurations:
  - {name: isolated, mode: isolated, interactive: {pool_size: 8}}
`)
	s, err := scenario.Parse(src, "tiny.yaml")
	if err != nil {
		fmt.Println(err)
		return
	}
	c, _ := s.Configuration("isolated")
	fmt.Println("pool", c.Interactive.PoolSize, "acquire timeout", c.Interactive.AcquireTimeout, "statement_timeout", c.Interactive.Role.StatementTimeout)
	fmt.Println("run", s.Phases.Run, "orders", s.Data.Orders)
	// Output:
	// pool 8 acquire timeout 1.5s statement_timeout 3s
	// run 20s orders 200000
}

func ExampleScenario_Validate() {
	s := &scenario.Scenario{Name: "built in Go"}
	for _, err := range s.Validate()[:3] {
		fmt.Println(err)
	}
	// Output:
	// name: must be letters, digits, '.', '_' or '-', starting with a letter or digit; got "built in Go"
	// backend.kind: required: backend kind local, external or docker
	// backend.topology: required: topology single, replica, shards or citus
}
