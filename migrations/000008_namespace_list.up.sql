-- journal list as a namespace role reads its own namespaces' newest
-- operations, not everyone's.
--
-- journal list (store.List) read the newest operations through
-- operations_created_at and let row-level security filter them: a role
-- whose namespaces hold few of a large journal's operations walked the
-- index (and the heap) through everyone else's until it had a page of its
-- own, up to the whole journal for a quiet tenant or a granted namespace
-- without operations. List now reads, for each namespace the role was
-- granted, that namespace's newest operations (newest_in_namespace, through
-- the index below: target_namespace = the granted namespace is a plain text
-- equality, which row-level security lets become an index condition), and
-- merges them; the owner reads operations_created_at as before. What either
-- sees is unchanged: the policies still decide every row.
CREATE INDEX operations_namespace_created ON keyledger.operations (target_namespace, created_at DESC, id DESC);

-- The newest n operations of one namespace, as the caller (SECURITY
-- INVOKER: its policies apply). The planner, guessing that every namespace
-- holds an average share of the journal, would rather walk
-- operations_created_at and filter, then sort each run of equal times by
-- id (an incremental sort): that is the walk through everyone else's
-- operations this replaces. Without incremental sort that path needs a
-- full sort of the namespace, and the index above, which gives the order
-- whole, is the plan.
CREATE FUNCTION keyledger.newest_in_namespace(namespace text, n bigint) RETURNS SETOF keyledger.operations
  LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp SET enable_incremental_sort = off AS $$
  SELECT * FROM keyledger.operations o WHERE o.target_namespace = namespace ORDER BY o.created_at DESC, o.id DESC LIMIT n
$$;
