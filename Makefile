# kaas developer entry points. CI runs `make test` (through .ci/run).
#
#   make build          go build ./... and the binaries of ./cmd/... into bin/
#   make test           lint + unit tests (-race) + every acceptance spec
#   make unit           unit tests only (every package except specs/), with -race
#   make specs          acceptance specs (specs/), all labels
#   make specs-fast     acceptance specs without Label("slow")
#   make specs-clients  only Label("clients")
#   make specs-chaos    only Label("chaos")
#   make specs-txn      only Label("txn"): idempotent and transactional producers, InitProducerId, EOS copiers
#   make specs-acl      only Label("acl"): the ACL authorizer with franz-go, sarama, kafka-go and
#                       librdkafka (ACL and quota APIs, refusals, takeover of a refused partition)
#   make specs-hostile  only Label("hostile"): fault model T11, hostile connections beside good clients
#                       (KAAS_SPECS_HOSTILE_ATTACK=30s for a longer run of each attack)
#   make fuzz           every fuzz target in turn, FUZZTIME each (default 10m)
#   make fuzz-regress   the fuzz targets' seed corpora only (testdata/fuzz), as plain tests
#   make specs-k8s      only Label("k8s"): Topic resources, kaas-operator and the Helm chart against
#                       a real kube-apiserver and etcd (envtest)
#   make k8s-tools      build (or find cached) kube-apiserver, etcd and helm; prints their directory
#   make specs-floor    fault-model scenarios on the contract-floor filesystem (root, /dev/fuse)
#   make specs-gluster  bring up GlusterFS (.ci/gluster), run the multi-broker and
#                       gluster-labelled specs with one mount per broker, tear it down
#   make run            run a broker on 127.0.0.1:9092 (admin 127.0.0.1:9644)
#   make run-cluster    N brokers (default 3) sharing ./kaas-cluster-data, on 127.0.0.1:9092..
#   make bench          Go benchmarks, then kaas vs kfake vs disk with cmd/kaasbench (.ci/bench)
#   make bench-metrics  produce throughput and broker CPU with --metrics on and off, side by side
#                       (.ci/bench-metrics; ROUNDS, RECORDS)
#   make scale          3 brokers on one fresh local directory, kaasbench scale against them:
#                       SCALE_TOPICS x SCALE_PARTITIONS (1000 x 100) in one CreateTopics, idle
#                       cost, Metadata, a produce to every partition, kill -9 of broker
#                       SCALE_KILL (2) and the takeover (.ci/scale; SCALE_ARGS to kaasbench)
#   make scale-10k      the same at 10,000 partitions (SCALE_TOPICS=100)
#   make scale-gluster  the same on GlusterFS (.ci/gluster, root), each broker on its own FUSE
#                       mount of one volume, torn down at the end; 10,000 partitions unless
#                       SCALE_TOPICS is given (make scale SCALE_GLUSTER=1 for 1000 x 100)
#   make lint           gofmt -l must be empty, go vet, staticcheck
#
# Extra Ginkgo flags: make specs GINKGO_FLAGS='-ginkgo.focus=kcat'
#
# KAAS_NODE_MODULES names a node_modules directory holding kafkajs for
# specs/clients_security_test.go (.ci/run installs it with npm); without it
# the kafkajs specs skip.

GO            ?= go
BIN           ?= bin
SPECS_TIMEOUT ?= 60m
GINKGO_FLAGS  ?=
# SPECS_FILTER narrows `make specs` (and so `make test`) by label, e.g.
# SPECS_FILTER='!(cluster && !slow)' as .ci/run does (those run on GlusterFS).
SPECS_FILTER  ?=
RUN_ARGS      ?= --data /tmp/kaas-dev-data --listen 127.0.0.1:9092 --admin 127.0.0.1:9644 --auto-create-topics=true
BENCH_ARGS    ?=
SCALE_TOPICS     ?= 1000
SCALE_PARTITIONS ?= 100
SCALE_KILL       ?= 2
SCALE_GLUSTER    ?= 0
SCALE_ARGS       ?=
STATICCHECK_VERSION ?= v0.8.2

export KAAS_NODE_MODULES

UNIT_PKGS = $(shell $(GO) list ./... | grep -v '/specs$$')
SPECS     = $(GO) test -v -count=1 -timeout $(SPECS_TIMEOUT) ./specs/ -ginkgo.v -ginkgo.randomize-all

.PHONY: all build test unit specs specs-k8s k8s-tools specs-fast specs-clients specs-chaos specs-floor specs-gluster specs-txn specs-acl specs-hostile fuzz fuzz-regress run run-cluster bench bench-metrics scale scale-10k scale-gluster lint fmt-check vet staticcheck clean

all: build

build:
	$(GO) build ./...
	mkdir -p $(BIN)
	$(GO) build -o $(BIN)/ ./cmd/...

test: lint unit specs

unit:
	@if [ -z "$(strip $(UNIT_PKGS))" ]; then echo "no unit packages"; else \
		echo "$(GO) test -race -count=1 <unit packages>"; \
		$(GO) test -race -count=1 $(UNIT_PKGS); fi

# The k8s specs need kube-apiserver, etcd and helm: .ci/k8s-tools builds them
# from the Go module proxy once (about 15 minutes on a clean machine) and
# caches them outside the repository; set KAAS_K8S_TOOLS to skip the check.
K8S_TOOLS = KAAS_K8S_TOOLS="$${KAAS_K8S_TOOLS:-$$(bash .ci/k8s-tools)}"

specs:
	$(K8S_TOOLS) $(SPECS) $(if $(SPECS_FILTER),-ginkgo.label-filter='$(SPECS_FILTER)') $(GINKGO_FLAGS)

specs-fast:
	$(K8S_TOOLS) $(SPECS) -ginkgo.label-filter='!slow' $(GINKGO_FLAGS)

specs-k8s:
	$(K8S_TOOLS) $(SPECS) -ginkgo.label-filter=k8s $(GINKGO_FLAGS)

k8s-tools:
	bash .ci/k8s-tools

specs-clients:
	$(SPECS) -ginkgo.label-filter=clients $(GINKGO_FLAGS)

specs-chaos:
	$(SPECS) -ginkgo.label-filter=chaos $(GINKGO_FLAGS)

specs-floor:
	$(SPECS) -ginkgo.label-filter=floor $(GINKGO_FLAGS)

specs-txn:
	$(SPECS) -ginkgo.label-filter=txn $(GINKGO_FLAGS)

specs-acl:
	$(SPECS) -ginkgo.label-filter=acl $(GINKGO_FLAGS)

specs-hostile:
	$(SPECS) -ginkgo.label-filter=hostile $(GINKGO_FLAGS)

# Fuzz targets, as package:Target. `go test -fuzz` takes one target at a
# time, so fuzz runs them one after another. Inputs that fail land in each
# package's testdata/fuzz/<Target> (commit them as regression seeds); new
# interesting inputs stay in the Go cache. Every seed also runs with the
# unit tests (`make unit`), and fuzz-regress runs only them.
FUZZTIME     ?= 10m
FUZZ_TARGETS ?= ./wire:FuzzDispatch ./volume/records:FuzzValidate ./engine/auth:FuzzScramServer \
	./engine/auth:FuzzPlain ./engine/auth:FuzzOAuthBearer

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "$(GO) test -run '^$$' -fuzz '^'$$fn'$$' -fuzztime $(FUZZTIME) $$pkg"; \
		$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; done

fuzz-regress:
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "$(GO) test -count=1 -run '^'$$fn'$$' $$pkg"; \
		$(GO) test -count=1 -run "^$$fn\$$" $$pkg; done

# `make specs` skips the gluster specs (no mounts named); this target gives
# them mounts. GLUSTER_ROOT holds the bricks, state and mounts.
GLUSTER_ROOT ?= /tmp/kaas-gluster
specs-gluster:
	@set -e; trap 'bash .ci/gluster down $(GLUSTER_ROOT) >&2' EXIT; \
	mounts=$$(bash .ci/gluster up 3 $(GLUSTER_ROOT)); \
	cached=$$(bash .ci/gluster up-cached 2 $(GLUSTER_ROOT)); \
	KAAS_SPECS_MOUNTS=$$mounts KAAS_SPECS_CACHED_MOUNTS=$$cached \
		$(SPECS) -ginkgo.label-filter='gluster || (cluster && !slow)' $(GINKGO_FLAGS)

run:
	$(GO) run ./cmd/kaas-broker $(RUN_ARGS)

# N brokers sharing one data directory (127.0.0.1:9092..), stopped with Ctrl-C.
N ?= 3
run-cluster:
	bash .ci/run-cluster $(N)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(UNIT_PKGS)
	bash .ci/bench $(BENCH_ARGS)

bench-metrics:
	bash .ci/bench-metrics $(BENCH_ARGS)

scale:
	SCALE_TOPICS=$(SCALE_TOPICS) SCALE_PARTITIONS=$(SCALE_PARTITIONS) SCALE_KILL=$(SCALE_KILL) \
		SCALE_GLUSTER=$(SCALE_GLUSTER) GLUSTER_ROOT=$(GLUSTER_ROOT) bash .ci/scale $(SCALE_ARGS)

scale-10k:
	$(MAKE) scale SCALE_TOPICS=100 SCALE_PARTITIONS=100

# SCALE_TOPICS is 100 here unless the command line or the environment sets it.
scale-gluster:
	$(MAKE) scale SCALE_GLUSTER=1 SCALE_TOPICS=$(if $(filter file,$(origin SCALE_TOPICS)),100,$(SCALE_TOPICS))

lint: fmt-check vet staticcheck

fmt-check:
	@out="$$(gofmt -l $$(find . -name '*.go' -not -path './$(BIN)/*'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi; \
	echo "gofmt: clean"

vet:
	$(GO) vet ./...

# staticcheck at a pinned version, fetched through the Go module proxy.
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

clean:
	rm -rf $(BIN)
