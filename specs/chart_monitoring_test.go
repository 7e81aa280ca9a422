package specs

// Issue 19: the chart's optional monitoring objects. The PodMonitor scrapes
// the brokers' admin port as job "kaas", the PrometheusRule carries exactly
// deploy/monitoring/kaas-alerts.yaml, the dashboard ConfigMap exactly the
// dashboard; all off by default, and refused without the Prometheus
// Operator's API.

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"go.yaml.in/yaml/v3"

	"github.com/kaas-dev/kaas/deploy/monitoring"
)

var _ = Describe("The chart's monitoring objects", Label("k8s", "chart"), func() {
	It("renders a PodMonitor, the alert rules and the dashboard only when asked, identical to deploy/monitoring", func(ctx SpecContext) {
		kinds := func(args ...string) map[string]int {
			k := map[string]int{}
			for _, o := range decodeManifests(helmTemplate(ctx, args...)) {
				k[o.GetKind()]++
			}
			return k
		}
		Expect(kinds("--api-versions", "monitoring.coreos.com/v1")).NotTo(HaveKey("PodMonitor"), "off by default")
		Expect(kinds("--api-versions", "monitoring.coreos.com/v1")).NotTo(HaveKey("PrometheusRule"), "off by default")

		objs := decodeManifests(helmTemplate(ctx, "--api-versions", "monitoring.coreos.com/v1",
			"--set", "brokerPodMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true",
			"--set", "broker.adminAuthTokenSecret.name=admin-token"))
		var rulesFile map[string]any
		Expect(yaml.Unmarshal(monitoring.RulesFile, &rulesFile)).To(Succeed())
		var dashboard map[string]any
		Expect(json.Unmarshal(monitoring.DashboardFile, &dashboard)).To(Succeed())
		seen := map[string]bool{}
		for _, o := range objs {
			switch o.GetKind() {
			case "PodMonitor":
				seen["PodMonitor"] = true
				eps := o.Object["spec"].(map[string]any)["podMetricsEndpoints"].([]any)
				Expect(eps).To(HaveLen(1))
				ep := eps[0].(map[string]any)
				Expect(ep).To(HaveKeyWithValue("port", "admin"))
				Expect(ep).To(HaveKeyWithValue("path", "/metrics"))
				Expect(ep["relabelings"]).To(ContainElement(HaveKeyWithValue("replacement", "kaas")), "the job the rules select")
				Expect(ep["authorization"]).To(HaveKeyWithValue("credentials", HaveKeyWithValue("name", "admin-token")))
			case "PrometheusRule":
				seen["PrometheusRule"] = true
				// Compare through JSON, so both sides have the same number types.
				got, err := json.Marshal(o.Object["spec"])
				Expect(err).NotTo(HaveOccurred())
				want, err := json.Marshal(rulesFile)
				Expect(err).NotTo(HaveOccurred())
				Expect(got).To(MatchJSON(want), "the PrometheusRule carries kaas-alerts.yaml unchanged")
			case "ConfigMap":
				if data, ok := o.Object["data"].(map[string]any)["kaas-dashboard.json"].(string); ok {
					seen["dashboard"] = true
					Expect(data).To(MatchJSON(monitoring.DashboardFile))
				}
			}
		}
		Expect(seen).To(HaveLen(3), "rendered %v", seen)
		Expect(helmTemplateRefused(ctx, "--set", "brokerPodMonitor.enabled=true")).To(ContainSubstring("monitoring.coreos.com/v1"))
		Expect(helmTemplateRefused(ctx, "--set", "prometheusRule.enabled=true")).To(ContainSubstring("monitoring.coreos.com/v1"))
	})
})
