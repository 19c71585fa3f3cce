-- Back to migration 4: one shared operator role, no row-level security.
--
-- Going down drops the namespace grants and their history. A history that
-- holds anything is refused unless the session says it means it (keyledger
-- migrate down --destroy-journal-records sets
-- keyledger.destroy_journal_records = yes).
LOCK TABLE keyledger.namespace_grants, keyledger.grant_history IN ACCESS EXCLUSIVE MODE;
DO $$
BEGIN
  IF coalesce(current_setting('keyledger.destroy_journal_records', true), '') <> 'yes'
     AND EXISTS (SELECT 1 FROM keyledger.grant_history) THEN
    RAISE EXCEPTION 'migration 5 down would drop keyledger.namespace_grants and keyledger.grant_history, which hold % grants and % grant history records',
      (SELECT count(*) FROM keyledger.namespace_grants), (SELECT count(*) FROM keyledger.grant_history)
      USING ERRCODE = 'KL001';
  END IF;
END;
$$;

-- Without row-level security a namespace role would see every namespace:
-- every role ever granted loses its journal rights first.
DO $$
DECLARE
  r name;
BEGIN
  FOR r IN SELECT DISTINCT h.role FROM keyledger.grant_history h
           WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = h.role) LOOP
    EXECUTE format('REVOKE ALL ON keyledger.operations, keyledger.records, keyledger.state_edges, keyledger.namespace_grants FROM %I', r);
    EXECUTE format('REVOKE USAGE ON SCHEMA keyledger FROM %I', r);
  END LOOP;
END;
$$;

DROP POLICY IF EXISTS operations_owner ON keyledger.operations;
DROP POLICY IF EXISTS operations_namespace ON keyledger.operations;
DROP POLICY IF EXISTS records_owner ON keyledger.records;
DROP POLICY IF EXISTS records_namespace ON keyledger.records;
ALTER TABLE keyledger.operations NO FORCE ROW LEVEL SECURITY;
ALTER TABLE keyledger.operations DISABLE ROW LEVEL SECURITY;
ALTER TABLE keyledger.records NO FORCE ROW LEVEL SECURITY;
ALTER TABLE keyledger.records DISABLE ROW LEVEL SECURITY;
DROP TABLE keyledger.namespace_grants;
DROP TABLE keyledger.grant_history;
DROP FUNCTION keyledger.record_grant_change();
DROP FUNCTION keyledger.acting_as_owner();

-- The guards of migration 2 (xmin, 32 bits).
CREATE OR REPLACE FUNCTION keyledger.guard_record_insert() RETURNS trigger LANGUAGE plpgsql
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

ALTER TABLE keyledger.operations DROP CONSTRAINT operations_terminal_finished_xact;
ALTER TABLE keyledger.operations DROP COLUMN finished_xact;

-- The shared operator role's rights of migrations 1 to 4, when it exists.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('GRANT USAGE ON SCHEMA keyledger TO %I', operator);
    EXECUTE format('GRANT SELECT ON keyledger.state_edges TO %I', operator);
    EXECUTE format('GRANT SELECT ON keyledger.operations, keyledger.records TO %I', operator);
    EXECUTE format('GRANT INSERT (kind, mutation_id, request_id, command_digest, target_namespace, target_name, expected_uid) '
                   'ON keyledger.operations TO %I', operator);
    EXECUTE format('GRANT INSERT (operation_id, kind, step, target, attempt, uid, resource_version, digest, status, reason, detail, batch, final) '
                   'ON keyledger.records TO %I', operator);
    EXECUTE format('GRANT UPDATE (state, outcome, reason) ON keyledger.operations TO %I', operator);
  END IF;
END;
$$;
