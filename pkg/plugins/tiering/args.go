package tiering

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/plugins/pluginargs"
)

// DefaultPolicyVersion is reported when the profile names no policy version.
const DefaultPolicyVersion = "unversioned"

// maxPolicyVersionLength keeps the version short enough to fit event notes
// and annotations next to the rest of the explanation.
const maxPolicyVersionLength = 63

// TieringArgs configures the Tiering plugin through the profile's
// pluginConfig (`name: Tiering`).
type TieringArgs struct {
	metav1.TypeMeta `json:",inline"`

	// PolicyVersion names the placement policy in force. Every explanation
	// (event, annotation, failure message) quotes it, so that a decision can
	// be traced back to the configuration that made it.
	PolicyVersion string `json:"policyVersion,omitempty"`

	// DisablePruning turns tier-aware pruning off (docs/tiering.md,
	// "Pruning"): every node then goes through every Filter plugin, as
	// before pruning existed. Placements are the same either way; the
	// switch exists to compare the two paths and to rule pruning out when
	// investigating a placement.
	DisablePruning bool `json:"disablePruning,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *TieringArgs) DeepCopyObject() runtime.Object {
	out := *a
	return &out
}

// SetDefaults fills in the fields the profile left out.
func (a *TieringArgs) SetDefaults() {
	if a.PolicyVersion == "" {
		a.PolicyVersion = DefaultPolicyVersion
	}
}

// Validate reports every invalid field of defaulted args, with its path.
func (a *TieringArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.PolicyVersion == "" {
		errs = append(errs, field.Required(path.Child("policyVersion"), ""))
	}
	if len(a.PolicyVersion) > maxPolicyVersionLength {
		errs = append(errs, field.TooLong(path.Child("policyVersion"), a.PolicyVersion, maxPolicyVersionLength))
	}
	for _, r := range a.PolicyVersion {
		if r < 0x20 || r == 0x7f {
			errs = append(errs, field.Invalid(path.Child("policyVersion"), a.PolicyVersion, "must not contain control characters"))
			break
		}
	}
	return errs
}

// decodeArgs turns the profile's pluginConfig entry into defaulted,
// validated args. The scheduler hands out-of-tree plugins their args as
// runtime.Unknown; tests may pass *TieringArgs directly.
func decodeArgs(obj runtime.Object) (*TieringArgs, error) {
	return pluginargs.Decode(Name, obj, &TieringArgs{})
}
