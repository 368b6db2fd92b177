package gang

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/plugins/pluginargs"
)

// DefaultWaitLimit is how long placed members of an incomplete gang hold
// their devices before they are all released.
const DefaultWaitLimit = time.Minute

// GangArgs configures the Gang plugin through the profile's pluginConfig
// (`name: Gang`).
type GangArgs struct {
	metav1.TypeMeta `json:",inline"`

	// WaitLimit is how long the members of a gang that are placed wait at
	// Permit, holding their devices, for the rest; then all are released.
	WaitLimit *metav1.Duration `json:"waitLimit,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *GangArgs) DeepCopyObject() runtime.Object {
	out := *a
	if a.WaitLimit != nil {
		d := *a.WaitLimit
		out.WaitLimit = &d
	}
	return &out
}

// SetDefaults fills in the fields the profile left out.
func (a *GangArgs) SetDefaults() {
	if a.WaitLimit == nil {
		a.WaitLimit = &metav1.Duration{Duration: DefaultWaitLimit}
	}
}

// Validate reports every invalid field of defaulted args, with its path.
func (a *GangArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if d := a.WaitLimit.Duration; d <= 0 || d > 15*time.Minute {
		errs = append(errs, field.Invalid(path.Child("waitLimit"), d.String(), "must be positive and at most 15m (kube-scheduler's Permit limit)"))
	}
	return errs
}

func decodeArgs(obj runtime.Object) (*GangArgs, error) {
	return pluginargs.Decode(Name, obj, &GangArgs{})
}
