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

package app

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"

	"github.com/scaleplane/scaleplane/pkg/controllers/cronscaler"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// readCronSchema reads the installed CronFederatedHPA CRD and says, once, in
// the log, which of scaleplane's added fields it stores. When the CRD cannot
// be read (the manager's RBAC lacks `get` on it, say) it assumes neither is
// stored: that is always safe, as planning does not depend on them.
func readCronSchema(ctx context.Context, client dynamic.Interface) cronscaler.StoredFields {
	logger := klog.FromContext(ctx)
	crd, err := client.Resource(crdResource).Get(ctx, cronscaler.CRDName, metav1.GetOptions{})
	if err != nil {
		msg := "Could not read the CronFederatedHPA CRD; assuming its schema stores neither maxDelaySeconds nor lastScheduleTime, as Karmada's does not"
		if apierrors.IsForbidden(err) {
			msg = "Not allowed to read the CronFederatedHPA CRD (grant get on customresourcedefinitions " + cronscaler.CRDName + "); assuming its schema stores neither maxDelaySeconds nor lastScheduleTime, as Karmada's does not"
		}
		logger.Info(msg, "crd", cronscaler.CRDName, "err", err)
		return cronscaler.StoredFields{}
	}
	fields, err := cronscaler.StoredFieldsFromCRD(crd)
	if err != nil {
		logger.Info("Could not read the CronFederatedHPA CRD's schema; assuming it stores neither maxDelaySeconds nor lastScheduleTime", "crd", cronscaler.CRDName, "err", err)
		return cronscaler.StoredFields{}
	}
	logger.Info("Read the CronFederatedHPA CRD's schema", "crd", cronscaler.CRDName,
		"storesMaxDelaySeconds", fields.MaxDelaySeconds, "storesLastScheduleTime", fields.LastScheduleTime)
	if !fields.MaxDelaySeconds {
		logger.Info("This CRD prunes maxDelaySeconds (Karmada's CRD?): a missed firing runs until its rule's next scheduled time")
	}
	return fields
}
