package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

func printReport(w io.Writer, o options, generator string, satBy [][]result, fixed []result) {
	fmt.Fprintf(w, "\nGET of a %d-byte JSON answer over keep-alive connections on loopback; %d CPUs shared by load generator, backend and proxy; %s.\n",
		len(versionBody), runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(w, "Access logs: %v.\n", o.accessLog)

	for _, sat := range satBy {
		if len(sat) > 0 {
			fmt.Fprintf(w, "\n### %d connections\n\n", sat[0].connections)
			printSaturation(w, o, generator, sat)
		}
	}
	printFixed(w, o, fixed)
	if direct := find(satBy[0], "direct"); direct != nil && len(fixed) > 0 {
		fmt.Fprintf(w, "\nAt saturation every p99 is queueing on the shared CPUs (direct: %s), so the added-p99 target is judged in the fixed-rate table.\n", ms(direct.p99))
	}
}

func printSaturation(w io.Writer, o options, generator string, sat []result) {
	fmt.Fprintf(w, "Saturation: closed loop from %s, %v per load after %v warm-up, median of %d rounds.\n\n",
		generator, o.duration, o.warmup, o.rounds)
	fmt.Fprintln(w, "| target | req/s | p50 | p99 | proxy CPU per request (of it in the kernel) | GC share of proxy CPU | backend CPU per request | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range sat {
		proxy := cpuCell(r)
		if strings.HasPrefix(r.name, "direct") {
			proxy = "–"
		}
		gc := "–"
		if r.gcShare > 0 {
			gc = fmt.Sprintf("%.1f %%", 100*r.gcShare)
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %s | %s | %s | %d |\n", r.name, r.rps, ms(r.p50), ms(r.p99), proxy, gc, us(r.backendPerReq), r.errors)
	}
	nginx := find(sat, "nginx")
	fmt.Fprintln(w)
	for _, r := range sat {
		if !strings.HasPrefix(r.name, "router") && !strings.HasPrefix(r.name, "bare") {
			continue
		}
		line := "- " + r.name + ":"
		if nginx != nil && nginx.rps > 0 {
			line += fmt.Sprintf(" throughput %.2f× nginx (target %s)", r.rps/nginx.rps, throughputTarget(r.connections))
			if n := len(r.ratios); n > 1 {
				line += fmt.Sprintf(", per round %.2f× median, %.2f–%.2f×", r.ratios[n/2], r.ratios[0], r.ratios[n-1])
			}
			if nginx.cpuPerReq > 0 && r.cpuPerReq > 0 {
				line += fmt.Sprintf(", CPU per request %.2f× nginx's (target ≤ 1.5×)", float64(r.cpuPerReq)/float64(nginx.cpuPerReq))
			}
		}
		fmt.Fprintln(w, line)
	}
}

// throughputTarget is issue #23's throughput target for the router at n connections: ≥ 0.8×
// nginx at 64, ≥ 0.75× at 1,024 (and, by interpolation, 0.8× below 64 and 0.75× above 1,024).
func throughputTarget(n int) string {
	switch {
	case n <= 64:
		return "≥ 0.8×"
	case n >= 1024:
		return "≥ 0.75×"
	default:
		return "≥ 0.8× at 64, ≥ 0.75× at 1,024"
	}
}

func printFixed(w io.Writer, o options, fixed []result) {
	if len(fixed) > 0 {
		fmt.Fprintf(w, "\nLatency below saturation: open loop at a fixed %d req/s from the built-in Go generator, %v per target, measured from each request's due time.\n\n",
			o.rate, o.duration)
		fmt.Fprintln(w, "| target | p50 | p99 | p99.9 | p99 added over direct | errors |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
		fd := find(fixed, "direct")
		for _, r := range fixed {
			added := "–"
			if fd != nil && !strings.HasPrefix(r.name, "direct") {
				added = ms(r.p99 - fd.p99)
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d |\n", r.name, ms(r.p50), ms(r.p99), ms(r.p999), added, r.errors)
		}
		fmt.Fprintln(w, "\nTarget: the router adds ≤ 1 ms at p99.")
	}
}

func find(rs []result, prefix string) *result {
	for i := range rs {
		if strings.HasPrefix(rs[i].name, prefix) {
			return &rs[i]
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond)) }

// cpuCell is a proxy's CPU per request and, in brackets, the part spent in the kernel.
func cpuCell(r result) string {
	if r.cpuPerReq <= 0 {
		return us(r.cpuPerReq)
	}
	return fmt.Sprintf("%s (%.1f sys)", us(r.cpuPerReq), float64(r.sysPerReq)/float64(time.Microsecond))
}

func us(d time.Duration) string {
	if d <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
