// Package record records the statements a PostgreSQL server runs, in its own
// csvlog or jsonlog, for a replay (a scenario's replay.log, harness/pglog
// reads it).
//
// On a server noisysim started (Started says so), a Recording changes the
// server's logging settings with ALTER SYSTEM and pg_reload_conf, step by
// step:
//
//   - Start checks that logging_collector is on (it takes effect only at
//     server start: noisysim cannot turn it on without a restart), takes an
//     exclusive lock on the data directory (another recording under way:
//     ErrBusy, nothing changed; the lock goes with Stop or the process), turns on
//     the settings Needed lists that differ, log_filename pointing at a file
//     of the recording's own, and returns once the server's logging
//     collector writes that file.
//   - Stop puts every setting it changed back as it was (the previous
//     ALTER SYSTEM value, or RESET) and returns once the collector has left
//     the file: it holds the statements logged between the two, complete.
//     Stop is idempotent.
//   - Copy writes the file; Remove deletes it from the server's log
//     directory.
//
// On a server noisysim did not start nothing is changed: Guidance writes
// the settings to set and how to collect the file.
//
//	rec := record.New(conn, pglog.JSON, node.DataDir)
//	defer rec.Stop(context.WithoutCancel(ctx)) // from here on, also from a signal's handler
//	if err := rec.Start(ctx); err != nil {
//		return err
//	}
//	time.Sleep(10 * time.Minute)
//	if err := rec.Stop(ctx); err != nil { … }
//	rec.Copy(out)
package record
