-- Heavy: the month-end report, a year of invoice lines by month and
-- product, and the totals by status, in one consistent snapshot.
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;
SELECT date_trunc('month', i.issued_at) AS month, l.product,
       count(*) AS lines, sum(l.quantity) AS quantity, sum(l.amount) AS amount
FROM invoices i
JOIN invoice_lines l ON l.tenant_key = i.tenant_key AND l.invoice_id = i.invoice_id
WHERE i.tenant_key = :tenant AND i.issued_at >= now() - interval '1 year'
GROUP BY 1, 2
ORDER BY 1, 2;
SELECT status, count(*), sum(total) FROM invoices WHERE tenant_key = :tenant GROUP BY status;
COMMIT;
