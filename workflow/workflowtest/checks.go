package workflowtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keyledger/keyledger/store"
)

// The SQLSTATEs the journal's database raises for what this journal refuses.
const (
	sqlCheckViolation               = "23514" // a CHECK constraint, or the state_edges trigger
	sqlUniqueViolation              = "23505" // one preparation, one ending, one call per attempt
	sqlInsufficientPrivilege        = "42501" // a move of a finished operation
	sqlIntegrityConstraintViolation = "23000" // a terminal move without its ending record, or the reverse
	sqlInvalidTextRepresentation    = "22P02" // not a state or record kind of the enums
	sqlCharacterNotInRepertoire     = "22021" // a NUL byte or invalid UTF-8 in a text parameter
	sqlUntranslatableCharacter      = "22P05" // \u0000 in a jsonb string
)

// dbError is what the journal's database would answer, worded as
// store.Store words it once redacted.
type dbError struct{ code, constraint string }

func (e *dbError) Error() string {
	if e.constraint != "" {
		return fmt.Sprintf("server error %s (ERROR) on %s", e.code, e.constraint)
	}
	return fmt.Sprintf("server error %s (ERROR)", e.code)
}

// SQLState returns the SQLSTATE PostgreSQL raises for the same refusal.
func (e *dbError) SQLState() string { return e.code }

// raised is an error a trigger raises (no constraint named).
func raised(code string) error { return &dbError{code: code} }

// violated is a constraint's violation.
func violated(code, constraint string) error { return &dbError{code: code, constraint: constraint} }

// checkText refuses what PostgreSQL refuses in a text parameter.
func checkText(s string) error {
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		return raised(sqlCharacterNotInRepertoire)
	}
	return nil
}

// checkState refuses a value of keyledger.operation_state that is not one.
func checkState(s store.State) error {
	if err := checkText(string(s)); err != nil {
		return err
	}
	if !slices.Contains(store.States(), s) {
		return raised(sqlInvalidTextRepresentation)
	}
	return nil
}

func checkRecordKind(k store.RecordKind) error {
	if err := checkText(string(k)); err != nil {
		return err
	}
	if !slices.Contains(store.RecordKinds(), k) {
		return raised(sqlInvalidTextRepresentation)
	}
	return nil
}

var (
	kindPattern         = regexp.MustCompile(`^[A-Z][A-Za-z]{0,63}$`)
	idPattern           = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`)
	digestPattern       = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	outcomePattern      = regexp.MustCompile(`^[a-z][a-z-]{0,63}$`)
	reasonPattern       = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,63}$`)
	stepPattern         = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	statusPattern       = regexp.MustCompile(`^[a-z0-9-]{0,64}$`)
	recordReasonPattern = regexp.MustCompile(`^[a-z0-9-]{0,64}$`)
)

// check is one CHECK constraint: PostgreSQL checks a row's constraints in
// the order of their names, and reports the first that fails.
type check struct {
	name string
	ok   bool
}

func firstViolated(checks ...check) error {
	for _, c := range checks {
		if !c.ok {
			return violated(sqlCheckViolation, c.name)
		}
	}
	return nil
}

func between(s string, lo, hi int) bool {
	n := utf8.RuneCountInString(s)
	return n >= lo && n <= hi
}

// checkOperation checks a new operations row: its text parameters in
// order, then its CHECK constraints by name.
func checkOperation(p store.PrepareParams) error {
	if err := firstErr(checkText(p.Kind), checkText(p.MutationID), checkText(p.RequestID), checkText(p.CommandDigest),
		checkText(p.Namespace), checkText(p.Name), checkText(p.ExpectedUID)); err != nil {
		return err
	}
	return firstViolated(
		check{"operations_command_digest_check", digestPattern.MatchString(p.CommandDigest)},
		check{"operations_kind_check", kindPattern.MatchString(p.Kind)},
		check{"operations_mutation_id_check", idPattern.MatchString(p.MutationID)},
		check{"operations_request_id_check", idPattern.MatchString(p.RequestID)},
		check{"operations_target_name_check", between(p.Name, 1, 253)},
		check{"operations_target_namespace_check", between(p.Namespace, 1, 63)},
	)
}

// checkMove checks the operations row a move writes.
func checkMove(p store.TransitionParams) error {
	return firstViolated(
		check{"operations_outcome_check", p.Outcome == "" || outcomePattern.MatchString(p.Outcome)},
		check{"operations_reason_check", p.Reason == "" || reasonPattern.MatchString(p.Reason)},
		check{"operations_terminal_outcome", p.To.Terminal() == (p.Outcome != "")},
	)
}

// maxDetailBytes bounds a record's detail as jsonb text (records_detail_check).
const maxDetailBytes = 16384

// checkRecords appends records to e's as the records table would, each
// stamped with t, and returns e's records followed by the new ones (e is
// not changed), or the first refusal.
func checkRecords(e *entry, records []store.Record, t time.Time) ([]stored, error) {
	all := slices.Clone(e.records)
	for _, r := range records {
		// The journal holds the target's text and reads it back in the
		// operation's namespace (store.Target.Journaled).
		target, err := r.Target.Journaled(e.op.Namespace)
		if err != nil {
			return nil, fmt.Errorf("appending %s record: %w", r.Kind, err)
		}
		r.Target = target
		s, err := checkRecord(all, r, t)
		if err != nil {
			return nil, err
		}
		all = append(all, s)
	}
	return all, nil
}

func checkRecord(before []stored, r store.Record, t time.Time) (stored, error) {
	raw := r.Detail.JSON()
	appending := fmt.Sprintf("appending %s record", r.Kind)
	call := r.Kind == store.RecordAuthorityCall
	if r.Attempt > math.MaxInt32 || call && (r.Batch > math.MaxInt32 || r.Batch < math.MinInt32) {
		return stored{}, errors.New(appending + ": connection failed") // pgx cannot encode it; redacted
	}
	size, err := jsonbTextSize(raw)
	if err := firstErr(checkRecordKind(r.Kind), checkText(r.Step), checkText(r.Target.String()), checkText(r.UID),
		checkText(r.ResourceVersion), checkText(r.Digest), checkText(string(r.Status)), checkText(string(r.Reason)), err); err != nil {
		return stored{}, fmt.Errorf("%s: %w", appending, err)
	}
	if r.Attempt < 0 {
		r.Attempt = 0 // store.Store writes no attempt (NULL), read back as 0
	}
	if !call {
		r.Batch = 0 // store.Store writes a batch for calls only (NULL), read back as 0
	}
	if err := firstViolated(
		check{"records_attempt_check", r.Attempt == 0 || r.Attempt <= 1000},
		check{"records_call_attempt", call == (r.Attempt > 0)},
		check{"records_call_control", call && r.Batch >= 0 || !call && !r.Final},
		check{"records_detail_check", size <= maxDetailBytes},
		check{"records_digest_check", r.Digest == "" || digestPattern.MatchString(r.Digest)},
		check{"records_reason_check", recordReasonPattern.MatchString(string(r.Reason))},
		check{"records_resource_version_check", between(r.ResourceVersion, 0, 128)},
		check{"records_status_check", statusPattern.MatchString(string(r.Status))},
		check{"records_step_check", stepPattern.MatchString(r.Step)},
		check{"records_target_check", between(r.Target.String(), 0, 320)},
		check{"records_uid_check", between(r.UID, 0, 128)},
	); err != nil {
		return stored{}, fmt.Errorf("%s: %w", appending, err)
	}
	isEnding := func(k store.RecordKind) bool { return k == store.RecordCompletion || k == store.RecordRefusal }
	for _, b := range before {
		var unique string
		switch {
		case r.Kind == store.RecordPreparation && b.r.Kind == store.RecordPreparation:
			unique = "records_one_preparation"
		case isEnding(r.Kind) && isEnding(b.r.Kind):
			unique = "records_one_ending"
		case call && b.r.Kind == store.RecordAuthorityCall && b.r.Step == r.Step && b.r.Target == r.Target && b.r.Attempt == r.Attempt:
			unique = "records_one_call_per_attempt"
		}
		if unique != "" {
			return stored{}, fmt.Errorf("%s: %w", appending, violated(sqlUniqueViolation, unique))
		}
	}
	r.ID, r.CreatedAt = 0, t
	return stored{r: r}, nil
}

// jsonbTextSize is the length in bytes of raw (a JSON object) as
// PostgreSQL prints it as jsonb (detail::text): ", " and ": " between
// members, numbers as numeric prints them, strings escaped as jsonb
// escapes them. A string holding \u0000 is refused, as jsonb refuses it.
func jsonbTextSize(raw []byte) (int, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return 0, fmt.Errorf("decoding detail: %w", err)
	}
	return jsonbSize(v)
}

func jsonbSize(v any) (int, error) {
	switch v := v.(type) {
	case nil:
		return len("null"), nil
	case bool:
		if v {
			return len("true"), nil
		}
		return len("false"), nil
	case json.Number:
		return len(numericText(string(v))), nil
	case string:
		return jsonbStringSize(v)
	case []any:
		n := 2 + 2*max(len(v)-1, 0)
		for _, x := range v {
			m, err := jsonbSize(x)
			if err != nil {
				return 0, err
			}
			n += m
		}
		return n, nil
	case map[string]any:
		n := 2 + 2*max(len(v)-1, 0)
		for k, x := range v {
			kn, err := jsonbStringSize(k)
			if err != nil {
				return 0, err
			}
			m, err := jsonbSize(x)
			if err != nil {
				return 0, err
			}
			n += kn + 2 + m
		}
		return n, nil
	}
	return 0, fmt.Errorf("unexpected JSON value %T", v)
}

// jsonbStringSize is the printed length of a jsonb string (escape_json).
func jsonbStringSize(s string) (int, error) {
	n := 2
	for i := range len(s) {
		switch c := s[i]; {
		case c == 0:
			return 0, raised(sqlUntranslatableCharacter)
		case c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t' || c == '"' || c == '\\':
			n += 2
		case c < ' ':
			n += 6
		default:
			n++
		}
	}
	return n, nil
}

// numericText is how PostgreSQL's numeric prints the JSON number lit:
// plainly, with as many decimals as lit carries once its exponent is
// applied (1e+21 prints 1000000000000000000000, 1.5e-07 prints
// 0.00000015), zero without a sign.
func numericText(lit string) string {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, exp := lit, 0
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		mant = lit[:i]
		fmt.Sscan(strings.TrimPrefix(lit[i+1:], "+"), &exp) //nolint:errcheck // a JSON exponent is digits
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	point := len(intPart) + exp // digits before the decimal point
	var whole, decimals string
	switch {
	case point <= 0:
		whole, decimals = "0", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		whole = digits + strings.Repeat("0", point-len(digits))
	default:
		whole, decimals = digits[:point], digits[point:]
	}
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if decimals != "" {
		out += "." + decimals
	}
	if neg && strings.Trim(digits, "0") != "" {
		out = "-" + out
	}
	return out
}
