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

import (
	"testing"

	"github.com/scaleplane/scaleplane/test/integration/cronscaler/scenarios"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// The cron scenarios on scaleplane's own CRD; the karmadacrd package runs
// them (all but the target kinds, which do not depend on the schema) on
// Karmada's.

func TestEveryTargetKind(t *testing.T) { scenarios.EveryTargetKind(t, framework.Get(t)) }

func TestRestartAppliesMissedSlotOnce(t *testing.T) {
	scenarios.RestartAppliesMissedSlotOnce(t, framework.Get(t))
}

func TestResumeDoesNotReplay(t *testing.T) { scenarios.ResumeDoesNotReplay(t, framework.Get(t)) }

func TestScheduleChangeKeepsFiring(t *testing.T) {
	scenarios.ScheduleChangeKeepsFiring(t, framework.Get(t))
}

func TestFirstSightRunsMissedSlot(t *testing.T) {
	scenarios.FirstSightRunsMissedSlot(t, framework.Get(t))
}

func TestTransientTargetErrorIsRecorded(t *testing.T) {
	scenarios.TransientTargetErrorIsRecorded(t, framework.Get(t))
}

func TestDuplicateRuleNames(t *testing.T) { scenarios.DuplicateRuleNames(t, framework.Get(t)) }

func TestInheritedFiringNotReapplied(t *testing.T) {
	scenarios.InheritedFiringNotReapplied(t, framework.Get(t))
}

func TestAnotherStatusWriterReported(t *testing.T) {
	scenarios.AnotherStatusWriterReported(t, framework.Get(t))
}

func TestControllersTogether(t *testing.T) { scenarios.ControllersTogether(t, framework.Get(t)) }
