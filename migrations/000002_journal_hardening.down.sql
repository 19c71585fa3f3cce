-- Back to migration 000001's rights and triggers.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  -- Since migration 000005 a journal has no shared operator role: a fresh
  -- install need not declare one, and grants are per namespace role
  -- (keyledger journal grant). An existing journal's role keeps these
  -- rights until 000005 revokes them.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('REVOKE INSERT (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid) '
                   'ON keyledger.operations FROM %I', operator);
    EXECUTE format('REVOKE INSERT (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, detail) '
                   'ON keyledger.records FROM %I', operator);
    EXECUTE format('GRANT INSERT ON keyledger.operations, keyledger.records TO %I', operator);
    EXECUTE format('GRANT UPDATE (finalized_at, updated_at) ON keyledger.operations TO %I', operator);
  END IF;
END;
$$;

ALTER FUNCTION keyledger.refuse_record_change() RESET search_path;
ALTER FUNCTION keyledger.guard_operation_insert() RESET search_path;

CREATE OR REPLACE FUNCTION keyledger.guard_operation_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'keyledger operations are never deleted' USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF (NEW.id, NEW.kind, NEW.mutation_id, NEW.request_id, NEW.command_digest, NEW.target_namespace,
      NEW.target_name, NEW.expected_uid, NEW.created_at)
     IS DISTINCT FROM
     (OLD.id, OLD.kind, OLD.mutation_id, OLD.request_id, OLD.command_digest, OLD.target_namespace,
      OLD.target_name, OLD.expected_uid, OLD.created_at) THEN
    RAISE EXCEPTION 'keyledger operation % : prepared fields are immutable', OLD.mutation_id
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF OLD.state IN ('completed', 'refused') THEN
    RAISE EXCEPTION 'keyledger operation % is final (%)', OLD.mutation_id, OLD.state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF NEW.state <> OLD.state AND NOT EXISTS (
       SELECT 1 FROM keyledger.state_edges e WHERE e.from_state = OLD.state AND e.to_state = NEW.state) THEN
    RAISE EXCEPTION 'keyledger operation %: no edge % -> %', OLD.mutation_id, OLD.state, NEW.state
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.updated_at := now();
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END;
$$;

DROP TRIGGER IF EXISTS records_ending_finalizes ON keyledger.records;
DROP TRIGGER IF EXISTS operations_final_has_ending ON keyledger.operations;
DROP TRIGGER IF EXISTS records_b_not_final ON keyledger.records;
DROP TRIGGER IF EXISTS records_a_stamp ON keyledger.records;
DROP TRIGGER IF EXISTS operations_a_stamp ON keyledger.operations;
DROP FUNCTION IF EXISTS keyledger.check_ending_finalizes();
DROP FUNCTION IF EXISTS keyledger.check_final_has_ending();
DROP FUNCTION IF EXISTS keyledger.guard_record_insert();
DROP FUNCTION IF EXISTS keyledger.stamp_row();
