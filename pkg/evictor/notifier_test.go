package evictor

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// checkpointServer is a pod's checkpoint endpoint: it answers status and
// records the requests.
type checkpointServer struct {
	*httptest.Server
	status int

	mu       sync.Mutex
	requests []recordedRequest
}

type recordedRequest struct {
	Method, Path, ContentType string
	Body                      CheckpointRequest
}

func newCheckpointServer(t *testing.T, status int) *checkpointServer {
	s := &checkpointServer{status: status}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := recordedRequest{Method: r.Method, Path: r.URL.RequestURI(), ContentType: r.Header.Get("Content-Type")}
		if err := json.Unmarshal(raw, &rec.Body); err != nil {
			t.Errorf("checkpoint request body %q: %v", raw, err)
		}
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
		w.WriteHeader(s.status)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *checkpointServer) Requests() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recordedRequest(nil), s.requests...)
}

// port is the server's port, as a pod at 127.0.0.1 declares it.
func (s *checkpointServer) port(t *testing.T) int32 {
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return int32(p)
}

func TestHTTPNotifier(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "p"}, Status: v1.PodStatus{PodIP: "127.0.0.1"}}
	req := CheckpointRequest{Requested: "2026-12-06T05:00:00Z", Deadline: "2026-12-06T05:01:30Z", Tenant: "team-a"}

	ok := newCheckpointServer(t, http.StatusNoContent)
	if err := (HTTPNotifier{}).Notify(t.Context(), pod, Endpoint{Port: ok.port(t), Path: "/checkpoint?x=1"}, req); err != nil {
		t.Fatalf("Notify to a 204 endpoint: %v", err)
	}
	got := ok.Requests()
	want := recordedRequest{Method: http.MethodPost, Path: "/checkpoint?x=1", ContentType: "application/json", Body: req}
	if len(got) != 1 || got[0] != want {
		t.Errorf("requests = %+v, want [%+v]", got, want)
	}

	failing := newCheckpointServer(t, http.StatusServiceUnavailable)
	err := (HTTPNotifier{}).Notify(t.Context(), pod, Endpoint{Port: failing.port(t), Path: "/checkpoint"}, req)
	if err == nil || !strings.Contains(err.Error(), "answered 503 Service Unavailable") {
		t.Errorf("Notify to a 503 endpoint = %v, want an error naming the status", err)
	}

	noIP := pod.DeepCopy()
	noIP.Status.PodIP = ""
	if err := (HTTPNotifier{}).Notify(t.Context(), noIP, Endpoint{Port: 80, Path: "/"}, req); err == nil || !strings.Contains(err.Error(), "has no IP") {
		t.Errorf("Notify to a pod without IP = %v, want an error", err)
	}

	v6 := pod.DeepCopy()
	v6.Status.PodIP = "fd00::1"
	if u, err := (HTTPNotifier{}).URL(v6, Endpoint{Port: 8080, Path: "/c"}); err != nil || u != "http://[fd00::1]:8080/c" {
		t.Errorf("URL for an IPv6 pod = %q, %v", u, err)
	}
}
