-- The role that appends to the journal cannot shape it:
--   * record and operation ids and times are assigned by the database, whatever
--     the INSERT says (the operator may not even name those columns, and a
--     trigger overwrites them for everyone else);
--   * nothing is appended to a finished operation, except in the transaction
--     that finishes it;
--   * an operation reaches completed (refused) only in the transaction that
--     appends its completion (refusal) record, and such a record is only
--     appended by the transaction that finishes the operation;
--   * every trigger function runs with a pinned search_path.

-- Ids and times: a trigger overwrites them on every insert. It runs as the
-- schema owner (SECURITY DEFINER) so that it may draw from the identity
-- sequences the operator role holds no right on.
CREATE FUNCTION keyledger.stamp_row() RETURNS trigger LANGUAGE plpgsql
  SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  NEW.id := nextval(pg_get_serial_sequence(quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME), 'id'));
  NEW.created_at := now();
  IF TG_TABLE_NAME = 'operations' THEN
    NEW.updated_at := now();
  END IF;
  RETURN NEW;
END;
$$;
REVOKE ALL ON FUNCTION keyledger.stamp_row() FROM PUBLIC;
-- BEFORE triggers fire in name order: stamp first, guard after.
CREATE TRIGGER operations_a_stamp BEFORE INSERT ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.stamp_row();
CREATE TRIGGER records_a_stamp BEFORE INSERT ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.stamp_row();

-- Nothing is appended to a finished operation, unless this very transaction
-- finished it (the row version it sees was written by this transaction). The
-- operation row is locked, so an append waits for a concurrent finish and
-- then sees it.
CREATE FUNCTION keyledger.guard_record_insert() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_xmin  xid;
  op_mutation text;
BEGIN
  SELECT o.state, o.xmin, o.mutation_id INTO op_state, op_xmin, op_mutation
    FROM keyledger.operations o WHERE o.id = NEW.operation_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NEW; -- the foreign key refuses it
  END IF;
  IF op_state IN ('completed', 'refused') AND op_xmin IS DISTINCT FROM pg_current_xact_id()::xid THEN
    RAISE EXCEPTION 'keyledger operation % is final (%): nothing may be appended', op_mutation, op_state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;
CREATE TRIGGER records_b_not_final BEFORE INSERT ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_record_insert();

-- A finished operation carries its ending, appended by the same transaction.
-- Checked when the transaction commits, from both sides: the move to a
-- terminal state needs the matching record, and the record needs the move.
CREATE FUNCTION keyledger.check_final_has_ending() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_mutation text;
BEGIN
  SELECT o.state, o.mutation_id INTO op_state, op_mutation FROM keyledger.operations o WHERE o.id = NEW.id;
  IF op_state IN ('completed', 'refused') AND NOT EXISTS (
       SELECT 1 FROM keyledger.records r
       WHERE r.operation_id = NEW.id
         AND r.kind = CASE op_state WHEN 'completed' THEN 'completion'::keyledger.record_kind
                                    ELSE 'refusal'::keyledger.record_kind END) THEN
    RAISE EXCEPTION 'keyledger operation % moved to % without its % record', op_mutation, op_state,
      CASE op_state WHEN 'completed' THEN 'completion' ELSE 'refusal' END
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER operations_final_has_ending AFTER UPDATE ON keyledger.operations
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.state IN ('completed', 'refused'))
  EXECUTE FUNCTION keyledger.check_final_has_ending();

CREATE FUNCTION keyledger.check_ending_finalizes() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_mutation text;
BEGIN
  SELECT o.state, o.mutation_id INTO op_state, op_mutation FROM keyledger.operations o WHERE o.id = NEW.operation_id;
  IF op_state IS DISTINCT FROM (CASE NEW.kind WHEN 'completion' THEN 'completed'::keyledger.operation_state
                                              ELSE 'refused'::keyledger.operation_state END) THEN
    RAISE EXCEPTION 'keyledger operation %: a % record needs the move to its terminal state in the same transaction (state is %)',
      op_mutation, NEW.kind, op_state
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NULL;
END;
$$;
CREATE CONSTRAINT TRIGGER records_ending_finalizes AFTER INSERT ON keyledger.records
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
  WHEN (NEW.kind IN ('completion', 'refusal'))
  EXECUTE FUNCTION keyledger.check_ending_finalizes();

-- Times of a move are the database's too: updated_at on every move,
-- finalized_at exactly when the operation becomes terminal.
CREATE OR REPLACE FUNCTION keyledger.guard_operation_update() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
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
  NEW.finalized_at := CASE WHEN NEW.state IN ('completed', 'refused') THEN now() END;
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END;
$$;

ALTER FUNCTION keyledger.refuse_record_change() SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION keyledger.guard_operation_insert() SET search_path = pg_catalog, pg_temp;

-- The operator names only the columns it supplies: never an id, a time, a
-- revision or a state on insert; on update only the state and its outcome.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  -- Since migration 000005 a journal has no shared operator role: a fresh
  -- install need not declare one, and grants are per namespace role
  -- (keyledger journal grant). An existing journal's role keeps these
  -- rights until 000005 revokes them.
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('REVOKE INSERT ON keyledger.operations, keyledger.records FROM %I', operator);
    EXECUTE format('GRANT INSERT (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid) '
                   'ON keyledger.operations TO %I', operator);
    EXECUTE format('GRANT INSERT (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, detail) '
                   'ON keyledger.records TO %I', operator);
    EXECUTE format('REVOKE UPDATE (finalized_at, updated_at) ON keyledger.operations FROM %I', operator);
  END IF;
END;
$$;
