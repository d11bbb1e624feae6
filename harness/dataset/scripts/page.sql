-- page: one customer's 20 newest orders. A tenant with fewer orders than
-- data.customers has as many customers as orders, named c0, c1, ...
\set c random(0, least(:customers, :rows_orders) - 1)
SELECT id, created_at, amount, status FROM orders WHERE tenant_id = :tenant AND customer = 'c' || :c
	ORDER BY created_at DESC LIMIT 20;
