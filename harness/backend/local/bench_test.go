package local

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/noisysim/noisysim/harness/backend"
)

// Start-up targets (issue "Embedded local PostgreSQL backend"): single node
// accepting queries < 1.5 s, primary + replica < 4 s, 5 nodes < 3 s; each
// benchmark reports ms/start next to BenchmarkInitdb's ms/initdb.
//
//	go test -run '^$' -bench . -benchtime 5x ./harness/backend/local/

func benchBinaries(b *testing.B) (Binaries, osUser) {
	bin, err := FindBinaries(context.Background(), "")
	if err != nil {
		b.Skip("skipping: PostgreSQL server binaries not found")
	}
	u, err := serverUser("")
	if err != nil {
		b.Skip("skipping: ", err)
	}
	return bin, u
}

// BenchmarkInitdb measures initdb alone, as run for a template.
func BenchmarkInitdb(b *testing.B) {
	bin, u := benchBinaries(b)
	dir, err := os.MkdirTemp("", "nstest-initdb-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := u.chown(dir); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		data := filepath.Join(dir, "d"+itoa(i))
		t := time.Now()
		cmd := u.command(exec.Command(bin.Path("initdb"), append([]string{"-D", data}, initdbArgs...)...), dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("initdb: %v\n%s", err, out)
		}
		total += time.Since(t)
		b.StopTimer()
		os.RemoveAll(data)
		b.StartTimer()
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/initdb")
}

// benchStart measures Start of spec with cluster dirs under os.TempDir()
// ("tmp") and, where it exists, under the tmpfs /dev/shm ("shm"): copying a
// template is mostly file creation, several times cheaper on tmpfs.
func benchStart(b *testing.B, spec backend.Spec) {
	benchBinaries(b)
	bases := []struct{ name, dir string }{{"tmp", ""}}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		bases = append(bases, struct{ name, dir string }{"shm", "/dev/shm"})
	}
	for _, bd := range bases {
		b.Run(bd.name, func(b *testing.B) {
			base, err := os.MkdirTemp(bd.dir, "nstest-bench-")
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(base)
			os.Chmod(base, 0o755)
			be := New(WithBaseDir(base))
			warm, err := be.StartCluster(context.Background(), spec) // the template exists from here on
			if err != nil {
				b.Fatal(err)
			}
			warm.Close()
			var total time.Duration
			for b.Loop() {
				t := time.Now()
				c, err := be.StartCluster(context.Background(), spec)
				if err != nil {
					b.Fatal(err)
				}
				total += time.Since(t)
				b.StopTimer()
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/start")
		})
	}
}

// BenchmarkStartSingle measures Start of one primary, template cached, up to
// accepting queries with its password set.
func BenchmarkStartSingle(b *testing.B) { benchStart(b, backend.Spec{}) }

// BenchmarkStartReplica measures Start of primary + streaming standby, up to
// the standby having replayed the primary's WAL position.
func BenchmarkStartReplica(b *testing.B) {
	benchStart(b, backend.Spec{Topology: backend.TopologyReplica})
}

// BenchmarkStartFivePrimaries measures Start of 5 independent primaries.
func BenchmarkStartFivePrimaries(b *testing.B) {
	benchStart(b, backend.Spec{Topology: backend.TopologyPrimaries, Nodes: 5})
}

func itoa(i int) string { return string(rune('a'+i%26)) + time.Now().Format("150405.000000") }
