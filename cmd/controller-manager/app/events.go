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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	scaleplanescheme "github.com/scaleplane/scaleplane/pkg/generated/clientset/versioned/scheme"
)

// eventScheme knows the built-in types and the generated ones, so events can
// reference any object the controllers act on.
var eventScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := scaleplanescheme.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func scheme() *runtime.Scheme { return eventScheme }

func eventSource(component string) corev1.EventSource {
	return corev1.EventSource{Component: component}
}
