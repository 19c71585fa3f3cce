-- Journal metrics for whoever monitors the database: counts, never rows.
--
-- CloudNativePG turns the rows of custom queries into Prometheus metrics on
-- each instance's metrics endpoint (deploy/journal/metrics). It runs them
-- as its own role cnpg_metrics_exporter (LOGIN, a member of the predefined
-- role pg_monitor, no other right), in a read-only transaction, on the
-- database the query names. That role must learn how many operations each
-- namespace has in which state, never which operations: it must not read
-- a journal row.
--
-- The schema keyledger_metrics holds only the functions below. Each runs
-- as the schema owner (SECURITY DEFINER, search_path pinned), reads the
-- journal whole and returns aggregates alone: a namespace, a family
-- (retirement, credentials, versioned), a state, an outcome or a refusal
-- reason, and counts or ages. No mutation ID, request ID, Secret name,
-- digest, record or value leaves them. pg_monitor is granted USAGE on this
-- schema and EXECUTE on these functions, and nothing on the schema
-- keyledger: a member of pg_monitor (cnpg_metrics_exporter, a superuser)
-- reads counts and no journal table. A namespace role is no member of
-- pg_monitor: it cannot call them, so it learns no other namespace's
-- counts (docs/tenancy.md, "What the database shares beyond rows").
--
-- Every migration before this one grants no role anything: pg_monitor is
-- the one exception, a role PostgreSQL itself defines, granted only these
-- counts.

CREATE SCHEMA keyledger_metrics;
REVOKE ALL ON SCHEMA keyledger_metrics FROM PUBLIC;

-- The family of an operation kind (workflow/command's kinds).
CREATE FUNCTION keyledger_metrics.family(kind text) RETURNS text
  LANGUAGE sql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
  SELECT CASE kind
    WHEN 'KeyRetirement' THEN 'retirement'
    WHEN 'CredentialPlan' THEN 'credentials'
    WHEN 'SecretUpdate' THEN 'versioned'
    WHEN 'SecretRestore' THEN 'versioned'
    WHEN 'SecretDelete' THEN 'versioned'
    ELSE 'other' END
$$;

-- Operations by namespace, family, state and outcome ('' while unfinished).
-- The namespace column is target_namespace: a scraper's own label
-- "namespace" (the pod's) would otherwise rename it.
CREATE FUNCTION keyledger_metrics.operations()
  RETURNS TABLE (target_namespace text, family text, state text, outcome text, operations bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT o.target_namespace, keyledger_metrics.family(o.kind), o.state::text, coalesce(o.outcome, ''), count(*)
    FROM keyledger.operations o
   GROUP BY 1, 2, 3, 4
$$;

-- Refused operations by namespace, family and reason.
CREATE FUNCTION keyledger_metrics.refusals()
  RETURNS TABLE (target_namespace text, family text, reason text, refusals bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT o.target_namespace, keyledger_metrics.family(o.kind), coalesce(o.reason, ''), count(*)
    FROM keyledger.operations o
   WHERE o.state = 'refused'
   GROUP BY 1, 2, 3
$$;

-- Unfinished operations prepared more than older_than ago, by namespace,
-- family and state, with the age of the oldest in seconds. A run ends in
-- seconds; one still unfinished after minutes was cut off (exit 75, or a
-- lost process) and waits for a rerun of the same command.
CREATE FUNCTION keyledger_metrics.unfinished(older_than interval)
  RETURNS TABLE (target_namespace text, family text, state text, operations bigint, oldest_seconds double precision)
  LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
  IF older_than IS NULL OR older_than < interval '0' THEN
    RAISE EXCEPTION 'keyledger metrics: the age must not be negative' USING ERRCODE = 'invalid_parameter_value';
  END IF;
  RETURN QUERY
  SELECT o.target_namespace, keyledger_metrics.family(o.kind), o.state::text, count(*),
         extract(epoch FROM now() - min(o.created_at))::double precision
    FROM keyledger.operations o
   WHERE o.state NOT IN ('completed', 'refused') AND o.created_at < now() - older_than
   GROUP BY 1, 2, 3;
END;
$$;

-- Plans (desired-state commands, run on every sync) whose newest run is
-- unfinished, by namespace: the run's outcome is uncertain until a rerun
-- settles it. The newest run is the highest run number of the plan within
-- its namespace (migration 7).
CREATE FUNCTION keyledger_metrics.uncertain_plans()
  RETURNS TABLE (target_namespace text, plans bigint)
  LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
  SELECT n.target_namespace, count(*)
    FROM (SELECT DISTINCT ON (o.target_namespace, o.run_series) o.target_namespace, o.state
            FROM keyledger.operations o
           WHERE o.run_series IS NOT NULL AND o.kind = 'CredentialPlan'
           ORDER BY o.target_namespace, o.run_series, o.run_number DESC, o.id DESC) n
   WHERE n.state NOT IN ('completed', 'refused')
   GROUP BY 1
$$;

REVOKE ALL ON FUNCTION keyledger_metrics.family(text), keyledger_metrics.operations(),
  keyledger_metrics.refusals(), keyledger_metrics.unfinished(interval), keyledger_metrics.uncertain_plans() FROM PUBLIC;
GRANT USAGE ON SCHEMA keyledger_metrics TO pg_monitor;
GRANT EXECUTE ON FUNCTION keyledger_metrics.family(text), keyledger_metrics.operations(),
  keyledger_metrics.refusals(), keyledger_metrics.unfinished(interval), keyledger_metrics.uncertain_plans() TO pg_monitor;
