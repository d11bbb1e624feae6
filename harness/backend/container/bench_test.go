package container_test

import (
	"context"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
	"github.com/noisysim/noisysim/harness/backend/container"
)

// Time from `up` to ready per topology, on the local test image; each
// reports ms/start. Compare with harness/backend/local's benchmarks:
//
//	go test -run '^$' -bench . -benchtime 3x ./harness/backend/container/ ./harness/backend/local/
func benchStart(b *testing.B, spec backend.Spec) {
	needImage(b, testImage(), buildHint)
	ctx := context.Background()
	var ms float64
	for b.Loop() {
		c, err := container.Start(ctx, spec, container.WithImages(testImage()), testLabel)
		if err != nil {
			b.Fatal(err)
		}
		ms += float64(c.Ready().Milliseconds())
		b.StopTimer()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(ms/float64(b.N), "ms/start")
}

func BenchmarkStartSingle(b *testing.B) { benchStart(b, backend.Spec{}) }

func BenchmarkStartReplica(b *testing.B) {
	benchStart(b, backend.Spec{Topology: backend.TopologyReplica})
}

func BenchmarkStartPrimaries5(b *testing.B) {
	benchStart(b, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 5})
}
