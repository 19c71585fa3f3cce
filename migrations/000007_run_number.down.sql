-- Back to migration 6: runs ordered by row id again.
DROP INDEX keyledger.operations_run_number;
ALTER TABLE keyledger.operations DROP COLUMN run_number;
