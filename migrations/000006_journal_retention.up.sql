-- A journal that stays small and fast.
--
-- A credential plan runs on every sync, for years: each run is an operation
-- of its own (store.PrepareRun). This migration gives the schema owner one
-- way to remove the runs nobody needs any more, and indexes the readers
-- that grew with the journal.
--
-- Append-only for the appenders stays true: a namespace role holds no
-- DELETE right on any journal table, may not execute keyledger.prune, and
-- the triggers below refuse every DELETE that is not part of a prune. A
-- prune is the schema owner's, runs as keyledger.prune (SECURITY DEFINER,
-- owned by the schema owner, EXECUTE revoked from PUBLIC), and first
-- appends a row to keyledger.prune_events (append-only, whoever asks) that
-- names who pruned, the cutoff and what it removes. The delete triggers
-- accept a row only while the current transaction holds such an event, and
-- only a finished operation (with its records) finalized before that
-- event's cutoff: even the owner cannot remove an unfinished operation, a
-- single record of an operation it keeps, or anything without leaving the
-- event behind.
--
-- What a prune removes (keyledger.prune): the finished runs of
-- desired-state commands (an operation whose preparation record says which
-- command and run it is, exactly as PrepareRun journals it) finalized
-- before the cutoff, except each command's newest finished run and its
-- newest completed run. One-shot operations (retirements, versioned
-- writes, anything prepared once under its own mutationId) are never
-- removed: the operation row and its records are the tombstone that makes
-- the same mutationId replay (and a different command under it refused),
-- and their records are what a replay's confirmation and the versioned
-- family's snapshot provenance are proven from.

-- 1. The prune events.
CREATE TABLE keyledger.prune_events (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at            timestamptz NOT NULL DEFAULT now(),
  xact          xid8 NOT NULL DEFAULT pg_current_xact_id(),
  session_role  name NOT NULL DEFAULT session_user,
  acting_role   name NOT NULL DEFAULT current_user,
  older_than    interval NOT NULL CHECK (older_than >= interval '0'),
  cutoff        timestamptz NOT NULL,
  operations    bigint NOT NULL CHECK (operations >= 0),
  records       bigint NOT NULL CHECK (records >= 0),
  -- removed records by kind, e.g. {"preparation": 3, "authority_call": 9}
  record_kinds  jsonb NOT NULL DEFAULT '{}'::jsonb CHECK (jsonb_typeof(record_kinds) = 'object')
);
CREATE INDEX prune_events_xact ON keyledger.prune_events (xact);
CREATE TRIGGER prune_events_append_only BEFORE UPDATE OR DELETE ON keyledger.prune_events
  FOR EACH ROW EXECUTE FUNCTION keyledger.refuse_record_change();
CREATE TRIGGER prune_events_no_truncate BEFORE TRUNCATE ON keyledger.prune_events
  FOR EACH STATEMENT EXECUTE FUNCTION keyledger.refuse_record_change();
REVOKE ALL ON keyledger.prune_events FROM PUBLIC;

-- 2. Deletes only within a prune. The triggers of migration 1 refused every
-- DELETE (records_append_only, operations_forward_only); they keep refusing
-- UPDATE, and DELETE goes to the guards below. Both run as the role that
-- deletes: only the owner holds DELETE, and it sees every row.
CREATE FUNCTION keyledger.guard_pruned_delete() RETURNS trigger LANGUAGE plpgsql
  SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  op_state keyledger.operation_state;
  op_finalized timestamptz;
  op_mutation text;
  cut timestamptz;
BEGIN
  SELECT max(e.cutoff) INTO cut FROM keyledger.prune_events e WHERE e.xact = pg_current_xact_id();
  IF TG_TABLE_NAME = 'records' THEN
    SELECT o.state, o.finalized_at, o.mutation_id INTO op_state, op_finalized, op_mutation
      FROM keyledger.operations o WHERE o.id = OLD.operation_id;
  ELSE
    op_state := OLD.state; op_finalized := OLD.finalized_at; op_mutation := OLD.mutation_id;
  END IF;
  IF cut IS NULL THEN
    RAISE EXCEPTION 'keyledger journal rows are removed only by keyledger journal prune (% of % refused)', TG_OP, TG_TABLE_NAME
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  IF op_state IS NULL OR op_state NOT IN ('completed', 'refused') OR op_finalized IS NULL OR op_finalized >= cut THEN
    RAISE EXCEPTION 'keyledger operation % is not finished before the prune cutoff: it is kept', op_mutation
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN OLD;
END;
$$;

DROP TRIGGER records_append_only ON keyledger.records;
CREATE TRIGGER records_append_only BEFORE UPDATE ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.refuse_record_change();
CREATE TRIGGER records_delete_only_pruned BEFORE DELETE ON keyledger.records
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_pruned_delete();

DROP TRIGGER operations_forward_only ON keyledger.operations;
CREATE TRIGGER operations_forward_only BEFORE UPDATE ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_operation_update();
CREATE TRIGGER operations_delete_only_pruned BEFORE DELETE ON keyledger.operations
  FOR EACH ROW EXECUTE FUNCTION keyledger.guard_pruned_delete();

-- 3. The one path: keyledger.prune(older_than). It runs as the schema owner
-- (SECURITY DEFINER) and only the schema owner may call it.
CREATE FUNCTION keyledger.prune(older_than interval)
  RETURNS TABLE (event_id bigint, cutoff timestamptz, operations bigint, records bigint, record_kinds jsonb)
  LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
DECLARE
  cut timestamptz;
  ids bigint[];
  n_ops bigint;
  n_recs bigint;
  kinds jsonb;
  ev bigint;
BEGIN
  IF older_than IS NULL OR older_than < interval '0' THEN
    RAISE EXCEPTION 'keyledger prune: the age must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  cut := now() - older_than;
  -- Runs of desired-state commands: the preparation record names the
  -- command and the run number, and the mutation ID is exactly
  -- RunID(command, run). A one-shot operation whose mutation ID merely
  -- looks like a run's is never matched.
  WITH runs AS (
    SELECT o.id, o.state, o.finalized_at, p.detail->>'command' AS series
      FROM keyledger.operations o
      JOIN keyledger.records p ON p.operation_id = o.id AND p.kind = 'preparation'
     WHERE o.state IN ('completed', 'refused')
       AND p.detail ? 'command' AND p.detail ? 'run'
       AND o.mutation_id = (p.detail->>'command') || ':run-' || (p.detail->>'run')
  ), ranked AS (
    SELECT r.id, r.state, r.finalized_at,
           row_number() OVER (PARTITION BY r.series ORDER BY r.id DESC) AS newest_finished,
           row_number() OVER (PARTITION BY r.series, r.state ORDER BY r.id DESC) AS newest_of_state
      FROM runs r
  )
  SELECT coalesce(array_agg(k.id ORDER BY k.id), '{}') INTO ids
    FROM ranked k
   WHERE k.finalized_at < cut
     AND k.newest_finished > 1
     AND NOT (k.state = 'completed' AND k.newest_of_state = 1);

  SELECT count(*) INTO n_recs FROM keyledger.records r WHERE r.operation_id = ANY (ids);
  SELECT coalesce(jsonb_object_agg(c.kind, c.n), '{}'::jsonb) INTO kinds
    FROM (SELECT r.kind::text AS kind, count(*) AS n FROM keyledger.records r
           WHERE r.operation_id = ANY (ids) GROUP BY r.kind) c;
  n_ops := cardinality(ids);

  -- The event first: the delete guards accept rows only in a transaction
  -- that holds one, and only rows finalized before its cutoff.
  INSERT INTO keyledger.prune_events (older_than, cutoff, operations, records, record_kinds, session_role, acting_role)
  VALUES (older_than, cut, n_ops, n_recs, kinds, session_user, current_user)
  RETURNING id INTO ev;
  DELETE FROM keyledger.records r WHERE r.operation_id = ANY (ids);
  DELETE FROM keyledger.operations o WHERE o.id = ANY (ids);

  event_id := ev; cutoff := cut; operations := n_ops; records := n_recs; record_kinds := kinds;
  RETURN NEXT;
END;
$$;
REVOKE ALL ON FUNCTION keyledger.prune(interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION keyledger.guard_pruned_delete() FROM PUBLIC;

-- 4. Readers that grew with the journal.
--
-- A command's runs by command (the mutation ID without ":run-<n>"), newest
-- first: PrepareRun, `keyledger plan` and `journal show` read the newest
-- run(s) in one index probe, whatever the number of runs. The command is a
-- stored generated column, not an expression in the query: under
-- row-level security (every namespace role) only leakproof operators may
-- become index conditions, and neither substring() nor the regular
-- expression match of migration 3's prefix lookup is leakproof, so both
-- scanned every operation of the journal. run_series = $1 is a plain text
-- equality.
ALTER TABLE keyledger.operations ADD COLUMN run_series text
  GENERATED ALWAYS AS (substring(mutation_id FROM '^(.*):run-[1-9][0-9]{0,9}$')) STORED;
CREATE INDEX operations_run_series ON keyledger.operations (run_series, id DESC) WHERE run_series IS NOT NULL;
-- StepRecords: the operations on one target, then one step's records of
-- each (the versioned family reads them on every decision).
CREATE INDEX operations_target ON keyledger.operations (target_namespace, target_name, id);
CREATE INDEX records_operation_step ON keyledger.records (operation_id, step, id);
