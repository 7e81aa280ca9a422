// Package monitoring carries kaas's Prometheus alert rules and Grafana
// dashboard (the files beside it) so tests and tools can read them: the
// rules' alerts, the dashboard's queries, and the rules rendered with short
// `for:` durations for a test that watches alerts fire.
package monitoring

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// RulesFile is deploy/monitoring/kaas-alerts.yaml, a plain Prometheus rules file.
//
//go:embed kaas-alerts.yaml
var RulesFile []byte

// DashboardFile is deploy/monitoring/kaas-dashboard.json, a Grafana dashboard.
//
//go:embed kaas-dashboard.json
var DashboardFile []byte

// Alert is one alerting rule of RulesFile.
type Alert struct {
	Group       string            `yaml:"-"`
	Name        string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type rulesDoc struct {
	Groups []struct {
		Name  string  `yaml:"name"`
		Rules []Alert `yaml:"rules"`
	} `yaml:"groups"`
}

// Alerts parses RulesFile.
func Alerts() ([]Alert, error) {
	var doc rulesDoc
	if err := yaml.Unmarshal(RulesFile, &doc); err != nil {
		return nil, fmt.Errorf("parse kaas-alerts.yaml: %w", err)
	}
	var out []Alert
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// RulesWithFor returns RulesFile with every rule's `for:` set to d (a
// Prometheus duration such as "2s"), the expressions untouched: a test
// cannot wait out the production durations, and a second copy of the
// rules would drift from the first.
func RulesWithFor(d string) ([]byte, error) {
	if !durationRE.MatchString(d) {
		return nil, fmt.Errorf("RulesWithFor: %q is not a Prometheus duration", d)
	}
	// A line edit rather than a YAML round trip, which would refold the
	// expressions' block scalars.
	return forLineRE.ReplaceAll(RulesFile, []byte("${1}for: "+d)), nil
}

var (
	forLineRE  = regexp.MustCompile(`(?m)^(\s+)for: .*$`)
	durationRE = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
)

// PanelQuery is one query of one dashboard panel.
type PanelQuery struct {
	Panel string // the panel's title
	RefID string
	Expr  string // as written, with Grafana's variables
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// DashboardQueries returns every query of every panel of DashboardFile,
// rows' nested panels included.
func DashboardQueries() ([]PanelQuery, error) {
	var d struct {
		Panels []panel `json:"panels"`
	}
	if err := json.Unmarshal(DashboardFile, &d); err != nil {
		return nil, fmt.Errorf("parse kaas-dashboard.json: %w", err)
	}
	var out []PanelQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, PanelQuery{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

// Expand replaces the Grafana variables the dashboard's queries use with
// what Grafana would send, rateInterval for $__rate_interval (e.g. "1m"),
// so the query can be sent to Prometheus as it is.
func Expand(expr, rateInterval string) string {
	return strings.NewReplacer("$__rate_interval", rateInterval, "${__rate_interval}", rateInterval).Replace(expr)
}
