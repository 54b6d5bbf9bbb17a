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

package cronscaler

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	lwsv1 "github.com/scaleplane/scaleplane/pkg/apis/leaderworkerset/v1"
)

// The simulated apiserver of TestSim (see sim_test.go). Every client of
// every simulated process (the CronFederatedHPA clientset, the Kubernetes
// clientset, the scale and metadata clients) has its reactor chain replaced
// by simServer.react, so each request is answered here, as the apiserver
// would answer it:
//   - resourceVersions: one counter for all objects; an update whose
//     resourceVersion is not the stored one is a 409 conflict;
//   - the status/spec split: a status write changes only status, an object
//     write only spec and metadata; a spec change bumps the generation;
//   - managedFields: one entry per manager, operation and subresource; a
//     write that changes something makes its manager own what it changed
//     (taken from the other entries) and moves its time, truncated to the
//     second; a write through /scale records no time (see scaleStore.write
//     and docs/cron-scaler.md "the crash window");
//   - faults: outages (no answer: connection refused), flaky periods (500s,
//     and writes that commit but whose answer is lost: a reset connection or
//     an etcd timeout), and a process that dies inside a request (the write
//     commits, or not, and the process is gone).
//
// It keeps the history the oracle (sim_oracle_test.go) judges: every spec
// version of every CronFederatedHPA with its time, every change of a target
// field with who made it, every committed status, and the watch log the
// processes' informers are fed from (sim_run_test.go).

// Field managers of the simulated writers other than the cron-scaler.
const (
	simEditor        = "kubectl-edit"
	simGitOps        = "argocd"
	simScaler        = "kubectl-scale"
	simOtherCron     = "karmada-controller-manager"
	simCreator       = "kubectl-client-side-apply"
	simForeignPrefix = "karmada: "
)

// simTarget names a target as the oracle knows it: Kind/name.
type simTarget string

const (
	simWeb0 simTarget = "Deployment/web-0"
	simWeb1 simTarget = "Deployment/web-1"
	simHPA  simTarget = "HorizontalPodAutoscaler/hpa-0"
	simFHPA simTarget = "FederatedHPA/fhpa-0"
	simLWS  simTarget = "LeaderWorkerSet/lws-0"
)

var simTargets = []simTarget{simWeb0, simWeb1, simHPA, simFHPA, simLWS}

func (t simTarget) kind() string { k, _, _ := strings.Cut(string(t), "/"); return k }
func (t simTarget) name() string { _, n, _ := strings.Cut(string(t), "/"); return n }

// ref is the scaleTargetRef of t.
func (t simTarget) ref() autoscalingv2.CrossVersionObjectReference {
	apiVersion := map[string]string{
		"Deployment": "apps/v1", "HorizontalPodAutoscaler": "autoscaling/v2",
		"FederatedHPA": "autoscaling.karmada.io/v1alpha1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1",
	}[t.kind()]
	return autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: t.kind(), Name: t.name()}
}

// The fields of a target a rule can set.
const (
	fieldReplicas = "replicas"
	fieldMin      = "min"
	fieldMax      = "max"
)

// path is the field as managedFields name it on target t.
func fieldPath(t simTarget, field string) string {
	switch {
	case field == fieldReplicas:
		return "spec.replicas"
	case t.kind() == "LeaderWorkerSet":
		return "spec.scalePolicy." + field + "Replicas"
	}
	return "spec." + field + "Replicas"
}

// fieldChange is one committed change of a target field.
type fieldChange struct {
	at          time.Time
	value       int32
	manager     string
	subresource string
	// proc is the cron-scaler process that wrote it (nil: another writer),
	// and cacheAt when each object its cache held was committed, at the
	// time of the write (what the process could know).
	proc    *simProc
	cacheAt map[types.UID]time.Time
	// lost says the write committed but its answer was lost: the process
	// that made it does not know it was made.
	lost bool
}

// specVersion is one committed version of a CronFederatedHPA.
type specVersion struct {
	at  time.Time
	obj *autoscalingv1alpha1.CronFederatedHPA
	// deleted marks the deletion; spec says whether the write changed
	// spec or metadata (not only status).
	deleted, spec bool
	// specAt is when spec or metadata were last changed, at this version.
	specAt time.Time
}

// statusCommit is one committed status write.
type statusCommit struct {
	at      time.Time
	uid     types.UID
	name    string
	manager string
	status  autoscalingv1alpha1.CronFederatedHPAStatus
}

type lostWrite struct {
	at   time.Time
	proc *simProc
	uid  types.UID
}

type watchEvent struct {
	at      time.Time
	deleted bool
	obj     *autoscalingv1alpha1.CronFederatedHPA
	version *specVersion
}

// owners are a target's managedFields: the paths each entry owns.
type ownerEntry struct {
	manager, subresource string
	at                   *metav1.Time
	paths                map[string]bool
}

type simServer struct {
	s  *sim
	mu sync.Mutex
	rv int64
	// answerLost is set while a write whose answer will be lost is served.
	answerLost bool

	crons  map[string]*autoscalingv1alpha1.CronFederatedHPA
	fhpas  map[string]*autoscalingv1alpha1.FederatedHPA
	hpas   map[string]*autoscalingv2.HorizontalPodAutoscaler
	lwss   map[string]*lwsv1.LeaderWorkerSet
	deps   map[string]int32
	owners map[simTarget][]*ownerEntry

	// History.
	log      []watchEvent
	versions map[types.UID][]*specVersion
	fields   map[string][]fieldChange
	statuses []statusCommit
	// lostStatus are the status writes committed whose answer was lost.
	lostStatus []lostWrite
	// foreign are the status writes of the second cron controller.
	foreign map[types.UID][]time.Time
	uids    int
}

func newSimServer(s *sim) *simServer {
	srv := &simServer{
		s: s, crons: map[string]*autoscalingv1alpha1.CronFederatedHPA{},
		fhpas: map[string]*autoscalingv1alpha1.FederatedHPA{}, hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{},
		lwss: map[string]*lwsv1.LeaderWorkerSet{}, deps: map[string]int32{}, owners: map[simTarget][]*ownerEntry{},
		versions: map[types.UID][]*specVersion{}, fields: map[string][]fieldChange{}, foreign: map[types.UID][]time.Time{},
	}
	now := s.clock.Now()
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: srv.nextRV()}
	}
	srv.deps[simWeb0.name()], srv.deps[simWeb1.name()] = 1, 1
	srv.hpas[simHPA.name()] = &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: meta(simHPA.name()),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10}}
	srv.fhpas[simFHPA.name()] = &autoscalingv1alpha1.FederatedHPA{ObjectMeta: meta(simFHPA.name()),
		Spec: autoscalingv1alpha1.FederatedHPASpec{MinReplicas: ptr.To[int32](1), MaxReplicas: 10}}
	srv.lwss[simLWS.name()] = &lwsv1.LeaderWorkerSet{ObjectMeta: meta(simLWS.name()),
		Spec: lwsv1.LeaderWorkerSetSpec{Replicas: ptr.To[int32](1), ScalePolicy: &lwsv1.ScalePolicy{MinReplicas: ptr.To[int32](1), MaxReplicas: 5}}}
	for _, t := range simTargets {
		for _, f := range simFieldsOf(t) {
			srv.fields[fieldKey(t, f)] = []fieldChange{{at: now, value: srv.value(t, f), manager: simCreator}}
			srv.own(t, simCreator, "", f, now)
		}
	}
	return srv
}

func fieldKey(t simTarget, field string) string { return string(t) + "." + field }

// simFieldsOf are the fields a rule can set on a target of t's kind.
func simFieldsOf(t simTarget) []string {
	switch t.kind() {
	case "Deployment":
		return []string{fieldReplicas}
	case "LeaderWorkerSet":
		return []string{fieldReplicas, fieldMin, fieldMax}
	}
	return []string{fieldMin, fieldMax}
}

func (srv *simServer) nextRV() string {
	srv.rv++
	return strconv.FormatInt(srv.rv, 10)
}

// value is the current value of a target field.
func (srv *simServer) value(t simTarget, field string) int32 {
	switch t.kind() {
	case "Deployment":
		return srv.deps[t.name()]
	case "HorizontalPodAutoscaler":
		h := srv.hpas[t.name()]
		if field == fieldMin {
			return ptr.Deref(h.Spec.MinReplicas, 1)
		}
		return h.Spec.MaxReplicas
	case "FederatedHPA":
		h := srv.fhpas[t.name()]
		if field == fieldMin {
			return ptr.Deref(h.Spec.MinReplicas, 1)
		}
		return h.Spec.MaxReplicas
	}
	l := srv.lwss[t.name()]
	switch field {
	case fieldReplicas:
		return ptr.Deref(l.Spec.Replicas, 1)
	case fieldMin:
		return ptr.Deref(l.Spec.ScalePolicy.MinReplicas, 1)
	}
	return l.Spec.ScalePolicy.MaxReplicas
}

// setValue sets a target field as manager through subresource, records the
// change (if it is one) and moves the managedFields.
func (srv *simServer) setValue(t simTarget, field string, v int32, manager, subresource string, p *simProc) {
	if srv.value(t, field) == v {
		return
	}
	switch t.kind() {
	case "Deployment":
		srv.deps[t.name()] = v
	case "HorizontalPodAutoscaler":
		h := srv.hpas[t.name()]
		if field == fieldMin {
			h.Spec.MinReplicas = ptr.To(v)
		} else {
			h.Spec.MaxReplicas = v
		}
		h.ResourceVersion = srv.nextRV()
	case "FederatedHPA":
		h := srv.fhpas[t.name()]
		if field == fieldMin {
			h.Spec.MinReplicas = ptr.To(v)
		} else {
			h.Spec.MaxReplicas = v
		}
		h.ResourceVersion = srv.nextRV()
	default:
		l := srv.lwss[t.name()]
		switch field {
		case fieldReplicas:
			l.Spec.Replicas = ptr.To(v)
		case fieldMin:
			l.Spec.ScalePolicy.MinReplicas = ptr.To(v)
		default:
			l.Spec.ScalePolicy.MaxReplicas = v
		}
		l.ResourceVersion = srv.nextRV()
	}
	now := srv.s.clock.Now()
	ch := fieldChange{at: now, value: v, manager: manager, subresource: subresource, proc: p, lost: srv.answerLost}
	if p != nil {
		ch.cacheAt = p.cacheSnapshot()
	}
	srv.fields[fieldKey(t, field)] = append(srv.fields[fieldKey(t, field)], ch)
	srv.own(t, manager, subresource, field, now)
}

// own makes manager's entry (by subresource) own the field, as the
// apiserver's field manager does for a write that changed it.
func (srv *simServer) own(t simTarget, manager, subresource, field string, now time.Time) {
	path := fieldPath(t, field)
	var mine *ownerEntry
	kept := srv.owners[t][:0]
	for _, e := range srv.owners[t] {
		if e.manager == manager && e.subresource == subresource {
			mine = e
		} else {
			delete(e.paths, path)
		}
		if len(e.paths) > 0 || e == mine {
			kept = append(kept, e)
		}
	}
	if mine == nil {
		mine = &ownerEntry{manager: manager, subresource: subresource, paths: map[string]bool{}}
		kept = append(kept, mine)
	}
	mine.paths[path] = true
	mine.at = nil
	if subresource != "scale" {
		mine.at = ptr.To(metav1.NewTime(now.UTC().Truncate(time.Second)))
	}
	srv.owners[t] = kept
}

// managedFields are the target's entries as the apiserver serves them.
func (srv *simServer) managedFields(t simTarget) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range srv.owners[t] {
		set := map[string]any{}
		paths := make([]string, 0, len(e.paths))
		for p := range e.paths {
			paths = append(paths, p)
		}
		sort.Strings(paths)
		for _, p := range paths {
			node := set
			for _, step := range strings.Split(p, ".") {
				next, ok := node["f:"+step].(map[string]any)
				if !ok {
					next = map[string]any{}
					node["f:"+step] = next
				}
				node = next
			}
		}
		raw, _ := json.Marshal(set)
		out = append(out, metav1.ManagedFieldsEntry{
			Manager: e.manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: e.subresource,
			Time: e.at, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(raw)),
		})
	}
	return out
}

// commitCron stores a new version of a CronFederatedHPA (nil obj: deleted)
// and puts it in the watch log.
func (srv *simServer) commitCron(name string, obj *autoscalingv1alpha1.CronFederatedHPA, spec bool) {
	now := srv.s.clock.Now()
	v := &specVersion{at: now, spec: spec}
	ev := watchEvent{at: now, version: v}
	if obj == nil {
		old := srv.crons[name]
		delete(srv.crons, name)
		v.deleted, v.obj = true, old.DeepCopy()
		ev.deleted, ev.obj = true, old.DeepCopy()
	} else {
		srv.crons[name] = obj
		v.obj = obj.DeepCopy()
		ev.obj = obj.DeepCopy()
	}
	vs := srv.versions[v.obj.UID]
	v.specAt = now
	if !spec && len(vs) > 0 {
		v.specAt = vs[len(vs)-1].specAt
	}
	srv.versions[v.obj.UID] = append(vs, v)
	srv.log = append(srv.log, ev)
}

// createCron creates a CronFederatedHPA as a user would.
func (srv *simServer) createCron(obj *autoscalingv1alpha1.CronFederatedHPA) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	now := srv.s.clock.Now()
	srv.uids++
	obj = obj.DeepCopy()
	obj.Namespace = ns
	obj.UID = types.UID(fmt.Sprintf("uid-%s-%d", obj.Name, srv.uids))
	obj.ResourceVersion = srv.nextRV()
	obj.Generation = 1
	// Kept in seconds, as the apiserver serializes it.
	obj.CreationTimestamp = metav1.NewTime(now.UTC().Truncate(time.Second))
	touchManagedFields(&obj.ObjectMeta, simCreator, "", now)
	srv.commitCron(obj.Name, obj, true)
}

// editCron changes a CronFederatedHPA's spec or metadata as manager; a
// change that changes nothing writes nothing. It reports whether it wrote.
func (srv *simServer) editCron(name, manager string, change func(*autoscalingv1alpha1.CronFederatedHPA)) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	stored, ok := srv.crons[name]
	if !ok {
		return false
	}
	next := stored.DeepCopy()
	change(next)
	if equality.Semantic.DeepEqual(next.Spec, stored.Spec) && equality.Semantic.DeepEqual(next.Labels, stored.Labels) {
		return false
	}
	if !equality.Semantic.DeepEqual(next.Spec, stored.Spec) {
		next.Generation++
	}
	next.Status = *stored.Status.DeepCopy()
	next.ResourceVersion = srv.nextRV()
	touchManagedFields(&next.ObjectMeta, manager, "", srv.s.clock.Now())
	srv.commitCron(name, next, true)
	return true
}

func (srv *simServer) deleteCron(name string) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if _, ok := srv.crons[name]; !ok {
		return false
	}
	srv.rv++
	srv.commitCron(name, nil, true)
	return true
}

// writeStatusAs commits a status for the object as manager (the second
// cron controller), with no precondition.
func (srv *simServer) writeStatusAs(name, manager string, change func(*autoscalingv1alpha1.CronFederatedHPAStatus) bool) bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	stored, ok := srv.crons[name]
	if !ok {
		return false
	}
	next := stored.DeepCopy()
	if !change(&next.Status) {
		return false
	}
	next.ResourceVersion = srv.nextRV()
	now := srv.s.clock.Now()
	touchManagedFields(&next.ObjectMeta, manager, "status", now)
	srv.commitCron(name, next, false)
	srv.statuses = append(srv.statuses, statusCommit{at: now, uid: next.UID, name: name, manager: manager, status: *next.Status.DeepCopy()})
	srv.foreign[next.UID] = append(srv.foreign[next.UID], now)
	return true
}

// otherWrite changes a target field as another writer would.
func (srv *simServer) otherWrite(t simTarget, field string, v int32, manager, subresource string) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.setValue(t, field, v, manager, subresource, nil)
}
