-- report: a year of the tenant's orders aggregated by month and status.
SELECT date_trunc('month', created_at) AS month, status, count(*), sum(amount), avg(amount)
	FROM orders WHERE tenant_id = :tenant AND created_at >= now() - interval '1 year'
	GROUP BY 1, 2 ORDER BY 1, 2;
