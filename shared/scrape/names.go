package scrape

import (
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// fqName finds the metric name in a Desc's String (Desc exports no accessor for it).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names returns the sorted names of the metric families c describes: every family a registry
// can export, those without a series yet (a vector nothing has observed) included. The
// dashboards and alert rules of deploy/monitoring are checked against them.
func Names(c prometheus.Collector) []string {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	seen := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
