-- One journal, many namespaces, one trust domain per namespace.
--
-- A journal serves every namespace keyledger acts in. Each namespace's runs
-- connect as a role of their own, and the schema owner grants that role the
-- namespaces it may act on (keyledger journal grant ROLE NAMESPACE...,
-- recorded in keyledger.grant_history by a trigger). Row-level security,
-- enabled and forced on operations and records, confines a role to the
-- operations whose target_namespace it was granted, and to their records:
-- it cannot see, insert, extend or move any other. The role that owns the
-- journal's tables (the role that ran migrate up) sees and may do
-- everything the triggers allow, through a policy of its own, so that
-- migrations, journal list as the owner and a later prune work.
--
-- The shared operator role of migrations 1 to 4 loses its rights here:
-- rights are granted per namespace role by keyledger journal grant, never
-- by a migration.
--
-- The append-after-final guard no longer compares 32-bit xmin (which wraps):
-- finished_xact is the 64-bit id (xid8) of the transaction that finished the
-- operation, set only by the update trigger.

-- 1. finished_xact: which transaction finished the operation.
ALTER TABLE keyledger.operations ADD COLUMN finished_xact xid8;
-- Operations finished before this migration are stamped with the
-- migration's own transaction id: every transaction after it sees them as
-- finished by another transaction, which they were. The move guard (final
-- operations never change) and the ending check are lifted for this one
-- fill, inside the migration's transaction, and put back before anything
-- else can write.
ALTER TABLE keyledger.operations DISABLE TRIGGER operations_forward_only;
ALTER TABLE keyledger.operations DISABLE TRIGGER operations_final_has_ending;
UPDATE keyledger.operations SET finished_xact = pg_current_xact_id() WHERE state IN ('completed', 'refused');
ALTER TABLE keyledger.operations ENABLE TRIGGER operations_forward_only;
ALTER TABLE keyledger.operations ENABLE TRIGGER operations_final_has_ending;
ALTER TABLE keyledger.operations ADD CONSTRAINT operations_terminal_finished_xact CHECK (
  (state IN ('completed', 'refused')) = (finished_xact IS NOT NULL));

-- The move guard of migration 2, and finished_xact: set by the trigger when
-- the operation becomes terminal, whatever the UPDATE says (no role is
-- granted the column; the owner's value is overwritten too).
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
  NEW.finished_xact := CASE WHEN NEW.state IN ('completed', 'refused') THEN pg_current_xact_id() END;
  NEW.revision := OLD.revision + 1;
  RETURN NEW;
END;
$$;

-- Nothing is appended to a finished operation, unless this very transaction
-- finished it: finished_xact against the 64-bit id of this (top-level)
-- transaction, which never wraps. The operation row is locked, so an append
-- waits for a concurrent finish and then sees it. Runs as the invoker: a
-- namespace role finds only its own operations here; for another's, it finds
-- nothing, and the records policy's WITH CHECK refuses the row (an unknown
-- id is the foreign key's to refuse).
CREATE OR REPLACE FUNCTION keyledger.guard_record_insert() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_finished xid8;
  op_mutation text;
BEGIN
  SELECT o.state, o.finished_xact, o.mutation_id INTO op_state, op_finished, op_mutation
    FROM keyledger.operations o WHERE o.id = NEW.operation_id FOR NO KEY UPDATE;
  IF NOT FOUND THEN
    RETURN NEW;
  END IF;
  IF op_state IN ('completed', 'refused') AND op_finished IS DISTINCT FROM pg_current_xact_id() THEN
    RAISE EXCEPTION 'keyledger operation % is final (%): nothing may be appended', op_mutation, op_state
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN NEW;
END;
$$;

-- 2. Which role may act on which target namespace, and every change of it.
CREATE TABLE keyledger.namespace_grants (
  role       name NOT NULL CHECK (role ~ '^[a-z_][a-z0-9_-]{0,62}$'),
  namespace  text NOT NULL CHECK (namespace ~ '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$'),
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (role, namespace)
);

-- Append-only, whoever asks: one row per grant and per revoke, written by
-- the trigger on namespace_grants in the transaction that made the change.
CREATE TABLE keyledger.grant_history (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at           timestamptz NOT NULL DEFAULT now(),
  -- who: the login role (session_user) and the role it acted as (current_user)
  session_role name NOT NULL,
  acting_role  name NOT NULL,
  role         name NOT NULL,
  namespace    text NOT NULL,
  action       text NOT NULL CHECK (action IN ('grant', 'revoke'))
);
CREATE TRIGGER grant_history_append_only BEFORE UPDATE OR DELETE ON keyledger.grant_history
  FOR EACH ROW EXECUTE FUNCTION keyledger.refuse_record_change();
CREATE TRIGGER grant_history_no_truncate BEFORE TRUNCATE ON keyledger.grant_history
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.refuse_record_change();

-- A grant is added or removed, never changed, and every addition and
-- removal is written to the history (a TRUNCATE would skip it: refused).
CREATE FUNCTION keyledger.record_grant_change() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF TG_OP = 'UPDATE' THEN
    RAISE EXCEPTION 'keyledger namespace grants are granted and revoked, never changed'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  INSERT INTO keyledger.grant_history (at, session_role, acting_role, role, namespace, action)
  VALUES (now(), session_user, current_user,
          CASE TG_OP WHEN 'INSERT' THEN NEW.role ELSE OLD.role END,
          CASE TG_OP WHEN 'INSERT' THEN NEW.namespace ELSE OLD.namespace END,
          CASE TG_OP WHEN 'INSERT' THEN 'grant' ELSE 'revoke' END);
  RETURN NULL;
END;
$$;
CREATE TRIGGER namespace_grants_no_update BEFORE UPDATE ON keyledger.namespace_grants
  FOR EACH ROW EXECUTE FUNCTION keyledger.record_grant_change();
CREATE TRIGGER namespace_grants_history AFTER INSERT OR DELETE ON keyledger.namespace_grants
  FOR EACH ROW EXECUTE FUNCTION keyledger.record_grant_change();
CREATE TRIGGER namespace_grants_no_truncate BEFORE TRUNCATE ON keyledger.namespace_grants
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.refuse_record_change();

-- 3. Row-level security.
--
-- Whether the current role acts as the journal's owner: it owns
-- keyledger.operations or has that owner's privileges (pg_has_role USAGE).
-- Superusers and BYPASSRLS roles skip every policy anyway; keyledger
-- journal grant refuses to grant them, and the owner, a namespace.
CREATE FUNCTION keyledger.acting_as_owner() RETURNS boolean LANGUAGE sql STABLE
  SET search_path = pg_catalog, pg_temp AS $$
  SELECT pg_has_role(current_user, c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = 'keyledger.operations'::regclass
$$;

-- Forced: the owner is held to the policies too, and sees everything only
-- because a policy says so.
ALTER TABLE keyledger.operations ENABLE ROW LEVEL SECURITY;
ALTER TABLE keyledger.operations FORCE ROW LEVEL SECURITY;
ALTER TABLE keyledger.records ENABLE ROW LEVEL SECURITY;
ALTER TABLE keyledger.records FORCE ROW LEVEL SECURITY;
ALTER TABLE keyledger.namespace_grants ENABLE ROW LEVEL SECURITY;
ALTER TABLE keyledger.namespace_grants FORCE ROW LEVEL SECURITY;

-- (SELECT ...) around the owner check makes it one evaluation per statement.
CREATE POLICY operations_owner ON keyledger.operations FOR ALL
  USING ((SELECT keyledger.acting_as_owner())) WITH CHECK ((SELECT keyledger.acting_as_owner()));
-- A namespace role sees, inserts and moves (UPDATE, which also needs the row
-- to stay in a granted namespace; target_namespace is immutable anyway)
-- only operations whose target namespace it was granted.
CREATE POLICY operations_namespace ON keyledger.operations FOR ALL
  USING (target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user))
  WITH CHECK (target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user));

CREATE POLICY records_owner ON keyledger.records FOR ALL
  USING ((SELECT keyledger.acting_as_owner())) WITH CHECK ((SELECT keyledger.acting_as_owner()));
-- Records follow their operation: seen and appended (extended) only for an
-- operation in a granted namespace. The subquery reads operations under the
-- role's own policies as well.
CREATE POLICY records_namespace ON keyledger.records FOR ALL
  USING (EXISTS (SELECT 1 FROM keyledger.operations o
                 WHERE o.id = records.operation_id
                   AND o.target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user)))
  WITH CHECK (EXISTS (SELECT 1 FROM keyledger.operations o
                      WHERE o.id = records.operation_id
                        AND o.target_namespace IN (SELECT g.namespace FROM keyledger.namespace_grants g WHERE g.role = current_user)));

-- A namespace role reads its own grants (the policies above read them as
-- that role); the owner reads and changes all.
CREATE POLICY namespace_grants_owner ON keyledger.namespace_grants FOR ALL
  USING ((SELECT keyledger.acting_as_owner())) WITH CHECK ((SELECT keyledger.acting_as_owner()));
CREATE POLICY namespace_grants_own ON keyledger.namespace_grants FOR SELECT
  USING (role = current_user);

-- 4. The shared operator role of migrations 1 to 4 keeps no right on the
-- journal: each namespace's role is granted by keyledger journal grant.
DO $$
DECLARE
  operator text := coalesce(nullif(current_setting('keyledger.operator_role', true), ''), 'keyledger_operator');
BEGIN
  IF EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = operator) THEN
    EXECUTE format('REVOKE ALL ON keyledger.operations, keyledger.records, keyledger.state_edges FROM %I', operator);
    EXECUTE format('REVOKE USAGE ON SCHEMA keyledger FROM %I', operator);
  END IF;
END;
$$;
