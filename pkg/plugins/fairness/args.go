package fairness

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rota-dev/rota/pkg/plugins/pluginargs"
)

// DefaultAgeing is how long a pod waits to make up for one weighted device.
const DefaultAgeing = 5 * time.Minute

// FairnessArgs configures the Fairness queue sort through the profile's
// pluginConfig (`name: Fairness`).
type FairnessArgs struct {
	metav1.TypeMeta `json:",inline"`

	// DefaultWeight is the weight of tenants not listed. Default 1.
	DefaultWeight int32 `json:"defaultWeight,omitempty"`
	// Tenants sets other weights: a tenant with weight 2 may hold twice
	// the devices of a weight-1 tenant before it yields.
	Tenants []TenantWeight `json:"tenants,omitempty"`
	// Ageing is how long a pod must wait to make up for one weighted
	// device its tenant holds, so no tenant starves. Default 5m.
	Ageing *metav1.Duration `json:"ageing,omitempty"`
}

// TenantWeight is one namespace's weight.
type TenantWeight struct {
	Namespace string `json:"namespace"`
	Weight    int32  `json:"weight"`
}

// DeepCopyObject implements runtime.Object.
func (a *FairnessArgs) DeepCopyObject() runtime.Object {
	out := *a
	out.Tenants = append([]TenantWeight(nil), a.Tenants...)
	if a.Ageing != nil {
		d := *a.Ageing
		out.Ageing = &d
	}
	return &out
}

// SetDefaults fills in the fields the profile left out.
func (a *FairnessArgs) SetDefaults() {
	if a.DefaultWeight == 0 {
		a.DefaultWeight = 1
	}
	if a.Ageing == nil {
		a.Ageing = &metav1.Duration{Duration: DefaultAgeing}
	}
}

// Validate reports every invalid field of defaulted args, with its path.
func (a *FairnessArgs) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if a.DefaultWeight < 1 {
		errs = append(errs, field.Invalid(path.Child("defaultWeight"), a.DefaultWeight, "must be 1 or more"))
	}
	if a.Ageing.Duration <= 0 {
		errs = append(errs, field.Invalid(path.Child("ageing"), a.Ageing.Duration.String(), "must be positive"))
	}
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
		if t.Weight < 1 {
			errs = append(errs, field.Invalid(p.Child("weight"), t.Weight, "must be 1 or more"))
		}
	}
	return errs
}

func decodeArgs(obj runtime.Object) (*FairnessArgs, error) {
	return pluginargs.Decode(Name, obj, &FairnessArgs{})
}
