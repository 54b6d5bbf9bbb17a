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
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1alpha1 "github.com/scaleplane/scaleplane/pkg/apis/autoscaling/v1alpha1"
	"github.com/scaleplane/scaleplane/pkg/cronplan"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// fireSync fires the object's due rules and returns when to sync it again
// (0: only on change). A sync that wrote (or tried to write) the target
// leaves its status in memory and returns record true: the caller writes it
// with record, after the other firings due (targets first). Any other sync
// writes its status itself.
func (c *Controller) fireSync(ctx context.Context, key cache.ObjectName) (time.Duration, bool, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "cronFederatedHPA", key)
	ctx = klog.NewContext(ctx, logger)
	obj, err := c.crons.get(key)
	if apierrors.IsNotFound(err) {
		c.memory.forget(key)
		c.deferred.forget(key)
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	c.reportOtherWriters(logger, obj)
	obj, base, fresh, err := c.baseOf(ctx, obj)
	if err != nil || obj == nil {
		return 0, false, err
	}
	if dups := duplicateRuleNames(obj.Spec.Rules); len(dups) > 0 {
		return 0, false, c.refuse(ctx, obj, base, dups)
	}
	c.memory.accept(key, obj.UID)
	if len(obj.Spec.Rules) == 0 {
		return 0, false, c.writeStatus(ctx, obj, dormantStatus(base))
	}
	now := c.clock.Now()

	marks := c.memory.takeReplan(key, obj.UID)
	plans := c.plan(obj, base, marks, now)
	if !fresh && c.inherits(plans) {
		live, err := c.readBeforeInherited(ctx, obj)
		if err != nil {
			return 0, false, err
		}
		if live != nil {
			obj, base = live, live.Status.DeepCopy()
			plans = c.plan(obj, base, marks, now)
		}
	}
	wrote := c.fire(ctx, obj, plans, now)
	record := false
	if wrote {
		// The histories planned here are the only record of the firings
		// until record writes them; the next sync plans from them.
		c.memory.setPending(key, obj.UID, c.plannedStatus(plans).ExecutionHistories, true, marks)
		record = true
	} else if err := c.updateStatus(ctx, obj, plans, marks); err != nil {
		// Retried with backoff; the next firing is kept all the same. The
		// replan marks are kept with the plan made from them, in the
		// pending status, or given back when that plan is dropped (see
		// updateStatus): planning again without them, from the time of
		// the retry, would skip a slot in between.
		d, _ := nextRequeue(plans, c.clock.Now())
		return d, false, err
	}
	d, ok := nextRequeue(plans, c.clock.Now())
	if !ok {
		return 0, record, nil
	}
	logger.V(4).Info("Requeued until the next firing", "after", d)
	return d, record, nil
}

// duplicateRuleNames returns the names used by more than one rule.
func duplicateRuleNames(rules []autoscalingv1alpha1.CronFederatedHPARule) []string {
	seen := make(map[string]int, len(rules))
	var dups []string
	for i := range rules {
		seen[rules[i].Name]++
		if seen[rules[i].Name] == 2 {
			dups = append(dups, rules[i].Name)
		}
	}
	return dups
}

// refuse handles an object whose rules share names: a rule's name is the key
// of its history, so such rules would read and overwrite each other's history
// and one of them would never fire. No rule of the object runs; status keeps
// its histories but promises no next execution; a Warning event says why,
// once per change of the object. The CRD and the webhook reject such objects;
// this covers a cluster with neither (Karmada's CRD without its webhook).
func (c *Controller) refuse(ctx context.Context, obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, dups []string) error {
	if c.memory.refuse(cache.MetaObjectToName(obj), obj.UID, obj.Generation) {
		c.recorder.Eventf(obj, corev1.EventTypeWarning, reasonDuplicateRules,
			"Rule names %q are used by more than one rule; a rule's name is the key of its history, so no rule of this object runs until every rule has a name of its own", dups)
		klog.FromContext(ctx).Info("Refusing a CronFederatedHPA whose rules share names", "names", dups)
	}
	return c.writeStatus(ctx, obj, dormantStatus(base))
}

// plan plans every rule of the object from base, its status as this sync
// found it (see memory.base), with pkg/cronplan (see cronplan.Object and
// cronplan.Rule for the rules) and the replan marks it was handed (see
// replanMarks).
func (c *Controller) plan(obj *autoscalingv1alpha1.CronFederatedHPA, base *autoscalingv1alpha1.CronFederatedHPAStatus, marks replanMarks, now time.Time) []rulePlan {
	plans := make([]rulePlan, 0, len(obj.Spec.Rules))
	cronplan.Object(obj, base, c.schedules.get, c.start.time(), marks.all, marks.rules, now, func(p cronplan.Plan) {
		plans = append(plans, rulePlan{Plan: p})
	})
	return plans
}
