-- pgbench's builtin "TPC-B (sort of)" script, as pgbench --show-script
-- tpcb-like prints it, with "AND tenant = :tenant" added to each statement.
\set aid random(1, 100000 * :scale)
\set bid random(1, 1 * :scale)
\set tid random(1, 10 * :scale)
\set delta random(-5000, 5000)
BEGIN;
UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid AND tenant = :tenant;
SELECT abalance FROM pgbench_accounts WHERE aid = :aid AND tenant = :tenant;
UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid AND tenant = :tenant;
UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid AND tenant = :tenant;
INSERT INTO pgbench_history (tenant, tid, bid, aid, delta, mtime) VALUES (:tenant, :tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);
END;
