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

package resizer

// listGCPercent is the garbage collector's target (GOGC) while the initial
// pod list streams in. That list passes every pod of the cluster through the
// process (1.5 GB of realistic pods at 150,000) to keep a few bytes of each,
// while what it keeps grows to its largest: with the default 100 the heap
// may reach twice that before a collection, which is the start-up peak.
// Collecting at half of it more often costs some CPU for the seconds the
// list takes, and lowers the peak the memory limit must allow for. It is a
// cap (gcpace.Cap): a lower GOGC set by whoever runs the process stays.
const listGCPercent = 50
