package local

import (
	"fmt"
	"net"
	"sync"
)

// handedOut holds ports this process picked and still uses, so that two
// nodes started at once never get the same one.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// pickPort is pickFreePort; tests replace it to exercise the retry path.
var pickPort = pickFreePort

// pickFreePort returns a free TCP port on 127.0.0.1. It may be taken by someone
// else before the server binds it; callers retry.
func pickFreePort() (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("pick port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		handedOut.Lock()
		taken := handedOut.ports[p]
		if !taken {
			handedOut.ports[p] = true
		}
		handedOut.Unlock()
		if !taken {
			return p, nil
		}
	}
	return 0, fmt.Errorf("pick port: no free port found")
}

func releasePort(p int) {
	handedOut.Lock()
	delete(handedOut.ports, p)
	handedOut.Unlock()
}

// portFree reports whether 127.0.0.1:p can be bound now.
func portFree(p int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}
