# Strata. `make run` starts one broker on the embedded default; `make test`
# runs every test, installing what the tests need.

GO       ?= go
BIN      := bin/strata
GOFLAGS  ?=
TESTTIME ?= 20m

.PHONY: all build image run test test-deps vet metrics-doc fuzz bench bench-tier bench-move bench-throughput bench-tls bench-txn clean cluster cluster-down chaos compat

all: build

# `strata version` prints VERSION and COMMIT, stamped here: the nearest
# tag (git describe; the commit when there is none) and the commit, with
# "-dirty" for a tree with local changes. Without git, the go command's
# build information.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/strata

# The container image as a tar for `docker load -i bin/strata-image.tar`
# (or podman load), built without a container engine: a static binary
# (CGO_ENABLED=0) for IMAGE_ARCH and a minimal root file system
# (internal/image). deploy/docker/Dockerfile builds the same image with
# Docker. SOURCE_DATE_EPOCH (default: the last commit's time) dates every
# file, so the same source gives the same image digest.
IMAGE      ?= strata:latest
IMAGE_ARCH ?= $(shell $(GO) env GOARCH)
IMAGE_TAR  ?= bin/strata-image.tar
image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/strata-linux-$(IMAGE_ARCH) ./cmd/strata
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} \
	  $(GO) run ./internal/image/mkimage --binary bin/strata-linux-$(IMAGE_ARCH) --arch $(IMAGE_ARCH) \
	  --tag $(IMAGE) --out $(IMAGE_TAR) --version "$$(git describe --always --dirty 2>/dev/null)"

# `make run` serves /metrics and /healthz on 127.0.0.1:9644, a port no
# Kafka, ZooKeeper, MinIO or Prometheus default uses. ARGS are appended to
# the serve flags, and a repeated flag wins over the one before:
#   make run ARGS="--set log.segment.bytes=1048576 --pprof"
#   make run ARGS="--metrics 127.0.0.1:9645"    (or --metrics= for none)
run: build
	./$(BIN) serve --broker-id 0 --listen 127.0.0.1:9092 --data-dir ./strata-data --tier file://$(CURDIR)/strata-data/tier --metrics 127.0.0.1:9644 $(ARGS)

# A local cluster: ZooKeeper, MinIO (bucket strata) and three brokers with
# --tier s3://strata/cluster on it, on free loopback ports
# (deploy/local/cluster.sh; state and logs in ./cluster-data).
cluster:
	./deploy/local/cluster.sh up

cluster-down:
	./deploy/local/cluster.sh down

test-deps:
	GO=$(GO) ./deploy/install-deps.sh kcat python3-confluent-kafka zookeeper promtool minio kafka compat-confluent-kafka

vet:
	$(GO) vet ./...

# docs/metrics.md, from the metrics the code declares (internal/obs); a
# test fails when the file is out of date.
metrics-doc:
	$(GO) run ./internal/obs/metricsdoc -w docs/metrics.md

test: test-deps vet
	$(GO) test -count=1 -timeout $(TESTTIME) ./...

# The client matrix (compat/): Kafka's Java client and tools, franz-go,
# sarama, kafka-go, kcat, python3-confluent-kafka (Debian's librdkafka),
# confluent-kafka from PyPI (its own librdkafka) and kafkajs against a
# real broker, and over TLS, mutual TLS and SASL_SSL (PLAIN, SCRAM,
# OAUTHBEARER); rewrites docs/compatibility.md. `make test` runs the same
# suite and only checks that file.
compat:
	GO=$(GO) ./deploy/install-deps.sh kcat python3-confluent-kafka zookeeper compat-java compat-kafkajs compat-confluent-kafka
	STRATA_COMPAT_WRITE=1 $(GO) test -count=1 -timeout 10m -run '^TestCompat$$' -v ./compat/

# The long reliability campaigns of tiered storage (issues 15 and 22),
# about thirteen minutes on two cores: 24 rounds of kill -9, SIGTERM, SIGSTOP
# past the ZooKeeper session and cuts from ZooKeeper, with leadership
# moves, under load while segments are mid-upload, 12 kill -9 rounds on
# a cluster with SASL_SSL between brokers and ACLs on, and a one-minute
# bucket outage (internal/e2e/chaos_tier_test.go,
# chaos_secure_test.go). `make test` runs short versions.
# STRATA_CHAOS_ROUNDS, STRATA_CHAOS_OUTAGE_SECONDS and STRATA_CHAOS_SEED
# are passed through.
CHAOSTIME ?= 60m
chaos:
	GO=$(GO) ./deploy/install-deps.sh zookeeper minio
	STRATA_CHAOS=1 $(GO) test -count=1 -timeout $(CHAOSTIME) -run '^(TestChaos|TestClusterTxnConsumeTransformProduce$$)' -v ./internal/e2e/

# Run each fuzz target for a short while (FUZZTIME each).
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The standard suite: Strata against Apache Kafka and kfake in the same
# run, three times; rewrites bench/RESULTS.md and the plots in
# bench/results. Every preset, the tier one included (it starts its own
# MinIO).
bench: build
	GO=$(GO) ./deploy/install-deps.sh minio kafka
	./$(BIN) bench --count 3 --out bench/results --results bench/RESULTS.md

# The tier preset alone, three times (about two minutes): writes
# bench/results/tier/ (report, plots, broker log) and its RESULTS.md.
bench-tier: build
	GO=$(GO) ./deploy/install-deps.sh minio
	./$(BIN) bench --preset tier --count 3 --out bench/results/tier --results bench/results/tier/RESULTS.md

# The move preset alone, three times (about six minutes, 25 GB of disk):
# issue 16's partition moves at 0.1, 1 and 4 GB of history, tiered against
# a full copy, and restore from zero; MOVE_SIZES (GB, comma-separated) for
# a smaller run.
MOVE_SIZES ?= 0.1,1,4
bench-move: build
	GO=$(GO) ./deploy/install-deps.sh minio zookeeper
	./$(BIN) bench --preset move --move-sizes $(MOVE_SIZES) --count 3 --out bench/results/move --results bench/results/move/RESULTS.md

# The throughput preset alone, five times (about three minutes): issue 2's
# page-cache goals with the floor server beside them; writes
# bench/results/throughput/ and its RESULTS.md.
bench-throughput: build
	./deploy/install-deps.sh kafka
	./$(BIN) bench --preset throughput --count 5 --out bench/results/throughput --results bench/results/throughput/RESULTS.md

# The TLS presets alone (about three minutes): issue 25's goals, Strata
# and Apache Kafka over TLS with the same certificates, and Strata in
# plaintext; writes bench/results/tls/ and its RESULTS.md.
bench-tls: build
	./deploy/install-deps.sh kafka
	./$(BIN) bench --preset tls,tls-latency --out bench/results/tls --results bench/results/tls/RESULTS.md

# The transaction presets alone (about six minutes): issue 26's goals,
# Strata and Apache Kafka with transactional producers (transactions of
# 10,000 and of 100 records) and read_committed consumers, against the
# idempotent producer; writes bench/results/txn/ and its RESULTS.md.
bench-txn: build
	./deploy/install-deps.sh kafka
	./$(BIN) bench --preset txn-idempotent,txn,txn-100,txn-latency --out bench/results/txn --results bench/results/txn/RESULTS.md

clean:
	rm -rf bin bench/out
