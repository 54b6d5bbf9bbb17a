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

package karmadacrd

import (
	"testing"

	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
	"github.com/scaleplane/scaleplane/test/integration/cronscaler/scenarios"
	"github.com/scaleplane/scaleplane/test/integration/framework"
)

// TestSchemaIsKarmadas checks the premise: the installed CRD stores neither
// of scaleplane's added fields.
func TestSchemaIsKarmadas(t *testing.T) {
	if got := scenarios.StoredFields(t, framework.Get(t)); got != (cronscaler.StoredFields{}) {
		t.Fatalf("the CRD stores %+v; want neither field, as Karmada's", got)
	}
}

// Every scenario but the target kinds (which do not depend on the schema);
// all but the restart run on a fake clock and take seconds.

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

func TestAnotherStatusWriterReported(t *testing.T) {
	scenarios.AnotherStatusWriterReported(t, framework.Get(t))
}
