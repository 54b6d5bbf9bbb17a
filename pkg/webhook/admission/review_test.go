/*
Copyright The scaleplane Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// widget is a stand-in kind: its size must be positive.
type widget struct {
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Size              int `json:"size"`
}

func widgetValidator() Validator {
	return &ObjectValidator[widget]{
		Rules: func(_ context.Context, w *widget) Result {
			var r Result
			if w.Size <= 0 {
				r.Errs = append(r.Errs, field.Invalid(field.NewPath("size"), w.Size, "must be positive"))
			}
			if w.Size > 100 {
				r.Warnings = append(r.Warnings, "size: large")
			}
			return r
		},
		Judged: func(w *widget) any { return w.Size },
	}
}

func review(op admissionv1.Operation, obj, old string) string {
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("uid-1"),
			Operation: op,
			Name:      "w",
			Namespace: "ns",
			Object:    runtime.RawExtension{Raw: []byte(obj)},
		},
	}
	if old != "" {
		r.Request.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestHandler(t *testing.T) {
	tests := []struct {
		name        string
		method      string
		body        string
		wantCode    int
		wantAllowed bool
		wantStatus  *metav1.Status
		wantWarn    []string
	}{
		{
			name: "allowed", method: http.MethodPost,
			body:     review(admissionv1.Create, `{"size":1}`, ""),
			wantCode: http.StatusOK, wantAllowed: true,
		},
		{
			name: "allowed with warning", method: http.MethodPost,
			body:     review(admissionv1.Create, `{"size":101}`, ""),
			wantCode: http.StatusOK, wantAllowed: true, wantWarn: []string{"size: large"},
		},
		{
			name: "denied", method: http.MethodPost,
			body:     review(admissionv1.Create, `{"size":0}`, ""),
			wantCode: http.StatusOK,
			wantStatus: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
				Reason: metav1.StatusReasonForbidden, Message: "size: Invalid value: 0: must be positive"},
		},
		{
			name: "update changing the judged part is judged", method: http.MethodPost,
			body:     review(admissionv1.Update, `{"size":-1}`, `{"size":1}`),
			wantCode: http.StatusOK,
			wantStatus: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
				Reason: metav1.StatusReasonForbidden, Message: "size: Invalid value: -1: must be positive"},
		},
		{
			name: "update leaving the judged part alone is allowed", method: http.MethodPost,
			body:     review(admissionv1.Update, `{"metadata":{"finalizers":[]},"size":0}`, `{"metadata":{"finalizers":["x"]},"size":0}`),
			wantCode: http.StatusOK, wantAllowed: true,
		},
		{
			name: "delete is not judged", method: http.MethodPost,
			body:     review(admissionv1.Delete, `{"size":0}`, ""),
			wantCode: http.StatusOK, wantAllowed: true,
		},
		{
			name: "object that does not decode", method: http.MethodPost,
			body:     review(admissionv1.Create, `{"size":"big"}`, ""),
			wantCode: http.StatusOK,
			wantStatus: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest,
				Reason:  metav1.StatusReasonBadRequest,
				Message: "decoding object: json: cannot unmarshal string into Go struct field widget.size of type int"},
		},
		{name: "not JSON", method: http.MethodPost, body: "{", wantCode: http.StatusBadRequest},
		{name: "empty body", method: http.MethodPost, body: "", wantCode: http.StatusBadRequest},
		{name: "not a review", method: http.MethodPost, body: `{"apiVersion":"v1","kind":"Pod"}`, wantCode: http.StatusBadRequest},
		{
			name: "old review version", method: http.MethodPost,
			body:     strings.Replace(review(admissionv1.Create, `{"size":1}`, ""), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1),
			wantCode: http.StatusBadRequest,
		},
		{name: "review without request", method: http.MethodPost, body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantCode: http.StatusBadRequest},
		{name: "GET", method: http.MethodGet, body: "", wantCode: http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHandler("Widget", widgetValidator())
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tc.method, "/validate-widget", bytes.NewBufferString(tc.body))
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("code = %d, want %d (body %q)", rec.Code, tc.wantCode, rec.Body.String())
			}
			if tc.wantCode != http.StatusOK {
				return
			}
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("response does not decode: %v", err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" {
				t.Errorf("response type = %s %s", out.APIVersion, out.Kind)
			}
			resp := out.Response
			if resp == nil || resp.UID != "uid-1" {
				t.Fatalf("response %+v must carry the request's UID", resp)
			}
			if resp.Allowed != tc.wantAllowed {
				t.Errorf("allowed = %v, want %v (result %+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantStatus != nil {
				if resp.Result == nil || *resp.Result != *tc.wantStatus {
					t.Errorf("result = %+v, want %+v", resp.Result, tc.wantStatus)
				}
			}
			if strings.Join(resp.Warnings, ",") != strings.Join(tc.wantWarn, ",") {
				t.Errorf("warnings = %q, want %q", resp.Warnings, tc.wantWarn)
			}
		})
	}
}
