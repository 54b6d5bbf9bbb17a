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
	"fmt"
	"io"
	"math/big"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/inplaceresize"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// Explanation is what `explain addonresizer -o json` prints.
type Explanation struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Now        time.Time `json:"now"`
	Namespace  string    `json:"namespace"`
	Name       string    `json:"name"`
	Target     string    `json:"target"`
	Container  string    `json:"container"`
	UpdateMode string    `json:"updateMode"`
	// RecommendOnly: updateMode Off, the size is shown, nothing written.
	RecommendOnly bool `json:"recommendOnly,omitempty"`
	// ClusterSize is the count the controller last saw (status), in Unit.
	ClusterSize *int32 `json:"clusterSize,omitempty"`
	Unit        string `json:"unit"`
	Source      string `json:"source"`
	Estimator   string `json:"estimator"`
	// Units is what the estimate is computed for: the count (Linear), or
	// its bucket (Exponential), whose sequence Buckets shows up to it.
	Units     int64                 `json:"units"`
	Buckets   []int64               `json:"buckets,omitempty"`
	Threshold int64                 `json:"threshold"`
	SetLimits bool                  `json:"setLimits"`
	Resources []ResourceExplanation `json:"resources"`
	// Pending is a change held back by its delay.
	Pending *PendingExplanation `json:"pending,omitempty"`
	// Next says what the controller does next, and why.
	Next       string                            `json:"next"`
	InPlace    *scaleplanev1alpha1.InPlaceStatus `json:"inPlace,omitempty"`
	Conditions []metav1.Condition                `json:"conditions,omitempty"`
	// Pods are, with updateMode InPlace, the target's pods as the resizer
	// sees them at the size status.inPlace holds.
	Pods []PodExplanation `json:"pods,omitempty"`
	// Federation is the mode in effect (status.federation); in Karmada mode
	// Clusters are the member clusters, each with its count, estimate and
	// the value of OverridePolicy for it.
	Federation     string               `json:"federation,omitempty"`
	OverridePolicy string               `json:"overridePolicy,omitempty"`
	Clusters       []ClusterExplanation `json:"clusters,omitempty"`
	// Warnings say what could not be read, and what the explanation
	// assumed instead.
	Warnings []string `json:"warnings,omitempty"`
}

// ResourceExplanation is one managed resource's estimate and band.
type ResourceExplanation struct {
	Name         string `json:"name"`
	Base         string `json:"base"`
	ExtraPerUnit string `json:"extraPerUnit"`
	Estimate     string `json:"estimate"`
	// Arithmetic is base + extraPerUnit x units = estimate.
	Arithmetic string `json:"arithmetic"`
	// BandLow and BandHigh are the values kept as they are (the threshold
	// band around the estimate).
	BandLow  string `json:"bandLow"`
	BandHigh string `json:"bandHigh"`
	// Request and Limit are the container's now (pod template); nil when
	// not set.
	Request *string `json:"request,omitempty"`
	Limit   *string `json:"limit,omitempty"`
	// InBand tells whether the container's values are kept.
	InBand bool `json:"inBand"`
	// Capped: setLimits is false and the estimate is above the container's
	// limit; the request is sized to the limit.
	Capped bool `json:"capped,omitempty"`
	// MinAllowed and MaxAllowed are the resource's bounds; Bounded says how
	// one holds the estimate ("capped at maxAllowed 500m"), which Estimate
	// already is.
	MinAllowed string `json:"minAllowed,omitempty"`
	MaxAllowed string `json:"maxAllowed,omitempty"`
	Bounded    string `json:"bounded,omitempty"`
}

// PendingExplanation is status.pendingResize with its end.
type PendingExplanation struct {
	Direction string    `json:"direction"`
	Since     time.Time `json:"since"`
	Delay     string    `json:"delay"`
	Until     time.Time `json:"until"`
}

func newExplainCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "explain addonresizer NAME",
		Short: "Explain an AddonResizer's decision: the count, the estimate's arithmetic, the band, the delay, the next step",
		Long: `Explain an AddonResizer: the count the controller last saw (status.clusterSize), the estimate of each resource
with its arithmetic (Linear: base + extraPerUnit x count; Exponential: the count rounded up to its bucket), the
threshold band of values it keeps, a delay in progress and when it ends, what it does next and why, and with
updateMode InPlace the pods at the size. An estimate that minAllowed or maxAllowed holds says so; with updateMode
Off it says what the resizer would set, and that it writes nothing. The arithmetic is the controller's own
(pkg/resizeestimate).`,
		Example: `  kubectl scaleplane explain addonresizer metrics-server -n kube-system`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if kind := strings.ToLower(args[0]); kind != "addonresizer" && kind != "addonresizers" && kind != "ar" {
				return fmt.Errorf("explain knows addonresizer, not %q", args[0])
			}
			c, ns, err := o.complete()
			if err != nil {
				return err
			}
			if ns == "" {
				return fmt.Errorf("explain needs a namespace, not --all-namespaces")
			}
			e, err := explainAddonResizer(cmd.Context(), c, ns, args[1])
			if err != nil {
				return err
			}
			if o.output == "json" || o.output == "yaml" {
				return printObject(o.streams.Out, o.output, e)
			}
			return printExplanation(o.streams.Out, e)
		},
	}
}

func explainAddonResizer(ctx context.Context, c *Clients, ns, name string) (Explanation, error) {
	ar, err := c.Scaleplane.ScaleplaneV1alpha1().AddonResizers(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Explanation{}, err
	}
	spec, status := &ar.Spec, &ar.Status
	now := c.Clock.Now()
	e := Explanation{
		APIVersion: apiVersion, Kind: "AddonResizerExplanation", Now: now.UTC(),
		Namespace: ns, Name: name,
		Target: string(spec.TargetRef.Kind) + "/" + spec.TargetRef.Name, Container: spec.ContainerName,
		UpdateMode:    string(orDefault(spec.UpdateMode, scaleplanev1alpha1.UpdateModeRollout)),
		RecommendOnly: spec.UpdateMode == scaleplanev1alpha1.UpdateModeOff,
		ClusterSize:   status.ClusterSize, Unit: "nodes", Source: string(orDefault(spec.Source, scaleplanev1alpha1.SourceAPIServer)),
		Estimator: string(orDefault(spec.Estimator.Type, scaleplanev1alpha1.LinearEstimator)),
		Threshold: int64(min(max(spec.Threshold, 0), 100)),
		SetLimits: spec.SetLimits == nil || *spec.SetLimits,
		InPlace:   status.InPlace, Conditions: status.Conditions,
		Resources:  []ResourceExplanation{},
		Federation: string(status.Federation), OverridePolicy: status.OverridePolicy,
	}
	if spec.ScalingMode == scaleplanev1alpha1.ContainerProportional {
		e.Unit = "containers"
	} else {
		// Nodes are always counted from the API server (the resizer's
		// countSource).
		e.Source = string(scaleplanev1alpha1.SourceAPIServer)
	}
	minSize := int64(spec.Estimator.MinClusterSize)
	if minSize < 1 {
		minSize = resizeestimate.DefaultMinClusterSize
	}
	units := func(size int64) int64 {
		if e.Estimator == string(scaleplanev1alpha1.ExponentialEstimator) {
			return resizeestimate.Bucket(size, minSize)
		}
		return size
	}
	if status.Federation == scaleplanev1alpha1.FederationKarmada {
		// Sized per member cluster through the OverridePolicy; the
		// template is not written, so it is not compared.
		if e.Clusters, err = explainClusters(ctx, c, ns, ar, units, &e.Warnings); err != nil {
			return Explanation{}, err
		}
		e.Next = karmadaNext(status, e.RecommendOnly)
		var differ []string
		for _, m := range e.Clusters {
			if m.PolicyDiffers {
				differ = append(differ, m.Name)
			}
		}
		if len(differ) > 0 {
			e.Next += fmt.Sprintf("; the OverridePolicy does not set the size held for %s, which the resizer writes again", strings.Join(differ, ", "))
		}
		return e, nil
	}
	if status.ClusterSize == nil {
		e.Next = "nothing yet: the controller has not recorded a count (status.clusterSize); see the conditions"
		return e, nil
	}
	size := int64(*status.ClusterSize)
	e.Units = units(size)
	if e.Estimator == string(scaleplanev1alpha1.ExponentialEstimator) {
		for b := resizeestimate.Bucket(0, minSize); ; b = resizeestimate.Bucket(b+1, minSize) {
			e.Buckets = append(e.Buckets, b)
			if b >= e.Units || len(e.Buckets) > 64 {
				break
			}
		}
	}

	container, selector, err := targetContainer(ctx, c, ns, spec)
	if err != nil {
		e.Next = fmt.Sprintf("nothing: %v", err)
	}
	if container != nil && spec.UpdateMode == scaleplanev1alpha1.UpdateModeInPlace {
		// The in-place decision compares with the size the pods are held
		// at, not the template (the resizer's inPlaceView).
		if status.InPlace != nil {
			container = container.DeepCopy()
			var managed []corev1.ResourceName
			for _, r := range spec.Resources {
				managed = append(managed, r.Name)
			}
			inplaceresize.HeldView(&container.Resources, managed, status.InPlace.Resources, e.SetLimits)
		}
		if e.Pods, e.Warnings, err = explainPods(ctx, c, ns, ar, selector); err != nil {
			return Explanation{}, err
		}
	}
	var changes, raises []string
	for _, r := range spec.Resources {
		bounded := resizeestimate.Estimate(r, e.Units)
		want := bounded.Value
		exact := resizeestimate.Sum(r, e.Units)
		lo, hi := band(r.Name, want, e.Threshold)
		x := ResourceExplanation{
			Name: string(r.Name), Base: r.Base.String(), ExtraPerUnit: r.ExtraPerUnit.String(), Estimate: want.String(),
			Arithmetic: fmt.Sprintf("%s + %s x %d = %s", r.Base.String(), r.ExtraPerUnit.String(), e.Units, exact.String()),
			BandLow:    lo, BandHigh: hi,
		}
		if exact.Cmp(bounded.Estimate) != 0 {
			x.Arithmetic += ", rounded up to " + bounded.Estimate.String()
		}
		explainBounds(&x, r, bounded)
		if container != nil {
			// The resizer's decide, resource by resource: a missing
			// request is its limit; with setLimits false an estimate
			// above the limit is capped to it; a value out of the band
			// (or missing) is set to the estimate.
			req, hasReq := container.Resources.Requests[r.Name]
			lim, hasLim := container.Resources.Limits[r.Name]
			if hasReq {
				x.Request = ptrString(req.String())
			}
			if hasLim {
				x.Limit = ptrString(lim.String())
			}
			if !hasReq && hasLim {
				req, hasReq = lim, true
			}
			target := want
			if !e.SetLimits && hasLim && want.Cmp(lim) > 0 {
				x.Capped, target = true, lim.DeepCopy()
			}
			out := !hasReq || !resizeestimate.WithinThreshold(r.Name, req, target, e.Threshold)
			if e.SetLimits {
				out = out || !hasLim || !resizeestimate.WithinThreshold(r.Name, lim, target, e.Threshold)
			}
			x.InBand = !out
			if out {
				changes = append(changes, fmt.Sprintf("%s to %s", r.Name, target.String()))
				if !hasReq || target.Cmp(req) > 0 || e.SetLimits && (!hasLim || target.Cmp(lim) > 0) {
					raises = append(raises, string(r.Name))
				}
			}
		}
		e.Resources = append(e.Resources, x)
	}
	if container == nil {
		return e, nil
	}
	if e.RecommendOnly {
		e.Next = offNext(spec.ContainerName, e.Threshold, changes)
		return e, nil
	}
	if len(changes) == 0 {
		e.Next = fmt.Sprintf("nothing: every managed resource of container %s is within %d%% of its estimate", spec.ContainerName, e.Threshold)
		return e, nil
	}
	dir, delay := scaleplanev1alpha1.ResizeDown, durationOf(spec.ScaleDownDelay)
	if len(raises) > 0 {
		dir, delay = scaleplanev1alpha1.ResizeUp, durationOf(spec.ScaleUpDelay)
	}
	what := fmt.Sprintf("resize container %s (%s): %s", spec.ContainerName, strings.ToLower(string(dir)), strings.Join(changes, ", "))
	if p := status.PendingResize; p != nil && p.Direction == dir {
		until := p.Since.Add(delay)
		e.Pending = &PendingExplanation{Direction: string(p.Direction), Since: p.Since.UTC(), Delay: delay.String(), Until: until.UTC()}
		if now.Before(until) {
			e.Next = fmt.Sprintf("%s at %s (in %s): scale-%s delay %s since %s", what, until.UTC().Format(time.RFC3339), duration.HumanDuration(until.Sub(now)), strings.ToLower(string(dir)), delay, p.Since.UTC().Format(time.RFC3339))
			return e, nil
		}
	} else if delay > 0 {
		e.Next = fmt.Sprintf("%s after its scale-%s delay of %s, from the sync that sees it (no delay recorded in status yet)", what, strings.ToLower(string(dir)), delay)
		return e, nil
	}
	e.Next = what + " at its next sync: the estimate is out of the band and no delay holds it"
	return e, nil
}

// band returns the smallest and largest values the threshold keeps around
// the estimate: resizeestimate.WithinThreshold holds for a exactly when
// ceil((100-T) e / 100) <= a <= ceil((101+T) e / 100) - 1, in millicores
// (cpu) or bytes.
func band(name corev1.ResourceName, estimate resource.Quantity, threshold int64) (string, string) {
	e := big.NewInt(resizeestimate.ScaledValue(name, estimate))
	if e.Sign() == 0 {
		return "0", "0"
	}
	ceilDiv := func(n *big.Int) *big.Int {
		q, m := new(big.Int).QuoRem(n, big.NewInt(100), new(big.Int))
		if m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		return q
	}
	lo := ceilDiv(new(big.Int).Mul(e, big.NewInt(100-threshold)))
	hi := ceilDiv(new(big.Int).Mul(e, big.NewInt(101+threshold)))
	hi.Sub(hi, big.NewInt(1))
	format := func(v *big.Int) string {
		if name == corev1.ResourceCPU {
			return resource.NewMilliQuantity(v.Int64(), resource.DecimalSI).String()
		}
		return resource.NewQuantity(v.Int64(), estimate.Format).String()
	}
	return format(lo), format(hi)
}

// targetContainer returns the AddonResizer's container in its target's pod
// template, and the target's pod selector.
func targetContainer(ctx context.Context, c *Clients, ns string, spec *scaleplanev1alpha1.AddonResizerSpec) (*corev1.Container, *metav1.LabelSelector, error) {
	tmpl, selector, i, err := targetTemplate(ctx, c, ns, spec)
	if err != nil {
		return nil, nil, err
	}
	return &tmpl.Spec.Containers[i], selector, nil
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

func durationOf(d *metav1.Duration) time.Duration {
	if d == nil || d.Duration < 0 {
		return 0
	}
	return d.Duration
}

func ptrString(s string) *string { return &s }

// resizerDetails is who-scales' one-line summary of an AddonResizer.
func resizerDetails(size *int32, pending *scaleplanev1alpha1.PendingResize) string {
	if size == nil {
		return "no count recorded yet"
	}
	s := fmt.Sprintf("count %d", *size)
	if pending != nil {
		s += fmt.Sprintf("; a %s resize pending since %s", strings.ToLower(string(pending.Direction)), pending.Since.UTC().Format(time.RFC3339))
	}
	return s + " (kubectl scaleplane explain addonresizer for the arithmetic)"
}

// printExplanation prints the explanation for people.
func printExplanation(w io.Writer, e Explanation) error {
	var b strings.Builder
	fmt.Fprintf(&b, "AddonResizer %s/%s sizes container %s of %s (updateMode %s).\n", e.Namespace, e.Name, e.Container, e.Target, e.UpdateMode)
	if e.RecommendOnly {
		fmt.Fprintf(&b, "%s\n", offBanner)
	}
	karmada := e.Federation == string(scaleplanev1alpha1.FederationKarmada)
	switch {
	case karmada:
		fmt.Fprintf(&b, "Count:     per member cluster, its Cluster's node count (below)\n")
	case e.ClusterSize == nil:
		fmt.Fprintf(&b, "Count:     none recorded yet (%s, from %s)\n", e.Unit, e.Source)
	default:
		fmt.Fprintf(&b, "Count:     %d %s (from %s, as the controller last saw it)\n", *e.ClusterSize, e.Unit, e.Source)
	}
	switch {
	case karmada && e.Estimator == string(scaleplanev1alpha1.ExponentialEstimator):
		fmt.Fprintf(&b, "Estimator: Exponential: base + extraPerUnit x each cluster's count rounded up to its bucket (UNITS)\n")
	case karmada:
		fmt.Fprintf(&b, "Estimator: %s: base + extraPerUnit x each cluster's count (UNITS)\n", e.Estimator)
	case e.Buckets != nil:
		fmt.Fprintf(&b, "Estimator: Exponential: the count rounded up to its bucket, %d (buckets %s)\n", e.Units, joinInts(e.Buckets))
	default:
		fmt.Fprintf(&b, "Estimator: %s: base + extraPerUnit x %d\n", e.Estimator, e.Units)
	}
	fmt.Fprintf(&b, "Threshold: %d%% (values in the band are kept); setLimits %v\n\n", e.Threshold, e.SetLimits)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(e.Resources) > 0 && e.ClusterSize != nil {
		t := newTable(w, "RESOURCE", "ESTIMATE", "ARITHMETIC", "BAND", "REQUEST", "LIMIT", "IN BAND")
		for _, r := range e.Resources {
			inBand := fmt.Sprint(r.InBand)
			if r.Capped {
				inBand += " (capped at the limit)"
			}
			if r.Bounded != "" {
				inBand += " (estimate " + r.Bounded + ")"
			}
			t.row(r.Name, r.Estimate, r.Arithmetic, r.BandLow+" .. "+r.BandHigh, deref(r.Request), deref(r.Limit), inBand)
		}
		if err := t.flush(); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	b.Reset()
	if p := e.Pending; p != nil {
		fmt.Fprintf(&b, "Pending:   %s since %s, delay %s, until %s\n", p.Direction, p.Since.Format(time.RFC3339), p.Delay, p.Until.Format(time.RFC3339))
	}
	if ip := e.InPlace; ip != nil {
		fmt.Fprintf(&b, "In place:  %d of %d running pods at the size\n", ip.AtSize, ip.Pods)
	}
	fmt.Fprintf(&b, "Next:      %s\n", e.Next)
	for _, c := range e.Conditions {
		fmt.Fprintf(&b, "Condition: %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	if len(e.Pods) > 0 {
		if err := printPods(w, e); err != nil {
			return err
		}
	}
	if e.Federation == string(scaleplanev1alpha1.FederationKarmada) {
		if err := printClusters(w, e); err != nil {
			return err
		}
	}
	for _, warning := range e.Warnings {
		if _, err := fmt.Fprintf(w, "WARNING: %s\n", warning); err != nil {
			return err
		}
	}
	return nil
}

// karmadaNext says how the member clusters stand. Without an OverridePolicy
// nothing holds them (it could not be written, or no member holds a size of
// its own), and the UpToDate condition says why.
func karmadaNext(status *scaleplanev1alpha1.AddonResizerStatus, recommendOnly bool) string {
	if recommendOnly {
		return karmadaOffNext(status)
	}
	if status.OverridePolicy != "" {
		return fmt.Sprintf("per member cluster: %d of %d held at their recommendation by OverridePolicy %s; see each cluster's state",
			ptrInt(status.SizedClusters), ptrInt(status.MemberClusters), status.OverridePolicy)
	}
	next := fmt.Sprintf("per member cluster: %d of %d at their recommendation; no OverridePolicy holds a size, so every member runs the template's resources",
		ptrInt(status.SizedClusters), ptrInt(status.MemberClusters))
	if c := meta.FindStatusCondition(status.Conditions, scaleplanev1alpha1.ConditionUpToDate); c != nil && c.Status != metav1.ConditionTrue {
		next += fmt.Sprintf(" (UpToDate %s, %s: %s)", c.Status, c.Reason, c.Message)
	}
	return next
}

func ptrInt(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func deref(s *string) string {
	if s == nil {
		return "<none>"
	}
	return *s
}

func joinInts(v []int64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}
