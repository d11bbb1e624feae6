package redislimiter_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/noisysim/noisysim/harness/backend/redisserver"
	"github.com/noisysim/noisysim/isolation/limiter/redislimiter"
)

// startRedis starts a throwaway redis-server for the test, or skips it.
func startRedis(t testing.TB) *redisserver.Server {
	t.Helper()
	bin, err := redisserver.Find("")
	if err != nil {
		t.Skipf("skip: %v", err)
	}
	srv, err := redisserver.Start(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// client returns a new connection to srv, closed at the test's end.
func client(t testing.TB, srv *redisserver.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

// newLimiter returns a limiter on its own connection to srv (one app
// instance), closed at the test's end.
func newLimiter(t testing.TB, srv *redisserver.Server, cfg redislimiter.Config) *redislimiter.Limiter {
	t.Helper()
	if cfg.Client == nil {
		cfg.Client = client(t, srv)
	}
	l, err := redislimiter.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}
