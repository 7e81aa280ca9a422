// Package specs holds kaas's black-box acceptance specs: each story starts the real
// kaas-broker binary on 127.0.0.1 and talks to it with real Kafka clients
// (franz-go, kcat, sarama, segmentio/kafka-go, confluent-kafka-python, kafkajs) and
// with kaasctl.
//
// Run everything:        go test ./specs/ -ginkgo.v -timeout 60m
// Only client stories:   go test ./specs/ -ginkgo.v -ginkgo.label-filter=clients
// Only the chaos story:  go test ./specs/ -ginkgo.v -ginkgo.label-filter=chaos -timeout 30m
// Skip the slow ones:    go test ./specs/ -ginkgo.v -ginkgo.label-filter='!slow'
//
// Environment:
//
//	KAAS_BROKER_BIN, KAAS_CTL_BIN  use these binaries instead of building ./cmd/...
//	KAAS_SPECS_RACE=1              build the binaries with -race
//	KAAS_SPECS_LOGDIR=DIR          keep every broker's log file in DIR (default: a temp dir per spec)
//	KAAS_NODE_MODULES=DIR          a node_modules directory holding kafkajs (else its specs skip)
package specs

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestSpecs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "kaas Acceptance Suite")
}

// bins are the binaries every spec process uses. They are built once, on parallel
// process #1, and handed to the others.
var bins binaries

var _ = SynchronizedBeforeSuite(func(ctx SpecContext) []byte {
	b := buildBinaries(ctx)
	data, err := json.Marshal(b)
	Expect(err).NotTo(HaveOccurred())
	return data
}, func(data []byte) {
	Expect(json.Unmarshal(data, &bins)).To(Succeed())
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
}, NodeTimeout(10*time.Minute))

var _ = SynchronizedAfterSuite(func() {}, func() {
	cleanupBinaries(bins)
})
