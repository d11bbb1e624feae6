package harness_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness"
	"github.com/noisysim/noisysim/harness/backend/local/localtest"
	"github.com/noisysim/noisysim/harness/scenario"
)

// TestRunPromotionInterrupted: the tenant-promotion scenario stopped (the
// first Ctrl-C) once its before window is measured returns what was
// measured in a report marked incomplete, beside the interruption.
func TestRunPromotionInterrupted(t *testing.T) {
	sc, err := scenario.Load("../scenarios/tenant-promotion.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Timeline[1].Length = scenario.Duration(3 * time.Second) // before
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	stop, stopped := context.WithCancel(ctx)
	defer stopped()
	rep, err := harness.Run(stop, sc, harness.Options{Cluster: c, ProgressEvery: 50 * time.Millisecond, Progress: func(p harness.Progress) {
		if p.Phase == "move" || p.Phase == "after" {
			stopped()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the interruption", err)
	}
	if rep == nil {
		t.Fatal("no report: what was measured is lost")
	}
	if rep.Passed || !strings.HasPrefix(rep.Incomplete, "interrupted during ") {
		t.Errorf("passed %v, incomplete %q: want an incomplete report", rep.Passed, rep.Incomplete)
	}
	if len(rep.Configurations) != 1 || !rep.Configurations[0].Incomplete {
		t.Fatalf("configurations = %+v, want the one configuration, incomplete", rep.Configurations)
	}
	measured := false
	for _, w := range rep.Configurations[0].Windows {
		measured = measured || w.Name == "before" && len(w.Tenants) > 0
	}
	if !measured {
		t.Errorf("windows %+v: want the measured before window", rep.Configurations[0].Windows)
	}
	if err := rep.Validate(); err != nil {
		t.Errorf("invalid report (noisysim run --out would not write it): %v", err)
	}
	if len(rep.Assertions) != 0 {
		t.Errorf("%d assertions on an interrupted run, want none", len(rep.Assertions))
	}
}

// TestRunHotShardInterrupted: a hot-shard scenario stopped (the first
// Ctrl-C) in its ladder returns its solo and before windows in a report
// marked incomplete, beside the interruption.
func TestRunHotShardInterrupted(t *testing.T) {
	sc := shortHotShard(t)
	c := localtest.Start(t, sc.Backend.Spec())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	stop, stopped := context.WithCancel(ctx)
	defer stopped()
	rep, err := harness.Run(stop, sc, harness.Options{Cluster: c, ProgressEvery: 20 * time.Millisecond, Progress: func(p harness.Progress) {
		if p.Phase == "ladder" || p.Phase == "after" {
			stopped()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the interruption", err)
	}
	if rep == nil {
		t.Fatal("no report: what was measured is lost")
	}
	if err := rep.Validate(); err != nil {
		t.Errorf("invalid report (noisysim run --out would not write it): %v", err)
	}
	if rep.Passed || !strings.HasPrefix(rep.Incomplete, "interrupted during ") {
		t.Errorf("passed %v, incomplete %q: want an incomplete report", rep.Passed, rep.Incomplete)
	}
	if len(rep.Configurations) != 1 || !rep.Configurations[0].Incomplete {
		t.Fatalf("configurations = %+v, want the one cut short", rep.Configurations)
	}
	ws := map[string]int64{}
	for _, w := range rep.Configurations[0].Windows {
		ws[w.Name] = w.Stats.Issued
	}
	if ws["solo"] == 0 || ws["before"] == 0 || ws["after"] != 0 {
		t.Errorf("requests per window = %v, want solo and before measured, after not reached", ws)
	}
}
