-- Makes the coordinator a Citus coordinator and adds the 4 workers by their
-- service names. Safe to run again: citus_add_node returns the id of a node
-- already added.
CREATE EXTENSION IF NOT EXISTS citus;
SELECT citus_set_coordinator_host('coordinator', 5432);
SELECT citus_add_node('worker1', 5432);
SELECT citus_add_node('worker2', 5432);
SELECT citus_add_node('worker3', 5432);
SELECT citus_add_node('worker4', 5432);
SELECT nodename, nodeport, isactive FROM pg_dist_node ORDER BY nodeid;
