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
package upgrade

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	release = "scaleplane"
	// oldChart is the previous release's chart: testdata/README.md says
	// how it was made.
	oldChart = "testdata/scaleplane-0.1.0.tgz"
	// newVersion labels the working tree's chart, packaged by the test, so
	// that helm history tells the two apart (its Chart.yaml still says
	// 0.1.0).
	newVersion = "0.2.0-dev"

	// crdStep is docs/upgrading.md's CRD step; %s is the chart (oci://...
	// or a .tgz).
	crdStep = "helm show crds %s | kubectl apply --server-side --force-conflicts -f -"
	// crdStepNoForce is the same without --force-conflicts.
	crdStepNoForce = "helm show crds %s | kubectl apply --server-side -f -"

	// karmadaCRDStep is docs/upgrading.md's CRD step on Karmada, after
	// helm pull: the chart's AddonResizer and LeaderWorkerSet CRDs, to
	// karmada-apiserver (here the test's API server).
	karmadaCRDStep = "tar -xzf %s scaleplane/crds && " +
		"kubectl apply --server-side --force-conflicts " +
		"-f scaleplane/crds/autoscaling.scaleplane.io_addonresizers.yaml " +
		"-f scaleplane/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
	// karmadaInstall0_1_0 installs those CRDs on karmada-apiserver as
	// docs/karmada/addons.md and docs/karmada/leaderworkerset.md do (with
	// kubectl apply --server-side), 0.1.0's, taken from its chart (at
	// 6e14fdc artifacts/deploy/crds holds the same files).
	karmadaInstall0_1_0 = "tar -xzf %s scaleplane/crds && " +
		"kubectl apply --server-side " +
		"-f scaleplane/crds/autoscaling.scaleplane.io_addonresizers.yaml " +
		"-f scaleplane/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"

	// findOff is docs/upgrading.md's command that lists the
	// AddonResizers with updateMode Off, to deal with before a downgrade.
	findOff = `kubectl get addonresizers -A -o jsonpath='{range .items[?(@.spec.updateMode=="Off")]}{.metadata.namespace}/{.metadata.name}{"\n"}{end}'`

	commandTimeout = 60 * time.Second
	waitTimeout    = 30 * time.Second
)

// The CRDs the chart's crds/ directory holds.
var crdNames = []string{
	"addonresizers.autoscaling.scaleplane.io",
	"cronfederatedhpas.autoscaling.karmada.io",
	"federatedhpas.autoscaling.karmada.io",
	"leaderworkersets.leaderworkerset.x-k8s.io",
}

var (
	cronGVR = schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "cronfederatedhpas"}
	fhpaGVR = schema.GroupVersionResource{Group: "autoscaling.karmada.io", Version: "v1alpha1", Resource: "federatedhpas"}
	arGVR   = schema.GroupVersionResource{Group: "autoscaling.scaleplane.io", Version: "v1alpha1", Resource: "addonresizers"}
	lwsGVR  = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

// objects0_1_0 are one object of every kind the CRDs define, valid under
// 0.1.0's schemas, as artifacts/examples has them (the AddonResizer with
// updateMode Rollout, the FederatedHPA's CronFederatedHPA with a time zone
// and maxDelaySeconds).
const objects0_1_0 = `
apiVersion: autoscaling.karmada.io/v1alpha1
kind: FederatedHPA
metadata:
  name: nginx-fhpa
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: nginx-federated
  minReplicas: 1
  maxReplicas: 100
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: 80
---
apiVersion: autoscaling.karmada.io/v1alpha1
kind: CronFederatedHPA
metadata:
  name: nginx-fhpa-cronfhpa
spec:
  scaleTargetRef:
    apiVersion: autoscaling.karmada.io/v1alpha1
    kind: FederatedHPA
    name: nginx-fhpa
  rules:
    - name: scale-up
      schedule: "30 8 * * 1-5"
      timeZone: Europe/Paris
      maxDelaySeconds: 600
      targetMinReplicas: 1000
      targetMaxReplicas: 2000
    - name: scale-down
      schedule: "0 11 * * *"
      targetMinReplicas: 1
      targetMaxReplicas: 100
---
` + addonResizer0_1_0 + `
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata:
  name: vllm
spec:
  replicas: 1
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      metadata:
        labels:
          app: vllm
      spec:
        containers:
          - name: vllm
            image: vllm/vllm-openai:v0.11.0
            resources:
              requests:
                cpu: 100m
  scalePolicy:
    minReplicas: 1
    maxReplicas: 4
    metrics:
      - type: Resource
        resource:
          name: cpu
          target:
            type: Utilization
            averageUtilization: 50
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 60
`

const addonResizer0_1_0 = `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata:
  name: metrics-server
spec:
  targetRef:
    kind: Deployment
    name: metrics-server
  containerName: metrics-server
  resources:
    - name: cpu
      base: 40m
      extraPerUnit: 500u
    - name: memory
      base: 40Mi
      extraPerUnit: 4Mi
  scalingMode: NodeProportional
  source: Metrics
  estimator:
    type: Exponential
    minClusterSize: 16
  threshold: 5
  setLimits: false
  updateMode: Rollout
`

// addonResizerNew is the same AddonResizer switched to recommend-only, with
// bounds: fields 0.1.0's schema does not have.
const addonResizerNew = `
apiVersion: autoscaling.scaleplane.io/v1alpha1
kind: AddonResizer
metadata:
  name: metrics-server
spec:
  targetRef:
    kind: Deployment
    name: metrics-server
  containerName: metrics-server
  resources:
    - name: cpu
      base: 40m
      extraPerUnit: 500u
      minAllowed: 50m
      maxAllowed: "2"
    - name: memory
      base: 40Mi
      extraPerUnit: 4Mi
      maxAllowed: 2Gi
  scalingMode: NodeProportional
  source: Metrics
  estimator:
    type: Exponential
    minClusterSize: 16
  threshold: 5
  setLimits: false
  updateMode: "Off"
`

// statuses0_1_0 are statuses as the controllers write them, through the
// status subresource, valid under 0.1.0's schemas. The LeaderWorkerSet's
// observedGeneration is not in 0.1.0's schema: it is pruned.
var statuses0_1_0 = map[schema.GroupVersionResource]string{
	cronGVR: `
executionHistories:
  - ruleName: scale-up
    nextExecutionTime: "2026-11-30T07:30:00Z"
    lastScheduleTime: "2026-11-27T07:30:00Z"
    successfulExecutions:
      - scheduleTime: "2026-11-27T07:30:00Z"
        executionTime: "2026-11-27T07:30:01Z"
        appliedMinReplicas: 1000
        appliedMaxReplicas: 2000
  - ruleName: scale-down
    nextExecutionTime: "2026-11-28T10:00:00Z"
`,
	fhpaGVR: `
currentReplicas: 3
desiredReplicas: 4
lastScaleTime: "2026-11-27T07:31:00Z"
`,
	arGVR: `
observedGeneration: 1
federation: Karmada
memberClusters: 2
sizedClusters: 2
overridePolicy: metrics-server-resizer
clusters:
  - name: member1
    nodes: 24
    resources:
      requests:
        cpu: 58m
        memory: 136Mi
    state: Sized
  - name: member2
    nodes: 3
    resources:
      requests:
        cpu: 48m
        memory: 104Mi
    state: Postponed
conditions:
  - type: UpToDate
    status: "True"
    reason: Sized
    message: every member cluster is held at its recommendation
    lastTransitionTime: "2026-11-27T07:00:00Z"
`,
	lwsGVR: `
replicas: 1
readyReplicas: 1
updatedReplicas: 1
hpaPodSelector: leaderworkerset.sigs.k8s.io/name=vllm,leaderworkerset.sigs.k8s.io/worker-index=0
observedGeneration: 1
`,
}

// arStatusNew uses what 0.1.0's schema lacks: the states Capped,
// NotApplied and Recommended, and a member's recommendation.
const arStatusNew = `
observedGeneration: 2
federation: Karmada
memberClusters: 3
sizedClusters: 1
overridePolicy: metrics-server-resizer
clusters:
  - name: member1
    nodes: 24
    recommendation:
      requests:
        cpu: 58m
        memory: 136Mi
    resources:
      requests:
        cpu: 58m
        memory: 136Mi
    state: Capped
  - name: member2
    nodes: 3
    state: NotApplied
  - name: member3
    nodes: 5
    recommendation:
      requests:
        cpu: 50m
    state: Recommended
conditions:
  - type: UpToDate
    status: "False"
    reason: RecommendationOnly
    message: updateMode is Off
    lastTransitionTime: "2026-11-29T07:00:00Z"
`
