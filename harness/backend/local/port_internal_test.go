package local

import (
	"net"
	"sync/atomic"
	"testing"

	"github.com/noisysim/noisysim/harness/backend"
)

// A port picked free and taken before the server binds it is retried with
// another port, not fatal.
func TestPickedPortTakenIsRetried(t *testing.T) {
	if _, err := FindBinaries(t.Context(), ""); err != nil {
		t.Skip("skipping: PostgreSQL server binaries not found")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	var calls atomic.Int32
	pickPort = func() (int, error) {
		if calls.Add(1) == 1 {
			return taken, nil
		}
		return pickFreePort()
	}
	t.Cleanup(func() { pickPort = pickFreePort })

	c, err := Start(t.Context(), backend.Spec{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer c.Close()
	if got := c.Nodes()[0].Port; got == taken {
		t.Fatalf("node got the taken port %d", got)
	}
	if calls.Load() < 2 {
		t.Fatalf("pickPort called %d times, want a retry", calls.Load())
	}
}
