package scrape

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	depth = prometheus.NewDesc("test_depth", "Items by state.", []string{"state"}, nil)
	waits = prometheus.NewDesc("test_waits_total", "Waits so far.", nil, nil)
)

// series is what one gathering of a collector gave: each value by "name" or "name/label",
// and each metric's type.
type series struct {
	values map[string]float64
	types  map[string]string
}

// gather registers c alone and gathers it.
func gather(t *testing.T, c prometheus.Collector) (series, error) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	s := series{values: map[string]float64{}, types: map[string]string{}}
	for _, f := range fams {
		s.types[f.GetName()] = f.GetType().String()
		for _, m := range f.Metric {
			key := f.GetName()
			for _, l := range m.Label {
				key += "/" + l.GetValue()
			}
			s.values[key] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return s, err
}

func TestCollectorReportsWhatItsReadReturnsAtEachScrape(t *testing.T) {
	n := 0.0
	var deadline time.Time
	c := Collector(func(ctx context.Context) ([]Sample, error) {
		n++
		deadline, _ = ctx.Deadline()
		return []Sample{Gauge(depth, n, "pending"), Gauge(depth, 10*n, "running"), Counter(waits, 7)}, nil
	}, depth, waits)
	for scrape := 1.0; scrape <= 2; scrape++ {
		got, err := gather(t, c)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{"test_depth/pending": scrape, "test_depth/running": 10 * scrape, "test_waits_total": 7}
		if !maps.Equal(got.values, want) {
			t.Fatalf("scrape %v: %v, want %v", scrape, got.values, want)
		}
		if got.types["test_depth"] != "GAUGE" || got.types["test_waits_total"] != "COUNTER" {
			t.Fatalf("types %v", got.types)
		}
	}
	if deadline.IsZero() || time.Until(deadline) > Timeout {
		t.Fatalf("the read's context has no deadline within Timeout: %v", deadline)
	}
}

func TestCollectorReportsNothingWhenItsReadFails(t *testing.T) {
	c := Collector(func(context.Context) ([]Sample, error) {
		return []Sample{Gauge(depth, 0, "pending")}, errors.New("database unreachable")
	}, depth, waits)
	got, err := gather(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.values) != 0 {
		t.Fatalf("a failed read reported series: %v", got.values)
	}
}

func TestCollectorTurnsAMisfitSampleIntoAGatherError(t *testing.T) {
	c := Collector(func(context.Context) ([]Sample, error) {
		return []Sample{Gauge(depth, 1)}, nil // a label value missing
	}, depth)
	if _, err := gather(t, c); err == nil {
		t.Fatal("a sample without its label gathered without error")
	}
}

// Names lists a registry's families, those without any series included.
func TestNames(t *testing.T) {
	reg := prometheus.NewRegistry()
	empty := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "b_empty_total", Help: "h"}, []string{"x"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "a_gauge", Help: "h"})
	d := prometheus.NewDesc("c_scraped", "h", nil, nil)
	reg.MustRegister(empty, g, Collector(func(context.Context) ([]Sample, error) { return nil, nil }, d))
	got := Names(reg)
	if want := []string{"a_gauge", "b_empty_total", "c_scraped"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Names = %v, want %v", got, want)
	}
}
