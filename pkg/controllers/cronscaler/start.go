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

import "time"

// processStart is when this process started: the line between what it did
// and what a predecessor (an earlier leader, or this binary before a
// restart) may have done and not recorded. It is plan state of the process,
// not of an object, set once when the controller is built, just before the
// caches sync and the workers start, and never changed.
//
// Invariants (docs/cron-scaler.md, "Exactly once" and "Two cron
// controllers"):
//   - A slot before it is inherited (see inherited): a predecessor may have
//     applied it and died before recording it, so the object is read fresh
//     before it is decided (see readBeforeInherited) and its target's
//     managedFields are checked before it is applied (see priorWrite).
//   - A status write of the cron-scaler's own field manager timed no later
//     than its second is a predecessor's, not a second controller's (see
//     predecessorWrote): managedFields keep seconds, and a new leader's
//     first list may be older than its predecessor's last status write.
//   - A change of the object made before it was not watched by this
//     process (cronplan.From.Unwatched), and planning takes it from the
//     object's timeline instead of a replan mark.
type processStart struct {
	at time.Time
}

// inherited says whether a slot came before this process started: a
// predecessor may have applied it.
func (s processStart) inherited(slot time.Time) bool {
	return slot.Before(s.at)
}

// predecessorWrote says whether a status write of the cron-scaler's own
// field manager timed at (in managedFields, whole seconds; zero when
// unknown) may be a predecessor's: it was made no later than the second
// this process started.
func (s processStart) predecessorWrote(at time.Time) bool {
	return !at.IsZero() && !at.After(s.at.Truncate(time.Second))
}

// time is when this process started, as planning takes it (see
// cronplan.Object).
func (s processStart) time() time.Time {
	return s.at
}
