# natsd — two commands on a fresh machine: `make run` and `make test`.
GO        ?= go
BIN       := bin
TOOLS     := $(CURDIR)/.cache/tools
NATS_SERVER_VERSION := v2.15.2
NATSCLI_VERSION     := v0.5.0
TEST_TIMEOUT ?= 15m

# Build identity, stamped into the binary (start-up log, /varz git_commit). VERSION, when set,
# replaces the version in server/options.go.
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null)
VERSION   ?=
LDFLAGS   := -X github.com/natsd/natsd/server.Commit=$(COMMIT) $(if $(VERSION),-X github.com/natsd/natsd/server.Version=$(VERSION))

# make install: PREFIX and DESTDIR as usual; the unit goes where systemd looks under PREFIX.
PREFIX    ?= /usr/local
DESTDIR   ?=
UNITDIR   ?= $(PREFIX)/lib/systemd/system
IMAGE     ?= natsd

.PHONY: all build run test test-cluster vet fmt-check unit bench tools nats-server nats-cli clean install docker

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/natsd .

# The binary, and the systemd unit with ExecStart pointing at it. No nats-server symlink: on a
# host, a drop-in replacement is the operator's choice (ln -s natsd nats-server); the Docker
# image, whose manifests name /nats-server, has one.
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR)
	install -m 0755 $(BIN)/natsd $(DESTDIR)$(PREFIX)/bin/natsd
	sed 's|/usr/local/bin/natsd|$(PREFIX)/bin/natsd|' packaging/natsd.service > $(DESTDIR)$(UNITDIR)/natsd.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/natsd.service

# Needs a Docker daemon; packaging/packaging_test.go tests the image's build step without one.
docker:
	docker build --build-arg COMMIT=$(COMMIT) $(if $(VERSION),--build-arg VERSION=$(VERSION)) -t $(IMAGE) .

# Client port 4222, monitoring on 8222, JetStream with its store in .data/ (STORE_DIR=... for another).
run: build
	./$(BIN)/natsd -p 4222 -m 8222 -js -sd $(or $(STORE_DIR),.data)

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The whole suite, with the race detector. Fuzz targets run their seed corpora.
# The nats CLI comes from the module proxy for the CLI tests (test/cli_test.go), nats-server for
# the cluster tests (test/cluster_test.go: server processes joined by routes, in all-nats-server,
# all-natsd and mixed clusters). The integration tests (the cluster ones: all-natsd only) and the
# server's TLS and auth tests run again on the netpoll engine; the hostile-client test
# (perf/attack) measures RSS and so runs alone, after the rest.
test: build vet fmt-check nats-cli nats-server
	NATS_CLI=$(TOOLS)/nats NATS_SERVER=$(TOOLS)/nats-server $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	NATS_CLI=$(TOOLS)/nats NATS_SERVER=$(TOOLS)/nats-server NATSD_ENGINE=netpoll NATSD_TARGETS=natsd $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./test/
	NATSD_ENGINE=netpoll $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run 'TLS|Auth' ./server/
	NATSD_ATTACK_TEST=1 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -run TestAttacks ./perf/attack/

# The cluster tests alone; NATSD_CLUSTER_TOPOLOGIES=all-nats-server,all-natsd,mixed-natsd-seed,
# mixed-nats-server-seed (comma-separated) picks topologies, all four by default.
test-cluster: nats-cli nats-server
	NATS_CLI=$(TOOLS)/nats NATS_SERVER=$(TOOLS)/nats-server $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -run '^TestCluster$$' ./test/

# Micro-benchmarks with allocation counts (parse, L1 match, publish→deliver, store).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./parser/ ./sublist/ ./loop/ ./outbound/ ./transform/ ./filestore/ ./js/

# Reference binaries come from the Go module proxy into a folder this Makefile owns.
tools: nats-server nats-cli

nats-server: $(TOOLS)/nats-server
$(TOOLS)/nats-server:
	GOBIN=$(TOOLS) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)

nats-cli: $(TOOLS)/nats
$(TOOLS)/nats:
	GOBIN=$(TOOLS) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)

clean:
	rm -rf $(BIN)

-include perf/perf.mk
