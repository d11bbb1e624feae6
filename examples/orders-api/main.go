// Command orders-api is a small multi-tenant HTTP service built on
// noisysim's isolation stack, to show how a team puts its own service
// under noisysim's gate (scenarios/service-gate.yaml).
//
// Routes (tenant from the path):
//
//	GET /healthz                            ready check
//	GET /tenants/{tenant}/orders?customer=c7 a page of a customer's recent orders (interactive)
//	GET /tenants/{tenant}/orders/{id}       one order (interactive)
//	GET /tenants/{tenant}/report            a year of orders aggregated by month (heavy)
//
// Every query goes through the stack (isolation/pools): the tenant's
// limiter slot for its class, a pool per class, the connection tagged
// application_name t:<tenant>. A tenant over its limit gets 429 with
// Retry-After (isolation/limiter.WriteHTTP); a pool timeout gets 503.
//
// -bypass-report (or ORDERS_API_BYPASS_REPORT=1) is the regression the gate
// exists to catch: the report route goes around the stack, straight to a
// pool of its own, without limiter or tag.
//
//	orders-api -addr 127.0.0.1:8080 -interactive-dsn "$I" -heavy-dsn "$H"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noisysim/noisysim/isolation/limiter"
	"github.com/noisysim/noisysim/isolation/pools"
)

const (
	pageSQL = `SELECT id, created_at, amount, status FROM orders WHERE tenant_id = $1 AND customer = $2
		ORDER BY created_at DESC LIMIT 20`
	lookupSQL = `SELECT id, created_at, amount, status FROM orders WHERE tenant_id = $1 AND id = $2`
	reportSQL = `SELECT date_trunc('month', created_at) AS month, status, count(*), sum(amount), avg(amount)
		FROM orders WHERE tenant_id = $1 AND created_at >= now() - interval '1 year' GROUP BY 1, 2 ORDER BY 1, 2`
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	interactiveDSN := flag.String("interactive-dsn", os.Getenv("ORDERS_API_INTERACTIVE_DSN"), "DSN of the interactive role")
	heavyDSN := flag.String("heavy-dsn", os.Getenv("ORDERS_API_HEAVY_DSN"), "DSN of the heavy role (a replica's, or the primary's)")
	bypass := flag.Bool("bypass-report", os.Getenv("ORDERS_API_BYPASS_REPORT") == "1", "send the report route around the isolation stack (the regression)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*addr, *interactiveDSN, *heavyDSN, *bypass, log); err != nil {
		log.Error("orders-api", "err", err)
		os.Exit(1)
	}
}

func run(addr, interactiveDSN, heavyDSN string, bypass bool, log *slog.Logger) error {
	if interactiveDSN == "" || heavyDSN == "" {
		return errors.New("give -interactive-dsn and -heavy-dsn (or ORDERS_API_INTERACTIVE_DSN, ORDERS_API_HEAVY_DSN)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	interactive, err := limiter.New(limiter.Config{MaxPerTenant: 8, MaxQueue: 50, MaxWait: 3 * time.Second})
	if err != nil {
		return err
	}
	heavy, err := limiter.New(limiter.Config{MaxPerTenant: 1, MaxQueue: 0})
	if err != nil {
		return err
	}
	st, err := pools.New(ctx, pools.Config{
		Pools: []pools.PoolConfig{
			{Name: "interactive", DSN: interactiveDSN, Size: 12, AcquireTimeout: 3 * time.Second},
			{Name: "heavy", DSN: heavyDSN, Size: 2, AcquireTimeout: 5 * time.Second},
		},
		Classes: map[pools.Class]pools.ClassConfig{
			pools.Interactive: {Pool: "interactive", Limiter: interactive},
			pools.Heavy:       {Pool: "heavy", Limiter: heavy},
		},
		Logger: log,
	})
	if err != nil {
		return err
	}
	defer st.Close()
	a := &api{stack: st, log: log}
	if bypass {
		// The regression: a pool of its own for reports, no limiter, no
		// tag, sized "to keep up".
		cfg, err := pgxpool.ParseConfig(heavyDSN)
		if err != nil {
			return err
		}
		cfg.MaxConns = 16
		if a.direct, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
			return err
		}
		defer a.direct.Close()
		log.Warn("report route bypasses the isolation stack")
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /tenants/{tenant}/orders", a.page)
	mux.HandleFunc("GET /tenants/{tenant}/orders/{id}", a.lookup)
	mux.HandleFunc("GET /tenants/{tenant}/report", a.report)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("listening", "addr", addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

type api struct {
	stack  *pools.Stack
	direct *pgxpool.Pool // the bypass; nil as built
	log    *slog.Logger
}

// tenant returns the path's tenant id, or writes 400.
func tenant(w http.ResponseWriter, r *http.Request) (string, int64, bool) {
	t := r.PathValue("tenant")
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		http.Error(w, "tenant must be a number", http.StatusBadRequest)
		return "", 0, false
	}
	return t, n, true
}

func (a *api) page(w http.ResponseWriter, r *http.Request) {
	t, n, ok := tenant(w, r)
	if !ok {
		return
	}
	customer := r.URL.Query().Get("customer")
	if customer == "" {
		customer = "c1"
	}
	res, err := a.stack.Query(r.Context(), pools.Interactive, t, pageSQL, n, customer)
	a.answer(w, res.Rows, err)
}

func (a *api) lookup(w http.ResponseWriter, r *http.Request) {
	t, n, ok := tenant(w, r)
	if !ok {
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		http.Error(w, "id must be a number", http.StatusBadRequest)
		return
	}
	res, err := a.stack.Query(r.Context(), pools.Interactive, t, lookupSQL, n, id)
	a.answer(w, res.Rows, err)
}

func (a *api) report(w http.ResponseWriter, r *http.Request) {
	t, n, ok := tenant(w, r)
	if !ok {
		return
	}
	if a.direct != nil {
		rows, err := a.direct.Query(r.Context(), reportSQL, n)
		var count int64
		if err == nil {
			for rows.Next() {
				count++
			}
			rows.Close()
			err = rows.Err()
		}
		a.answer(w, count, err)
		return
	}
	res, err := a.stack.Query(r.Context(), pools.Heavy, t, reportSQL, n)
	a.answer(w, res.Rows, err)
}

// answer writes the outcome: the row count, 429 with Retry-After for a
// limiter rejection, 503 for a pool timeout, 500 otherwise.
func (a *api) answer(w http.ResponseWriter, rows int64, err error) {
	switch {
	case err == nil:
		fmt.Fprintf(w, "{\"rows\":%d}\n", rows)
	case limiter.WriteHTTP(w, err):
	case errors.Is(err, pools.ErrAcquireTimeout):
		w.Header().Set("Retry-After", "1")
		http.Error(w, "busy", http.StatusServiceUnavailable)
	case errors.Is(err, context.Canceled), errors.Is(err, pgx.ErrNoRows):
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
	default:
		a.log.Warn("query", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
	}
}
