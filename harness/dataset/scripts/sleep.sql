-- sleep: pg_sleep for the class's sleep (:sleep, in seconds): a query of
-- exact cost.
SELECT pg_sleep(:sleep);
