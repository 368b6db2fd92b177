package quota

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/plugins/pluginargs"
)

// OverLimit says what happens to a pod that would take a tenant past a limit.
type OverLimit string

const (
	// OverLimitWait keeps the pod queued (QuotaExceeded) until the tenant
	// releases devices.
	OverLimitWait OverLimit = "Wait"
	// OverLimitRefuse rejects the pod as unresolvable: it is reported once
	// and retried only when the tenant's usage drops.
	OverLimitRefuse OverLimit = "Refuse"
)

// DefaultModelAttribute is the device attribute whose value names a model.
const DefaultModelAttribute = "model"

// QuotaArgs configures the Quota plugin through the profile's pluginConfig
// (`name: Quota`).
type QuotaArgs struct {
	metav1.TypeMeta `json:",inline"`

	// ModelAttribute is the device attribute (bare or qualified by the
	// driver) whose string value is the model a limit names. Default "model".
	ModelAttribute string `json:"modelAttribute,omitempty"`
	// Tenants lists the namespaces with limits; others are unlimited.
	Tenants []TenantLimits `json:"tenants,omitempty"`
}

// TenantLimits are one namespace's limits.
type TenantLimits struct {
	// Namespace is the tenant.
	Namespace string `json:"namespace"`
	// Limits maps a device model (e.g. "H100") to the most devices of that
	// model the tenant may hold at once. Models not listed are unlimited.
	// Limits are limits, not guarantees: their sum may exceed the pool.
	Limits map[string]int64 `json:"limits"`
	// OverLimit is Wait (default) or Refuse.
	OverLimit OverLimit `json:"overLimit,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (a *QuotaArgs) DeepCopyObject() runtime.Object {
	out := *a
	out.Tenants = make([]TenantLimits, len(a.Tenants))
	for i, t := range a.Tenants {
		out.Tenants[i] = t
		out.Tenants[i].Limits = make(map[string]int64, len(t.Limits))
		for k, v := range t.Limits {
			out.Tenants[i].Limits[k] = v
		}
	}
	return &out
}

// SetDefaults fills in the fields the profile left out.
func (a *QuotaArgs) SetDefaults() {
	if a.ModelAttribute == "" {
		a.ModelAttribute = DefaultModelAttribute
	}
	for i := range a.Tenants {
		if a.Tenants[i].OverLimit == "" {
			a.Tenants[i].OverLimit = OverLimitWait
		}
	}
}

// Validate reports every invalid field of defaulted args, with its path.
func (a *QuotaArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, t := range a.Tenants {
		p := path.Child("tenants").Index(i)
		for _, msg := range validation.IsDNS1123Label(t.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), t.Namespace, msg))
		}
		if seen[t.Namespace] {
			errs = append(errs, field.Duplicate(p.Child("namespace"), t.Namespace))
		}
		seen[t.Namespace] = true
		models := make([]string, 0, len(t.Limits))
		for m := range t.Limits {
			models = append(models, m)
		}
		sort.Strings(models)
		for _, m := range models {
			if m == "" {
				errs = append(errs, field.Invalid(p.Child("limits"), m, "model must not be empty"))
			}
			if t.Limits[m] < 0 {
				errs = append(errs, field.Invalid(p.Child("limits").Key(m), t.Limits[m], "must be 0 or more"))
			}
		}
		if t.OverLimit != OverLimitWait && t.OverLimit != OverLimitRefuse {
			errs = append(errs, field.NotSupported(p.Child("overLimit"), t.OverLimit, []OverLimit{OverLimitWait, OverLimitRefuse}))
		}
	}
	return errs
}

// decodeArgs turns the profile's pluginConfig entry into defaulted,
// validated args.
func decodeArgs(obj runtime.Object) (*QuotaArgs, error) {
	return pluginargs.Decode(Name, obj, &QuotaArgs{})
}
