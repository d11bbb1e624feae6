-- Rows per tenant come from noisysim_tenants: one row per tenant with its
-- key, its share of the traffic and its row counts (rows_accounts,
-- rows_invoices: data.rows split by the same power law as the traffic).
INSERT INTO accounts (tenant_key, account_id, name, created_at)
SELECT t.key, g, 'account ' || g, now() - make_interval(days => (g * 37 % 700)::int)
FROM noisysim_tenants t, generate_series(1, t.rows_accounts) AS g;

-- Values are pure functions of the ids: the same data set every run.
INSERT INTO invoices (tenant_key, invoice_id, account_id, issued_at, status, total)
SELECT t.key, g,
       1 + (g * 7919) % t.rows_accounts,
       now() - make_interval(secs => ((g * 2654435761 + t.n * 40503) % (365 * 86400))::double precision),
       (ARRAY['draft', 'open', 'paid', 'paid', 'void'])[1 + g % 5],
       ((g * 104729) % 500000) / 100.0
FROM noisysim_tenants t, generate_series(1, t.rows_invoices) AS g;

-- Two to four lines per invoice.
INSERT INTO invoice_lines (tenant_key, invoice_id, line_no, product, quantity, amount)
SELECT i.tenant_key, i.invoice_id, l,
       (ARRAY['seats', 'storage', 'support', 'api calls'])[1 + (i.invoice_id + l) % 4],
       1 + (i.invoice_id * l) % 9,
       ((i.invoice_id * 31 + l * 17) % 50000) / 100.0
FROM invoices i, generate_series(1, 2 + (i.invoice_id % 3)::int) AS l;

-- Keys and indexes after the rows: several times faster.
ALTER TABLE accounts ADD PRIMARY KEY (tenant_key, account_id);
ALTER TABLE invoices ADD PRIMARY KEY (tenant_key, invoice_id);
ALTER TABLE invoice_lines ADD PRIMARY KEY (tenant_key, invoice_id, line_no);
CREATE INDEX invoices_account_issued ON invoices (tenant_key, account_id, issued_at DESC);
