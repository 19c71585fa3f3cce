package store

import "context"

// RoleExists says whether a role of that name exists on the journal's
// server (pg_roles is readable by every role). Offboarding waits on it
// until CloudNativePG has dropped a namespace's role.
func (s *Store) RoleExists(ctx context.Context, role string) (bool, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)`, role).Scan(&exists); err != nil {
		return false, wrap("reading the role", err)
	}
	return exists, nil
}
