package pools

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// TagPrefix starts the application_name of a connection borrowed for a
// tenant: "t:<tenant>". PostgreSQL keeps at most 63 bytes of an
// application_name and shows bytes outside printable ASCII as '?': tenant
// ids of up to 61 printable ASCII bytes appear intact in pg_stat_activity
// (any string is safe to pass; it is a bound parameter).
const TagPrefix = "t:"

// ActivityGroup is what the client backends sharing one application_name are
// doing at one instant, from pg_stat_activity.
type ActivityGroup struct {
	// ApplicationName is the group's application_name ("t:42",
	// "noisysim-interactive", "" for clients that set none).
	ApplicationName string
	// Tenant is ApplicationName without TagPrefix when it has it, else "".
	Tenant string
	// Connections is the number of backends in the group.
	Connections int
	// Active backends are running a query; WaitingOnLock of them wait on a
	// heavyweight lock (wait_event_type 'Lock').
	Active        int
	WaitingOnLock int
	// IdleInTransaction backends hold a transaction open between statements
	// (including aborted ones).
	IdleInTransaction int
	// Idle backends wait for a new command.
	Idle int
	// LongestQuery is how long the oldest running query of the group has
	// been running (0 when none is active).
	LongestQuery time.Duration
	// LongestTransaction is the age of the oldest open transaction (0 when
	// none).
	LongestTransaction time.Duration
}

// activitySQL reads client backends of the current database, except the
// reading session itself. Durations are in µs, measured on the server clock.
const activitySQL = `
SELECT coalesce(application_name, ''),
       count(*),
       count(*) FILTER (WHERE state = 'active'),
       count(*) FILTER (WHERE state = 'active' AND wait_event_type = 'Lock'),
       count(*) FILTER (WHERE state IN ('idle in transaction', 'idle in transaction (aborted)')),
       count(*) FILTER (WHERE state = 'idle'),
       coalesce(max(extract(epoch FROM clock_timestamp() - query_start)) FILTER (WHERE state = 'active'), 0)::float8 * 1e6,
       coalesce(max(extract(epoch FROM clock_timestamp() - xact_start)), 0)::float8 * 1e6
FROM pg_stat_activity
WHERE backend_type = 'client backend'
  AND datname = current_database()
  AND pid <> pg_backend_pid()
GROUP BY 1
ORDER BY 1`

// Activity returns who is using the database now: pg_stat_activity grouped
// by application_name, sorted by it. It runs one query on q and is cheap
// enough to call every few milliseconds during a run.
//
// q must be a superuser or a member of pg_read_all_stats (pg_monitor):
// for other roles PostgreSQL hides the state of other roles' backends, and
// those backends would count in Connections only. Durations are measured
// on the server's clock at the time of reading.
func Activity(ctx context.Context, q Querier) ([]ActivityGroup, error) {
	rows, err := q.Query(ctx, activitySQL)
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	groups, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ActivityGroup, error) {
		var (
			g               ActivityGroup
			queryUS, txUS   float64
			n, act, lck, it int64
			idle            int64
		)
		if err := row.Scan(&g.ApplicationName, &n, &act, &lck, &it, &idle, &queryUS, &txUS); err != nil {
			return g, err
		}
		g.Connections, g.Active, g.WaitingOnLock, g.IdleInTransaction, g.Idle = int(n), int(act), int(lck), int(it), int(idle)
		g.LongestQuery = time.Duration(max(queryUS, 0)) * time.Microsecond
		g.LongestTransaction = time.Duration(max(txUS, 0)) * time.Microsecond
		if t, ok := strings.CutPrefix(g.ApplicationName, TagPrefix); ok {
			g.Tenant = t
		}
		return g, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read pg_stat_activity: %w", err)
	}
	return groups, nil
}

// Housekeeping reports whether query (as pg_stat_activity shows it) is one
// of the statements a Stack runs on a connection around a tenant's work —
// setting the tag, resetting the session — which run while the
// connection shows its pool's application_name rather than a tenant's
// tag. A sampler that requires every active backend to carry a tag skips
// these.
func Housekeeping(query string) bool {
	switch query = strings.TrimSpace(query); query {
	case tagSQL, tagLocalSQL, resetSQL:
		return true
	}
	return slices.Contains(queryReset, query) || slices.Contains(resetCommands, query)
}
