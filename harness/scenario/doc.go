// Package scenario reads noisysim scenario files: YAML documents that name the
// cluster to run against, the tenant population, the classes of traffic, the
// phases, the isolation configurations to compare and the assertions that
// decide pass or fail.
//
// Decoding is strict: an unknown or duplicate key is an error, as is a value
// of the wrong type or out of range. Load and Parse report every problem at
// once, each with file:line:col and the field's path:
//
//	scenarios/x.yaml: 2 problems
//	scenarios/x.yaml:5:3: tenants.dominant_share: must be in (0, 1), got 1.2
//	scenarios/x.yaml:9:40: classes[0].rate: must be > 0 arrivals per second, got 0
//
// The error is an *Error listing Problems; it matches ErrInvalid, which the
// CLI maps to exit code 2.
//
// Keys left out, or set to null, take their defaults (the Default* constants
// and functions). Durations are Go duration strings ("1.5s", "500ms"); rates
// are per second; memory sizes are PostgreSQL's ("64MB"). REFERENCE.md in
// this directory lists every key with its unit, default and rule.
//
// Loading a scenario:
//
//	s, err := scenario.Load("scenarios/ci-gate.yaml")
//	if errors.Is(err, scenario.ErrInvalid) {
//		fmt.Fprintln(os.Stderr, err) // every problem, one per line
//		os.Exit(2)
//	}
//	for _, c := range s.Configurations {
//		fmt.Println(c.Name, c.Mode, c.Expect)
//	}
package scenario
