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

package app

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/scale"
	fakescale "k8s.io/client-go/scale/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/scaleplane/scaleplane/pkg/gcpace"
)

// The cron-scaler's Patch of a scale subresource is the request client-go's
// scale client sends (path, query, content type, body), asking for the
// answer in protobuf or JSON as client-go's typed clients of built-in kinds
// do; its answer, in either, read as the Scale it is, and the apiserver's
// errors, in either, kept as the errors they are (the cron-scaler retries a
// conflict, a timeout, and not a 404); the other methods are client-go's.
func TestPatchScalesSendsThePatchAndReadsTheScale(t *testing.T) {
	protobufScale := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	webScale := &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "3b8f3e2c-1d0a-4f5e-9c8b-7a6d5e4f3a2b", ResourceVersion: "4711"},
		Spec:       autoscalingv1.ScaleSpec{Replicas: 12},
		Status:     autoscalingv1.ScaleStatus{Replicas: 3, Selector: "app=web"},
	}
	type request struct{ method, path, query, contentType, accept, body string }
	requests := make(chan request, 10)
	answer := func(w http.ResponseWriter, code int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests <- request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Accept"), string(body)}
		switch r.URL.Path {
		case "/apis/apps/v1/namespaces/shop/deployments/web/scale":
			// As kube-apiserver 1.37 answers a scale patch of a Deployment
			// asked for protobuf first: the Scale in protobuf.
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			w.WriteHeader(http.StatusOK)
			if err := protobufScale.Encode(webScale, w); err != nil {
				t.Error(err)
			}
		case "/api/v1/namespaces/shop/replicationcontrollers/rc/scale":
			// An answer in JSON, which any server may give: Accept lists
			// both (a custom resource's scale subresource on a server
			// without protobuf for it, say).
			answer(w, http.StatusOK, `{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web","namespace":"shop","uid":"3b8f3e2c-1d0a-4f5e-9c8b-7a6d5e4f3a2b","resourceVersion":"4711","creationTimestamp":"2026-11-29T08:00:00Z"},"spec":{"replicas":12},"status":{"replicas":3,"selector":"app=web"}}`)
		case "/apis/apps/v1/namespaces/shop/deployments/busy/scale":
			// kube-apiserver's errors come in the type asked for too.
			w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
			w.WriteHeader(http.StatusConflict)
			if err := protobufScale.Encode(&metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
				Message: `Operation cannot be fulfilled on deployments.apps "busy": the object has been modified; please apply your changes to the latest version and try again`,
				Details: &metav1.StatusDetails{Name: "busy", Group: "apps", Kind: "deployments"},
			}, w); err != nil {
				t.Error(err)
			}
		default:
			answer(w, http.StatusNotFound, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"gone\" not found","reason":"NotFound","details":{"name":"gone","group":"apps","kind":"deployments"},"code":404}`)
		}
	}))
	defer server.Close()
	wrapped := &fakescale.FakeScaleClient{}
	wrapped.AddReactor("get", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 7}}, nil
	})
	scales, err := newPatchScales(&rest.Config{Host: server.URL}, wrapped, noHold)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	patch := []byte(`{"spec":{"replicas":12}}`)

	got, err := scales.Scales("shop").Patch(ctx, deployments, "web", types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: "scaleplane-cron-scaler", DryRun: []string{metav1.DryRunAll}, Force: ptr.To(false), FieldValidation: "Strict"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "web" || got.Spec.Replicas != 12 || got.Status.Replicas != 3 || got.Status.Selector != "app=web" || got.ResourceVersion != "4711" {
		t.Errorf("the answer read as %+v; want the Scale of web, 12 wanted, 3 running", got)
	}
	want := request{http.MethodPatch, "/apis/apps/v1/namespaces/shop/deployments/web/scale",
		"dryRun=All&fieldManager=scaleplane-cron-scaler&fieldValidation=Strict&force=false", string(types.MergePatchType),
		"application/vnd.kubernetes.protobuf,application/json", string(patch)}
	if r := <-requests; r != want {
		t.Errorf("request %+v; want %+v", r, want)
	}

	got, err = scales.Scales("shop").Patch(ctx, schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, "rc", types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.Replicas != 12 || got.Status.Selector != "app=web" {
		t.Errorf("an answer in JSON read as %+v; want 12 wanted, selector app=web", got)
	}
	if r := <-requests; r.path != "/api/v1/namespaces/shop/replicationcontrollers/rc/scale" || r.query != "" {
		t.Errorf("a core resource's patch went to %s?%s; want /api/v1/namespaces/shop/replicationcontrollers/rc/scale and no query", r.path, r.query)
	}

	if _, err := scales.Scales("shop").Patch(ctx, deployments, "busy", types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("a 409 came back as %v; want a conflict", err)
	}
	<-requests
	got, err = scales.Scales("shop").Patch(ctx, deployments, "gone", types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsNotFound(err) || got != nil {
		t.Errorf("a 404 came back as %v, %v; want NotFound and no Scale", got, err)
	}
	<-requests

	if s, err := scales.Scales("shop").Get(ctx, schema.GroupResource{Group: "apps", Resource: "deployments"}, "web", metav1.GetOptions{}); err != nil || s.Spec.Replicas != 7 {
		t.Errorf("Get gave %v, %v; want client-go's scale client's answer (7)", s, err)
	}
	select {
	case r := <-requests:
		t.Errorf("Get sent %+v to the server; want it left to the wrapped client", r)
	default:
	}
	var _ scale.ScalesGetter = patchScales{}

	// A config that names a content type keeps it: the answer is asked for
	// in that type only.
	jsonOnly, err := newPatchScales(&rest.Config{Host: server.URL, ContentConfig: rest.ContentConfig{ContentType: runtime.ContentTypeJSON}}, wrapped, noHold)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jsonOnly.Scales("shop").Patch(ctx, schema.GroupVersionResource{Version: "v1", Resource: "replicationcontrollers"}, "rc", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if r := <-requests; r.accept != "application/json, */*" {
		t.Errorf("with a JSON config the answer was asked for as %q; want JSON", r.accept)
	}
}

// noHold is a hold that holds nothing.
func noHold() func() { return func() {} }

// While scale patches are in flight the heap has room to grow between
// collections (burstHeadroomBytes, through gcpace): from the first patch to
// start to the last to end, and not after.
func TestPatchScalesHoldHeadroomWhilePatchesAreInFlight(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	protobufScale := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	during := make(chan int, 2)
	answers := map[string]chan struct{}{"first": make(chan struct{}), "second": make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/apps/v1/namespaces/shop/deployments/{name}/scale", func(w http.ResponseWriter, r *http.Request) {
		during <- gcpace.Percent()
		<-answers[r.PathValue("name")]
		w.Header().Set("Content-Type", runtime.ContentTypeProtobuf)
		if err := protobufScale.Encode(&autoscalingv1.Scale{TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"}}, w); err != nil {
			t.Error(err)
		}
	})
	server := httptest.NewServer(mux)
	defer server.Close()
	scales, err := newPatchScales(&rest.Config{Host: server.URL}, &fakescale.FakeScaleClient{}, burstHeadroom)
	if err != nil {
		t.Fatal(err)
	}
	deployments := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	done := make(chan error, 2)
	patch := func(name string) {
		_, err := scales.Scales("shop").Patch(context.Background(), deployments, name, types.MergePatchType, []byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{})
		done <- err
	}
	go patch("first")
	// 16 MiB on a live heap of 4 MiB at least: at most 400 %.
	if got := <-during; got <= 50 || got > 400 {
		t.Errorf("GOGC while a patch is in flight = %d; want it raised above 50 (the live heap of a test is far under 32 MiB), to 400 at most", got)
	}
	go patch("second")
	<-during
	close(answers["first"])
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := gcpace.Percent(); got <= 50 || got > 400 {
		t.Errorf("GOGC with the second patch still in flight = %d; want it raised above 50, to 400 at most", got)
	}
	close(answers["second"])
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := gcpace.Percent(); got != 50 {
		t.Errorf("GOGC after the last patch = %d; want 50 again", got)
	}
}

// inFlight takes one hold for patches that overlap, one for each that does
// not, and releases each.
func TestInFlightHoldsOncePerOverlap(t *testing.T) {
	holds, releases := 0, 0
	f := &inFlight{hold: func() func() { holds++; return func() { releases++ } }}
	f.enter()
	f.enter()
	f.exit()
	f.enter()
	f.exit()
	f.exit()
	if holds != 1 || releases != 1 {
		t.Errorf("overlapping patches: %d holds, %d releases; want 1 and 1", holds, releases)
	}
	f.enter()
	f.exit()
	if holds != 2 || releases != 2 {
		t.Errorf("one more patch alone: %d holds, %d releases; want 2 and 2", holds, releases)
	}
}
