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
	"fmt"
	"strings"
	"time"

	"github.com/scaleplane/scaleplane/test/bench/internal/benchutil"
)

// print writes the results as Markdown tables, and the raw windows under
// them.
func (r *results) print() {
	fmt.Println()
	fmt.Printf("machine: %s\n", benchutil.Machine())
	fmt.Printf("load average (1/5/15 min): start %s; end %s\n", r.loadStart, r.loadEnd)
	fmt.Println()
	table("measure", "value", r.rows())
	if r.cfg.baselinePolls > 0 {
		fmt.Println()
		table("", "resizer (incremental informers)", r.baselineRows())
	}
	fmt.Println()
	fmt.Println("controller manager startup, from its log (time since its start):")
	for _, l := range r.startupLog {
		fmt.Println("  " + l)
	}
	printAPI("startup (manager start to after the settle)", r.startupAPI)
	printManager("startup", r.startupMgr)
	printAPI(fmt.Sprintf("%d more pods", r.cfg.more), r.moreAPI)
	printManager(fmt.Sprintf("%d more pods", r.cfg.more), r.moreMgr)
	if r.cfg.baselinePolls > 0 {
		printAPI("baseline", r.baselineAPI)
		printManager("baseline (manager idle)", r.baselineMgr)
		for i, p := range r.baseline.Polls {
			fmt.Printf("  baseline poll %d: %+v\n", i+1, p)
		}
	}
	printAPI("after sync (after the settle to the end)", r.afterSyncAPI)
	printManager("after sync", r.afterSyncMgr)
}

func table(first, second string, rows [][]string) {
	fmt.Printf("| %s | %s |", first, second)
	if len(rows) > 0 && len(rows[0]) == 3 {
		fmt.Print(" Addon Resizer's way (baseline) |")
	}
	fmt.Println()
	fmt.Println("|" + strings.Repeat(" --- |", len(rows[0])))
	for _, row := range rows {
		fmt.Printf("| %s |\n", strings.Join(row, " | "))
	}
}

func (r *results) rows() [][]string {
	c := r.cfg
	s, e := r.settled, r.end
	lists, mine, others := r.listsAfterSync()
	return [][]string{
		{"nodes created", fmt.Sprintf("%d in %s (%.0f/s, %d creators)", c.nodes, secs(r.nodes.took()), r.nodes.rate(), c.creators)},
		{fmt.Sprintf("pods created (shape %s, %d containers each, Pending)", c.podShape, containersPerPod(c.podShape)), fmt.Sprintf("%d in %s (%.0f/s)", c.pods, secs(r.pods.took()), r.pods.rate())},
		{"manager /readyz, from its start", secs(r.ready)},
		{fmt.Sprintf("**first correct resize**, NodeProportional (cpu %dm), from the start", nodeEstimate(c.nodes)), "**" + secs(r.firstNode) + "**"},
		{fmt.Sprintf("**first correct resize**, ContainerProportional (memory %d bytes), from the start", containerEstimate(c.pods, c.podShape)), "**" + secs(r.firstContainer) + "**"},
		{"writes until then (resizer_writes_total)", benchutil.Format(r.synced.writes)},
		{"initial sync: requests to the apiserver", r.startupRequests()},
		{"initial sync: bytes the apiserver sent to watchers (pods / nodes)", fmt.Sprintf("%s / %s", mb(r.startupAPI.watchBytes["pods"]), mb(r.startupAPI.watchBytes["nodes"]))},
		{"manager CPU from the start to the first correct resizes", fmt.Sprintf("%.2f CPU-s", r.synced.proc.cpu)},
		{"**RSS after sync** (both first correct) / VmHWM then", fmt.Sprintf("**%s** / %s", benchutil.MiB(r.synced.proc.rssKiB), benchutil.MiB(r.synced.proc.hwmKiB))},
		{fmt.Sprintf("**RSS after the settle** (%s idle)", c.settle), "**" + benchutil.MiB(s.proc.rssKiB) + "**"},
		{"Go heap in use / heap alloc / next GC at / from the OS (sys) / goroutines, after the settle", fmt.Sprintf("%s / %s / %s / %s / %.0f", mb(s.heapInuse), mb(s.heapAlloc), mb(s.nextGC), mb(s.sys), s.goroutines)},
		{"CPU in the settle: manager / apiserver", fmt.Sprintf("%.2f / %.2f CPU-s", s.proc.cpu-r.synced.proc.cpu, r.settleAPI.cpu)},
		{fmt.Sprintf("%d more pods created", c.more), fmt.Sprintf("in %s (%.0f/s)", secs(r.more.took()), r.more.rate())},
		{"**resize to the new estimate, from the last create answered**", "**" + secs(r.moreFromLast) + "**"},
		{"resize to the new estimate, from the first create sent", secs(r.moreFromFirst)},
		{"first change of the target, from the first create sent", secs(r.moreFirstChange)},
		{"distinct values the target took until correct / writes in the window", fmt.Sprintf("%d / %s", r.moreChanges, benchutil.Format(r.moreMgr.writes))},
		{"**LIST requests after sync** on the manager's resources (apiserver, after the settle to the end, less the baseline's)", fmt.Sprintf("**%.0f** (all of them: %s; baseline's: %d)", lists, benchutil.Format(mine), r.baseline.Lists)},
		{"other LISTs in that window (not the manager's resources)", benchutil.Format(others)},
		{"the manager's own requests after sync (rest_client_requests_total; a LIST would be a GET)", benchutil.Format(r.afterSyncMgr.requests)},
		{"RSS at the end / **peak (VmHWM)**", fmt.Sprintf("%s / **%s**", benchutil.MiB(e.proc.rssKiB), benchutil.MiB(e.proc.hwmKiB))},
		{"status.clusterSize at the end", fmt.Sprintf("%s: %s, %s: %s", nodeTarget, r.statusSizes[nodeTarget], containerTarget, r.statusSizes[containerTarget])},
	}
}

// managerResources are the resources the controller manager with only the
// resizer lists or watches.
var managerResources = map[string]bool{
	"pods": true, "nodes": true, "deployments": true, "statefulsets": true, "daemonsets": true, "addonresizers": true,
}

// listsAfterSync returns the LISTs after the settle of the manager's
// resources, less the baseline's; and those LISTs and the others (the
// apiserver's own, e.g. the LimitRanger admission plugin's lookups when the
// benchmark creates pods) by resource.
func (r *results) listsAfterSync() (manager float64, mine, others map[string]float64) {
	mine, others = r.afterSyncAPI.split("LIST")
	return benchutil.Total(mine) - float64(r.baseline.Lists), mine, others
}

func (r *results) startupRequests() string {
	var parts []string
	for _, verb := range []string{"LIST", "WATCH"} {
		mine, others := r.startupAPI.split(verb)
		part := verb + ": " + benchutil.Format(mine)
		if len(others) > 0 {
			part += " (not the manager's resources: " + benchutil.Format(others) + ")"
		}
		parts = append(parts, part)
	}
	if len(r.startupAPI.watchLists) > 0 {
		parts = append(parts, "of the WATCHes, streaming lists (sendInitialEvents): "+benchutil.Format(r.startupAPI.watchLists))
	}
	return strings.Join(parts, "; ")
}

func (r *results) baselineRows() [][]string {
	b := r.baseline
	polls := len(b.Polls)
	var podLists, nodeLists []string
	for _, p := range b.Polls {
		podLists = append(podLists, secs(p.PodList))
		nodeLists = append(nodeLists, secs(p.NodeList))
	}
	pods := 0
	containers := 0
	if polls > 0 {
		pods, containers = b.Polls[polls-1].Pods, b.Polls[polls-1].Containers
	}
	podBytes := r.baselineAPI.listBytes["pods"]
	lists, _, _ := r.listsAfterSync()
	var decoded int64
	for _, p := range b.Polls {
		decoded += p.PodBytes
	}
	return [][]string{
		{"how the size is learned", "watch events (pods through a transform, nodes as metadata)", fmt.Sprintf("every %s: one LIST of all non-terminal pods (no pagination) and one of all nodes", r.cfg.poll)},
		{"size seen", fmt.Sprintf("status.clusterSize %s / %s", r.statusSizes[nodeTarget], r.statusSizes[containerTarget]), fmt.Sprintf("%d pods, %d containers", pods, containers)},
		{"LIST requests per poll period", fmt.Sprintf("%.0f after sync", max(lists, 0)), fmt.Sprintf("%d per poll (%s)", b.Lists/max(polls, 1), benchutil.Format(r.baselineAPI.verb("LIST")))},
		{"pod LIST latency, per poll", "none", strings.Join(podLists, ", ")},
		{"node LIST latency, per poll", "none", strings.Join(nodeLists, ", ")},
		{"pod LIST per poll: bytes on the wire (gzip; apiserver_response_sizes) / protobuf body the client decoded", "none after sync", fmt.Sprintf("%s / %s", mb(podBytes/float64(max(polls, 1))), mb(float64(decoded)/float64(max(polls, 1))))},
		{"delay from a count change to seeing it", fmt.Sprintf("%s to the resize (more pods)", secs(r.moreFromLast)), fmt.Sprintf("up to %s + a pod LIST", r.cfg.poll)},
		{"RSS (idle at the end) / peak (VmHWM)", fmt.Sprintf("%s / %s", benchutil.MiB(r.end.proc.rssKiB), benchutil.MiB(r.end.proc.hwmKiB)), fmt.Sprintf("%s / %s", benchutil.MiB(b.RSSKiB), benchutil.MiB(b.HWMKiB))},
		{"CPU of the process", fmt.Sprintf("%.2f CPU-s over the baseline window (%s)", r.baselineMgr.cpu, secs(r.baselineMgr.length)), fmt.Sprintf("%.2f CPU-s (%.2f per poll)", b.CPU, b.CPU/float64(max(polls, 1)))},
		{"apiserver CPU (process_cpu_seconds_total)", fmt.Sprintf("%.2f CPU-s over the %s settle (manager idle)", r.settleAPI.cpu, r.cfg.settle), fmt.Sprintf("%.2f CPU-s over the baseline window (%.2f per poll)", r.baselineAPI.cpu, r.baselineAPI.cpu/float64(max(polls, 1)))},
	}
}

func printAPI(name string, w apiWindow) {
	fmt.Printf("%s (%s), apiserver:\n", name, secs(w.length))
	fmt.Printf("  requests: %s\n", benchutil.Format(w.requests))
	fmt.Printf("  LIST bytes: %s; watch bytes: %s; watch events: %s; streaming lists: %s\n",
		benchutil.Format(w.listBytes), benchutil.Format(w.watchBytes), benchutil.Format(w.watchEvents), benchutil.Format(w.watchLists))
}

func printManager(name string, w managerWindow) {
	fmt.Printf("%s (%s), manager: writes %s; decisions %s; requests %s; queue adds %.0f; CPU %.2f s\n",
		name, secs(w.length.Round(time.Millisecond)), benchutil.Format(w.writes), benchutil.Format(w.decisions), benchutil.Format(w.requests), w.queueAdds, w.cpu)
}
