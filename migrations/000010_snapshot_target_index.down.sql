-- Back to migration 9: the versioned family's provenance read goes through
-- operations_target and records_operation_step again.
DROP INDEX keyledger.records_snapshot_target;
