package pools

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// standbyPoll is how often WaitForStandby reads the standby's replay
// position.
const standbyPoll = 10 * time.Millisecond

// WaitForStandby returns once standby has replayed the WAL that primary had
// written when it was called, so that roles created on the primary by
// EnsureRoles can log in to the standby. Both must be connections of a
// superuser (or of pg_monitor members). It returns ctx's error if ctx ends
// first, or the first query error; an error wraps ErrInvalidConfig when
// standby is not in recovery.
func WaitForStandby(ctx context.Context, primary, standby Querier) error {
	var target string
	if err := queryRow(ctx, primary, "SELECT pg_current_wal_lsn()::text", nil, &target); err != nil {
		return fmt.Errorf("wait for standby: read primary WAL position: %w", err)
	}
	tick := time.NewTicker(standbyPoll)
	defer tick.Stop()
	for {
		var caught, recovering bool
		err := queryRow(ctx, standby,
			"SELECT pg_is_in_recovery(), coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)",
			[]any{target}, &recovering, &caught)
		switch {
		case err != nil:
			return fmt.Errorf("wait for standby: read replay position: %w", err)
		case !recovering:
			return fmt.Errorf("wait for standby: server is not in recovery: %w", ErrInvalidConfig)
		case caught:
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for standby to replay %s: %w", target, ctx.Err())
		case <-tick.C:
		}
	}
}

// queryRow runs sql with args and scans its single row into dests.
func queryRow(ctx context.Context, q Querier, sql string, args []any, dests ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("no row")
	}
	if err := rows.Scan(dests...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}
