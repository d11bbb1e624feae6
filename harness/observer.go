package harness

import (
	"errors"
	"time"

	"github.com/noisysim/noisysim/reports"
	"github.com/noisysim/noisysim/workload"
)

// Observer sees a run as it goes (live metrics, harness/live): each
// request's outcome, each point of a configuration's series and each
// phase. Its methods are called from the run's goroutines, concurrently,
// and must not block.
type Observer interface {
	// Outcome is one request's result, as recorded in its window.
	Outcome(Outcome)
	// Point is a configuration's series point, once a second.
	Point(configuration string, p reports.Point)
	// Phase says the named phase of configuration started. configuration
	// is "" for a phase of no configuration (PhaseStart, PhaseLoad,
	// "calibrate (class)").
	Phase(configuration, phase string)
}

// Outcome is one request's result.
type Outcome struct {
	Configuration string
	// TenantID is the tenant's number (1 is the dominant tenant, the
	// others in falling share); Tenant its key.
	TenantID int
	Tenant   string
	Class    string
	// Latency is from the intended start to the answer.
	Latency time.Duration
	// Error is "" for a success, else the error's class as the report
	// counts it: "dropped", "incomplete", or an allowed_errors name
	// (queue_full, statement_timeout, ...).
	Error string
}

// observed wraps rec so that each result also goes to the run's
// Observer; rec itself when there is none.
func (r *runner) observed(configuration string, rec workload.Recorder) workload.Recorder {
	o := r.opts.Observer
	if o == nil {
		return rec
	}
	return workload.RecorderFunc(func(res workload.Result) {
		rec.Record(res)
		out := Outcome{Configuration: configuration, TenantID: res.Op.Tenant, Tenant: r.key(res.Op.Tenant),
			Class: res.Op.Class, Latency: res.Latency()}
		switch {
		case res.Err == nil:
		case errors.Is(res.Err, workload.ErrDropped):
			out.Error = "dropped"
		case errors.Is(res.Err, workload.ErrIncomplete):
			out.Error = "incomplete"
		default:
			out.Error = errorClass(res.Err)
		}
		o.Outcome(out)
	})
}
