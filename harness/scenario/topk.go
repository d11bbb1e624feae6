package scenario

import (
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// CheckAll is the TopK of every quiet tenant (check_top: all).
const CheckAll TopK = -1

// TopK is a number of tenants, or CheckAll; written as an integer or "all".
type TopK int

// String returns "all" for CheckAll, else the number.
func (k TopK) String() string {
	if k == CheckAll {
		return "all"
	}
	return strconv.Itoa(int(k))
}

// UnmarshalYAML reads an integer or "all".
func (k *TopK) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "all" {
			*k = CheckAll
			return nil
		}
		if v, err := strconv.Atoi(n.Value); err == nil {
			if v < 0 {
				return typeError(n, fmt.Sprintf("must be a number of quiet tenants >= 0 or all, got %d", v))
			}
			*k = TopK(v)
			return nil
		}
	}
	return typeError(n, "must be a number of quiet tenants or all, got "+describe(n))
}

// CalibrationPool returns the pool a calibrated class's offered
// concurrency is set against (see Class.LoadFactor), and its name: the
// largest shared pool of the shared configurations (configuration name,
// "shared"); with none, the largest pool of the class's isolation class
// among the isolated configurations. size is 0 when there is no
// configuration.
func (s *Scenario) CalibrationPool(c *Class) (size int, name string) {
	for _, cf := range s.Configurations {
		if cf.Mode == ModeShared && cf.Shared.PoolSize > size {
			size, name = cf.Shared.PoolSize, cf.Name+" shared pool"
		}
	}
	if size > 0 {
		return size, name
	}
	for i := range s.Configurations {
		cf := &s.Configurations[i]
		if p := cf.Pool(c.IsolationClass); cf.Mode == ModeIsolated && p != nil && p.PoolSize > size {
			size, name = p.PoolSize, fmt.Sprintf("%s %s pool", cf.Name, c.IsolationClass)
		}
	}
	return size, name
}
