package scenario

import (
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// TopologyShards is directory sharding without Citus: Backend.Shards
// independent primaries (backend.TopologyPrimaries, nodes primary1…N), a
// tenant catalog on the first, tenants placed by hash over all but the
// promotion target. It needs a promotion section.
const TopologyShards backend.Topology = "shards"

// Promotion defaults, applied to keys a promotion section leaves out.
const (
	DefaultShards                        = 4
	DefaultPromotionTrigger              = TriggerLedger
	DefaultPromotionThreshold            = 0.25
	DefaultPromotionWindow      Duration = Duration(2 * time.Second)
	DefaultPromotionBucket      Duration = Duration(500 * time.Millisecond)
	DefaultPromotionBefore      Duration = Duration(8 * time.Second)
	DefaultPromotionAfter       Duration = Duration(8 * time.Second)
	DefaultPromotionMaxMove     Duration = Duration(60 * time.Second)
	DefaultPromotionSampleEvery Duration = Duration(20 * time.Millisecond)
	DefaultPromotionSkew                 = 1.5
	DefaultPromotionWriterRate           = 100.0
	DefaultPromotionUpdateShare          = 0.3
	DefaultPromotionBatchRows            = 1000
	DefaultPromotionMaxPause    Duration = Duration(time.Second)
	DefaultPromotionGrace       Duration = Duration(time.Second)
	DefaultPromotionP99Factor            = 1.0
)

// Trigger says what starts a promotion.
type Trigger string

// Triggers.
const (
	// TriggerLedger moves the tenant once its DB-time share in the ledger
	// stays above Threshold for Window.
	TriggerLedger Trigger = "ledger"
	// TriggerRequest moves the tenant At after the before window starts,
	// as `noisysim tenant move` would.
	TriggerRequest Trigger = "request"
)

// Promotion is a tenant-promotion scenario on topology shards: the big
// tenant makes its node hot, the trigger fires, the tenant moves to a node
// of its own under load while writers check that no acknowledged write is
// lost, and the quiet tenants of the formerly hot node are measured before
// and after. It uses the first configuration's pool settings on every
// node.
type Promotion struct {
	// Tenant is the tenant to promote, 1..tenants.count. Default 1 (the
	// dominant tenant).
	Tenant int `yaml:"tenant"`
	// Target is the node the tenant moves to. Default: the last node
	// (primaryN), which is then kept out of the hash ring.
	Target string `yaml:"target"`
	// Trigger is ledger (default) or request.
	Trigger Trigger `yaml:"trigger"`
	// Threshold is the ledger share of DB time above which the tenant is
	// promoted, in (0, 1]. Default 0.25.
	Threshold float64 `yaml:"threshold"`
	// Window is how long the share must stay above Threshold, and Bucket
	// the ledger's resolution (<= Window). Defaults 2s and 500ms.
	Window Duration `yaml:"window"`
	Bucket Duration `yaml:"bucket"`
	// At is when a request trigger fires, from the start of the before
	// window, < Before. Default 0 (at once).
	At Duration `yaml:"at"`
	// Before and After are the measured windows before the move starts and
	// after it ends (warm-up not included). Defaults 8s each.
	Before Duration `yaml:"before"`
	After  Duration `yaml:"after"`
	// MaxMove bounds the move (the run fails beyond it). Default 60s.
	MaxMove Duration `yaml:"max_move"`
	// SampleEvery is the pg_stat_activity sampling period per node.
	// Default 20ms.
	SampleEvery Duration `yaml:"sample_every"`
	// Skew is the hot-node threshold: a node is hot when its load is above
	// Skew × the median node load (max/median). Default 1.5.
	Skew float64 `yaml:"skew"`
	// WriterRate is the moving tenant's checked writes per second, for the
	// whole run; UpdateShare the share of them that update a row written
	// earlier (the rest insert), in [0, 1). Defaults 100 and 0.3.
	WriterRate  float64 `yaml:"writer_rate"`
	UpdateShare float64 `yaml:"update_share"`
	// BatchRows is the copy batch size. Default 1000.
	BatchRows int `yaml:"batch_rows"`
	// MaxPause bounds the write pause (asserted). Default 1s.
	MaxPause Duration `yaml:"max_pause"`
	// Grace is the wait between the switch and the delete at the source.
	// Default 1s.
	Grace Duration `yaml:"grace"`
	// QuietP99Factor: the quiet tenants of the formerly hot node must have
	// p99 after <= factor × p99 before + assertions.quiet_p99.slack.
	// Default 1.0.
	QuietP99Factor float64 `yaml:"quiet_p99_factor"`
}

// Promoting reports whether s has a promotion section.
func (s *Scenario) Promoting() bool { return s.Promotion.Tenant != 0 }

// applyPromotionDefaults fills a present promotion section, and the shard
// count of topology shards.
func (s *Scenario) applyPromotionDefaults() {
	if s.Backend.Topology == TopologyShards && !s.ix.has("backend.shards") {
		s.Backend.Shards = DefaultShards
	}
	if !s.ix.has("promotion") {
		return
	}
	p := &s.Promotion
	set := func(key string, apply func()) {
		if !s.ix.has("promotion." + key) {
			apply()
		}
	}
	set("tenant", func() { p.Tenant = DominantTenant })
	set("trigger", func() { p.Trigger = DefaultPromotionTrigger })
	set("threshold", func() { p.Threshold = DefaultPromotionThreshold })
	set("window", func() { p.Window = DefaultPromotionWindow })
	set("bucket", func() { p.Bucket = min(DefaultPromotionBucket, p.Window) })
	set("before", func() { p.Before = DefaultPromotionBefore })
	set("after", func() { p.After = DefaultPromotionAfter })
	set("max_move", func() { p.MaxMove = DefaultPromotionMaxMove })
	set("sample_every", func() { p.SampleEvery = DefaultPromotionSampleEvery })
	set("skew", func() { p.Skew = DefaultPromotionSkew })
	set("writer_rate", func() { p.WriterRate = DefaultPromotionWriterRate })
	set("update_share", func() { p.UpdateShare = DefaultPromotionUpdateShare })
	set("batch_rows", func() { p.BatchRows = DefaultPromotionBatchRows })
	set("max_pause", func() { p.MaxPause = DefaultPromotionMaxPause })
	set("grace", func() { p.Grace = DefaultPromotionGrace })
	set("quiet_p99_factor", func() { p.QuietP99Factor = DefaultPromotionP99Factor })
}

// ShardNames returns the node names of topology shards: primary1…N.
func (b Backend) ShardNames() []string {
	out := make([]string, b.Shards)
	for i := range out {
		out[i] = "primary" + itoa(i+1)
	}
	return out
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// promotion checks the promotion section and its link to topology shards.
func (c *checker) promotion(s *Scenario) {
	shards := s.Backend.Topology == TopologyShards
	if shards && (s.Backend.Shards < 2 || s.Backend.Shards > 16) {
		c.add("backend.shards", "must be in 2..16, got %d", s.Backend.Shards)
	}
	if !shards && s.Backend.Shards != 0 {
		c.add("backend.shards", "only for topology shards")
	}
	if !s.Promoting() {
		if shards {
			c.add("backend.topology", "shards needs a promotion section (the scenario shards tenants to promote one)")
		}
		return
	}
	if !shards {
		c.add("promotion", "needs backend.topology shards")
	}
	p := &s.Promotion
	if p.Tenant < 1 || p.Tenant > s.Tenants.Count {
		c.add("promotion.tenant", "must be a tenant id in 1..%d, got %d", s.Tenants.Count, p.Tenant)
	}
	if p.Target != "" && shards && s.Backend.Shards >= 2 {
		ok := false
		for _, n := range s.Backend.ShardNames() {
			ok = ok || n == p.Target
		}
		if !ok {
			c.add("promotion.target", "unknown node %q; the shards are primary1..primary%d", p.Target, s.Backend.Shards)
		}
	}
	oneOf(c, "promotion.trigger", "trigger", p.Trigger, TriggerLedger, TriggerRequest)
	if !(p.Threshold > 0 && p.Threshold <= 1) {
		c.add("promotion.threshold", "must be in (0, 1], got %s", fmtFloat(p.Threshold))
	}
	for f, d := range map[string]Duration{"window": p.Window, "bucket": p.Bucket, "before": p.Before,
		"after": p.After, "max_move": p.MaxMove, "sample_every": p.SampleEvery, "max_pause": p.MaxPause} {
		c.positive("promotion."+f, d)
	}
	c.nonNegative("promotion.at", p.At)
	c.nonNegative("promotion.grace", p.Grace)
	if p.Bucket > p.Window && p.Window > 0 {
		c.add("promotion.bucket", "must be <= promotion.window (%s), got %s", p.Window, p.Bucket)
	}
	if p.Trigger == TriggerLedger && p.Window >= p.Before && p.Before > 0 {
		c.add("promotion.window", "must be shorter than promotion.before (%s): the trigger fires inside it", p.Before)
	}
	if p.Trigger == TriggerRequest && p.At >= p.Before && p.Before > 0 {
		c.add("promotion.at", "must be before the end of promotion.before (%s)", p.Before)
	}
	if p.Skew <= 1 {
		c.add("promotion.skew", "must be > 1, got %s", fmtFloat(p.Skew))
	}
	if !(p.WriterRate > 0 && p.WriterRate <= 5000) {
		c.add("promotion.writer_rate", "must be in (0, 5000] writes/s, got %s", fmtFloat(p.WriterRate))
	}
	if !(p.UpdateShare >= 0 && p.UpdateShare < 1) {
		c.add("promotion.update_share", "must be in [0, 1), got %s", fmtFloat(p.UpdateShare))
	}
	c.atLeast("promotion.batch_rows", p.BatchRows, 1)
	if p.QuietP99Factor <= 0 {
		c.add("promotion.quiet_p99_factor", "must be > 0, got %s", fmtFloat(p.QuietP99Factor))
	}
}
