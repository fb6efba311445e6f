# perf/perf.mk — the side-by-side benchmark rig (included by the top Makefile).
# `make perf`        every scenario, 5 alternating rounds per side, profiles + flame graphs
# `make perf-quick`  pub-only, 1→1, 1→4 at 16 B, 3 rounds (under 2 minutes)
# `make perf-self`   nats-server against itself: every ratio should land near 1.0
# `make perf-tls`    publish, 1→1 and 1→4 scenarios with every connection over TLS 1.3
# `make perf-cluster` 3-server clusters (publisher on A, subscriber on B) at 16 B, 128 B, 1 KiB
# `make perf-cluster-self` the same with nats-server against itself (the noise band)
# Pass more runner flags with PERF_ARGS="--scenarios 'pubsub|fanout' --natsd-args '--reactors 2'".
PERF_ARGS ?=

.PHONY: perf perf-quick perf-self perf-tls perf-cluster perf-cluster-self perf-tools perf-natscli perf-js perf-js-consumers perf-kv perf-conns perf-conns-tls soak

$(BIN)/perfrun: FORCE_PERF
	$(GO) build -o $(BIN)/perfrun ./perf/cmd/perfrun
	$(GO) build -o $(BIN)/natsbench ./perf/cmd/natsbench

.PHONY: FORCE_PERF
FORCE_PERF:

perf-tools: build nats-server $(BIN)/perfrun

perf: perf-tools
	./$(BIN)/perfrun --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server $(PERF_ARGS)

perf-quick: perf-tools
	./$(BIN)/perfrun --quick --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server $(PERF_ARGS)

perf-self: perf-tools
	./$(BIN)/perfrun --self --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server $(PERF_ARGS)

perf-tls: perf-tools
	./$(BIN)/perfrun --tls --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server \
		--scenarios '^(pub-16B|pubsub-(16B|128B|1KiB|16KiB)|fanout4-(16B|128B))$$' $(PERF_ARGS)

# Issue 19: a 3-server cluster per side and round (full mesh, default pool of 3 routes per pair,
# $SYS pinned), the publisher on A, the subscriber on B, C idle in the mesh; delivered msgs/s and
# the servers' CPU per delivered message (A+B+C, and each). ROUNDS=7 rounds of 1.5 s per side by
# default, then a profiled natsd round (A and B profiled). About 2 minutes.
CLUSTER_SCENARIOS := '^cluster-'
perf-cluster: perf-tools
	./$(BIN)/perfrun --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server \
		--scenarios $(CLUSTER_SCENARIOS) --rounds $(or $(ROUNDS),7) $(PERF_ARGS)

perf-cluster-self: perf-tools
	./$(BIN)/perfrun --self --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server \
		--scenarios $(CLUSTER_SCENARIOS) --rounds $(or $(ROUNDS),7) $(PERF_ARGS)

# The same three headline scenarios with the real `nats bench` CLI as load generator.
perf-natscli: build nats-server nats-cli
	bash perf/scripts/natscli-ab.sh $(BIN)/natsd $(TOOLS)/nats-server $(TOOLS)/nats $(or $(ROUNDS),5)

# JetStream with the real `nats bench js` as load generator: natsd vs nats-server (lazy default)
# vs nats-server with sync_interval: always; async/sync file, memory, 100 streams; then the
# consumer side (js fetch, consume, ordered on a prefilled file stream; natsd and nats-server
# only), then perf-js-consumers. About 14 minutes. ROUNDS=3 by default; MSGS=N fixes the message
# count of every run (else calibrated to ~3 s); ROWS="fetch consume ordered" runs the consumer
# rows alone.
perf-js: build nats-server nats-cli
	ROUNDS=$(or $(ROUNDS),3) MSGS=$(MSGS) bash perf/scripts/natscli-js-ab.sh $(BIN)/natsd $(TOOLS)/nats-server $(TOOLS)/nats
	$(MAKE) --no-print-directory perf-js-consumers

# 1,000 durable pull consumers (explicit ack), each filtered on its own subject of one file stream,
# while a publisher spreads CONSUMER_MSGS (50,000) async publishes over their subjects: deliveries/s,
# server CPU per delivery, natsd / nats-server (perf/cmd/jsconsumers; about 2 minutes). A side
# that fails is reported "n/a (error: …)". More flags: JSC_ARGS="--rate 2000 --consumers 100".
perf-js-consumers: build nats-server
	$(GO) build -o $(BIN)/jsconsumers ./perf/cmd/jsconsumers
	./$(BIN)/jsconsumers --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server \
		--consumers 1000 --msgs $(or $(CONSUMER_MSGS),50000) --rounds $(or $(ROUNDS),3) $(JSC_ARGS)

# Idle-connection rig: RSS per connection, accept rate and PING latency, natsd (both engines)
# and nats-server in one run. CONNS=15000 by default.
perf-conns: build nats-server
	$(GO) build -o $(BIN)/connrig ./perf/cmd/connrig
	./$(BIN)/connrig --n $(or $(CONNS),15000)

# The same over TLS 1.3, 100 handshakes at a time (an all-at-once storm of 15,000 handshakes
# outlasts the 2 s handshake timeout on both servers); RSS is read 8 s after the last one, once
# natsd has handed the handshakes' garbage back (its reclaimer is spaced by how long the last
# run took). Then an accept storm of 2,000.
perf-conns-tls: build nats-server
	$(GO) build -o $(BIN)/connrig ./perf/cmd/connrig
	./$(BIN)/connrig --tls --n $(or $(CONNS),15000) --concurrency 100 --settle 8s
	./$(BIN)/connrig --tls --n 2000 --targets natsd-gnet,nats-server

# Hostile clients against natsd (both engines, and TLS) and nats-server, 8 s per attack, with
# every bound checked (peak RSS ≤ 2× nats-server's, unrelated PING p50 ≤ 2× unloaded, RSS back
# down after the attacker left). Not part of `make test` (timing on a shared box is noisy).
soak: build nats-server
	$(GO) build -o $(BIN)/attackrig ./perf/cmd/attackrig
	./$(BIN)/attackrig --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server --check $(SOAK_ARGS)
	./$(BIN)/attackrig --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server --check --tls \
		--attacks slowsub,ping,badsub --targets nats-server,natsd-gnet,natsd-netpoll $(SOAK_ARGS)

# KV scale (issue 18): one bucket of KEYS keys (async puts, RSS per key, random gets) and
# BUCKETS buckets (create time, RSS, goroutines), natsd then nats-server.
perf-kv: build nats-server
	$(GO) build -o $(BIN)/kvscale ./perf/cmd/kvscale
	./$(BIN)/kvscale --natsd $(BIN)/natsd --nats-server $(TOOLS)/nats-server --keys $(or $(KEYS),1000000) --buckets $(or $(BUCKETS),1000)
