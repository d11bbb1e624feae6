// Package external is the backend for an existing PostgreSQL cluster given
// by DSNs: a primary and optionally one streaming replica, or (topology
// citus) a Citus coordinator whose workers are reached through it. noisysim
// neither starts nor stops those servers.
//
//	b := external.New(external.Config{Primary: os.Getenv("PRIMARY_DSN")})
//	c, err := b.Start(ctx, backend.Spec{})
//	if err != nil {
//		return err
//	}
//	defer c.Close() // does nothing to the servers
package external
