-- Back to migration 11: mutation IDs unique across the journal, the live-run
-- lock keyed by operation ID, prune ranking runs across namespaces.
-- Refused while two namespaces hold one mutation ID: the old key cannot
-- hold both, and which to drop is not a migration's choice.
DO $$
BEGIN
  IF EXISTS (SELECT 1 FROM keyledger.operations GROUP BY mutation_id HAVING count(*) > 1) THEN
    RAISE EXCEPTION 'keyledger journal: a mutation ID is journaled in more than one namespace; migration 12 cannot be undone'
      USING ERRCODE = 'KL001';
  END IF;
END;
$$;
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
ALTER TABLE keyledger.operations DROP COLUMN live_key;
DROP INDEX keyledger.operations_run_number;
CREATE INDEX operations_run_number ON keyledger.operations (run_series, run_number DESC) WHERE run_series IS NOT NULL;
DROP INDEX keyledger.operations_run_series;
CREATE INDEX operations_run_series ON keyledger.operations (run_series, id DESC) WHERE run_series IS NOT NULL;
ALTER TABLE keyledger.operations DROP CONSTRAINT operations_namespace_mutation_id_key;
ALTER TABLE keyledger.operations ADD CONSTRAINT operations_mutation_id_key UNIQUE (mutation_id);
