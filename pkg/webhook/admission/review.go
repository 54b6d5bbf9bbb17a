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

// Package admission is the part of scaleplane's validating webhook that is the
// same for every kind: reading an AdmissionReview, answering it, and counting
// the verdicts. The rules of each kind live in their own package.
package admission

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
)

// maxBodyBytes bounds what a request may make the server read. kube-apiserver
// caps an object at 3 MiB and a review carries the object and, on updates, the
// old object, so 8 MiB leaves room without letting a client exhaust memory.
const maxBodyBytes = 8 << 20

// The verdicts counted in the requests metric.
const (
	verdictAllowed    = "allowed"
	verdictDenied     = "denied"
	verdictError      = "error"
	verdictBadRequest = "bad_request"
)

// Result is the verdict on one object: the problems that deny it, and
// warnings shown to the client whether or not it is allowed.
type Result struct {
	Errs     field.ErrorList
	Warnings []string
}

// Validator judges the object of an admission request.
type Validator interface {
	// Validate returns the problems of the request's object; none means it is
	// allowed. An error means the object could not be judged at all (it does
	// not decode, say); the request is then refused with code 400.
	Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (Result, error)
}

// Handler serves AdmissionReviews (admission.k8s.io/v1) for one kind.
type Handler struct {
	kind      string
	validator Validator
}

// NewHandler returns the HTTP handler of kind's validating webhook. kind only
// labels logs and metrics; every verdict of kind is exported at zero from
// now on (the metrics are registered if they were not).
func NewHandler(kind string, validator Validator) *Handler {
	exportKind(kind)
	return &Handler{kind: kind, validator: validator}
}

// ServeHTTP answers one AdmissionReview. A body that is not an AdmissionReview
// with a request gets HTTP 400, as there is nothing to answer; everything else
// gets HTTP 200 with the verdict in the review's response.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	logger := klog.FromContext(r.Context()).WithValues("kind", h.kind)

	review, err := readReview(w, r)
	if err != nil {
		logger.V(2).Info("Rejecting malformed admission request", "err", err)
		observe(h.kind, verdictBadRequest, start)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := review.Request
	logger = logger.WithValues("uid", req.UID, "operation", req.Operation,
		"object", klog.KRef(req.Namespace, req.Name), "user", req.UserInfo.Username)
	ctx := klog.NewContext(r.Context(), logger)

	resp, verdict := h.judge(ctx, req)
	resp.UID = req.UID
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	if err := utiljson.NewEncoder(w).Encode(&out); err != nil {
		// The client went away or the connection broke; nothing more to send.
		logger.Error(err, "Writing admission response")
	}
	observe(h.kind, verdict, start)
}

// judge turns the validator's answer into an admission response and the
// verdict to count.
func (h *Handler) judge(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	logger := klog.FromContext(ctx)
	result, err := h.validator.Validate(ctx, req)
	if err != nil {
		logger.V(2).Info("Cannot judge the object", "err", err)
		return errored(http.StatusBadRequest, err), verdictError
	}
	if len(result.Errs) > 0 {
		msg := result.Errs.ToAggregate().Error()
		logger.V(2).Info("Denied", "reason", msg)
		resp := Denied(msg)
		resp.Warnings = result.Warnings
		return resp, verdictDenied
	}
	logger.V(4).Info("Allowed", "warnings", len(result.Warnings))
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: result.Warnings}, verdictAllowed
}

// readReview reads and decodes the request body.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, error) {
	if r.Method != http.MethodPost {
		return nil, fmt.Errorf("method %s not allowed, only POST", r.Method)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if len(body) == 0 {
		return nil, errors.New("empty body")
	}
	review := &admissionv1.AdmissionReview{}
	if err := utiljson.Unmarshal(body, review); err != nil {
		return nil, fmt.Errorf("decoding AdmissionReview: %w", err)
	}
	gvk := review.GroupVersionKind()
	if gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, fmt.Errorf("expected %s AdmissionReview, got %s %s",
			admissionv1.SchemeGroupVersion, review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, errors.New("AdmissionReview has no request")
	}
	return review, nil
}

// Denied is the response refusing a request for reason. The code is 403
// Forbidden, as Karmada's webhook answers, so that clients see the same error.
func Denied(reason string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusForbidden,
			Reason:  metav1.StatusReasonForbidden,
			Message: reason,
		},
	}
}

func errored(code int32, err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    code,
			Reason:  metav1.StatusReasonBadRequest,
			Message: err.Error(),
		},
	}
}

// ObjectValidator is a Validator for objects of type T, from two functions:
// the rules, and what part of the object the rules read.
type ObjectValidator[T any] struct {
	// Rules judges obj.
	Rules func(ctx context.Context, obj *T) Result
	// Judged returns the part of obj that Rules reads. An update that leaves
	// it unchanged is allowed without checking, so that an object admitted
	// under older rules can still get its labels, annotations and finalizers
	// changed (a finalizer that cannot be removed blocks deletion).
	Judged func(obj *T) any
}

// Validate decodes the request's object (and old object on updates) and runs
// the rules. Only CREATE and UPDATE are judged; the webhook is registered for
// nothing else, and anything else is allowed.
func (v *ObjectValidator[T]) Validate(ctx context.Context, req *admissionv1.AdmissionRequest) (Result, error) {
	switch req.Operation {
	case admissionv1.Create, admissionv1.Update:
	default:
		return Result{}, nil
	}
	obj, err := Decode[T](req.Object.Raw)
	if err != nil {
		return Result{}, fmt.Errorf("decoding object: %w", err)
	}
	if req.Operation == admissionv1.Update && v.Judged != nil && len(req.OldObject.Raw) > 0 {
		old, err := Decode[T](req.OldObject.Raw)
		if err != nil {
			return Result{}, fmt.Errorf("decoding old object: %w", err)
		}
		if apiequality.Semantic.DeepEqual(v.Judged(old), v.Judged(obj)) {
			klog.FromContext(ctx).V(4).Info("Update leaves the validated fields unchanged")
			return Result{}, nil
		}
	}
	return v.Rules(ctx, obj), nil
}

// Decode decodes a JSON object into a new T, case-sensitively as the
// apiserver does.
func Decode[T any](raw []byte) (*T, error) {
	if len(raw) == 0 {
		return nil, errors.New("no object")
	}
	obj := new(T)
	if err := utiljson.Unmarshal(raw, obj); err != nil {
		return nil, err
	}
	return obj, nil
}
