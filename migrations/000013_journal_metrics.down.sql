-- Back to migration 12: no metrics schema, nothing granted to pg_monitor.
DROP SCHEMA keyledger_metrics CASCADE;
