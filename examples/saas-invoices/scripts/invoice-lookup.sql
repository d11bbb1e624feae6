-- Interactive: open one invoice with its account's name.
-- :tenant is the tenant's key ('org-0007'), :rows_invoices its invoice
-- count (data.rows.invoices split by the tenants' shares).
\set invoice random(1, :rows_invoices)
SELECT i.invoice_id, i.issued_at, i.status, i.total, a.name
FROM invoices i
JOIN accounts a ON a.tenant_key = i.tenant_key AND a.account_id = i.account_id
WHERE i.tenant_key = :tenant AND i.invoice_id = :invoice;
