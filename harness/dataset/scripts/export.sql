-- export: every order of the tenant, in key-ordered batches of :batch rows
-- (the class's batch) read in one REPEATABLE READ snapshot, never in one
-- giant query. The tenant's ids are 1..:rows_orders, so each batch starts
-- after the last id of the one before, and the last batch is the first
-- that returns fewer than :batch rows (none when :batch divides the count).
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
\set after 0
\repeat :rows_orders / :batch + 1
SELECT id, created_at, amount, status, customer, note FROM orders
	WHERE tenant_id = :tenant AND id > :after ORDER BY id LIMIT :batch;
\set after :after + :batch
\endrepeat
COMMIT;
