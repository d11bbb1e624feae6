-- lookup: an indexed point lookup of one of the tenant's orders by its
-- primary key. The tenant's ids are 1..:rows_orders.
\set id random(1, :rows_orders)
SELECT id, created_at, amount, status, customer FROM orders WHERE tenant_id = :tenant AND id = :id;
