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

package main

import "time"

// The measurement helpers that hpagen shares with the other benchmarks are
// in test/bench/internal/benchutil; these are hpagen's own.

// mutatingKey names a mutating apiserver_request_total sample as
// "VERB resource[/subresource]", and skips reads.
func mutatingKey(l map[string]string) string {
	switch l["verb"] {
	case "POST", "PUT", "PATCH", "DELETE", "APPLY":
	default:
		return ""
	}
	key := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		key += "/" + l["subresource"]
	}
	return key
}

// readKey names a read apiserver_request_total sample as
// "VERB resource[/subresource]", and skips writes and watches.
func readKey(l map[string]string) string {
	switch l["verb"] {
	case "GET", "LIST":
	default:
		return ""
	}
	key := l["verb"] + " " + l["resource"]
	if l["subresource"] != "" {
		key += "/" + l["subresource"]
	}
	return key
}

// pct returns the p-th percentile of sorted (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	if i > 0 {
		i--
	}
	return sorted[i]
}
