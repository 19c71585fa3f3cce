-- Every key a namespace role can reach is scoped by namespace.
--
-- Row-level security confines a namespace role to its rows; what the
-- database shares beyond rows is every role's. This migration closes three
-- of those channels (docs/tenancy.md lists every shared object and what is
-- left of each):
--
-- 1. Mutation IDs. They were unique across the journal: a role of namespace
--    A that inserted "plan:run-1", "run-2", ... learned from each unique
--    violation how often B's plan had run, and an insert of B's next run
--    number made every later sync of B's plan refuse mutation-id-reused.
--    They are now unique within a namespace: a role may insert only into
--    the namespaces it was granted (the policies' WITH CHECK), so no insert
--    of A can conflict with, or reveal, a row of B. The run readers' indexes
--    lead with the namespace, and every lookup names it (store).
--
-- 2. The live-run lock. A run's liveness was an advisory lock keyed by its
--    operation ID, from a sequence every role draws from: any role could
--    hold the keys of B's next runs. The key is now live_key, 64 random bits
--    drawn when the operation is inserted, readable only by the roles that
--    may read the operation (no role may insert or update it). A key seen in
--    pg_locks while held can still be taken by another role; store.runLive
--    counts a run live only when a session of a role granted its namespace
--    (or the journal's owner) holds it, and store.holdRun never waits.
--
-- 3. Prune. keyledger.prune ranked a command's runs by the command name
--    alone, across namespaces: one forged finished run in A's namespace
--    named like B's plan made the owner's prune delete B's runs. Runs are
--    now ranked within their namespace, and a run that holds a delete-pod
--    call is kept: one restart per cause is read from those calls by every
--    later run of the plan (workflow/credentials), so pruning them would
--    restart a server again for an unchanged cause.

-- 1. Mutation IDs unique within a namespace.
ALTER TABLE keyledger.operations DROP CONSTRAINT operations_mutation_id_key;
ALTER TABLE keyledger.operations ADD CONSTRAINT operations_namespace_mutation_id_key
  UNIQUE (target_namespace, mutation_id);
DROP INDEX keyledger.operations_run_series;
CREATE INDEX operations_run_series ON keyledger.operations (target_namespace, run_series, id DESC)
  WHERE run_series IS NOT NULL;
DROP INDEX keyledger.operations_run_number;
CREATE INDEX operations_run_number ON keyledger.operations (target_namespace, run_series, run_number DESC)
  WHERE run_series IS NOT NULL;

-- 2. The live-run lock's key: random, never inserted or changed by a role
-- (grants name their columns, and this is not one of them).
ALTER TABLE keyledger.operations ADD COLUMN live_key bigint NOT NULL
  DEFAULT (('x' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 16))::bit(64)::bigint);

-- 3. Prune within a namespace, keeping the restart memory.
CREATE OR REPLACE FUNCTION keyledger.prune(older_than interval)
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
    SELECT o.id, o.state, o.finalized_at, o.target_namespace, p.detail->>'command' AS series,
           EXISTS (SELECT 1 FROM keyledger.records m
                    WHERE m.operation_id = o.id AND m.kind = 'authority_call' AND m.step = 'delete-pod') AS remembered
      FROM keyledger.operations o
      JOIN keyledger.records p ON p.operation_id = o.id AND p.kind = 'preparation'
     WHERE o.state IN ('completed', 'refused')
       AND p.detail ? 'command' AND p.detail ? 'run'
       AND o.mutation_id = (p.detail->>'command') || ':run-' || (p.detail->>'run')
  ), ranked AS (
    SELECT r.id, r.state, r.finalized_at, r.remembered,
           row_number() OVER (PARTITION BY r.target_namespace, r.series ORDER BY r.id DESC) AS newest_finished,
           row_number() OVER (PARTITION BY r.target_namespace, r.series, r.state ORDER BY r.id DESC) AS newest_of_state
      FROM runs r
  )
  SELECT coalesce(array_agg(k.id ORDER BY k.id), '{}') INTO ids
    FROM ranked k
   WHERE k.finalized_at < cut
     AND k.newest_finished > 1
     AND NOT k.remembered
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
