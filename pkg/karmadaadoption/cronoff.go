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

package karmadaadoption

// Switching Karmada's CronFederatedHPA controller off and back on: whether
// an appended --controllers can do it (CanAppend), the JSON patches of the
// Deployment's command (CronOffPatch, CronOnPatch), and the same change in
// the installer's own settings (HelmValues, OperatorPatches).

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// CanAppend says whether CronOffFlag switches the cron controller off: not
// when an earlier entry enables it by name.
func (in *Install) CanAppend() error {
	if !in.CronEnabled {
		return errors.New("karmada's CronFederatedHPA controller is already off")
	}
	if Enabled(append(append([]string{}, in.Controllers...), strings.Split(strings.TrimPrefix(CronOffFlag, "--controllers="), ",")...), CronController, true) {
		return fmt.Errorf("karmada's --controllers (%s) enables %s by name, which an appended flag cannot override: remove that entry from your installer's settings", strings.Join(in.Controllers, ","), CronController)
	}
	return nil
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func (in *Install) commandPath() string {
	return fmt.Sprintf("/spec/template/spec/containers/%d/command", in.ContainerIndex)
}

// CronOffPatch is the JSON patch that appends CronOffFlag to Karmada's
// command. Its test operations make the apiserver refuse it, whole, if the
// Deployment is no longer the one inspected (another container at that
// index, or a command of another length).
func (in *Install) CronOffPatch() ([]byte, error) {
	if err := in.CanAppend(); err != nil {
		return nil, err
	}
	n := len(in.Container.Command)
	return marshalPatch([]jsonPatchOp{
		{Op: "test", Path: fmt.Sprintf("/spec/template/spec/containers/%d/name", in.ContainerIndex), Value: in.Container.Name},
		{Op: "test", Path: fmt.Sprintf("%s/%d", in.commandPath(), n-1), Value: in.Container.Command[n-1]},
		{Op: "add", Path: in.commandPath() + "/-", Value: CronOffFlag},
	})
}

// CronOnPatch is the exact reverse of CronOffPatch: it removes the element
// CronOffPatch adds (read before it is applied) or added (read after), and
// nothing if that element is not where it was put.
func (in *Install) CronOnPatch() ([]byte, error) {
	n := len(in.Container.Command)
	if !in.CronOffAppended {
		if err := in.CanAppend(); err != nil {
			return nil, err
		}
		n++
	}
	at := fmt.Sprintf("%s/%d", in.commandPath(), n-1)
	return marshalPatch([]jsonPatchOp{
		{Op: "test", Path: fmt.Sprintf("/spec/template/spec/containers/%d/name", in.ContainerIndex), Value: in.Container.Name},
		{Op: "test", Path: at, Value: CronOffFlag},
		{Op: "remove", Path: at},
	})
}

func marshalPatch(ops []jsonPatchOp) ([]byte, error) {
	out, err := json.MarshalIndent(ops, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the JSON patch: %w", err)
	}
	return append(out, '\n'), nil
}

// controllersSetting is the value of --controllers the installer's own
// setting holds now ("" when the command has none), and the value that
// keeps it and switches the cron controller off: "-name" appended is the
// first entry naming the cron controller (CanAppend checked that no earlier
// entry does), and a list without "*" would switch every controller off.
func (in *Install) controllersSetting() (now, off string, err error) {
	if err := in.CanAppend(); err != nil {
		return "", "", err
	}
	now = lastFlag(in.Container.Command, "controllers")
	if strings.Count(strings.Join(in.Container.Command, "\n"), "--controllers=") > 1 {
		return "", "", errors.New("karmada's command has --controllers more than once: not one setting of the installer")
	}
	if now == "" {
		return "", "*,-" + CronController, nil
	}
	return now, now + ",-" + CronController, nil
}

// HelmValues are the values files for `helm upgrade --reuse-values -f`:
// controllerManager.controllers switching the cron controller off, and the
// one giving the current setting back.
func (in *Install) HelmValues() (off, undo []byte, err error) {
	now, value, err := in.controllersSetting()
	if err != nil {
		return nil, nil, err
	}
	const format = "# Karmada's Helm chart (charts/karmada): controllerManager.controllers%s\ncontrollerManager:\n  controllers: %q\n"
	return fmt.Appendf(nil, format, ", with its CronFederatedHPA controller off", value),
		fmt.Appendf(nil, format, " as it was before", now), nil
}

// OperatorPatches are JSON merge patches of the Karmada object: its
// spec.components.karmadaControllerManager.extraArgs.controllers (the
// operator does not wire the typed controllers field) switching the cron
// controller off, and the one giving the current setting back.
func (in *Install) OperatorPatches() (off, undo []byte, err error) {
	now, value, err := in.controllersSetting()
	if err != nil {
		return nil, nil, err
	}
	patch := func(v any) ([]byte, error) {
		out, err := json.Marshal(map[string]any{"spec": map[string]any{"components": map[string]any{
			"karmadaControllerManager": map[string]any{"extraArgs": map[string]any{"controllers": v}}}}})
		if err != nil {
			return nil, fmt.Errorf("encoding the Karmada object's patch: %w", err)
		}
		return append(out, '\n'), nil
	}
	var previous any // null deletes the key: there was no setting
	if now != "" {
		previous = now
	}
	if off, err = patch(value); err != nil {
		return nil, nil, err
	}
	if undo, err = patch(previous); err != nil {
		return nil, nil, err
	}
	return off, undo, nil
}
