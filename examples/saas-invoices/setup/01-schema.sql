-- The schema of a small invoicing SaaS: every table is keyed by the
-- tenant's text key first. noisysim runs this file in the run's schema
-- (search_path is that schema alone), after it created noisysim_tenants.
CREATE TABLE accounts (
    tenant_key text        NOT NULL,
    account_id bigint      NOT NULL,
    name       text        NOT NULL,
    created_at timestamptz NOT NULL
);

CREATE TABLE invoices (
    tenant_key text          NOT NULL,
    invoice_id bigint        NOT NULL,
    account_id bigint        NOT NULL,
    issued_at  timestamptz   NOT NULL,
    status     text          NOT NULL,
    total      numeric(12,2) NOT NULL
);

CREATE TABLE invoice_lines (
    tenant_key text          NOT NULL,
    invoice_id bigint        NOT NULL,
    line_no    integer       NOT NULL,
    product    text          NOT NULL,
    quantity   integer       NOT NULL,
    amount     numeric(12,2) NOT NULL
);
