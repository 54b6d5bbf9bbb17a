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

package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// deploymentPatch is the part of a Deployment strategic merge patch that
// holds containers.
type deploymentPatch struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

func sidecarArgsCommand(args []string) error {
	fs := flag.NewFlagSet("sidecar-args", flag.ContinueOnError)
	patch := fs.String("patch", "", "the strategic merge patch of a Deployment")
	name := fs.String("container", "", "the container whose args to print")
	podIP := fs.String("pod-ip", "127.0.0.1", "the value of status.podIP")
	mounts := mountFlag{}
	fs.Var(mounts, "mount", "VOLUME=DIR: the local directory standing in for the container's mount of VOLUME; every mount needs one")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := containerFromPatch(*patch, *name)
	if err != nil {
		return err
	}
	out, err := localArgs(c, *podIP, mounts)
	if err != nil {
		return fmt.Errorf("container %s of %s: %w", *name, *patch, err)
	}
	for _, a := range out {
		fmt.Println(a)
	}
	return nil
}

func containerFromPatch(path, name string) (*corev1.Container, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the patch: %w", err)
	}
	var p deploymentPatch
	if err := yaml.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	for i := range p.Spec.Template.Spec.Containers {
		if c := &p.Spec.Template.Spec.Containers[i]; c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%s has no container %q", path, name)
}

// localArgs is what the kubelet would run (its $(VAR) expansion) with the
// mounted directories moved to local ones. Anything that cannot be
// reproduced locally is an error, not a guess: a command (the image's
// entrypoint is the binary, the args are what the sidecar changes), an env
// source other than a value or the pod IP, a mount without a local stand-in.
func localArgs(c *corev1.Container, podIP string, mounts mountFlag) ([]string, error) {
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("sets command %v; only args can be run locally", c.Command)
	}
	env, err := containerEnv(c, podIP)
	if err != nil {
		return nil, err
	}
	if err := checkMounts(c, mounts); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		a = expand(a, env)
		for _, m := range c.VolumeMounts {
			a = movePath(a, m.MountPath, mounts[m.Name])
		}
		out = append(out, a)
	}
	return out, nil
}

func containerEnv(c *corev1.Container, podIP string) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, env)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		default:
			return nil, fmt.Errorf("env %s: only values and status.podIP can be reproduced locally", e.Name)
		}
	}
	return env, nil
}

func checkMounts(c *corev1.Container, mounts mountFlag) error {
	known := map[string]bool{}
	for _, m := range c.VolumeMounts {
		known[m.Name] = true
		if mounts[m.Name] == "" {
			return fmt.Errorf("volumeMount %s (%s) has no --mount", m.Name, m.MountPath)
		}
	}
	for name := range mounts {
		if !known[name] {
			return fmt.Errorf("--mount %s: the container mounts no volume %s", name, name)
		}
	}
	return nil
}

// expand replaces $(NAME) with NAME's value when the env defines it and
// $$ with $, leaving other references alone, as the kubelet does with
// command, args and env values.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case s[i+1] == '$':
			b.WriteByte('$')
			i++
		case s[i+1] == '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// movePath replaces the directory from, where it appears as a whole path
// component sequence (followed by "/" or the end), with to.
func movePath(s, from, to string) string {
	from = strings.TrimSuffix(from, "/")
	var b strings.Builder
	for {
		i := strings.Index(s, from)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		rest := s[i+len(from):]
		if rest == "" || rest[0] == '/' {
			b.WriteString(s[:i] + to)
		} else {
			b.WriteString(s[:i+len(from)])
		}
		s = rest
	}
}

// mountFlag is the repeatable VOLUME=DIR flag.
type mountFlag map[string]string

func (m mountFlag) String() string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k+"="+m[k])
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func (m mountFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("%q is not VOLUME=DIR", s)
	}
	m[k] = v
	return nil
}
