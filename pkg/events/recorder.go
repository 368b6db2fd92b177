// Package events gives a Rota controller binary its one event broadcaster:
// events written to the API server's Events, recorded against a scheme that
// knows Rota's types as well as Kubernetes'.
package events

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	rotav1 "github.com/rota-dev/rota/pkg/apis/rota/v1alpha1"
)

// ControllerComponent is the event source of schedule-controller's
// controllers (DeploySchedule and GPUReservation).
const ControllerComponent = "rota-schedule-controller"

// NewRecorder starts a broadcaster that writes to client's Events until
// stop is called (or ctx ends) and returns a recorder for component.
func NewRecorder(ctx context.Context, client kubernetes.Interface, component string) (recorder record.EventRecorder, stop func(), err error) {
	s := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(s), rotav1.AddToScheme(s)); err != nil {
		return nil, nil, fmt.Errorf("building event scheme: %w", err)
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return broadcaster.NewRecorder(s, v1.EventSource{Component: component}), broadcaster.Shutdown, nil
}
