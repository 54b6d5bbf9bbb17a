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

// Package resourceoverride reads back what Karmada plaintext overriders set
// in a workload's container resources: the form the resizer writes them in
// (JSON-patch add of .../resources/requests/NAME, or of the whole requests
// or limits map), and replace, which sets them the same way. The resizer
// reads its stored policy with it to say in status what the members run,
// and `kubectl scaleplane explain` to say what the policy sets: one reader,
// so the two cannot disagree.
package resourceoverride

import (
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	policyv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/policy/v1alpha1"
)

// containersPath is the JSON pointer of an apps/v1 workload's containers
// (Deployment, StatefulSet and DaemonSet alike).
const containersPath = "/spec/template/spec/containers/"

// ContainerPath is the JSON pointer of the i-th container.
func ContainerPath(i int) string {
	return containersPath + strconv.Itoa(i)
}

// Read returns the requests and limits ops set in container i, or in any
// container when i < 0 (where the template, and so the index, is not
// known). Nil when they set none. Remove operations and values that are not
// quantities are left out.
func Read(ops []policyv1alpha1.PlaintextOverrider, i int) *corev1.ResourceRequirements {
	var out corev1.ResourceRequirements
	found := false
	for _, op := range ops {
		field, name, ok := resourcesField(op.Path, i)
		if !ok || op.Operator == policyv1alpha1.OverriderOpRemove {
			continue
		}
		list := &out.Requests
		if field == "limits" {
			list = &out.Limits
		}
		for n, q := range values(op, name) {
			if *list == nil {
				*list = corev1.ResourceList{}
			}
			(*list)[corev1.ResourceName(n)] = q
			found = true
		}
	}
	if !found {
		return nil
	}
	return &out
}

// resourcesField splits a path under container i's resources into its
// field (requests or limits) and resource name ("" for the whole map).
func resourcesField(path string, i int) (field, name string, ok bool) {
	rest, ok := strings.CutPrefix(path, containersPath)
	if !ok {
		return "", "", false
	}
	index, rest, _ := strings.Cut(rest, "/")
	if i >= 0 && index != strconv.Itoa(i) {
		return "", "", false
	}
	rest, ok = strings.CutPrefix(rest, "resources/")
	if !ok {
		return "", "", false
	}
	field, name, _ = strings.Cut(rest, "/")
	if field != "requests" && field != "limits" {
		return "", "", false
	}
	return field, strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~"), true
}

// values decodes an op's value: one quantity for a named resource, a map of
// them for the whole field.
func values(op policyv1alpha1.PlaintextOverrider, name string) map[string]resource.Quantity {
	raw := map[string]string{}
	if name != "" {
		var v string
		if json.Unmarshal(op.Value.Raw, &v) != nil {
			return nil
		}
		raw[name] = v
	} else if json.Unmarshal(op.Value.Raw, &raw) != nil {
		return nil
	}
	out := make(map[string]resource.Quantity, len(raw))
	for n, v := range raw {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[n] = q
		}
	}
	return out
}
