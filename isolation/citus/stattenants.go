package citus

import (
	"context"
	"fmt"
)

// ResetStatTenants clears the counts of citus_stat_tenants on every node
// (citus_stat_tenants_reset, Citus 11.3 and later), so that a later
// StatTenants covers only what ran since. Without it, StatTenants sums the
// current and the last citus.stat_tenants_period (default 60 s), which
// mixes in whatever ran before the window compared. Errors: the database
// error, wrapped.
func ResetStatTenants(ctx context.Context, db DB) error {
	if _, err := db.Exec(ctx, "SELECT citus_stat_tenants_reset()"); err != nil {
		return fmt.Errorf("reset citus_stat_tenants: %w", err)
	}
	return nil
}
