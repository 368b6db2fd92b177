package kubelet

import (
	"errors"
	"time"

	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/clock"

	gpuv1 "github.com/rota-dev/rota/pkg/apis/gpu/v1alpha1"
)

// Options configure a simulated kubelet.
type Options struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// NodeName is the node whose pods this kubelet runs. Required.
	NodeName string
	// Clock measures every delay; the real clock when nil.
	Clock clock.WithTickerAndDelayedExecution
	// StartDelay is the time from seeing a pod bound to the node until its
	// containers run (phase Running).
	StartDelay time.Duration
	// ReadyDelay is the time from Running until the pod is Ready.
	ReadyDelay time.Duration
	// MaxGracePeriod caps a deleted pod's termination grace period; a
	// negative value means no cap.
	MaxGracePeriod time.Duration
	// Preparer is the DRA kubelet plugin (usually a gRPC client of its
	// service socket). Claims allocated by DriverName are prepared before
	// a pod starts and unprepared after it stopped. Nil skips both.
	Preparer drapb.DRAPluginClient
	// DriverName is the driver whose claims Preparer handles;
	// gpuv1.DriverName when empty.
	DriverName string
	// RetryDelay is the first wait before a failed prepare, unprepare or
	// API update is retried; it doubles up to MaxRetryDelay. 10s and 5m
	// when zero.
	RetryDelay, MaxRetryDelay time.Duration
}

func (o *Options) validate() error {
	var errs []error
	if o.Client == nil {
		errs = append(errs, errors.New("kubelet: Client is required"))
	}
	if o.NodeName == "" {
		errs = append(errs, errors.New("kubelet: NodeName is required"))
	}
	if o.StartDelay < 0 || o.ReadyDelay < 0 {
		errs = append(errs, errors.New("kubelet: StartDelay and ReadyDelay must not be negative"))
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.DriverName == "" {
		o.DriverName = gpuv1.DriverName
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = 10 * time.Second
	}
	if o.MaxRetryDelay <= 0 {
		o.MaxRetryDelay = 5 * time.Minute
	}
	return errors.Join(errs...)
}
