package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	gridcityv1 "github.com/gridcity/gridcity/proto/gridcity/v1"
)

const gib = 1 << 30

// printSnapshot writes a state for a person to read.
func printSnapshot(w io.Writer, st *gridcityv1.StateUpdate) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	h, c, m := st.GetHost(), st.GetCpu(), st.GetMemory()
	if h != nil {
		fmt.Fprintf(tw, "host\t%s\t%s %s, kernel %s, %s, up %s\n", h.GetHostname(), h.GetOs(), h.GetOsVersion(), h.GetKernel(), h.GetArch(), (time.Duration(h.GetUptimeSeconds()) * time.Second).String())
	}
	if c != nil {
		busy := "busy unknown"
		if c.BusyPercent != nil {
			busy = fmt.Sprintf("%.1f%% busy", c.GetBusyPercent())
		}
		fmt.Fprintf(tw, "cpu\t%d cores\t%s, load %.2f %.2f %.2f\n", c.GetCores(), busy, c.GetLoad1(), c.GetLoad5(), c.GetLoad15())
	}
	if m != nil {
		fmt.Fprintf(tw, "memory\t%.1f GiB\t%.1f%% used, swap %.1f/%.1f GiB\n", float64(m.GetTotalBytes())/gib, m.GetUsedPercent(), float64(m.GetSwapUsedBytes())/gib, float64(m.GetSwapTotalBytes())/gib)
	}
	for _, d := range st.GetDisks().GetItems() {
		fmt.Fprintf(tw, "disk\t%s\t%s %.1f GiB, %.1f GiB free, %.1f%% used, inodes %.1f%%\n", d.GetMount(), d.GetFilesystem(), float64(d.GetTotalBytes())/gib, float64(d.GetAvailableBytes())/gib, d.GetUsedPercent(), d.GetInodesUsedPercent())
	}
	for _, l := range st.GetListeners().GetItems() {
		fmt.Fprintf(tw, "listen\t%s %s:%d\t%s\n", l.GetProto(), l.GetAddress(), l.GetPort(), l.GetProcess())
	}
	for _, cn := range st.GetConnections().GetItems() {
		fmt.Fprintf(tw, "uses\t%s:%d\t%d connections\n", cn.GetRemoteAddress(), cn.GetRemotePort(), cn.GetCount())
	}
	for _, u := range st.GetFailedUnits().GetItems() {
		fmt.Fprintf(tw, "failed\t%s\t%s\n", u.GetName(), u.GetDescription())
	}
	for _, ct := range st.GetContainers().GetItems() {
		fmt.Fprintf(tw, "container\t%s\t%s %s (%s)\n", ct.GetName(), ct.GetImage(), ct.GetState(), ct.GetStatus())
	}
	for _, p := range st.GetProcesses().GetItems() {
		unit := ""
		if p.GetUnit() != "" {
			unit = ", unit " + p.GetUnit()
		}
		fmt.Fprintf(tw, "process\t%d %s\t%.1f%% of a core, %.1f MiB, user %s%s\n", p.GetPid(), p.GetName(), p.GetCpuPercent(), float64(p.GetRssBytes())/(1<<20), p.GetUser(), unit)
	}
	if u := st.GetUpdates(); u != nil {
		fmt.Fprintf(tw, "updates\t%s\t%d pending, %d security\n", u.GetManager(), u.GetPending(), u.GetSecurity())
	}
	for _, g := range st.GetGaps().GetItems() {
		fmt.Fprintf(tw, "gap\t%s\t%s\n", g.GetCheck(), g.GetReason())
	}
	return tw.Flush()
}
