package store

// ReaderSQL is the SQL of the journal readers that must stay bounded as
// the journal grows (the newest run of a plan, one page of its runs, a
// target's step records), by name, with their $n parameters: tests and
// docs EXPLAIN them as they run.
func ReaderSQL() map[string]string {
	return map[string]string{
		"latest-run":   latestRunQuery,
		"runs-page":    runsPageQuery,
		"step-records": stepRecordsQuery,
		"runs-record":  findInRunsQuery,
	}
}
