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
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	scaleplanev1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/scaleplane/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/resizeestimate"
)

// The nanny's arithmetic, written from Addon Resizer 1.8's source:
// kubernetes/autoscaler, tag addon-resizer-1.8.24 (commit a7a842b55d19),
// addon-resizer/nanny/estimator.go, unchanged in these lines since 1.8.4,
// and nanny_lib.go.

// nannyBucket is ExponentialEstimator.scale's size (estimator.go:71-76):
// from minClusterSize, n becomes uint64(float64(n)*1.5 + 0.01) while it is
// below the cluster size.
func nannyBucket(size, minClusterSize uint64) uint64 {
	n := minClusterSize
	for n < size {
		n = uint64(float64(n)*1.5 + 0.01)
	}
	return n
}

// nannyEstimate is calculateResources (estimator.go:114-128) through
// computeResourceOverheadValueString (98-112): the extra is printed by
// Quantity.String, read back as a float and a suffix, multiplied by the
// size, printed with %f and the suffix, parsed, and added to the base.
// Requests and limits are both set to it.
func nannyEstimate(base, extra resource.Quantity, size uint64) resource.Quantity {
	var number float64
	var suffix string
	_, _ = fmt.Sscanf(extra.String(), "%f%s", &number, &suffix)
	out := base.DeepCopy()
	out.Add(resource.MustParse(fmt.Sprintf("%f%s", number*float64(size), suffix)))
	return out
}

// nannyKeeps is checkResource's band (nanny_lib.go:52-71): actual/expected
// rounded down to two decimals, kept within [(100-T)/100, (100+T)/100],
// exactly (inf.Dec).
func nannyKeeps(actual, expected resource.Quantity, threshold int64) bool {
	a, _ := new(big.Rat).SetString(actual.AsDec().String())
	e, _ := new(big.Rat).SetString(expected.AsDec().String())
	hundredths := new(big.Int).Quo(new(big.Int).Mul(a.Num(), new(big.Int).Mul(e.Denom(), big.NewInt(100))), new(big.Int).Mul(a.Denom(), e.Num()))
	return hundredths.Cmp(big.NewInt(100-threshold)) >= 0 && hundredths.Cmp(big.NewInt(100+threshold)) <= 0
}

// nannyBand is the smallest and largest whole value (millicores for cpu,
// bytes otherwise) nannyKeeps keeps around expected.
func nannyBand(name corev1.ResourceName, expected resource.Quantity, threshold int64) (int64, int64) {
	e, _ := new(big.Rat).SetString(expected.AsDec().String())
	if name == corev1.ResourceCPU {
		e.Mul(e, big.NewRat(1000, 1))
	}
	ceil := func(r *big.Rat) int64 {
		q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		if m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		return q.Int64()
	}
	lo := ceil(new(big.Rat).Mul(e, big.NewRat(100-threshold, 100)))
	hi := ceil(new(big.Rat).Mul(e, big.NewRat(101+threshold, 100))) - 1
	return lo, hi
}

func wholeQuantity(name corev1.ResourceName, v int64) *resource.Quantity {
	if name == corev1.ResourceCPU {
		return resource.NewMilliQuantity(v, resource.DecimalSI)
	}
	return resource.NewQuantity(v, resource.BinarySI)
}

// sameSizesNodes are the cluster sizes compared: the edges of the
// exponential buckets from 16 (16, 24, 36, 54, 81, 121, ...) and of the
// chart's from 100, up to 5,000 nodes.
var sameSizesNodes = []uint64{1, 2, 3, 15, 16, 17, 24, 25, 36, 37, 100, 101, 121, 150, 151, 1000, 5000}

var pollPeriod = regexp.MustCompile(`--poll-period=[0-9]+`)

// migratedResizers are the AddonResizers migrate writes for the three
// transcribed shapes, and for each also with the linear estimator and with
// --scaling-mode=container-proportional (the same flags otherwise).
func migratedResizers(t *testing.T) []*scaleplanev1alpha1.AddonResizer {
	t.Helper()
	var out []*scaleplanev1alpha1.AddonResizer
	for _, shape := range migrateShapes {
		data, err := os.ReadFile(shapePath(shape))
		if err != nil {
			t.Fatal(err)
		}
		for _, variant := range []struct{ suffix, from, to string }{
			{"", "", ""},
			{"-linear", "--estimator=exponential", "--estimator=linear"},
			{"-containers", "--poll-period=", "--scaling-mode=container-proportional"},
		} {
			text := string(data)
			if variant.from == "--poll-period=" {
				text = pollPeriod.ReplaceAllString(text, variant.to)
			} else if variant.from != "" {
				text = strings.ReplaceAll(text, variant.from, variant.to)
			}
			{
				// Pods are not counted by --use-metrics (refused); count
				// containers from the API, as the nanny does without it.
				if strings.Contains(variant.to, "container-proportional") {
					text = strings.ReplaceAll(text, "--use-metrics=true", "--use-metrics=false")
				}
			}
			m := &migrateOptions{options: &options{}, file: "-"}
			m.streams.In = strings.NewReader(text)
			src, err := m.readManifest("kube-system", "")
			if err != nil {
				t.Fatal(err)
			}
			_, ars, err := planMigration(context.Background(), src, false, false, "")
			if err != nil {
				t.Fatalf("%s%s: %v", shape, variant.suffix, err)
			}
			for _, ar := range ars {
				ar.Name += variant.suffix
				out = append(out, ar)
			}
		}
	}
	return out
}

// TestSameSizesAsAddonResizer18: for every AddonResizer migrate writes from
// the real shapes (both estimators, both scaling modes) and every cluster
// size from 1 to 5,000 nodes (or containers) in sameSizesNodes, the plugin's
// explain (the resizer's estimate and decision, pkg/resizeestimate) gives:
// the nanny's units (bucket and minClusterSize); the nanny's estimate,
// rounded up to a whole millicore or byte where the nanny's is finer (the
// scheduler and the kubelet read millicores rounded up, so the pod gets
// the same); requests and limits both (setLimits); the nanny's own size
// within the band, so the AddonResizer does not resize an add-on the
// nanny sized at that count; and the band edges the nanny keeps, exactly.
func TestSameSizesAsAddonResizer18(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	fractional, edges := 0, 0
	for _, ar := range migratedResizers(t) {
		for _, n := range sameSizesNodes {
			units := n
			if ar.Spec.Estimator.Type == scaleplanev1alpha1.ExponentialEstimator {
				units = nannyBucket(n, uint64(ar.Spec.Estimator.MinClusterSize))
			}
			nannySize := corev1.ResourceList{}
			for _, r := range ar.Spec.Resources {
				nannySize[r.Name] = nannyEstimate(r.Base, r.ExtraPerUnit, units)
			}
			// The add-on as the nanny left it at this count.
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ar.Spec.TargetRef.Name},
				Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: ar.Spec.ContainerName, Resources: corev1.ResourceRequirements{Requests: nannySize, Limits: nannySize.DeepCopy()},
				}}}}}}
			obj := ar.DeepCopy()
			obj.Status.ClusterSize = ptr.To(int32(n))
			var e Explanation
			out := run(t, now, []runtime.Object{dep}, []runtime.Object{obj}, "explain", "addonresizer", ar.Name, "-n", "kube-system", "-o", "json")
			if err := json.Unmarshal([]byte(out), &e); err != nil {
				t.Fatal(err)
			}
			where := fmt.Sprintf("%s at %d %ss", ar.Name, n, unitOf(ar.Spec.ScalingMode))
			if e.Units != int64(units) {
				t.Errorf("%s: units %d, the nanny's %d", where, e.Units, units)
			}
			if !e.SetLimits {
				t.Errorf("%s: requests only; the nanny sets requests and limits", where)
			}
			for _, x := range e.Resources {
				name := corev1.ResourceName(x.Name)
				theirs, ours := nannySize[name], resource.MustParse(x.Estimate)
				rounded := theirs.DeepCopy()
				rounded.RoundUp(resizeestimate.ScaleOf(name))
				if ours.Cmp(rounded) != 0 {
					t.Errorf("%s: %s estimate %s, the nanny's %s", where, name, ours.String(), theirs.String())
				}
				if rounded.Cmp(theirs) != 0 {
					fractional++
				}
				if !x.InBand {
					t.Errorf("%s: %s at the nanny's own size %s is out of the band: the AddonResizer would resize it", where, name, theirs.String())
				}
				// The band: the values kept. Where the nanny's estimate is
				// whole, the same values exactly; where it is finer (half a
				// millicore), the AddonResizer's band is around the rounded
				// estimate, and each edge moves by at most one millicore.
				lo, hi := nannyBand(name, theirs, int64(ar.Spec.Threshold))
				for _, v := range []int64{lo, hi, lo - 1, hi + 1} {
					if q := wholeQuantity(name, v); v >= 0 && nannyKeeps(*q, theirs, int64(ar.Spec.Threshold)) != (v == lo || v == hi) {
						t.Fatalf("%s: the band model is wrong at %s", where, q.String())
					}
				}
				ourLo, ourHi := band(name, ours, int64(ar.Spec.Threshold))
				spLo, spHi := resizeestimate.ScaledValue(name, resource.MustParse(ourLo)), resizeestimate.ScaledValue(name, resource.MustParse(ourHi))
				switch {
				case rounded.Cmp(theirs) == 0 && (spLo != lo || spHi != hi):
					t.Errorf("%s: %s band %d..%d, the nanny's %d..%d", where, name, spLo, spHi, lo, hi)
				case spLo-lo > 1 || lo-spLo > 1 || spHi-hi > 1 || hi-spHi > 1:
					t.Errorf("%s: %s band %d..%d, the nanny's %d..%d (estimate %s, the nanny's %s): more than a unit apart", where, name, spLo, spHi, lo, hi, ours.String(), theirs.String())
				case spLo != lo || spHi != hi:
					edges++
					if edges <= 3 {
						t.Logf("%s: %s band %s..%s, the nanny's %s..%s (estimate %s, the nanny's %s)", where, name, ourLo, ourHi,
							wholeQuantity(name, lo).String(), wholeQuantity(name, hi).String(), ours.String(), theirs.String())
					}
				}
			}
		}
	}
	t.Logf("%d resource estimates finer than a millicore; at %d of them a band edge moved by one millicore", fractional, edges)
	// 0.5m per node at an odd count: the nanny writes 40.5m-style sizes.
	if fractional == 0 {
		t.Errorf("no nanny estimate finer than a millicore was compared; the rounding is untested")
	}
}

// TestSameBucketsAsAddonResizer18: resizeestimate.Bucket is the nanny's
// float loop for every size up to 5,000 and every minClusterSize from 2
// (the nanny's least) to 200.
func TestSameBucketsAsAddonResizer18(t *testing.T) {
	for m := uint64(2); m <= 200; m++ {
		for n := uint64(0); n <= 5000; n++ {
			if got, want := resizeestimate.Bucket(int64(n), int64(m)), nannyBucket(n, m); got != int64(want) {
				t.Fatalf("size %d from %d: bucket %d, the nanny's %d", n, m, got, want)
			}
		}
	}
}

// TestNannyRewritesEveryManagedResource shows the one decision that
// differs, for the guide: when one resource leaves the band, the nanny
// sets every managed resource to its estimate (shouldOverwriteResources,
// nanny_lib.go:76-88, then the whole estimate is written), while the
// AddonResizer changes the resources out of the band only, and leaves one
// within the threshold as it is. Both end within the threshold of the
// estimate; the nanny's is exactly at it.
func TestNannyRewritesEveryManagedResource(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	// kubernetes-addons-metrics-server: 40m + 0.5m, 40Mi + 4Mi, exponential
	// from 16, 5%.
	var ar *scaleplanev1alpha1.AddonResizer
	for _, a := range migratedResizers(t) {
		if a.Name == "metrics-server-v0.5.2" {
			ar = a
		}
	}
	// 20 nodes: bucket 24, cpu 52m, memory 136Mi. The container has cpu
	// 40m (out) and memory 132Mi (97%: in).
	size := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("40m"), corev1.ResourceMemory: resource.MustParse("132Mi")}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ar.Spec.TargetRef.Name},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: ar.Spec.ContainerName, Resources: corev1.ResourceRequirements{Requests: size, Limits: size.DeepCopy()}}}}}}}
	obj := ar.DeepCopy()
	obj.Status.ClusterSize = ptr.To[int32](20)
	var e Explanation
	if err := json.Unmarshal([]byte(run(t, now, []runtime.Object{dep}, []runtime.Object{obj}, "explain", "addonresizer", ar.Name, "-n", "kube-system", "-o", "json")), &e); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Next, "cpu to 52m") || strings.Contains(e.Next, "memory to") {
		t.Errorf("the AddonResizer: %s; want cpu only", e.Next)
	}
	memEstimate := nannyEstimate(ar.Spec.Resources[1].Base, ar.Spec.Resources[1].ExtraPerUnit, nannyBucket(20, 16))
	if !nannyKeeps(size[corev1.ResourceMemory], memEstimate, 5) || memEstimate.String() != "136Mi" {
		t.Errorf("memory %s should be within 5%% of the nanny's %s", "132Mi", memEstimate.String())
	}
	// The nanny: cpu is out, so it writes its whole estimate, memory 136Mi
	// included.
}

// TestNannyModelAgreesWithAddonResizersOwnTests: the transcription above
// gives the values Addon Resizer's own tests expect (nanny/estimator_test.go
// at addon-resizer-1.8.24: lessThanMilliEstimator at 3 nodes 0.3015,
// exponentialLessThanMilliEstimator at 3 nodes 0.308, fullEstimator 24.3 and
// 54Mi at 17 nodes, exponentialSmallClusterEstimator from 5 at 1 node 12.5m
// and 72.5Mi), and the bucket sequence from 16.
func TestNannyModelAgreesWithAddonResizersOwnTests(t *testing.T) {
	q := resource.MustParse
	for _, c := range []struct {
		base, extra string
		size, minCS uint64
		exponential bool
		want        string
	}{
		{"0.3", "0.5m", 3, 0, false, "0.3015"},
		{"0.3", "0.5m", 3, 16, true, "0.308"},
		{"0.3", "1", 17, 16, true, "24.3"},
		{"30Mi", "1Mi", 17, 16, true, "54Mi"},
		{"10m", "0.5m", 1, 5, true, "12.5m"},
		{"50Mi", "4.5Mi", 1, 5, true, "72.5Mi"},
	} {
		units := c.size
		if c.exponential {
			units = nannyBucket(c.size, c.minCS)
		}
		if got := nannyEstimate(q(c.base), q(c.extra), units); got.Cmp(q(c.want)) != 0 {
			t.Errorf("%s + %s x %d: %s, Addon Resizer's tests want %s", c.base, c.extra, units, got.String(), c.want)
		}
	}
	var seq []uint64
	for b := nannyBucket(0, 16); b <= 5000; b = nannyBucket(b+1, 16) {
		seq = append(seq, b)
	}
	if got := fmt.Sprint(seq); got != "[16 24 36 54 81 121 181 271 406 609 913 1369 2053 3079 4618]" {
		t.Errorf("buckets from 16: %s", got)
	}
}
