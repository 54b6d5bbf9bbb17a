package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDResource is where the apiserver serves CustomResourceDefinitions. CRDs
// are handled as unstructured objects through the dynamic client so that the
// framework needs no module beyond client-go and apimachinery.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRD is an installed, Established CustomResourceDefinition.
type CRD struct {
	// Name is the CRD's name, <plural>.<group>.
	Name       string
	Group      string
	Kind       string
	Plural     string
	Namespaced bool
	// Versions are the served versions, in the CRD's order.
	Versions []string
	// StorageVersion is the version objects are stored in.
	StorageVersion string
	// Object is the CRD as the apiserver returned it once Established.
	Object *unstructured.Unstructured
}

// Resource returns the CRD's resource in the given version.
func (c CRD) Resource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: c.Group, Version: version, Resource: c.Plural}
}

// ReadCRDs reads every CustomResourceDefinition from the *.yaml, *.yml and
// *.json files in dir, in file name order; a file may hold several YAML
// documents. A missing or empty directory yields none: the CRDs are generated
// from the API types and may not exist yet in a young branch.
func ReadCRDs(dir string) ([]*unstructured.Unstructured, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading CRD directory: %w", err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)

	var crds []*unstructured.Unstructured
	for _, file := range files {
		docs, err := DecodeManifests(file)
		if err != nil {
			return nil, err
		}
		for _, crd := range docs {
			if gvk := crd.GroupVersionKind(); gvk != CRDResource.GroupVersion().WithKind("CustomResourceDefinition") {
				return nil, fmt.Errorf("%s: holds a %s, only %s CustomResourceDefinitions belong in a CRD directory", file, gvk, CRDResource.GroupVersion())
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

// DecodeManifests reads the objects of a YAML (several documents) or JSON
// file, leaving out empty documents (after a trailing "---", say).
func DecodeManifests(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", file, err)
	}
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var doc map[string]any
		err := decoder.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", file, err)
		}
		if len(doc) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: doc})
		}
	}
}

// InstallCRDs creates (or updates) every CRD in dir and waits until each one
// is Established, so that clients can use the new kinds right away.
func InstallCRDs(ctx context.Context, client dynamic.Interface, dir string, timeout time.Duration) ([]CRD, error) {
	crds, err := ReadCRDs(dir)
	if err != nil {
		return nil, err
	}
	crdClient := client.Resource(CRDResource)
	for _, crd := range crds {
		_, err := crdClient.Create(ctx, crd, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			var existing *unstructured.Unstructured
			existing, err = crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err == nil {
				crd.SetResourceVersion(existing.GetResourceVersion())
				_, err = crdClient.Update(ctx, crd, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			return nil, fmt.Errorf("installing CRD %s: %w", crd.GetName(), err)
		}
	}

	installed := make([]CRD, 0, len(crds))
	for _, crd := range crds {
		var current *unstructured.Unstructured
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			var err error
			current, err = crdClient.Get(ctx, crd.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return IsCRDEstablished(current), nil
		})
		if err != nil {
			var conditions any
			if current != nil {
				conditions, _, _ = unstructured.NestedSlice(current.Object, "status", "conditions")
			}
			return nil, fmt.Errorf("CRD %s is not Established (conditions: %v): %w", crd.GetName(), conditions, err)
		}
		info, err := describeCRD(current)
		if err != nil {
			return nil, err
		}
		installed = append(installed, info)
	}
	return installed, nil
}

// IsCRDEstablished reports whether the apiserver serves the CRD's kinds: its
// names were accepted and it is Established.
func IsCRDEstablished(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	established, namesAccepted := false, false
	for _, c := range conditions {
		cond, ok := c.(map[string]any)
		if !ok {
			continue
		}
		isTrue := cond["status"] == "True"
		switch cond["type"] {
		case "Established":
			established = isTrue
		case "NamesAccepted":
			namesAccepted = isTrue
		}
	}
	return established && namesAccepted
}

func describeCRD(crd *unstructured.Unstructured) (CRD, error) {
	info := CRD{Name: crd.GetName(), Object: crd}
	var err error
	str := func(fields ...string) string {
		v, _, e := unstructured.NestedString(crd.Object, fields...)
		if e != nil && err == nil {
			err = e
		}
		return v
	}
	info.Group = str("spec", "group")
	info.Kind = str("spec", "names", "kind")
	info.Plural = str("spec", "names", "plural")
	info.Namespaced = str("spec", "scope") == "Namespaced"
	versions, _, e := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if e != nil {
		err = e
	}
	for _, v := range versions {
		version, ok := v.(map[string]any)
		if !ok {
			continue
		}
		name, _ := version["name"].(string)
		if served, _ := version["served"].(bool); served {
			info.Versions = append(info.Versions, name)
		}
		if storage, _ := version["storage"].(bool); storage {
			info.StorageVersion = name
		}
	}
	if err != nil {
		return CRD{}, fmt.Errorf("reading CRD %s: %w", crd.GetName(), err)
	}
	return info, nil
}

// WriteCRDVariant reads the CRDs of srcDir, lets edit change each one (edit
// may leave a CRD alone), and writes them all to dstDir, one JSON file per
// CRD, replacing what dstDir held: a variant of the installed schemas, such as
// another project's CRD for the same kind, for Options.CRDDir.
func WriteCRDVariant(srcDir, dstDir string, edit func(crd *unstructured.Unstructured) error) error {
	crds, err := ReadCRDs(srcDir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dstDir); err != nil {
		return fmt.Errorf("clearing the CRD variant directory: %w", err)
	}
	if err := os.MkdirAll(dstDir, 0o755); err != nil {
		return fmt.Errorf("creating the CRD variant directory: %w", err)
	}
	for _, crd := range crds {
		if err := edit(crd); err != nil {
			return fmt.Errorf("editing CRD %s: %w", crd.GetName(), err)
		}
		data, err := crd.MarshalJSON()
		if err != nil {
			return fmt.Errorf("encoding CRD %s: %w", crd.GetName(), err)
		}
		if err := os.WriteFile(filepath.Join(dstDir, crd.GetName()+".json"), data, 0o644); err != nil {
			return fmt.Errorf("writing CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}
