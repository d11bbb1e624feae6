package scenario

import "time"

// Writer defaults, applied to keys a writer section leaves out.
const (
	DefaultWriterRate        = 100.0
	DefaultWriterUpdateShare = 0.3
)

// Writer writes one tenant's orders at a fixed rate over each
// configuration's whole timeline, through the configuration's role on the
// node holding the tenant, and keeps every acknowledged write; after the
// timeline a checker reads them back at the tenant's node. Its rows have
// negative ids, apart from the data set's.
type Writer struct {
	// Tenant is the tenant written to, 1..tenants.count. Default 1.
	Tenant int `yaml:"tenant"`
	// Rate is writes per second, in (0, 5000]. Default 100.
	Rate float64 `yaml:"rate"`
	// UpdateShare is the share of writes that update a row written
	// earlier (the rest insert), in [0, 1). Default 0.3.
	UpdateShare float64 `yaml:"update_share"`
}

// WritePause is the assertion on the writer's longest write.
type WritePause struct {
	// Max is the longest a write may take from its intended start to its
	// answer, > 0. Unset: no assertion.
	Max Duration `yaml:"max"`
	// From names the phase from whose start on writes are judged (by
	// their intended start): a remedy's pause, not the harm before it.
	// Default: every write of the timeline.
	From string `yaml:"from"`
}

// applyWriterDefaults fills a present writer section.
func (s *Scenario) applyWriterDefaults() {
	if s.Writer == nil {
		return
	}
	w := s.Writer
	if !s.ix.has("writer.tenant") {
		w.Tenant = DominantTenant
	}
	if !s.ix.has("writer.rate") {
		w.Rate = DefaultWriterRate
	}
	if !s.ix.has("writer.update_share") {
		w.UpdateShare = DefaultWriterUpdateShare
	}
}

// writer checks the writer and the assertions that read it.
func (c *checker) writer(s *Scenario) {
	a := &s.Assertions
	if s.Writer == nil {
		if c.present("writer") {
			c.add("writer", "must be a mapping, e.g. {tenant: 1, rate: 100}")
		}
		if a.ZeroLoss {
			c.add("assertions.zero_loss", "needs a writer section: the checked writes it reads back")
		}
		if c.present("assertions.write_pause") {
			c.add("assertions.write_pause", "needs a writer section: the writes it times")
		}
		return
	}
	w := s.Writer
	if !s.Data.Builtin() {
		c.add("writer", "only with the built-in data set: the writer checks rows it writes into orders")
	}
	if w.Tenant < 1 || (s.Tenants.Count >= 2 && w.Tenant > s.Tenants.Count) {
		c.add("writer.tenant", "no such tenant %d: ids run from 1 to tenants.count (%d)", w.Tenant, s.Tenants.Count)
	}
	if !(w.Rate > 0 && w.Rate <= 5000) {
		c.add("writer.rate", "must be in (0, 5000] writes/s, got %s", fmtFloat(w.Rate))
	}
	if !(w.UpdateShare >= 0 && w.UpdateShare < 1) {
		c.add("writer.update_share", "must be in [0, 1), got %s", fmtFloat(w.UpdateShare))
	}
	if c.present("assertions.write_pause") {
		switch {
		case !c.present("assertions.write_pause.max"):
			c.add("assertions.write_pause.max", "required: the longest a write may take, e.g. 1s")
		case a.WritePause.Max <= 0:
			c.add("assertions.write_pause.max", "must be a duration > 0, got %s", a.WritePause.Max)
		case a.WritePause.Max > Duration(time.Hour):
			c.add("assertions.write_pause.max", "must be at most 1h, got %s", a.WritePause.Max)
		}
		if f := a.WritePause.From; c.present("assertions.write_pause.from") && s.PhaseIndex(f) < 0 {
			c.add("assertions.write_pause.from", "unknown phase %q, want one of %s", f, phaseList(s.Steps()))
		}
	}
	if !s.Data.Builtin() || !s.Tenants.Keys.Default() {
		c.add("writer", "writes the built-in data set's orders: not with data.setup or tenants.keys")
	}
}
