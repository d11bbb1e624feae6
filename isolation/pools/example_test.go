package pools_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
)

// The isolated stack on a primary and its standby. It needs a running
// cluster, so it is compiled but not run; the package's tests run the same
// steps against throwaway PostgreSQL.
func Example() {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, os.Getenv("ADMIN_DSN")) // a superuser on the primary
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close(ctx)

	interactive, heavy := pools.DefaultRoles()
	interactive.WriteTables = []string{"orders"}
	heavy.ReadTables = []string{"orders"}
	pw, err := pools.EnsureRoles(ctx, admin, "app", interactive, heavy)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := pools.DefaultIsolated(
		fmt.Sprintf("postgres://%s:%s@primary:5432/app", interactive.Name, pw[interactive.Name]),
		fmt.Sprintf("postgres://%s:%s@replica:5432/app", heavy.Name, pw[heavy.Name]))
	if err != nil {
		log.Fatal(err)
	}
	stack, err := pools.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer stack.Close()

	p, _ := stack.Placement(pools.Heavy)
	fmt.Println(p) // heavy → pool heavy at replica:5432 (standby)

	res, err := stack.Query(ctx, pools.Interactive, "42", "SELECT * FROM orders WHERE tenant_id = $1", 42)
	switch {
	case errors.Is(err, limiter.ErrLimited):
		fmt.Println("tenant 42 is over its share; answer 429")
	case pools.Classify(err) == pools.ErrorStatementTimeout:
		fmt.Println("query exceeded the interactive statement_timeout")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(res.Rows, "rows in", res.DBTime)
	}

	for _, r := range stack.Ledger().Ranking(3) {
		fmt.Printf("%s: %.0f%% of DB time\n", r.Tenant, r.Share*100)
	}
}

func ExampleLedger_Ranking() {
	ledger, err := pools.NewLedger(pools.LedgerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	ledger.Record("noisy", pools.Heavy, 1200*time.Millisecond)
	ledger.Record("noisy", pools.Interactive, 300*time.Millisecond)
	ledger.Record("quiet", pools.Interactive, 500*time.Millisecond)

	for _, r := range ledger.Ranking(2) {
		fmt.Printf("%s %s %.0f%% (heavy %s)\n", r.Tenant, r.DBTime, r.Share*100, r.ByClass[pools.Heavy])
	}
	// Output:
	// noisy 1.5s 75% (heavy 1.2s)
	// quiet 500ms 25% (heavy 0s)
}

func ExampleNewLedger_alert() {
	ledger, err := pools.NewLedger(pools.LedgerConfig{
		ShareThreshold: 0.5,
		Window:         10 * time.Second,
		OnAlert: func(a pools.Alert) {
			log.Printf("noisy neighbour: %v", a) // e.g. throttle the tenant further
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = ledger // give it to Config.Ledger instead to have the Stack feed it
}

func ExampleClassify() {
	err := fmt.Errorf("acquire interactive slot: %w", &limiter.LimitError{Tenant: "42", Reason: limiter.ReasonQueueFull, RetryAfter: time.Second})
	fmt.Println(pools.Classify(err))
	fmt.Println(pools.Classify(&pools.AcquireTimeoutError{Class: pools.Interactive, Pool: "interactive", Timeout: 1500 * time.Millisecond}))
	fmt.Println(pools.Classify(context.Canceled))
	// Output:
	// limited_queue_full
	// acquire_timeout
	// cancelled
}

func ExampleActivity() {
	ctx := context.Background()
	monitor, err := pgx.Connect(ctx, os.Getenv("ADMIN_DSN")) // superuser or pg_monitor
	if err != nil {
		log.Fatal(err)
	}
	defer monitor.Close(ctx)
	groups, err := pools.Activity(ctx, monitor)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range groups {
		if g.Tenant != "" {
			fmt.Printf("tenant %s: %d active (%d waiting on locks), %d idle in transaction, longest query %s\n",
				g.Tenant, g.Active, g.WaitingOnLock, g.IdleInTransaction, g.LongestQuery)
		}
	}
}
