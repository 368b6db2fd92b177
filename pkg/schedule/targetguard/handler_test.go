package targetguard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestServeHTTPAnswersTheReview: the API server's AdmissionReview comes
// back with the request's UID and the decision; a body that is no review
// is a 400, never a panic.
func TestServeHTTPAnswersTheReview(t *testing.T) {
	g := New(fixedSchedules{"team-a": {schedule("team-a", target("apps/v1", "Deployment", "model", ""))}})
	post := func(body []byte) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		return rec
	}
	for name, want := range map[string]bool{"model": true, "payroll": false} {
		review := admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  request("apps", "deployments", "", admissionv1.Update, "team-a", name, nil),
		}
		body, _ := json.Marshal(review)
		rec := post(body)
		var got admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Response == nil {
			t.Fatalf("%s: answer %q is no AdmissionReview: %v", name, rec.Body.String(), err)
		}
		if got.Response.Allowed != want || got.Response.UID != review.Request.UID || got.Kind != "AdmissionReview" {
			t.Errorf("%s: response %+v, want allowed=%v with UID %q", name, got, want, review.Request.UID)
		}
	}
	for _, body := range [][]byte{nil, []byte("{"), []byte(`{"kind":"AdmissionReview"}`)} {
		if rec := post(body); rec.Code != http.StatusBadRequest {
			t.Errorf("body %q: status %d, want 400", body, rec.Code)
		}
	}
}
