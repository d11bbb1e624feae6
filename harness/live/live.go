// Package live serves a run's live metrics to Prometheus while it runs:
// Metrics is a harness.Observer that keeps them in a registry of its own,
// Serve serves that registry's /metrics on an address.
//
// The metrics, each labelled by configuration:
//
//	noisysim_request_latency_seconds{configuration, tenant, class}   histogram, from each request's intended start
//	noisysim_operations_total{configuration, class}                  requests answered (errors included, drops not)
//	noisysim_errors_total{configuration, class, error}               by error class (queue_full, statement_timeout, incomplete, ...)
//	noisysim_dropped_total{configuration, class}                     requests the generator could not issue in time
//	noisysim_limiter_in_flight{configuration, class}                 at the last second's end
//	noisysim_limiter_queued{configuration, class}                    at the last second's end
//	noisysim_limiter_rejections_total{configuration, class, reason}   queue_full, wait_exceeded
//	noisysim_db_time_share{configuration, tenant}                    the last second's top 5 tenants (0..1)
//	noisysim_phase{configuration, phase}                             1 for the phase running, the others absent
//
// The tenant label is the tenant's key for the dominant tenant and the
// quiet tenants with the largest shares (tenants 1..TopTenants); every
// other quiet tenant is folded into OtherQuiet. So the latency histogram
// has at most (TopTenants + 1) × classes × configurations series, whatever
// the number of tenants.
//
// Example:
//
//	m := live.New(live.DefaultTopTenants)
//	srv, err := live.Serve("127.0.0.1:9464", m, false)
//	if err != nil { ... }
//	defer srv.Close()
//	rep, err := harness.Run(ctx, sc, harness.Options{Observer: m})
package live

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/reports"
)

// DefaultTopTenants is how many tenants keep their own tenant label by
// default: the dominant tenant and the 9 largest quiet ones.
const DefaultTopTenants = 10

// OtherQuiet is the tenant label of the quiet tenants beyond the top.
const OtherQuiet = "quiet (rest)"

// DefaultAddr is the address noisysim run --metrics-addr suggests.
const DefaultAddr = "127.0.0.1:9464"

// LatencyBuckets are the latency histogram's bucket bounds, in seconds:
// 0.5 ms to about 33 s, doubling.
var LatencyBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

// Metrics is a harness.Observer keeping the run's metrics.
type Metrics struct {
	reg      *prometheus.Registry
	top      int
	latency  *prometheus.HistogramVec
	ops      *prometheus.CounterVec
	errs     *prometheus.CounterVec
	dropped  *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
	queued   *prometheus.GaugeVec
	rejected *prometheus.CounterVec
	share    *prometheus.GaugeVec
	phase    *prometheus.GaugeVec

	mu     sync.Mutex
	shares map[string][]string // the tenants with a share gauge, per configuration
}

var _ harness.Observer = (*Metrics)(nil)

// New returns Metrics that label tenants 1..top by their key and fold the
// others into OtherQuiet; top < 1 means DefaultTopTenants.
func New(top int) *Metrics {
	if top < 1 {
		top = DefaultTopTenants
	}
	m := &Metrics{reg: prometheus.NewRegistry(), top: top, shares: map[string][]string{}}
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "noisysim_request_latency_seconds",
		Help:    "Request latency from the intended start, per tenant (the top tenants; the rest folded) and class.",
		Buckets: LatencyBuckets}, []string{"configuration", "tenant", "class"})
	m.ops = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noisysim_operations_total",
		Help: "Requests answered, errors included, drops not."}, []string{"configuration", "class"})
	m.errs = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noisysim_errors_total",
		Help: "Requests answered with an error, by error class."}, []string{"configuration", "class", "error"})
	m.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noisysim_dropped_total",
		Help: "Requests the generator could not issue in time."}, []string{"configuration", "class"})
	m.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "noisysim_limiter_in_flight",
		Help: "Requests holding a limiter slot, per isolation class."}, []string{"configuration", "class"})
	m.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "noisysim_limiter_queued",
		Help: "Requests waiting for a limiter slot, per isolation class."}, []string{"configuration", "class"})
	m.rejected = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "noisysim_limiter_rejections_total",
		Help: "Requests the limiter turned away, per isolation class and reason."}, []string{"configuration", "class", "reason"})
	m.share = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "noisysim_db_time_share",
		Help: "Share of DB time in the last second of the top 5 tenants, 0..1."}, []string{"configuration", "tenant"})
	m.phase = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "noisysim_phase",
		Help: "1 for the phase running."}, []string{"configuration", "phase"})
	m.reg.MustRegister(m.latency, m.ops, m.errs, m.dropped, m.inFlight, m.queued, m.rejected, m.share, m.phase)
	return m
}

// Registry is the registry the metrics are in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// tenant is the tenant label of a tenant.
func (m *Metrics) tenant(id int, key string) string {
	if id >= 1 && id <= m.top {
		return key
	}
	return OtherQuiet
}

// Outcome counts one request.
func (m *Metrics) Outcome(o harness.Outcome) {
	if o.Error == "dropped" {
		m.dropped.WithLabelValues(o.Configuration, o.Class).Inc()
		return
	}
	m.ops.WithLabelValues(o.Configuration, o.Class).Inc()
	if o.Error != "" {
		m.errs.WithLabelValues(o.Configuration, o.Class, o.Error).Inc()
	}
	m.latency.WithLabelValues(o.Configuration, m.tenant(o.TenantID, o.Tenant), o.Class).Observe(o.Latency.Seconds())
}

// Point sets the limiter gauges and the DB-time shares.
func (m *Metrics) Point(configuration string, p reports.Point) {
	for _, l := range p.Limiters {
		m.inFlight.WithLabelValues(configuration, l.Class).Set(float64(l.InFlight))
		m.queued.WithLabelValues(configuration, l.Class).Set(float64(l.Queued))
		split := int64(0)
		for reason, n := range l.RejectedByReason {
			m.rejected.WithLabelValues(configuration, l.Class, reason).Add(float64(n))
			split += n
		}
		if rest := l.Rejected - split; rest > 0 {
			m.rejected.WithLabelValues(configuration, l.Class, "unknown").Add(float64(rest))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.shares[configuration] {
		m.share.DeleteLabelValues(configuration, t)
	}
	m.shares[configuration] = m.shares[configuration][:0]
	for _, s := range p.TopDBTime {
		m.share.WithLabelValues(configuration, s.Tenant).Set(s.Share)
		m.shares[configuration] = append(m.shares[configuration], s.Tenant)
	}
}

// Phase marks the phase running.
func (m *Metrics) Phase(configuration, phase string) {
	m.phase.Reset()
	m.phase.WithLabelValues(configuration, phase).Set(1)
}

// ErrNotLoopback is returned by Serve for an address that is not on the
// loopback interface when remote is false.
var ErrNotLoopback = errors.New("not a loopback address")

// CheckAddr checks addr (host:port): its host must be a loopback address
// or "localhost" unless remote.
func CheckAddr(addr string, remote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("metrics address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("metrics address %q: port %q: want 0..65535", addr, port)
	}
	if remote {
		return nil
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("metrics address %q: %w: it would serve the run's metrics to the network", addr, ErrNotLoopback)
}

// Server serves a registry's metrics on /metrics.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
}

// Serve listens on addr (checked by CheckAddr) and serves m's metrics on
// /metrics until Close.
func Serve(addr string, m *Metrics, remote bool) (*Server, error) {
	if err := CheckAddr(addr, remote); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	s := &Server{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server; it is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		err = s.srv.Close()
		<-s.done
	})
	return err
}
