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
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Watch watches from resourceVersion with a RetryWatcher (which resumes a
// closed or expired watch with another watch, never a list), handing every
// event to handle, with the time it arrived, on one goroutine. Watch errors
// are reported on stderr. The watch ends with ctx.
func Watch(ctx context.Context, resourceVersion string, watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	handle func(watch.Event, time.Time)) error {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &cache.ListWatch{WatchFuncWithContext: watchFn})
	if err != nil {
		return fmt.Errorf("starting a watch: %w", err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Error {
					fmt.Fprintf(os.Stderr, "%s watch error: %v\n", time.Now().Format("15:04:05.000"), ev.Object)
					continue
				}
				handle(ev, time.Now())
			}
		}
	}()
	return nil
}
