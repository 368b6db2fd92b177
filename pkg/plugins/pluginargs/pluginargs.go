// Package pluginargs decodes the args of Rota's scheduler plugins. Every
// plugin takes its pluginConfig entry the same way: kube-scheduler hands
// out-of-tree plugins their args as runtime.Unknown (or nil when the profile
// has none), tests may pass the typed args directly; either way the result
// is decoded strictly (unknown fields are errors), defaulted and validated,
// with field paths under "args".
package pluginargs

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"sigs.k8s.io/yaml"
)

// Args is what a plugin's args type provides.
type Args interface {
	runtime.Object
	SetDefaults()
	Validate(path *field.Path) field.ErrorList
}

// Decode returns plugin's args from obj, decoded into empty (a new, zero
// args value), defaulted and validated. Typed args are copied, never
// modified.
func Decode[T Args](plugin string, obj runtime.Object, empty T) (T, error) {
	var zero T
	args := empty
	switch o := obj.(type) {
	case nil:
	case T:
		args = o.DeepCopyObject().(T)
	case *runtime.Unknown:
		// Strict: a misspelt field is an error, not a silently unused value.
		if err := yaml.UnmarshalStrict(o.Raw, args); err != nil {
			return zero, fmt.Errorf("decode %s args: %w", plugin, err)
		}
	default:
		if err := frameworkruntime.DecodeInto(obj, args); err != nil {
			return zero, fmt.Errorf("decode %s args: %w", plugin, err)
		}
	}
	args.SetDefaults()
	if errs := args.Validate(field.NewPath("args")); len(errs) > 0 {
		return zero, fmt.Errorf("invalid %s args: %w", plugin, errs.ToAggregate())
	}
	return args, nil
}
