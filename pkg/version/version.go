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

// Package version holds the build's version, set at link time with
// -ldflags "-X github.com/scaleplane/scaleplane/pkg/version.gitVersion=...".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

var (
	gitVersion = "v0.0.0-dev"
	gitCommit  = ""
)

// Info describes the running binary.
type Info struct {
	GitVersion string
	GitCommit  string
	GoVersion  string
	Platform   string
}

// Get returns the version of the running binary. When the commit was not set
// at link time it falls back to the VCS data the Go toolchain embedded.
func Get() Info {
	commit := gitCommit
	if commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					commit = s.Value
				}
			}
		}
	}
	return Info{
		GitVersion: gitVersion,
		GitCommit:  commit,
		GoVersion:  runtime.Version(),
		Platform:   fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH),
	}
}

// String formats the version for --version.
func (i Info) String() string {
	commit := i.GitCommit
	if commit == "" {
		commit = "unknown"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.GitVersion, commit, i.GoVersion, i.Platform)
}
