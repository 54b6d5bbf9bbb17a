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

package benchutil

import (
	"reflect"
	"testing"
)

const exposition = `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 12
rest_client_requests_total{code="201",host="127.0.0.1:6443",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PUT"} 2
rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PUT"} 1
rest_client_requests_total_extra{method="GET"} 99
rest_client_request_duration_seconds_sum{verb="GET"} 0.5
rest_client_request_duration_seconds_count{verb="GET"} 12
process_cpu_seconds_total 1.25
process_resident_memory_bytes 4.2e+07
`

func TestParseSamples(t *testing.T) {
	tests := []struct {
		name string
		want []Sample
	}{
		{
			name: "rest_client_requests_total",
			want: []Sample{
				{Labels: map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "GET"}, Value: 12},
				{Labels: map[string]string{"code": "201", "host": "127.0.0.1:6443", "method": "POST"}, Value: 3},
				{Labels: map[string]string{"code": "200", "host": "127.0.0.1:6443", "method": "PUT"}, Value: 2},
				{Labels: map[string]string{"code": "409", "host": "127.0.0.1:6443", "method": "PUT"}, Value: 1},
			},
		},
		{
			name: "rest_client_request_duration_seconds_count",
			want: []Sample{{Labels: map[string]string{"verb": "GET"}, Value: 12}},
		},
		{
			name: "process_resident_memory_bytes",
			want: []Sample{{Labels: map[string]string{}, Value: 4.2e7}},
		},
		{
			name: "rest_client",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseSamples(exposition, tt.name)
			if err != nil {
				t.Fatalf("ParseSamples: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseSamples(%q) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestParseSamplesBadValue(t *testing.T) {
	if _, err := ParseSamples("up{job=\"a\"} NaNa\n", "up"); err == nil {
		t.Error("ParseSamples of a bad value: no error")
	}
}

func TestSumByLabel(t *testing.T) {
	samples, err := ParseSamples(exposition, "rest_client_requests_total")
	if err != nil {
		t.Fatalf("ParseSamples: %v", err)
	}
	byMethod := SumBy(samples, ByLabel("method"))
	want := map[string]float64{"GET": 12, "POST": 3, "PUT": 3}
	if !reflect.DeepEqual(byMethod, want) {
		t.Errorf("SumBy(ByLabel(method)) = %v, want %v", byMethod, want)
	}
	if got, want := Format(byMethod), "GET 12, POST 3, PUT 3"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}
	if got := SumBy(samples, ByLabel("absent")); len(got) != 0 {
		t.Errorf("SumBy(ByLabel(absent)) = %v, want none", got)
	}
}
