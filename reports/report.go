package reports

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"
)

// Expectations a Configuration can carry.
const (
	// ExpectPass means the configuration's assertions must all pass.
	ExpectPass = "pass"
	// ExpectFail marks a control: at least one of its assertions must fail,
	// proving the scenario can see the problem.
	ExpectFail = "fail"
)

// QuietAll is the tenant label of the aggregate row over all quiet tenants
// (every tenant but the dominant one) of one class: the rows of
// Configuration.QuietAll and Configuration.SoloQuietAll, the assertions on
// those rows, and the aggregate rows of the terminal tables.
const QuietAll = "quiet (all)"

// QuietHotWorker and QuietOtherWorkers split QuietAll on topology citus:
// the quiet tenants whose shard was on the dominant tenant's worker when
// it started sending, and the others (Window.QuietWorkers, and the
// quiet_p99 assertions).
const (
	QuietHotWorker    = "quiet (hot worker)"
	QuietOtherWorkers = "quiet (other workers)"
)

// SchemaVersion is the version of report.json's shape that this package
// writes (Report.SchemaVersion): 2 added schema_version, the windows of each
// configuration, the window of assertions and intervals.
const SchemaVersion = 2

// Report is the result of one finished scenario run. The harness fills it;
// the renderers in this package only read it. JSON names are snake_case and
// stable: scripts read report.json.
type Report struct {
	// SchemaVersion is the shape of report.json; WriteJSON writes
	// SchemaVersion whatever the field holds.
	SchemaVersion int `json:"schema_version"`
	// Scenario is the scenario's name.
	Scenario string `json:"scenario"`
	// File is the scenario file the run was loaded from, if any.
	File string `json:"file,omitempty"`
	// FileAbs is File made absolute where the run ran, so that a later
	// command run from another directory still finds it.
	FileAbs string `json:"file_abs,omitempty"`
	// Seed seeded every random choice of the run.
	Seed int64 `json:"seed"`
	// ScheduleHash identifies the arrival schedule: same seed and scenario,
	// same hash.
	ScheduleHash string `json:"schedule_hash"`
	// Segment, in the partial report of one agent of many, is the slice of
	// the schedule it ran, "i/N" (noisysim run --segment); empty otherwise.
	Segment string `json:"segment,omitempty"`
	// Segments, in a report merged from N agents' (noisysim merge), is N;
	// 0 otherwise.
	Segments int `json:"segments,omitempty"`
	// Passed is the run's verdict: every configuration met its expectation.
	Passed bool `json:"passed"`
	// StartedAt is when the run started. Renderers show it in UTC.
	StartedAt time.Time `json:"started_at"`
	// Duration is the wall-clock length of the whole run, in seconds.
	Duration float64 `json:"duration_s"`
	// Backend describes the cluster, e.g. "local single (PostgreSQL 15.18)".
	Backend string `json:"backend"`
	// Version is noisysim's version (its module version and VCS revision,
	// as built), when known.
	Version string `json:"noisysim_version,omitempty"`
	// Dominant names the noisy tenant. Empty means the tenant with the most
	// requests in the first configuration.
	Dominant string `json:"dominant_tenant,omitempty"`
	// Notes are remarks about the run a reader should see, e.g.
	// "heavy class runs on the primary: topology has no replica".
	Notes []string `json:"notes,omitempty"`
	// Replay describes the replayed trace or log; nil when the run drew
	// its schedule.
	Replay *Replay `json:"replay,omitempty"`
	// Configurations are the compared configurations, in run order.
	Configurations []Configuration `json:"configurations"`
	// Assertions are every assertion evaluated, per configuration, tenant
	// and class.
	Assertions []Assertion `json:"assertions"`
	// HotShard is the hot-shard run's measurements, for a scenario with a
	// hot_shard section; nil otherwise.
	HotShard *HotShard `json:"hot_shard,omitempty"`
	// Machine is the nodes' CPU budgets and the disturbance guard's
	// figures; nil when neither applied.
	Machine *Machine `json:"machine,omitempty"`
	// QuietPlan is how many quiet tenant × class pairs quiet_p99 could
	// judge, as planned before the run; nil for scenarios without it.
	QuietPlan *QuietPlan `json:"quiet_plan,omitempty"`
	// Calibrations are the classes whose rate calibration set
	// (classes[].load_factor), in class order.
	Calibrations []Calibration `json:"calibrations,omitempty"`
	// Marginal are the assertions whose verdict is marginal (their limit
	// lies inside the observed value's confidence interval, or a control's
	// failures are all such), copied from Assertions: listed apart, as
	// noisysim run --strict fails on them.
	Marginal []Assertion `json:"marginal,omitempty"`
	// Incomplete, when set, says why the run stopped before its end, e.g.
	// "interrupted during run of naive": the report holds what was
	// measured until then (a configuration cut short is marked Incomplete
	// and has no assertions), Passed is false and no verdict was reached.
	Incomplete string `json:"incomplete,omitempty"`
	// Simulated is set when the figures come from noisysim simulate (a
	// model run in virtual time, no database), not from a real run.
	Simulated *Simulation `json:"simulated,omitempty"`
	// Attempts are the runs of the scenario noisysim run
	// --retry-disturbed or --retry-marginal made, in order, the last
	// being this report's own; nil without them (and in an interrupted
	// report, the attempts before the interrupted one).
	Attempts []Attempt `json:"attempts,omitempty"`
}

// Attempt is one run of a scenario under noisysim run --retry-disturbed,
// which runs a scenario again, with the same seed, when it failed on a
// window the machine disturbed, or --retry-marginal, when it failed on
// marginal verdicts only.
type Attempt struct {
	// Attempt numbers it from 1.
	Attempt int   `json:"attempt"`
	Seed    int64 `json:"seed"`
	Passed  bool  `json:"passed"`
	// Failed are the failed assertions that failed its verdict.
	Failed []Assertion `json:"failed,omitempty"`
	// Disturbed are its disturbed windows, in run order.
	Disturbed []DisturbedWindow `json:"disturbed,omitempty"`
	// Marginal is true when it failed and every check of Failed was
	// marginal (its limit inside the observed value's confidence
	// interval).
	Marginal bool `json:"marginal,omitempty"`
	// Retried is true when the scenario was run again after it: it failed
	// and a check of Failed was judged over a window of Disturbed
	// (Judged), or it failed on marginal verdicts only (Marginal) and
	// --retry-marginal allowed another attempt.
	Retried bool `json:"retried,omitempty"`
	// RetriedMarginal is true when it was retried for its marginal
	// verdicts (--retry-marginal), not for a disturbed window.
	RetriedMarginal bool `json:"retried_marginal,omitempty"`
	// Reports is the directory its reports were written to
	// (OUT/attempt-K); empty for the last attempt, whose reports are this
	// report, and without --out.
	Reports string `json:"reports,omitempty"`
}

// DisturbedWindow is a disturbed window of an Attempt.
type DisturbedWindow struct {
	Window string `json:"window"`
	// Why is Machine.Why of the window, e.g. "the hypervisor took 0.12
	// CPU, 9% of the CPU the machine ran (above 5%)".
	Why string `json:"why"`
	// Judged is true when a failed check of the attempt was judged over
	// the window (or which windows it rests on cannot be told): its
	// failure may be the machine's.
	Judged bool `json:"judged,omitempty"`
}

// FailedDisturbed reports whether a failed with a check judged over a
// disturbed window.
func (a Attempt) FailedDisturbed() bool {
	if a.Passed {
		return false
	}
	for _, w := range a.Disturbed {
		if w.Judged {
			return true
		}
	}
	return false
}

// DisturbedEveryAttempt reports whether r was run with --retry-disturbed or --retry-marginal
// and every attempt failed on a window the machine disturbed.
func (r *Report) DisturbedEveryAttempt() bool {
	if len(r.Attempts) == 0 {
		return false
	}
	for _, a := range r.Attempts {
		if !a.FailedDisturbed() {
			return false
		}
	}
	return true
}

// Simulation says how a simulated report's figures were made.
type Simulation struct {
	// Calibration is the real run's report.json the service times were
	// read from, with its scenario and seed.
	Calibration         string `json:"calibration"`
	CalibrationScenario string `json:"calibration_scenario"`
	CalibrationSeed     int64  `json:"calibration_seed"`
	// CalibrationSeeds are the seeds of every calibration run when the
	// model was calibrated on several (Calibration then names each file,
	// comma-separated; CalibrationSeed is the first's).
	CalibrationSeeds []int64 `json:"calibration_seeds,omitempty"`
	// Model names the contention model (package harness/sim).
	Model string `json:"model"`
	// Cores lists each node with the cores it was given ("primary 2").
	Cores string `json:"cores"`
	// Classes are the service-time distributions drawn from, per class.
	Classes []SimulatedClass `json:"classes"`
	// Interference is the model's slowdown per busy core beyond one
	// (harness/sim's Machine), fitted from the calibration report;
	// InterferenceFrom says from what. Machines says which nodes share a
	// machine.
	Interference     float64 `json:"interference"`
	InterferenceFrom string  `json:"interference_from,omitempty"`
	Machines         string  `json:"machines,omitempty"`
	// SliceMs is the scheduler's time slice of the model's nodes
	// (harness/sim's Node.Slice): a call that starts while its node's
	// cores are all busy waits uniformly 0–SliceMs for one. SliceFrom says
	// from what it was fitted.
	SliceMs   float64 `json:"slice_ms,omitempty"`
	SliceFrom string  `json:"slice_from,omitempty"`
}

// SimulatedClass is one class's service-time distribution in a simulation.
type SimulatedClass struct {
	Class string `json:"class"`
	// From says what of the calibration report it was read from.
	From   string  `json:"from"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
}

// Configuration is the result of one configuration (e.g. "naive",
// "isolated") running the scenario's timeline. Tenants, QuietAll and Stats
// are those of the window the quiet_p99 assertion judges; Solo and
// SoloQuietAll those of its baseline window; Windows holds every phase.
type Configuration struct {
	// Name is unique within the report.
	Name string `json:"name"`
	// Expect is ExpectPass or ExpectFail; empty means ExpectPass.
	Expect string `json:"expect"`
	// Passed reports whether all of this configuration's own assertions
	// passed, regardless of Expect.
	Passed bool `json:"passed"`
	// Duration is how long the configuration's timeline ran, in seconds.
	Duration float64 `json:"duration_s,omitempty"`
	// Tenants are the measured rows of the noisy phase, one per tenant and
	// class.
	Tenants []TenantRow `json:"tenants"`
	// Solo are the rows of the solo baseline: each quiet class alone on the
	// same cluster.
	Solo []TenantRow `json:"solo,omitempty"`
	// QuietAll are the noisy phase's rows merged over all quiet tenants, one
	// per class, each with Tenant set to QuietAll. Count, Rejected, Errors,
	// Dropped and Incomplete are sums; P50, P99, Max and ServiceP99 come from
	// the merged histograms of every quiet request of the class, so they are
	// exact, not a bound; DBTime is the class's summed DB time and
	// DBTimeShare the quiet tenants' combined share of all DB time, each
	// tenant counted once. Optional: without it the terminal tables fall back
	// to the worst single quiet tenant's latencies.
	QuietAll []TenantRow `json:"quiet_all,omitempty"`
	// SoloQuietAll is QuietAll for the solo baseline.
	SoloQuietAll []TenantRow `json:"solo_quiet_all,omitempty"`
	// Stats are the counters of the quiet_p99 window (the noisy phase).
	Stats RunStats `json:"stats"`
	// TopDBTime ranks tenants by database time, from the DB-time ledger.
	TopDBTime []Share `json:"top_db_time,omitempty"`
	// Windows are the timeline's phases in order, each with its own rows,
	// measured (asserted on) or not (a warm-up). Optional.
	Windows []Window `json:"windows,omitempty"`
	// Intervals is an optional time series over the timeline: latency per
	// second of the dominant tenant and of the quiet tenants merged.
	Intervals []Interval `json:"intervals,omitempty"`
	// Series is an optional time series over the timeline, one point per
	// second: request rate, DB-time shares of the top tenants, limiters.
	Series []Point `json:"series,omitempty"`
	// Actions are the timeline's actions, in start order. Optional.
	Actions []ActionResult `json:"actions,omitempty"`
	// Writer is the checked writer's verdict; nil without a writer.
	Writer *WriterCheck `json:"writer,omitempty"`
	// Faults are the node faults injected during the timeline, in
	// injection order. Optional.
	Faults []Fault `json:"faults,omitempty"`
	// QuietChecks is how many quiet tenant × class pairs quiet_p99 judged
	// in this configuration; nil when it was not evaluated.
	QuietChecks *QuietChecks `json:"quiet_checks,omitempty"`
	// Incomplete is true when the configuration's run was cut short (see
	// Report.Incomplete): its rows cover the part measured and its
	// assertions were not evaluated.
	Incomplete bool `json:"incomplete,omitempty"`
	// HTTP counts the answers of the HTTP classes; nil without one.
	HTTP *HTTPStats `json:"http,omitempty"`
	// Service is the service under test as started for this
	// configuration; nil without one.
	Service *ServiceRun `json:"service,omitempty"`
	// Activity is what pg_stat_activity showed of the configuration's
	// roles over the timeline; nil when not sampled (no service).
	Activity *Activity `json:"activity,omitempty"`
	// Recovery is how long the quiet tenants took to be back within their
	// bound after the dominant tenant stopped sending; nil when no phase
	// of the timeline follows the dominant tenant's last one.
	Recovery *Recovery `json:"recovery,omitempty"`
}

// Recovery is the time the quiet tenants took to recover after the
// dominant tenant stopped sending: from Stopped, the time until the first
// second from which every second's merged quiet p99 (each quiet class, the
// per-second series of Intervals: the requests intended after Stopped, by
// the second they ended in) stays within its bound for Hold seconds.
type Recovery struct {
	// Stopped is the end of the last phase in which the dominant tenant
	// sent, in seconds from the timeline's start; Windows the phases after
	// it, watched.
	Stopped float64  `json:"stopped_s"`
	Windows []string `json:"windows"`
	// Baseline is the window the bounds come from; Bounds each quiet
	// class's bound in ms: quiet_p99's factor × the quiet tenants' merged
	// p99 in Baseline + its slack.
	Baseline string             `json:"baseline"`
	Bounds   map[string]float64 `json:"bounds_ms"`
	// Hold is how long every second must stay within the bounds, in s.
	Hold float64 `json:"hold_s"`
	// Recovered says whether it happened before the watched phases ended.
	Recovered bool `json:"recovered"`
	// Time is the seconds from Stopped to the start of the first second
	// of the hold (0: never out of bounds); when not Recovered, the
	// seconds watched.
	Time float64 `json:"time_s"`
	// Seconds is the number of seconds judged (0: every quiet request
	// after Stopped still running at the end); Worst the
	// highest per-second quiet p99 among them, in ms, of class WorstClass.
	Seconds    int     `json:"seconds"`
	Worst      float64 `json:"worst_p99_ms"`
	WorstClass string  `json:"worst_class,omitempty"`
}

// HTTPStats counts the HTTP classes' outcomes over a configuration's
// timeline.
type HTTPStats struct {
	// Arrivals are the HTTP classes' arrivals (the open loop's calls);
	// Requests the requests sent for them, Retries the attempts after a
	// first (classes with retry), Amplification Requests / Arrivals.
	Arrivals      int64   `json:"arrivals"`
	Requests      int64   `json:"requests"`
	Retries       int64   `json:"retries,omitempty"`
	Amplification float64 `json:"amplification"`
	// Outcomes counts them by outcome: "2xx", "429", "4xx", "5xx",
	// "timeout", "transport" (and "3xx", "1xx").
	Outcomes map[string]int64 `json:"outcomes"`
	// RetryAfter counts the 429 answers by their Retry-After header:
	// "seconds", "date", "missing", "malformed".
	RetryAfter map[string]int64 `json:"retry_after,omitempty"`
	// RetryAfterMean is the mean of the well-formed Retry-After values, in
	// seconds.
	RetryAfterMean float64 `json:"retry_after_mean_s,omitempty"`
}

// ServiceRun is one configuration's service: its instances and logs.
type ServiceRun struct {
	// Instances are the base URLs, one per instance.
	Instances []string `json:"instances"`
	// Logs are the files holding each instance's stdout and stderr.
	Logs []string `json:"logs,omitempty"`
	// Ready is the seconds from the start to the last instance ready.
	Ready float64 `json:"ready_s,omitempty"`
	// Exit is each instance's end once stopped ("signal: terminated",
	// "exit status 0", or how it ended early).
	Exit []string `json:"exit,omitempty"`
}

// Activity is pg_stat_activity sampled for a configuration's roles: a
// ledger of a black box, per tenant tag (application_name "t:<tenant>").
type Activity struct {
	// Interval is the sampling step in ms; Samples the number taken.
	Interval float64 `json:"interval_ms"`
	Samples  int64   `json:"samples"`
	// Tenants are the tagged tenants, most active-backend time first.
	Tenants []ActivityRow `json:"tenants"`
	// Untagged is the activity of backends of the roles without a tenant
	// tag (Tenant empty); nil when none was seen.
	Untagged *ActivityRow `json:"untagged,omitempty"`
	// UntaggedQueries are the distinct query texts seen active untagged
	// (the first ones, truncated to 200 characters).
	UntaggedQueries []string `json:"untagged_queries,omitempty"`
	// Windows split the active-backend time by the timeline's phase
	// running at each sample, in timeline order.
	Windows []ActivityWindow `json:"windows,omitempty"`
	// Alerts are the share alerts, in firing order: a tenant above
	// AlertThreshold of the active-backend time in every second of
	// AlertWindow (seconds) — service.share_alert.
	AlertThreshold float64         `json:"alert_threshold,omitempty"`
	AlertWindow    float64         `json:"alert_window_s,omitempty"`
	Alerts         []ActivityAlert `json:"alerts,omitempty"`
}

// ActivityAlert is one share alert of the sampled activity.
type ActivityAlert struct {
	Tenant string `json:"tenant"`
	// Share is the tenant's share of the active-backend time over the
	// Window seconds that fired the alert; Threshold the alert's.
	Share     float64 `json:"share"`
	Threshold float64 `json:"threshold"`
	Window    float64 `json:"window_s"`
	// Fired is when it fired, in seconds from the start of sampling (just
	// before the timeline), in phase Phase; Cleared when the tenant first
	// fell back to or below the threshold for a second, 0 when it had not
	// by the end.
	Fired   float64 `json:"fired_s"`
	Phase   string  `json:"phase"`
	Cleared float64 `json:"cleared_s,omitempty"`
}

// ActivityWindow is one phase's sampled activity: active-backend time per
// tenant tag (Share.DBTime in ms, most first) and untagged, in seconds.
type ActivityWindow struct {
	Window   string  `json:"window"`
	Samples  int64   `json:"samples"`
	Shares   []Share `json:"shares"`
	Untagged float64 `json:"untagged_s,omitempty"`
}

// ActivityRow is one tenant's sampled backends.
type ActivityRow struct {
	Tenant string `json:"tenant"`
	// Active is active-backend time in seconds: active backends seen ×
	// the interval; Share its part of all active time.
	Active float64 `json:"active_s"`
	Share  float64 `json:"share"`
	// ActiveSamples, IdleInTx and Waiting count backends seen active,
	// idle in transaction and active waiting (a wait event other than
	// client I/O) over the samples; MaxActive the most active at once.
	ActiveSamples int64 `json:"active_samples"`
	IdleInTx      int64 `json:"idle_in_transaction_samples"`
	Waiting       int64 `json:"waiting_samples"`
	MaxActive     int64 `json:"max_active"`
	// Longest is the longest-running active query seen, in ms.
	Longest float64 `json:"longest_ms"`
}

// Window is one phase of a configuration's timeline: what its arrivals
// (by intended start in [Start, End)) measured.
type Window struct {
	// Name is the phase's name, unique within the configuration.
	Name string `json:"name"`
	// Start and End are seconds from the timeline's start.
	Start float64 `json:"start_s"`
	End   float64 `json:"end_s"`
	// Senders says who sent: "all", "quiet", "dominant" or tenant ids.
	Senders string `json:"senders"`
	// Measured is false for a warm-up: no assertion reads the window.
	Measured bool `json:"measured"`
	// Tenants are the rows per tenant and class; QuietAll the rows merged
	// over the quiet tenants, one per class (see Configuration.QuietAll).
	Tenants  []TenantRow `json:"tenants"`
	QuietAll []TenantRow `json:"quiet_all,omitempty"`
	// QuietWorkers split QuietAll on topology citus, one row per class and
	// group: QuietHotWorker and QuietOtherWorkers.
	QuietWorkers []TenantRow `json:"quiet_workers,omitempty"`
	// Stats are the window's counters.
	Stats RunStats `json:"stats"`
	// TopDBTime ranks tenants by database time in the window.
	TopDBTime []Share `json:"top_db_time,omitempty"`
	// Workers is each Citus worker's load in the window (topology citus
	// only), by short name (worker1…, see Report.Notes): the DB time of
	// the tenants whose shard it held at the window's start, from the
	// ledger, in mean busy backends. Skew is max / median of it over the
	// workers that take shards; HotWorker the worker holding the dominant
	// tenant's shard then.
	Workers   map[string]float64 `json:"workers,omitempty"`
	Skew      float64            `json:"skew,omitempty"`
	HotWorker string             `json:"hot_worker,omitempty"`
	// ShareAlert is the DB-time share the phase's watcher acts on (the
	// promote policy's threshold); nil when no watcher of the phase
	// watches a share.
	ShareAlert *ShareAlert `json:"share_alert,omitempty"`
}

// ShareAlert is a watcher's DB-time share threshold: Policy acts once
// Tenant's share of all DB time stays above Threshold (0..1).
type ShareAlert struct {
	Policy    string  `json:"policy"`
	Tenant    string  `json:"tenant"`
	Threshold float64 `json:"threshold"`
}

// AsExpected reports whether the configuration met its expectation: its
// assertions all passed under ExpectPass, or at least one failed under
// ExpectFail.
func (c Configuration) AsExpected() bool { return c.Passed != c.expectsFailure() }

func (c Configuration) expectsFailure() bool { return c.Expect == ExpectFail }

// TenantRow is what one tenant's requests of one class measured. Latencies
// are response times in ms, measured from each request's intended start.
type TenantRow struct {
	Tenant string `json:"tenant"`
	Class  string `json:"class"`
	// Count is the number of requests measured after warm-up.
	Count int64 `json:"count"`
	// Rejected is the number of requests the limiter turned away.
	Rejected int64 `json:"rejected"`
	// Errors is the number of requests that ended in an error.
	Errors int64 `json:"errors"`
	// ErrorsByClass splits Errors by error class (e.g. a SQLSTATE name).
	ErrorsByClass map[string]int64 `json:"errors_by_class,omitempty"`
	// Dropped is the number of intended requests the generator could not
	// issue in time.
	Dropped int64 `json:"dropped"`
	// Incomplete is the number of requests still running at the phase end.
	Incomplete int64   `json:"incomplete"`
	P50        float64 `json:"p50_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	// ServiceP99 is the p99 of service time (actual start to end), in ms.
	ServiceP99 float64 `json:"service_p99_ms,omitempty"`
	// DBTime is the tenant's database time for this class, in ms.
	DBTime float64 `json:"db_time_ms,omitempty"`
	// DBTimeShare is the tenant's share of all database time, 0..1.
	DBTimeShare float64 `json:"db_time_share"`
	// Percentiles are the response time's distribution (a percentile
	// plot), on the merged quiet rows only (QuietAll, SoloQuietAll and
	// Window.QuietAll).
	Percentiles []Percentile `json:"percentiles,omitempty"`
	// SigFigs is the significant decimal digits of the histogram P50,
	// P99, ServiceP99 and Percentiles come from: 2 (within 1%) for a
	// tenant's row of a run, 3 (within 0.1%) for the merged quiet rows,
	// recorded apart from the tenants' (see REPORT.md); 0 when the row has
	// no request or comes from a report written before it was recorded.
	SigFigs int `json:"sig_figs,omitempty"`
}

// Percentile is one point of a distribution: the response time in ms at
// percentile P (0..100).
type Percentile struct {
	P  float64 `json:"p"`
	Ms float64 `json:"ms"`
}

// RunStats are the counters of one configuration's noisy phase.
type RunStats struct {
	Issued     int64 `json:"issued"`
	Completed  int64 `json:"completed"`
	Dropped    int64 `json:"dropped"`
	Incomplete int64 `json:"incomplete"`
	Rejected   int64 `json:"rejected"`
	// RejectedByReason splits Rejected by limiter reason.
	RejectedByReason map[string]int64 `json:"rejected_by_reason,omitempty"`
	Errors           int64            `json:"errors"`
	// ErrorsByClass splits Errors by error class.
	ErrorsByClass map[string]int64 `json:"errors_by_class,omitempty"`
	// TargetRate and AchievedRate are requests per second, intended and
	// issued.
	TargetRate   float64 `json:"target_rate_per_s,omitempty"`
	AchievedRate float64 `json:"achieved_rate_per_s,omitempty"`
}

// Share is one tenant's place in the DB-time ranking.
type Share struct {
	Tenant string `json:"tenant"`
	// DBTime is in ms.
	DBTime float64 `json:"db_time_ms"`
	// Share is 0..1 of all database time.
	Share float64 `json:"share"`
}

// ActionResult is one action of a configuration's timeline.
type ActionResult struct {
	// Phase is the phase that started it; Type its kind.
	Phase string `json:"phase"`
	Type  string `json:"type"`
	// At is when it started, in seconds from the timeline's start; Took
	// how long it ran, in seconds.
	At   float64 `json:"at_s"`
	Took float64 `json:"took_s"`
	// Detail says what it did.
	Detail string `json:"detail,omitempty"`
	// Before and After are its figures, by name, before and after it.
	Before map[string]float64 `json:"before,omitempty"`
	After  map[string]float64 `json:"after,omitempty"`
	// Error is why it failed; empty when it succeeded.
	Error string `json:"error,omitempty"`
	// NotStarted says the run stopped (an interruption, the load's end)
	// before the action's time: it neither ran nor failed, At is when it
	// was due and Detail why it did not start.
	NotStarted bool `json:"not_started,omitempty"`
	// FiredBy is the policy of the phase's watcher that fired the action;
	// empty for an action the timeline lists.
	FiredBy string `json:"fired_by,omitempty"`
}

// WriterCheck is what the checked writer wrote over a configuration's
// timeline and what the checker found when it read it back at the
// tenant's node.
type WriterCheck struct {
	// Tenant is the tenant written to; Rate the writes per second.
	Tenant string  `json:"tenant"`
	Rate   float64 `json:"rate_per_s"`
	// Inserts and Updates are the acknowledged writes; Errors the writes
	// that failed (not acknowledged, possibly committed).
	Inserts int64 `json:"inserts"`
	Updates int64 `json:"updates"`
	Errors  int64 `json:"errors"`
	// LockRetries are writes run again after waiting their lock_timeout
	// for a lock (nothing written; the wait counts in LongestWrite).
	LockRetries int64 `json:"lock_retries,omitempty"`
	// Lost are acknowledged rows missing at the tenant's node, Duplicated
	// rows present more than once, Stale rows whose value is neither the
	// last acknowledged one nor a later unanswered one, Vanished
	// acknowledged updates of an acknowledged row that matched no row.
	Lost       int64 `json:"lost"`
	Duplicated int64 `json:"duplicated"`
	Stale      int64 `json:"stale"`
	Vanished   int64 `json:"vanished"`
	// LongestWrite is the longest write, from its intended start to its
	// answer, in ms; LongestWriteAt when it was intended, in s from the
	// timeline's start, and in which window.
	LongestWrite       float64 `json:"longest_write_ms"`
	LongestWriteAt     float64 `json:"longest_write_at_s"`
	LongestWriteWindow string  `json:"longest_write_window"`
	// LongestWriteLockRetries are the lock waits of the longest write
	// (part of LockRetries): its time covers them and its reruns.
	LongestWriteLockRetries int64 `json:"longest_write_lock_retries,omitempty"`
	// LongestWriteLate is the part of LongestWrite before it was sent, in
	// ms: writes are sent open loop, on schedule, whatever is in flight,
	// so it stays near 0 unless the writer's bound of writes in flight
	// (256: 2.56 s at 100 writes/s) was reached, the writes before it
	// still unanswered, or the Go scheduler held it.
	LongestWriteLate float64 `json:"longest_write_late_ms,omitempty"`
	// Node is where the checker read the rows back.
	Node string `json:"node,omitempty"`
}

// Point is one second of a configuration's timeline.
type Point struct {
	// Window is the phase running at the point's end.
	Window string `json:"window"`
	// At is the end of the second, in seconds from the timeline's start.
	At float64 `json:"at_s"`
	// Rate is the requests issued in the second, per second.
	Rate float64 `json:"rate_per_s"`
	// TopDBTime ranks the tenants by DB time in the second (the top 5):
	// the DB time their calls spent in it, a long call's spread over the
	// seconds it ran.
	TopDBTime []Share `json:"top_db_time,omitempty"`
	// Limiters are each limited class's limiter at the point's end
	// (in flight, queued) and over the second (rejected).
	Limiters []LimiterPoint `json:"limiters,omitempty"`
	// Pools are each pool's connections in use at the point's end, with
	// the node it runs on: the load per node where there are several.
	Pools []PoolPoint `json:"pools,omitempty"`
	// Writer is the checked writer's answers in the second; nil without
	// a writer.
	Writer *WriterPoint `json:"writer,omitempty"`
	// Workers is each Citus worker's load in the second (topology citus),
	// in worker order: the DB time the calls spent in the second (a call
	// that ran 3 seconds counts in each of them, the part that fell
	// there), each tenant's counted on the worker that held its shard
	// (the placements as read at most a second before the point), per
	// second.
	Workers []WorkerPoint `json:"workers,omitempty"`
}

// WorkerPoint is one Citus worker in a Point.
type WorkerPoint struct {
	// Worker is the worker's short name (worker1…).
	Worker string `json:"worker"`
	// Load is the mean busy backends the worker's shards had in the
	// second.
	Load float64 `json:"load"`
	// Dedicated is true when the worker takes no shards
	// (shouldhaveshards = false): left out of the skew's median.
	Dedicated bool `json:"dedicated,omitempty"`
}

// WriterPoint is the checked writer in a Point: the writes answered in
// the second, acknowledged (inserts and updates that matched their row)
// or failed.
type WriterPoint struct {
	Acked  int64 `json:"acked"`
	Errors int64 `json:"errors"`
}

// PoolPoint is one pool in a Point.
type PoolPoint struct {
	Name string `json:"name"`
	// Node is the shard node's name for a pool of topology shards
	// (primary1…), else the pool's server address; Standby says it is a
	// replica.
	Node    string `json:"node"`
	Standby bool   `json:"standby,omitempty"`
	// Borrowed and Max are the connections in use and the pool's size.
	Borrowed int64 `json:"borrowed"`
	Max      int64 `json:"max"`
	// Busy is the DB time the pool's calls spent in the second (a long
	// call counts in each second it ran, the part that fell there), per
	// second: the mean connections busy, the node's load.
	Busy float64 `json:"busy,omitempty"`
	// Opened is how many connections the pool opened over the second: a
	// burst is a pool growing under a change of load, each new connection
	// a server process to start before its first call runs.
	Opened int64 `json:"opened,omitempty"`
}

// LimiterPoint is one class's limiter in a Point: the requests in flight
// and queued at the point's end, and those rejected over the second.
type LimiterPoint struct {
	Class    string `json:"class"`
	InFlight int64  `json:"in_flight"`
	Queued   int64  `json:"queued"`
	Rejected int64  `json:"rejected"`
	// RejectedByReason splits Rejected by the limiter's reason
	// (queue_full: the tenant's queue was full; wait_exceeded: the request
	// waited its max_wait, the limiter's deadline, without a slot), a
	// reason without rejections left out. Optional: a report without it
	// has the total only.
	RejectedByReason map[string]int64 `json:"rejected_by_reason,omitempty"`
}

// Interval is one point of a time series. Tenant and Class may be empty
// (all) or a group label such as QuietAll.
type Interval struct {
	// Window is the phase the interval's requests were intended in; empty
	// when the series has no phases.
	Window string `json:"window,omitempty"`
	// Start and End are seconds from the timeline's start.
	Start    float64 `json:"start_s"`
	End      float64 `json:"end_s"`
	Tenant   string  `json:"tenant,omitempty"`
	Class    string  `json:"class,omitempty"`
	Count    int64   `json:"count"`
	Rejected int64   `json:"rejected"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

// Assertion is one evaluated check: it passed when Observed Op Limit holds.
type Assertion struct {
	// Name says what is checked, e.g. "quiet_p99".
	Name string `json:"name"`
	// Window is the timeline phase the check read, and Baseline the one
	// it compared with; empty for checks over the whole timeline.
	Window   string `json:"window,omitempty"`
	Baseline string `json:"baseline,omitempty"`
	// Configuration names the Configuration the check ran against.
	Configuration string `json:"configuration"`
	// Tenant and Class are empty for checks over the whole configuration.
	Tenant   string  `json:"tenant"`
	Class    string  `json:"class"`
	Observed float64 `json:"observed"`
	Limit    float64 `json:"limit"`
	// Unit of Observed and Limit, e.g. "ms"; empty for counts.
	Unit string `json:"unit,omitempty"`
	// Op is one of "<=", "<", ">=", ">", "==".
	Op     string `json:"op"`
	Passed bool   `json:"passed"`
	// Skipped means the check could not be evaluated (Detail says why);
	// Passed is then ignored.
	Skipped bool `json:"skipped,omitempty"`
	// Detail is free text shown beside the result.
	Detail string `json:"detail,omitempty"`
	// CI is the confidence interval of Observed (quiet_p99: the p99's
	// 95% interval); nil when there is none.
	CI *CI `json:"observed_ci,omitempty"`
	// Marginal means the verdict could go either way: Limit lies inside CI
	// (for control_fails: every failure of the control is marginal).
	Marginal bool `json:"marginal,omitempty"`
}

func (a Assertion) failed() bool { return !a.Skipped && !a.Passed }

// ErrInvalid is wrapped by every *InvalidError.
var ErrInvalid = errors.New("invalid report")

// InvalidError says which field of a Report is unusable and why.
type InvalidError struct {
	// Field is the JSON path, e.g. "configurations[1].tenants[3].p99_ms".
	Field  string
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid report: %s: %s", e.Field, e.Reason)
}

// Unwrap returns ErrInvalid.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

var validOps = map[string]bool{"<=": true, "<": true, ">=": true, ">": true, "==": true}

// Validate checks what the renderers rely on: a scenario name, unique
// non-empty configuration names, known Expect and Op values, assertions that
// name an existing configuration, non-negative counts, finite numbers
// (JSON has no NaN), shares within 0..1, QuietAll as the tenant of every
// QuietAll and SoloQuietAll row and of no other row, and at most one such
// row per class. It returns every problem found,
// joined, each an *InvalidError; nil if there are none.
func (r *Report) Validate() error {
	if r == nil {
		return &InvalidError{Field: "report", Reason: "nil"}
	}
	var errs []error
	bad := func(field, reason string, args ...any) {
		errs = append(errs, &InvalidError{Field: field, Reason: fmt.Sprintf(reason, args...)})
	}
	finite := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			bad(field, "not a finite number")
		}
	}
	nonNegative := func(field string, v int64) {
		if v < 0 {
			bad(field, "negative count %d", v)
		}
	}
	share := func(field string, v float64) {
		finite(field, v)
		if v < 0 || v > 1+1e-9 {
			bad(field, "share %g outside 0..1", v)
		}
	}
	// numbers checks a row's counts, latencies and share.
	numbers := func(p string, t TenantRow) {
		nonNegative(p+".count", t.Count)
		nonNegative(p+".rejected", t.Rejected)
		nonNegative(p+".errors", t.Errors)
		nonNegative(p+".dropped", t.Dropped)
		nonNegative(p+".incomplete", t.Incomplete)
		finite(p+".p50_ms", t.P50)
		finite(p+".p99_ms", t.P99)
		finite(p+".max_ms", t.Max)
		finite(p+".service_p99_ms", t.ServiceP99)
		finite(p+".db_time_ms", t.DBTime)
		share(p+".db_time_share", t.DBTimeShare)
		for i, q := range t.Percentiles {
			finite(fmt.Sprintf("%s.percentiles[%d].p", p, i), q.P)
			finite(fmt.Sprintf("%s.percentiles[%d].ms", p, i), q.Ms)
			if q.P < 0 || q.P >= 100 {
				bad(fmt.Sprintf("%s.percentiles[%d].p", p, i), "percentile %g outside 0..100 (100 excluded)", q.P)
			}
		}
	}
	rows := func(prefix string, rs []TenantRow) {
		for i, t := range rs {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			switch t.Tenant {
			case "":
				bad(p+".tenant", "empty")
			case QuietAll:
				bad(p+".tenant", "%q is reserved for the merged quiet rows", QuietAll)
			}
			numbers(p, t)
		}
	}
	// quietRows checks merged rows: labelled QuietAll, one per class.
	quietRows := func(prefix string, rs []TenantRow) {
		classes := make(map[string]bool, len(rs))
		for i, t := range rs {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			if t.Tenant != QuietAll {
				bad(p+".tenant", "%q, want %q", t.Tenant, QuietAll)
			}
			if classes[t.Class] {
				bad(p+".class", "duplicate class %q", t.Class)
			}
			classes[t.Class] = true
			numbers(p, t)
		}
	}

	if r.Scenario == "" {
		bad("scenario", "empty")
	}
	finite("duration_s", r.Duration)
	names := make(map[string]bool, len(r.Configurations))
	for i, c := range r.Configurations {
		p := fmt.Sprintf("configurations[%d]", i)
		switch {
		case c.Name == "":
			bad(p+".name", "empty")
		case names[c.Name]:
			bad(p+".name", "duplicate configuration %q", c.Name)
		}
		names[c.Name] = true
		if c.Expect != "" && c.Expect != ExpectPass && c.Expect != ExpectFail {
			bad(p+".expect", "%q is neither %q nor %q", c.Expect, ExpectPass, ExpectFail)
		}
		finite(p+".duration_s", c.Duration)
		rows(p+".tenants", c.Tenants)
		rows(p+".solo", c.Solo)
		quietRows(p+".quiet_all", c.QuietAll)
		quietRows(p+".solo_quiet_all", c.SoloQuietAll)
		s := c.Stats
		for _, f := range []struct {
			name string
			v    int64
		}{
			{"issued", s.Issued}, {"completed", s.Completed}, {"dropped", s.Dropped},
			{"incomplete", s.Incomplete}, {"rejected", s.Rejected}, {"errors", s.Errors},
		} {
			nonNegative(p+".stats."+f.name, f.v)
		}
		finite(p+".stats.target_rate_per_s", s.TargetRate)
		finite(p+".stats.achieved_rate_per_s", s.AchievedRate)
		for j, sh := range c.TopDBTime {
			q := fmt.Sprintf("%s.top_db_time[%d]", p, j)
			finite(q+".db_time_ms", sh.DBTime)
			share(q+".share", sh.Share)
		}
		windows := make(map[string]bool, len(c.Windows))
		for j, w := range c.Windows {
			q := fmt.Sprintf("%s.windows[%d]", p, j)
			switch {
			case w.Name == "":
				bad(q+".name", "empty")
			case windows[w.Name]:
				bad(q+".name", "duplicate window %q", w.Name)
			}
			windows[w.Name] = true
			finite(q+".start_s", w.Start)
			finite(q+".end_s", w.End)
			rows(q+".tenants", w.Tenants)
			quietRows(q+".quiet_all", w.QuietAll)
			for j, t := range w.QuietWorkers {
				if t.Tenant != QuietHotWorker && t.Tenant != QuietOtherWorkers {
					bad(fmt.Sprintf("%s.quiet_workers[%d].tenant", q, j), "%q, want %q or %q", t.Tenant, QuietHotWorker, QuietOtherWorkers)
				}
				numbers(fmt.Sprintf("%s.quiet_workers[%d]", q, j), t)
			}
			for _, f := range []struct {
				name string
				v    int64
			}{
				{"issued", w.Stats.Issued}, {"completed", w.Stats.Completed}, {"dropped", w.Stats.Dropped},
				{"incomplete", w.Stats.Incomplete}, {"rejected", w.Stats.Rejected}, {"errors", w.Stats.Errors},
			} {
				nonNegative(q+".stats."+f.name, f.v)
			}
			finite(q+".stats.target_rate_per_s", w.Stats.TargetRate)
			finite(q+".stats.achieved_rate_per_s", w.Stats.AchievedRate)
			for k, sh := range w.TopDBTime {
				finite(fmt.Sprintf("%s.top_db_time[%d].db_time_ms", q, k), sh.DBTime)
				share(fmt.Sprintf("%s.top_db_time[%d].share", q, k), sh.Share)
			}
			if a := w.ShareAlert; a != nil {
				share(q+".share_alert.threshold", a.Threshold)
			}
		}
		for j, a := range c.Actions {
			q := fmt.Sprintf("%s.actions[%d]", p, j)
			finite(q+".at_s", a.At)
			finite(q+".took_s", a.Took)
			for _, m := range []map[string]float64{a.Before, a.After} {
				for _, k := range slices.Sorted(maps.Keys(m)) {
					finite(q+"."+k, m[k])
				}
			}
		}
		for j, pt := range c.Series {
			q := fmt.Sprintf("%s.series[%d]", p, j)
			finite(q+".at_s", pt.At)
			finite(q+".rate_per_s", pt.Rate)
			for k, sh := range pt.TopDBTime {
				finite(fmt.Sprintf("%s.top_db_time[%d].db_time_ms", q, k), sh.DBTime)
				share(fmt.Sprintf("%s.top_db_time[%d].share", q, k), sh.Share)
			}
			for k, pl := range pt.Pools {
				nonNegative(fmt.Sprintf("%s.pools[%d].borrowed", q, k), pl.Borrowed)
				finite(fmt.Sprintf("%s.pools[%d].busy", q, k), pl.Busy)
			}
			if w := pt.Writer; w != nil {
				nonNegative(q+".writer.acked", w.Acked)
				nonNegative(q+".writer.errors", w.Errors)
			}
			for k, l := range pt.Limiters {
				nonNegative(fmt.Sprintf("%s.limiters[%d].in_flight", q, k), l.InFlight)
				nonNegative(fmt.Sprintf("%s.limiters[%d].queued", q, k), l.Queued)
				nonNegative(fmt.Sprintf("%s.limiters[%d].rejected", q, k), l.Rejected)
				for _, reason := range slices.Sorted(maps.Keys(l.RejectedByReason)) {
					nonNegative(fmt.Sprintf("%s.limiters[%d].rejected_by_reason.%s", q, k, reason), l.RejectedByReason[reason])
				}
			}
		}
		for j, iv := range c.Intervals {
			q := fmt.Sprintf("%s.intervals[%d]", p, j)
			for _, f := range []struct {
				name string
				v    float64
			}{{"start_s", iv.Start}, {"end_s", iv.End}, {"p50_ms", iv.P50}, {"p99_ms", iv.P99}, {"max_ms", iv.Max}} {
				finite(q+"."+f.name, f.v)
			}
		}
	}
	for i, a := range r.Assertions {
		p := fmt.Sprintf("assertions[%d]", i)
		if a.Name == "" {
			bad(p+".name", "empty")
		}
		if !names[a.Configuration] {
			bad(p+".configuration", "no configuration named %q", a.Configuration)
		}
		if !validOps[a.Op] {
			bad(p+".op", "unknown operator %q", a.Op)
		}
		finite(p+".observed", a.Observed)
		finite(p+".limit", a.Limit)
	}
	if h := r.HotShard; h != nil {
		for _, f := range []struct {
			field string
			v     float64
		}{{"hot_shard.ledger_share", h.LedgerShare}, {"hot_shard.sampled_share", h.SampledShare}} {
			share(f.field, f.v)
		}
		if h.DetectedAfter != nil {
			finite("hot_shard.detected_after_s", *h.DetectedAfter)
		}
		if h.StatTenantsShare != nil {
			share("hot_shard.stat_tenants_share", *h.StatTenantsShare)
		}
		loads := func(field string, m map[string]float64) {
			for _, k := range slices.Sorted(maps.Keys(m)) {
				finite(field+"."+k, m[k])
			}
		}
		for i, w := range h.Windows {
			p := fmt.Sprintf("hot_shard.windows[%d]", i)
			loads(p+".workers", w.Workers)
			loads(p+".sampled", w.Sampled)
			for _, f := range []struct {
				field string
				v     float64
			}{{"length_s", w.Length}, {"skew", w.Skew}, {"sampled_skew", w.SampledSkew}, {"quiet_p50_ms", w.QuietP50},
				{"quiet_p99_ms", w.QuietP99}, {"quiet_max_ms", w.QuietMax}, {"quiet_service_p99_ms", w.QuietServiceP99}} {
				finite(p+"."+f.field, f.v)
			}
			share(p+".hot_worker_share", w.HotWorkerShare)
			share(p+".sampled_hot_worker_share", w.SampledHotWorkerShare)
			share(p+".hot_share", w.HotShare)
		}
		for i, pt := range h.Timeline {
			p := fmt.Sprintf("hot_shard.timeline[%d]", i)
			loads(p+".workers", pt.Workers)
			loads(p+".sampled", pt.Sampled)
			finite(p+".worker_skew", pt.WorkerSkew)
			finite(p+".shard_skew", pt.ShardSkew)
			share(p+".hot_share", pt.HotShare)
			for _, id := range slices.Sorted(maps.Keys(pt.Shards)) {
				finite(fmt.Sprintf("%s.shards.%d", p, id), pt.Shards[id])
			}
		}
		if w := h.Writes; w != nil {
			finite("hot_shard.writes.max_pause_ms", w.MaxPause)
		}
	}
	return errors.Join(errs...)
}
