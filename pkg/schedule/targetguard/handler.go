package targetguard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2"
)

// Path is where the webhook configuration sends the controller's writes.
const Path = "/validate-targets"

// maxReview bounds the body read from the API server: a pod template of
// the largest workload fits many times over.
const maxReview = 8 << 20

// ServeHTTP answers an admission.k8s.io/v1 AdmissionReview.
func (g *Guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, fmt.Sprintf("read the AdmissionReview: %v (at most %d bytes)", err, maxReview), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := g.Review(req)
	if !resp.Allowed {
		logger.Info("Refused a write of the schedule controller", "user", req.UserInfo.Username,
			"resource", req.Resource.Resource, "namespace", req.Namespace, "name", req.Name, "reason", resp.Result.Message)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(&out); err != nil {
		logger.Error(err, "Write the AdmissionReview response")
	}
}
