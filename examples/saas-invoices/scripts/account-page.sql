-- Interactive: an account's page: its name, then its 20 newest invoices.
-- A few accounts are much busier than the rest (zipfian, s = 1.2).
\set account random_zipfian(1, :rows_accounts, 1.2)
SELECT name AS account_name FROM accounts
WHERE tenant_key = :tenant AND account_id = :account \gset
SELECT invoice_id, issued_at, status, total, :account_name AS account
FROM invoices
WHERE tenant_key = :tenant AND account_id = :account
ORDER BY issued_at DESC
LIMIT 20;
