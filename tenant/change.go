package tenant

import "fmt"

// Action is what a step did (or, in a dry run, would do) to one object.
type Action string

const (
	// Created: the object did not exist and was created.
	Created Action = "created"
	// Updated: the object existed and was changed.
	Updated Action = "updated"
	// Unchanged: the object was already as it should be.
	Unchanged Action = "unchanged"
	// Deleted: the object existed and was deleted.
	Deleted Action = "deleted"
	// Absent: the object to delete did not exist.
	Absent Action = "absent"
)

// Change is one object's outcome: its kind, namespace and name, and what
// was done. It never holds a value.
type Change struct {
	Action    Action `json:"action"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// DryRun is true when nothing was written: Action is what a run would do.
	DryRun bool `json:"dryRun,omitempty"`
}

// String is the change's line: "created Secret team-a/keyledger-journal-credentials",
// in a dry run "would create ...".
func (c Change) String() string {
	obj := c.Kind + " " + c.Name
	if c.Namespace != "" {
		obj = c.Kind + " " + c.Namespace + "/" + c.Name
	}
	if !c.DryRun {
		return fmt.Sprintf("%s %s", c.Action, obj)
	}
	verb := map[Action]string{Created: "would create", Updated: "would update", Deleted: "would delete",
		Unchanged: "unchanged", Absent: "absent"}[c.Action]
	return fmt.Sprintf("%s %s", verb, obj)
}

// Changed says whether any of changes wrote (or would write) something.
func Changed(changes []Change) bool {
	for _, c := range changes {
		if c.Action != Unchanged && c.Action != Absent {
			return true
		}
	}
	return false
}
