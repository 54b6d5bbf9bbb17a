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
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

func TestParallelRunsEveryIndexOnce(t *testing.T) {
	var seen [100]atomic.Int32
	if err := Parallel(context.Background(), len(seen), 8, func(i int) error {
		seen[i].Add(1)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Errorf("index %d ran %d times", i, n)
		}
	}
}

func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := Parallel(context.Background(), 10000, 2, func(i int) error {
		calls.Add(1)
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("error %v; want %v", err, boom)
	}
	if n := calls.Load(); n > 100 {
		t.Errorf("%d calls after the first error; want the feeding to stop", n)
	}
}
