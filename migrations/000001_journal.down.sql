DROP TABLE IF EXISTS keyledger.records;
DROP TABLE IF EXISTS keyledger.operations;
DROP TABLE IF EXISTS keyledger.state_edges;
DROP FUNCTION IF EXISTS keyledger.guard_operation_update();
DROP FUNCTION IF EXISTS keyledger.guard_operation_insert();
DROP FUNCTION IF EXISTS keyledger.refuse_record_change();
DROP TYPE IF EXISTS keyledger.record_kind;
DROP TYPE IF EXISTS keyledger.operation_state;
