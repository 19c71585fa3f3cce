package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/keyledger/keyledger/store"
	"github.com/keyledger/keyledger/workflow/command"
)

// Limits of a plan.
const (
	// MaxSecrets is the most Secrets one plan may name.
	MaxSecrets = 64
	// MaxKeysPerSecret and MaxKeys bound the planned keys of one Secret and
	// of the whole plan, and MaxLabelsPerSecret a Secret's planned labels:
	// with names of at most 253 characters (Kubernetes' own limit on keys
	// and label names), every record a plan can produce (a create or patch
	// call naming every key and label of one Secret, the read before it, a
	// resolution) stays inside the journal's 16 KiB detail limit
	// (TestLimitsFitTheJournal).
	MaxKeysPerSecret   = 32
	MaxKeys            = 256
	MaxLabelsPerSecret = 16
	// MaxMutationID is the longest mutationId of a plan: each run of it is
	// journaled as "<mutationId>:run-<n>" (n up to 10 digits), which must
	// stay a journal identifier of at most 128 characters.
	MaxMutationID = command.MaxIdentifier - len(store.RunSuffix) - store.MaxRunNumberDigits
	// MinLength and MaxLength bound a generated value's length.
	MinLength = 16
	MaxLength = 128
	// maxPreparationBytes keeps the preparation record (planned names) well
	// inside the journal's 16 KiB detail limit.
	maxPreparationBytes = 12 << 10
)

// Alphabets a generated value may be drawn from.
const (
	AlphabetAlphanumeric = "alphanumeric"
	AlphabetHex          = "hex"
	AlphabetBase64URL    = "base64url"
)

// Protocols a server probe speaks.
const (
	ProtocolValkey = "valkey"
	ProtocolNATS   = "nats"
)

// Spec is a CredentialPlan command's spec.
type Spec struct {
	// Owner names the workload the credentials belong to; the rendered hook
	// objects are named after it.
	Owner     string `json:"owner"`
	Namespace string `json:"namespace"`
	// Secrets are created if absent; an existing one only gains what it lacks.
	Secrets []Secret `json:"secrets"`
	// Adopt names generator-backed ExternalSecrets that produced planned
	// Secrets, and the Password generators they used.
	Adopt []Adopt `json:"adopt,omitempty"`
	// Servers are probed with the password their Secret holds and repaired
	// once when they refuse it.
	Servers []Server `json:"servers,omitempty"`
	// Repair says how a refusing server may be repaired.
	Repair *Repair `json:"repair,omitempty"`
}

// Repair is how far the repair of a refusing server may go.
type Repair struct {
	// RestartOnUnproven lets a refusing server be restarted onto a Secret
	// whose authorship is unproven (see Authorship): anyone who may create
	// Secrets in the namespace may have written it, with a password they
	// know, and a restart makes the server take that password. Unset
	// (false), such a server is not restarted and the run refuses
	// (secret-unproven).
	RestartOnUnproven bool `json:"restartOnUnproven,omitempty"`
}

// restartOnUnproven: the plan opts in to restarts onto unproven Secrets.
func (s *Spec) restartOnUnproven() bool { return s.Repair != nil && s.Repair.RestartOnUnproven }

// Secret is one planned Secret.
type Secret struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Keys   []Key             `json:"keys"`
}

// Key is one data entry: generated, or a literal value that is not secret
// (a user name). A plan is not a secret: render puts it in a ConfigMap.
type Key struct {
	Name     string    `json:"name"`
	Generate *Generate `json:"generate,omitempty"`
	Value    *string   `json:"value,omitempty"`
}

// Generate says how a value is generated.
type Generate struct {
	Length   int    `json:"length"`
	Alphabet string `json:"alphabet"`
}

// Adopt is one ExternalSecret to take over (same name as a planned Secret).
type Adopt struct {
	ExternalSecret string   `json:"externalSecret"`
	Generators     []string `json:"generators,omitempty"`
}

// Server is one server pod whose password is probed.
type Server struct {
	Protocol    string `json:"protocol"`
	Pod         string `json:"pod"`
	Port        int    `json:"port"`
	Secret      string `json:"secret"`
	UserKey     string `json:"userKey,omitempty"`
	PasswordKey string `json:"passwordKey"`
	// Controller is the pod's expected controller (its controller owner
	// reference). Unset: the StatefulSet of the pod's name without its
	// ordinal ("cache-0": StatefulSet cache), or no controller at all for a
	// name without one. Kind None expects a pod without a controller. A
	// StatefulSet is read before the pod is probed: the pod must be its
	// (owner reference in group apps with its UID, its selector, its
	// template's containers).
	Controller *Controller `json:"controller,omitempty"`
}

// Controller names a server pod's controller.
type Controller struct {
	Kind string `json:"kind"`
	Name string `json:"name,omitempty"`
}

// Controller kinds: a StatefulSet (group apps), or none.
const (
	// ControllerNone is the Controller kind of a pod without a controller.
	ControllerNone = "None"
	// ControllerStatefulSet is the Controller kind of a StatefulSet's pod.
	ControllerStatefulSet = "StatefulSet"
)

var ordinal = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(.+)-(0|[1-9][0-9]*)$`) })

// ExpectedController is the controller srv's pod must have (see
// Server.Controller); kind None for none.
func (srv Server) ExpectedController() Controller {
	if srv.Controller != nil {
		return *srv.Controller
	}
	if m := ordinal().FindStringSubmatch(srv.Pod); m != nil {
		return Controller{Kind: ControllerStatefulSet, Name: m[1]}
	}
	return Controller{Kind: ControllerNone}
}

// Command is a decoded, validated CredentialPlan.
type Command struct {
	Metadata command.Metadata
	Spec     Spec
	// Digest is the canonical command digest journaled with the preparation.
	Digest string
}

// Decode reads a CredentialPlan from a command file. Errors are
// *command.InvalidError naming the field, never a value.
func Decode(f *command.File) (*Command, error) {
	doc, digest, err := command.DecodeKind[Spec](f, command.KindCredentialPlan)
	if err != nil {
		return nil, err
	}
	if err := validateMutationID(doc.Metadata.MutationID); err != nil {
		return nil, err
	}
	if err := doc.Spec.validate(); err != nil {
		return nil, err
	}
	cmd := &Command{Metadata: doc.Metadata, Spec: doc.Spec, Digest: digest}
	if b, _ := json.Marshal(cmd.preparation()); len(b) > maxPreparationBytes {
		return nil, command.Invalid("spec", fmt.Sprintf("the planned names take more than %d bytes", maxPreparationBytes))
	}
	return cmd, nil
}

// validateMutationID keeps room for the run suffix, and refuses an ID that
// already names a run of another plan.
func validateMutationID(id string) error {
	if len(id) > MaxMutationID {
		return command.Invalid("metadata.mutationId", fmt.Sprintf("at most %d characters for a CredentialPlan (each run is journaled as <mutationId>%s<n>)", MaxMutationID, store.RunSuffix))
	}
	if _, _, ok := store.SplitRunID(id); ok {
		return command.Invalid("metadata.mutationId", "must not end in "+store.RunSuffix+"<n>: that names a run of another plan")
	}
	return nil
}

func (s *Spec) validate() error {
	if err := s.validateScope(); err != nil {
		return err
	}
	planned, err := s.validateSecrets()
	if err != nil {
		return err
	}
	if err := s.validateAdopt(planned); err != nil {
		return err
	}
	pods := map[string]bool{}
	for i, srv := range s.Servers {
		if err := srv.validate(fmt.Sprintf("spec.servers[%d]", i), planned, pods); err != nil {
			return err
		}
	}
	return nil
}

// validateScope checks the owner and the namespace: both required, both
// namespace-shaped names.
func (s *Spec) validateScope() error {
	if s.Owner == "" {
		return command.Required("spec.owner")
	}
	if err := command.ValidNamespace(s.Owner); err != nil {
		return command.Invalid("spec.owner", err.Error())
	}
	if s.Namespace == "" {
		return command.Required("spec.namespace")
	}
	if err := command.ValidNamespace(s.Namespace); err != nil {
		return command.Invalid("spec.namespace", err.Error())
	}
	return nil
}

// validateSecrets checks each planned Secret, the plan's bounds (MaxSecrets,
// MaxKeys in all) and that no name is planned twice; it returns the planned
// Secrets by name.
func (s *Spec) validateSecrets() (map[string]*Secret, error) {
	switch {
	case len(s.Secrets) == 0:
		return nil, command.Required("spec.secrets")
	case len(s.Secrets) > MaxSecrets:
		return nil, command.Invalid("spec.secrets", fmt.Sprintf("at most %d Secrets", MaxSecrets))
	}
	planned := map[string]*Secret{}
	keys := 0
	for i := range s.Secrets {
		sec := &s.Secrets[i]
		field := fmt.Sprintf("spec.secrets[%d]", i)
		if err := sec.validate(field); err != nil {
			return nil, err
		}
		if keys += len(sec.Keys); keys > MaxKeys {
			return nil, command.Invalid(field+".keys", fmt.Sprintf("the plan names more than %d keys in all (MaxKeys, so that every journal record fits)", MaxKeys))
		}
		if _, dup := planned[sec.Name]; dup {
			return nil, command.Invalid(field+".name", "names a Secret already planned")
		}
		planned[sec.Name] = sec
	}
	return planned, nil
}

// validateAdopt checks each adopted ExternalSecret (a planned Secret's name,
// adopted once) and its generators (valid names, each named once in the
// plan).
func (s *Spec) validateAdopt(planned map[string]*Secret) error {
	adopted, generators := map[string]bool{}, map[string]bool{}
	for i, a := range s.Adopt {
		field := fmt.Sprintf("spec.adopt[%d]", i)
		if a.ExternalSecret == "" {
			return command.Required(field + ".externalSecret")
		}
		if _, ok := planned[a.ExternalSecret]; !ok {
			return command.Invalid(field+".externalSecret", "must name a planned Secret (the ExternalSecret and its Secret share the name)")
		}
		if adopted[a.ExternalSecret] {
			return command.Invalid(field+".externalSecret", "already adopted")
		}
		adopted[a.ExternalSecret] = true
		for j, g := range a.Generators {
			gf := fmt.Sprintf("%s.generators[%d]", field, j)
			if err := command.ValidName(g); err != nil {
				return command.Invalid(gf, err.Error())
			}
			if generators[g] {
				return command.Invalid(gf, "already named")
			}
			generators[g] = true
		}
	}
	return nil
}

func (sec *Secret) validate(field string) error {
	if sec.Name == "" {
		return command.Required(field + ".name")
	}
	if err := command.ValidName(sec.Name); err != nil {
		return command.Invalid(field+".name", err.Error())
	}
	if len(sec.Labels) > MaxLabelsPerSecret {
		return command.Invalid(field+".labels", fmt.Sprintf("at most %d labels per Secret (MaxLabelsPerSecret, so that every journal record fits)", MaxLabelsPerSecret))
	}
	for k, v := range sec.Labels {
		lf := fmt.Sprintf("%s.labels[%q]", field, k)
		if len(validation.IsQualifiedName(k)) > 0 {
			return command.Invalid(lf, "not a valid label name")
		}
		if k == LabelArgoInstance {
			return command.Invalid(lf, "Argo CD's instance label is removed from planned Secrets, never set")
		}
		if len(validation.IsValidLabelValue(v)) > 0 {
			return command.Invalid(lf, "not a valid label value (at most 63 characters of A-Z a-z 0-9 - _ .)")
		}
	}
	if len(sec.Keys) == 0 {
		return command.Required(field + ".keys")
	}
	if len(sec.Keys) > MaxKeysPerSecret {
		return command.Invalid(field+".keys", fmt.Sprintf("at most %d keys per Secret (MaxKeysPerSecret, so that every journal record fits)", MaxKeysPerSecret))
	}
	seen := map[string]bool{}
	for j, k := range sec.Keys {
		kf := fmt.Sprintf("%s.keys[%d]", field, j)
		if k.Name == "" {
			return command.Required(kf + ".name")
		}
		if len(validation.IsConfigMapKey(k.Name)) > 0 {
			return command.Invalid(kf+".name", "not a valid Secret data key")
		}
		if seen[k.Name] {
			return command.Invalid(kf+".name", "key already planned in this Secret")
		}
		seen[k.Name] = true
		switch {
		case k.Generate == nil && k.Value == nil:
			return command.Invalid(kf, "want generate or value")
		case k.Generate != nil && k.Value != nil:
			return command.Invalid(kf, "want generate or value, not both")
		case k.Generate != nil:
			if !slices.Contains(Alphabets(), k.Generate.Alphabet) {
				return command.Invalid(kf+".generate.alphabet", "want one of alphanumeric, hex, base64url")
			}
			if k.Generate.Length < MinLength || k.Generate.Length > MaxLength {
				return command.Invalid(kf+".generate.length", fmt.Sprintf("want %d to %d", MinLength, MaxLength))
			}
		}
	}
	return nil
}

func (srv Server) validate(field string, planned map[string]*Secret, pods map[string]bool) error {
	switch srv.Protocol {
	case "":
		return command.Required(field + ".protocol")
	case ProtocolValkey, ProtocolNATS:
	default:
		return command.Invalid(field+".protocol", "want valkey or nats")
	}
	if srv.Pod == "" {
		return command.Required(field + ".pod")
	}
	if err := command.ValidName(srv.Pod); err != nil {
		return command.Invalid(field+".pod", err.Error())
	}
	if pods[srv.Pod] {
		return command.Invalid(field+".pod", "pod already named by another server")
	}
	pods[srv.Pod] = true
	if srv.Port < 1 || srv.Port > 65535 {
		return command.Invalid(field+".port", "want 1 to 65535")
	}
	if srv.Secret == "" {
		return command.Required(field + ".secret")
	}
	sec, ok := planned[srv.Secret]
	if !ok {
		return command.Invalid(field+".secret", "must name a planned Secret")
	}
	hasKey := func(name string) bool {
		return slices.ContainsFunc(sec.Keys, func(k Key) bool { return k.Name == name })
	}
	if srv.PasswordKey == "" {
		return command.Required(field + ".passwordKey")
	}
	if !hasKey(srv.PasswordKey) {
		return command.Invalid(field+".passwordKey", "must name a key of the planned Secret")
	}
	if srv.UserKey == "" && srv.Protocol == ProtocolNATS {
		return command.Required(field + ".userKey")
	}
	if srv.UserKey != "" && !hasKey(srv.UserKey) {
		return command.Invalid(field+".userKey", "must name a key of the planned Secret")
	}
	if c := srv.Controller; c != nil {
		switch {
		case c.Kind == ControllerNone && c.Name != "":
			return command.Invalid(field+".controller.name", "must be empty for kind None")
		case c.Kind == ControllerNone:
		case c.Kind != ControllerStatefulSet:
			// A probe reaches only a pod tied to the live controller
			// object, which keyledger reads for a StatefulSet alone.
			return command.Invalid(field+".controller.kind", "want StatefulSet or None (a pod is probed only once it is tied to its live StatefulSet)")
		case c.Name == "":
			return command.Required(field + ".controller.name")
		case command.ValidName(c.Name) != nil:
			return command.Invalid(field+".controller.name", command.ValidName(c.Name).Error())
		}
	}
	return nil
}

// Alphabets lists the accepted alphabet names.
func Alphabets() []string { return []string{AlphabetAlphanumeric, AlphabetHex, AlphabetBase64URL} }

// SecretNames, ExternalSecretNames, GeneratorNames and PodNames are the
// planned names, in plan order.
func (s *Spec) SecretNames() []string {
	out := make([]string, len(s.Secrets))
	for i, sec := range s.Secrets {
		out[i] = sec.Name
	}
	return out
}

// ExternalSecretNames are the ExternalSecrets to adopt.
func (s *Spec) ExternalSecretNames() []string {
	var out []string
	for _, a := range s.Adopt {
		out = append(out, a.ExternalSecret)
	}
	return out
}

// GeneratorNames are the retired Password generators.
func (s *Spec) GeneratorNames() []string {
	var out []string
	for _, a := range s.Adopt {
		out = append(out, a.Generators...)
	}
	return out
}

// PodNames are the server pods.
func (s *Spec) PodNames() []string {
	var out []string
	for _, srv := range s.Servers {
		out = append(out, srv.Pod)
	}
	return out
}

// StatefulSetNames are the servers' expected StatefulSets, each once, in
// plan order: the only controllers a run reads.
func (s *Spec) StatefulSetNames() []string {
	var out []string
	for _, srv := range s.Servers {
		if c := srv.ExpectedController(); c.Kind == ControllerStatefulSet && !slices.Contains(out, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

// preparation is the preparation record's detail: planned names, never values.
func (c *Command) preparation() store.Detail {
	s := c.Spec
	return store.DetailOf(preparationDetail{
		Owner: s.Owner, PlanDigest: c.Digest, Secrets: s.SecretNames(),
		ExternalSecrets: orEmpty(s.ExternalSecretNames()), Generators: orEmpty(s.GeneratorNames()),
		Pods: orEmpty(s.PodNames()),
	})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

var errUnknownAlphabet = errors.New("unknown alphabet")
