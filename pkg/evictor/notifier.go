package evictor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// CheckpointRequest is what a Notifier tells the pod.
type CheckpointRequest struct {
	// Requested is the rota.dev/checkpoint-requested value (RFC 3339).
	Requested string `json:"requested"`
	// Deadline is when the grace ends and the pod is evicted anyway (RFC
	// 3339).
	Deadline string `json:"deadline"`
	// Tenant is the tenant the GPUs go back to.
	Tenant string `json:"tenant"`
}

// Notifier asks a pod to checkpoint through the endpoint it declares. A nil
// error is the pod's acknowledgement: its state is saved.
type Notifier interface {
	Notify(ctx context.Context, pod *v1.Pod, endpoint Endpoint, req CheckpointRequest) error
}

// DefaultNotifyTimeout bounds one POST of HTTPNotifier by default: the
// longest grace a pod may declare (the evictor also gives up when the
// grace ends).
const DefaultNotifyTimeout = MaxGrace

// HTTPNotifier POSTs the CheckpointRequest as JSON to
// http://<pod IP>:<port><path>; a 2xx answer acknowledges.
type HTTPNotifier struct {
	// Client sends the POST (nil: a client of its own that uses no proxy).
	Client *http.Client
	// Timeout bounds one POST (0: DefaultNotifyTimeout).
	Timeout time.Duration
}

var defaultNotifyClient = &http.Client{Transport: &http.Transport{
	Proxy:               nil, // pod IPs are never reached through a proxy
	DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	TLSHandshakeTimeout: 10 * time.Second,
	MaxIdleConns:        10,
	IdleConnTimeout:     30 * time.Second,
}}

// URL is where the POST for pod goes.
func (HTTPNotifier) URL(pod *v1.Pod, endpoint Endpoint) (string, error) {
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s/%s has no IP", pod.Namespace, pod.Name)
	}
	return "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(endpoint.Port))) + endpoint.Path, nil
}

// Notify POSTs req and waits for the answer.
func (n HTTPNotifier) Notify(ctx context.Context, pod *v1.Pod, endpoint Endpoint, req CheckpointRequest) error {
	url, err := n.URL(pod, endpoint)
	if err != nil {
		return err
	}
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = DefaultNotifyTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding checkpoint request: %w", err)
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	r.Header.Set("Content-Type", "application/json")
	client := n.Client
	if client == nil {
		client = defaultNotifyClient
	}
	resp, err := client.Do(r)
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	// Drain a little so that the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("POST %s answered %s", url, resp.Status)
	}
	return nil
}
