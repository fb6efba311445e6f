#!/usr/bin/env bash
# JetStream side by side with the real `nats bench js` (natscli) as the load generator: natsd
# (fsync before every ack), nats-server with its default lazy sync (sync_interval 2m) and
# nats-server with `sync_interval: always`. Rows: async publish to a file stream, sync publish to a
# file stream (rate and latency p50), async publish to a memory stream, async publish to 100 file
# streams at once (100 CLI processes in parallel, one stream each), and the consumer side: `nats
# bench js fetch`, `consume` (durable pull consumer, explicit acks) and `ordered` (ephemeral
# ordered consumer) reading a file stream prefilled with N messages by `nats bench js pub async`
# (unmeasured) in the same server; and KV: `nats bench kv put` (one client, each put waiting for
# its ack) and `nats bench kv get` (direct gets by key of a bucket prefilled with N keys by
# `nats bench kv put`, unmeasured). 128 B payloads everywhere.
#
# Every run gets a fresh server on a free 127.0.0.1 port with a fresh store directory (deleted
# afterwards). Round 0 calibrates: it runs each row on each side with a small count, unmeasured,
# and sizes that side's count for the row so a measured run lasts about TARGET_S seconds (the
# 100-stream row is sized from the side's 1-stream async rate, TARGET_MANY_S seconds). Then
# ROUNDS measured rounds, side order rotated each round; medians, ratios natsd / side, and server
# CPU (utime+stime from /proc/PID/stat) per stored (consumer rows: delivered) message. The stored
# count is checked after every run ($JS.API.STREAM.LIST), and after fetch and consume the durable
# consumer's ack floor ($JS.API.CONSUMER.INFO: every message acked). A side that fails (server
# does not start, CLI error or timeout, wrong stored count or ack floor, server dies) is reported
# "n/a (error: …)" for that row and not retried, and the run goes on; every CLI
# call has a timeout and the whole run a time budget (DEADLINE_S), so nothing hangs.
#
# Usage: natscli-js-ab.sh NATSD NATS_SERVER NATS [ROUNDS]
# Environment (all optional):
#   ROUNDS=3        measured rounds per side and row
#   MSGS=N          fixed message count for every row and side (total over all streams for the
#                   100-stream row); skips calibration. MSGS_ASYNC, MSGS_SYNC, MSGS_MEM, MSGS_MANY
#                   do the same for one row.
#   TARGET_S=3      calibrated duration of a measured run, in seconds (TARGET_MANY_S=10 for the
#                   100-stream row, whose clients take about 2 s to start and spread their starts)
#   MSGS_FETCH, MSGS_CONSUME, MSGS_ORDERED, MSGS_KVGET: the same for a row that reads (the
#                   prefill is as many); MSGS_KVPUT for kv put
#   ROWS="async sync mem many fetch consume ordered kvput kvget"   rows to run
#   SIDES="natsd nats-server nats-server-always"   sides to run
#   CONSUMER_SIDES="natsd nats-server"   sides of SIDES the consumer and kv get rows run on
#                   (prefilling at nats-server-always's ~2,000 msgs/s would take minutes)
#   STREAMS=100     streams (and CLI processes) in the "many" row
#   BATCH=500       --batch of `nats bench js pub async` (the CLI's default)
#   PRECREATE=1     create the streams with `nats stream add` before each run (unmeasured) and
#                   run `nats bench` without --create: for a server that refuses the stream
#                   `nats bench --create` asks for (it always sets allow_batched)
#   CLI_TIMEOUT=45  seconds allowed per CLI call
#   DEADLINE_S=720  no new run starts after this many seconds (one run can add ~65 s at worst)
#   ACK_TIMEOUT=20s the CLI's --timeout (its 5 s default expires on nats-server-always's acks
#                   with 100 × 500 messages in flight)
#   JS_TMPDIR       parent of the store directories (default $TMPDIR or /tmp; not a tmpfs!)
set -uo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 NATSD NATS_SERVER NATS [ROUNDS]" >&2
  exit 2
fi
NATSD=$1 REF=$2 NATS=$3
ROUNDS=${ROUNDS:-${4:-3}}
TARGET_S=${TARGET_S:-3}
TARGET_MANY_S=${TARGET_MANY_S:-10}
ROWS=${ROWS:-async sync mem many fetch consume ordered kvput kvget}
SIDES=${SIDES:-natsd nats-server nats-server-always}
CONSUMER_SIDES=${CONSUMER_SIDES:-natsd nats-server}
STREAMS=${STREAMS:-100}
BATCH=${BATCH:-500}
CLI_TIMEOUT=${CLI_TIMEOUT:-45}
ACK_TIMEOUT=${ACK_TIMEOUT:-20s}
PRECREATE=${PRECREATE:-0}
DEADLINE_S=${DEADLINE_S:-720}
SIZE=128B
HZ=$(getconf CLK_TCK)
START=$SECONDS

TMP=$(mktemp -d "${JS_TMPDIR:-${TMPDIR:-/tmp}}/natscli-js-ab.XXXXXX") || exit 1
SP=""
cleanup() {
  if [ -n "$SP" ] && kill -0 "$SP" 2>/dev/null; then kill -KILL "$SP" 2>/dev/null; wait "$SP" 2>/dev/null; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
FSTYPE=$(df --output=fstype "$TMP" 2>/dev/null | tail -1)
if [ "$FSTYPE" = tmpfs ]; then
  echo "warning: $TMP is on tmpfs, where fsync is free; set JS_TMPDIR to a directory on a disk" >&2
fi

declare -A BASE=([async]=10000 [sync]=2000 [mem]=50000 [many]=50000 [fetch]=50000 [consume]=50000 [ordered]=50000
  [kvput]=2000 [kvget]=2000)
declare -A MAXN=([async]=1000000 [sync]=100000 [mem]=1000000 [many]=1000000 [fetch]=2000000 [consume]=2000000 [ordered]=2000000
  [kvput]=100000 [kvget]=200000)
declare -A FIXED=([async]=${MSGS_ASYNC:-${MSGS:-}} [sync]=${MSGS_SYNC:-${MSGS:-}} [mem]=${MSGS_MEM:-${MSGS:-}} [many]=${MSGS_MANY:-${MSGS:-}}
  [fetch]=${MSGS_FETCH:-${MSGS:-}} [consume]=${MSGS_CONSUME:-${MSGS:-}} [ordered]=${MSGS_ORDERED:-${MSGS:-}}
  [kvput]=${MSGS_KVPUT:-${MSGS:-}} [kvget]=${MSGS_KVGET:-${MSGS:-}})
declare -A TITLE=([async]="js pub async, file, 1 stream" [sync]="js pub sync, file, 1 stream"
  [mem]="js pub async, memory, 1 stream" [many]="js pub async, file, $STREAMS streams"
  [fetch]="js fetch (durable pull, explicit ack), file" [consume]="js consume (durable pull, explicit ack), file"
  [ordered]="js ordered (ephemeral ordered consumer), file"
  [kvput]="kv put (one client, each put waits for its ack), file" [kvget]="kv get (one client, direct get by key), file")
# FAILED: a side's row that cannot go on (its calibration failed, or the time budget ran out);
# RFAILED: measured rounds that failed, the others still run and count (a client stall in one
# round, as nats.go's pull consumer sometimes has, does not take the row with it)
declare -A COUNT=() FAILED=() RFAILED=() CALRATE=()

is_consumer() { case $1 in fetch | consume | ordered) return 0 ;; esac; return 1; }
is_kv() { case $1 in kvput | kvget) return 0 ;; esac; return 1; }
# rows that read what an unmeasured prefill stored; they run on CONSUMER_SIDES only
is_prefilled() { is_consumer "$1" || [ "$1" = kvget ]; }
log() { echo "[$(date +%T)] $*" >&2; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null; }
freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
rate_of() { grep -Eo 'stats: [0-9,]+ msgs/sec' "$1" | head -1 | tr -dc '0-9'; }
p50_of() { grep -Eo 'P50: [0-9.,]+us' "$1" | head -1 | tr -d ',' | sed 's/P50: //; s/us//'; }

# stream_of ROW [K] → STREAM SUBJECT STORAGE MAXBYTES (MAXBYTES: the CLI's 1GB; 64MB a stream
# for 100 streams, else nats-server refuses to reserve 100 GB of its default store limit)
stream_of() {
  case $1 in
    async | sync | fetch | consume | ordered) echo benchstream js.bench file 1GB ;;
    mem) echo benchstream js.bench memory 1GB ;;
    kvput | kvget) echo KV_benchbucket '$KV.benchbucket.>' file 1GB ;;
    many) echo "bench$2 js.bench.$2 file 64MB" ;;
  esac
}

# cli_args ROW MSGS [K] → CMD=(arguments after `nats -s URL`); for a consumer row the measured
# consumer bench (its prefill is `cli_args async MSGS`)
cli_args() {
  local row=$1 m=$2 k=${3:-} name subj storage maxb mode=async
  read -r name subj storage maxb <<<"$(stream_of "$row" "$k")"
  if is_kv "$row"; then
    # the bucket (benchbucket, file, history 1) is made by `nats bench kv put` itself
    CMD=(--timeout "$ACK_TIMEOUT" bench kv "${row#kv}" --msgs "$m" --no-progress)
    [ "$row" = kvput ] && CMD+=(--size "$SIZE")
    return
  fi
  if is_consumer "$row"; then
    CMD=(--timeout "$ACK_TIMEOUT" bench js "$row" --stream "$name" --msgs "$m" --no-progress)
    return
  fi
  [ "$row" = sync ] && mode=sync
  CMD=(--timeout "$ACK_TIMEOUT" bench js pub "$mode" "$subj" --stream "$name")
  [ "$PRECREATE" = 1 ] || CMD+=(--create --storage "$storage" --maxbytes "$maxb")
  [ "$mode" = async ] && CMD+=(--batch "$BATCH")
  CMD+=(--size "$SIZE" --msgs "$m" --no-progress)
}

# add_args ROW [K] → ADD=(arguments after `nats -s URL`): the stream `nats bench --create` makes
# (limits, discard new, R1, 2m duplicate window, direct get) without allow_batched
add_args() {
  local name subj storage maxb
  read -r name subj storage maxb <<<"$(stream_of "$1" "${2:-}")"
  ADD=(stream add "$name" --subjects "$subj" --storage "$storage" --replicas 1 --retention limits
    --discard new --max-bytes "$maxb" --dupe-window 2m --allow-direct --defaults)
}

# precreate URL ROW → creates the row's streams (PRECREATE=1), unmeasured; sets ERR on failure
precreate() {
  local k pids=() rc=0
  is_kv "$2" && return # a KV bucket has no allow_batched to avoid
  if [ "$2" = many ]; then
    for k in $(seq "$STREAMS"); do
      add_args many "$k"
      timeout -k 2 10 "$NATS" --no-context -s "$1" "${ADD[@]}" >"$TMP/add.$k" 2>&1 &
      pids+=($!)
    done
    for k in "${pids[@]}"; do wait "$k" || rc=$?; done
  else
    add_args "$2"
    timeout -k 2 10 "$NATS" --no-context -s "$1" "${ADD[@]}" >"$TMP/add.1" 2>&1 || rc=$?
  fi
  [ "$rc" = 0 ] || ERR="nats stream add failed (rc=$rc): $(cat "$TMP"/add.* | grep -v '^$' | grep -i -m1 error)"
  rm -f "$TMP"/add.*
}

# server_cmd SIDE PORT DIR [print] → SRV=(command line); writes DIR.conf for nats-server-always
server_cmd() {
  case $1 in
    natsd) SRV=("$NATSD" -a 127.0.0.1 -p "$2" -js -sd "$3") ;;
    nats-server) SRV=("$REF" -a 127.0.0.1 -p "$2" -js -sd "$3") ;;
    nats-server-always)
      [ -n "${4:-}" ] || printf 'jetstream { store_dir: "%s", sync_interval: always }\n' "$3" >"$3.conf"
      SRV=("$REF" -a 127.0.0.1 -p "$2" -c "$3.conf") ;;
  esac
}

stop_server() {
  local i
  [ -n "$SP" ] || return 0
  kill -TERM "$SP" 2>/dev/null
  for i in $(seq 100); do kill -0 "$SP" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$SP" 2>/dev/null; then
    log "  $side did not exit 10 s after SIGTERM: SIGKILL"
    kill -KILL "$SP" 2>/dev/null
  fi
  wait "$SP" 2>/dev/null
  SP=""
}

# stored URL → "STREAMS MSGS" from $JS.API.STREAM.LIST, or empty
stored() {
  timeout -k 2 10 "$NATS" --no-context -s "$1" req --raw '$JS.API.STREAM.LIST' '' 2>/dev/null |
    jq -r 'select(.streams) | "\(.total) \([.streams[].state.messages] | add // 0)"' 2>/dev/null
}

# prefill URL ROW M → M messages in the consumer rows' stream, by the CLI's own async
# publisher, or M keys in the KV bucket by its putter (unmeasured); sets ERR on failure
prefill() {
  local rc m=$3
  if [ "$2" = kvget ]; then cli_args kvput "$m"; else cli_args async "$m"; fi
  timeout -k 2 "$CLI_TIMEOUT" "$NATS" --no-context -s "$1" "${CMD[@]}" >"$TMP/prefill.out" 2>&1
  rc=$?
  if [ "$rc" != 0 ] || [ -z "$(rate_of "$TMP/prefill.out")" ]; then
    ERR="prefill of $m msgs: rc=$rc: $(grep -v '^$' "$TMP/prefill.out" | tail -1)"
  fi
}

# acked URL M → sets ERR unless the durable consumer nats-bench has its ack floor at stream
# sequence M (the CLI's acks are fire-and-forget: allow them 2 s to land)
acked() {
  local i f=""
  for i in $(seq 20); do
    f=$(timeout -k 2 10 "$NATS" --no-context -s "$1" req --raw '$JS.API.CONSUMER.INFO.benchstream.nats-bench' '' 2>/dev/null |
      jq -r '.ack_floor.stream_seq // empty' 2>/dev/null)
    [ "$f" = "$2" ] && return
    sleep 0.1
  done
  ERR="consumer ack floor at stream seq ${f:-?} after the run, expected $2"
}

# run ROUND ROW SIDE M → sets RES ("rate ns_per_msg p50_us", for 100 streams "span_rate
# ns_per_msg sum_of_client_rates") or ERR (reason)
run() {
  local round=$1 row=$2 side=$3 m=$4 port dir url t0 t1 out rc r p50="-" k per n st end cr pids
  local rspan rsum spread span
  RES="" ERR=""
  port=$(freeport)
  dir="$TMP/store-$row-$side-$round"
  mkdir -p "$dir"
  server_cmd "$side" "$port" "$dir"
  "${SRV[@]}" >"$TMP/server.log" 2>&1 &
  SP=$!
  for _ in $(seq 100); do
    kill -0 "$SP" 2>/dev/null || break
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
  if ! kill -0 "$SP" 2>/dev/null || ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    ERR="server did not start: $(tail -1 "$TMP/server.log")"
    stop_server; rm -rf "$dir" "$dir.conf"; return
  fi
  url=nats://127.0.0.1:$port
  out="$TMP/cli.out"
  if [ "$PRECREATE" = 1 ]; then
    precreate "$url" "$row"
    if [ -n "$ERR" ]; then stop_server; rm -rf "$dir" "$dir.conf"; return; fi
  fi
  if is_prefilled "$row"; then
    prefill "$url" "$row" "$m"
    if [ -n "$ERR" ]; then stop_server; rm -rf "$dir" "$dir.conf"; return; fi
  fi
  t0=$(ticks "$SP")
  if [ "$row" = many ]; then
    per=$(( (m + STREAMS - 1) / STREAMS ))
    m=$((per * STREAMS))
    pids=()
    for k in $(seq "$STREAMS"); do
      cli_args many "$per" "$k"
      ( timeout -k 2 "$CLI_TIMEOUT" "$NATS" --no-context -s "$url" "${CMD[@]}" >"$out.$k" 2>&1
        echo "$? $(date +%s.%N)" >"$out.$k.end" ) &
      pids+=($!)
    done
    wait "${pids[@]}"
    t1=$(ticks "$SP")
    n=0 r=""
    for k in $(seq "$STREAMS"); do
      read -r rc end <"$out.$k.end"
      cr=$(rate_of "$out.$k")
      if [ "$rc" != 0 ] || [ -z "$cr" ]; then
        n=$((n + 1))
        [ -n "$ERR" ] || ERR="client $k: rc=$rc $(grep -v '^$' "$out.$k" | tail -1)"
      else
        echo "$end $cr"
      fi
    done >"$out.spans"
    if [ "$n" -gt 0 ]; then
      ERR="$n of $STREAMS clients failed (first: $ERR)"
    else
      # client k published from end_k − per/rate_k to end_k; the row's rate is all messages /
      # (last end − first start), as nats bench itself sums --clients. Starting 100 CLI processes
      # on 2 cores spreads the starts over 0.5–3 s, which runs of ~8 s keep small.
      r=$(awk -v per="$per" '{e=$1; s=e-per/$2; if (NR==1||e>me) me=e; if (NR==1||s<ms) ms=s
            if (NR==1||s>ls) ls=s; if (NR==1||e<fe) fe=e; sum+=$2}
          END {printf "%.0f %.0f %.2f %.2f", NR*per/(me-ms), sum, ls-ms, me-ms}' "$out.spans")
      read -r rspan rsum spread span <<<"$r"
      log "  $side many: $rspan msgs/s over ${span}s (starts spread over ${spread}s); sum of client rates $rsum"
      r=$rspan p50=$rsum
    fi
  else
    cli_args "$row" "$m"
    timeout -k 2 "$CLI_TIMEOUT" "$NATS" --no-context -s "$url" "${CMD[@]}" >"$out" 2>&1
    rc=$?
    t1=$(ticks "$SP")
    r=$(rate_of "$out")
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
      ERR="CLI timed out after ${CLI_TIMEOUT}s"
    elif [ "$rc" != 0 ] || [ -z "$r" ]; then
      ERR="CLI rc=$rc: $(grep -v '^$' "$out" | tail -1)"
    elif [ "$row" = sync ] || is_kv "$row"; then
      p50=$(p50_of "$out"); [ -n "$p50" ] || p50="-"
    elif [ "$row" = fetch ] || [ "$row" = consume ]; then
      acked "$url" "$m"
    fi
  fi
  if [ -z "$ERR" ] && ! kill -0 "$SP" 2>/dev/null; then ERR="server exited during the run"; fi
  if [ -z "$ERR" ]; then
    st=$(stored "$url")
    local want_s=1; [ "$row" = many ] && want_s=$STREAMS
    if [ -z "$st" ]; then
      log "  $side $row: stored count unverified (\$JS.API.STREAM.LIST gave nothing usable)"
    elif [ "$st" != "$want_s $m" ]; then
      ERR="stored ${st#* } msgs in ${st% *} streams, expected $m in $want_s"
    fi
  fi
  stop_server
  if grep -qiE 'panic|fatal error|data race' "$TMP/server.log"; then
    log "  $side: server log: $(grep -iE -m1 'panic|fatal error|data race' "$TMP/server.log")"
    [ -n "$ERR" ] || ERR="server log: panic/fatal"
  fi
  rm -rf "$dir" "$dir.conf"
  [ -n "$ERR" ] && return
  [ -n "$t0" ] && [ -n "$t1" ] || { ERR="could not read /proc/$SP/stat"; return; }
  RES="$r $(( (t1 - t0) * 1000000000 / HZ / m )) $p50"
}

# size_count ROW SIDE RATE → COUNT[ROW.SIDE] = RATE × target, a multiple of BATCH, at least the
# calibration count, at most MAXN
size_count() {
  local t=$TARGET_S
  [ "$1" = many ] && t=$TARGET_MANY_S
  COUNT[$1.$2]=$(awk -v r="$3" -v t="$t" -v lo="${BASE[$1]}" -v hi="${MAXN[$1]}" -v b="$BATCH" \
    'BEGIN {n=int(r*t/b+0.5)*b; if (n<lo) n=lo; if (n>hi) n=hi; print n}')
}

read -ra SIDE_LIST <<<"$SIDES"
read -ra ROW_LIST <<<"$ROWS"
NS=${#SIDE_LIST[@]}
log "store dirs under $TMP ($FSTYPE); $ROUNDS rounds; target ${TARGET_S}s per run; budget ${DEADLINE_S}s"
for round in $(seq 0 "$ROUNDS"); do
  for row in "${ROW_LIST[@]}"; do
    for j in $(seq 0 $((NS - 1))); do
      side=${SIDE_LIST[$(( (j + (round > 0 ? round - 1 : 0)) % NS ))]}
      [ -n "${FAILED[$row.$side]:-}" ] && continue
      if is_prefilled "$row" && [[ " $CONSUMER_SIDES " != *" $side "* ]]; then continue; fi
      if [ "$round" = 0 ]; then
        [ -n "${FIXED[$row]}" ] && { COUNT[$row.$side]=${FIXED[$row]}; continue; }
        # 100 streams: a short calibration run measures only the CLI processes starting, so size
        # the row from this side's 1-stream async rate when there is one
        if [ "$row" = many ] && [ -n "${CALRATE[async.$side]:-}" ]; then
          size_count many "$side" "${CALRATE[async.$side]}"
          log "$row $side: sized from the 1-stream async rate: ${COUNT[$row.$side]} msgs"
          continue
        fi
        m=${BASE[$row]}
      else
        m=${COUNT[$row.$side]}
      fi
      if [ $((SECONDS - START)) -ge "$DEADLINE_S" ]; then
        FAILED[$row.$side]="skipped: time budget (${DEADLINE_S}s) used up"
        log "$row $side: ${FAILED[$row.$side]}"
        continue
      fi
      run "$round" "$row" "$side" "$m"
      if [ -n "$ERR" ]; then
        if [ "$round" = 0 ]; then
          FAILED[$row.$side]="round $round: $ERR"
        else
          RFAILED[$row.$side]+="${RFAILED[$row.$side]:+; }round $round: $ERR"
        fi
        log "$row $side round $round ($m msgs): FAILED: $ERR"
        continue
      fi
      log "$row $side round $round ($m msgs): $RES"
      if [ "$round" = 0 ]; then
        CALRATE[$row.$side]=${RES%% *}
        size_count "$row" "$side" "${RES%% *}"
      else
        echo "$row $side $RES" >>"$TMP/rows"
      fi
    done
  done
done
touch "$TMP/rows"

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# cell ROW SIDE FIELD → median over the side's measured rounds, "n/a (error: …)" or "–"
cell() {
  local v n e
  n=$(awk -v r="$1" -v s="$2" '$1==r && $2==s' "$TMP/rows" | wc -l)
  v=$(awk -v r="$1" -v s="$2" -v f="$3" '$1==r && $2==s && $f!="-" {print $f}' "$TMP/rows" | median)
  e=${FAILED[$1.$2]:-${RFAILED[$1.$2]:-}}
  if [ -n "$e" ] && [ "$n" = 0 ]; then
    # the error's last words (the server's description), short and with no table pipes
    e=${e%%; round *} # the first failed round's
    e=$(printf '%s' "${e#round * }" | tr '|' '/' | sed -E 's/.*(description=|nats: error: )//')
    [ ${#e} -gt 70 ] && e="${e:0:67}..."
    echo "n/a (error: $e)"
  elif [ -z "$v" ]; then echo "–"
  elif [ "$n" -lt "$ROUNDS" ]; then echo "$v ($n/$ROUNDS)"
  else echo "$v"; fi
}
ratio() { awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN {if (a+0>0 && b+0>0) printf "%.2f×", a/b; else printf "–"}'; }
fmt() { case $1 in n/a*|–) echo "$1" ;; *) awk -v v="${1%% *}" -v rest="${1#"${1%% *}"}" -v p="$2" 'BEGIN {printf "%." p "f%s", v, rest}' ;; esac; }

echo
echo "| row (nats bench, 128 B) | metric | natsd | nats-server | natsd / nats-server | nats-server-always | natsd / nats-server-always |"
echo "|---|---|---:|---:|---:|---:|---:|"
for row in "${ROW_LIST[@]}"; do
  metrics=$'3|msgs/s|0\n4|server CPU ns/msg|0'
  { [ "$row" = sync ] || is_kv "$row"; } && metrics=$'3|msgs/s|0\n5|latency p50 µs|1\n4|server CPU ns/msg|0'
  [ "$row" = many ] && metrics=$'3|msgs/s (all / span)|0\n5|msgs/s (Σ of clients)|0\n4|server CPU ns/msg|0'
  is_consumer "$row" && metrics=$'3|msgs/s|0\n4|server CPU ns/delivery|0'
  while IFS='|' read -r f name prec; do
    a=$(cell "$row" natsd "$f"); b=$(cell "$row" nats-server "$f"); c=$(cell "$row" nats-server-always "$f")
    echo "| ${TITLE[$row]} | $name | $(fmt "$a" "$prec") | $(fmt "$b" "$prec") | $(ratio "$a" "$b") | $(fmt "$c" "$prec") | $(ratio "$a" "$c") |"
  done <<<"$metrics"
done
echo
echo "($ROUNDS measured rounds per side after a calibration round, side order rotated each round, medians;"
echo " msgs/s as printed by nats bench; for $STREAMS streams, all messages / (last client's end − first client's start),"
echo " which the clients' staggered start-up understates, and the sum of the clients' own rates, which overstates;"
echo " CPU = server utime+stime over the CLI run / messages stored (consumer rows: delivered, over the consumer bench only);"
echo " p50 = the CLI's per-message sync publish (kv: put or get) latency; consumer and kv get rows on $CONSUMER_SIDES"
echo " only, each reading a stream (bucket) prefilled with as many messages (keys) as it reads;"
how="made by \`nats bench --create\`"; [ "$PRECREATE" = 1 ] && how="made beforehand by \`nats stream add\` (PRECREATE=1)"
echo " streams $how; store on $FSTYPE under ${TMP%/*};"
echo " ratios natsd / side: msgs/s higher is better, CPU and latency lower is better)"
echo
echo "Every round (msgs/s, in run order; the spread is the noise):"
for row in "${ROW_LIST[@]}"; do
  line=""
  for side in "${SIDE_LIST[@]}"; do
    line+="  $side: $(awk -v r="$row" -v s="$side" '$1==r && $2==s {printf "%s ", $3}' "$TMP/rows")"
  done
  echo "- ${TITLE[$row]}:$line"
done
if [ $((${#FAILED[@]} + ${#RFAILED[@]})) -gt 0 ]; then
  echo
  echo "Failures (a cell with (n/$ROUNDS) is the median of the rounds that completed):"
  {
    for key in "${!FAILED[@]}"; do echo "- ${key%%.*} on ${key#*.}: ${FAILED[$key]}"; done
    for key in "${!RFAILED[@]}"; do echo "- ${key%%.*} on ${key#*.}: ${RFAILED[$key]}"; done
  } | sort
  if [ "$PRECREATE" != 1 ] && printf '%s\n' "${FAILED[@]}" | grep -q '(10052)'; then
    echo "(10052: \`nats bench --create\` always asks for allow_batched; PRECREATE=1 makes the streams without it)"
  fi
fi

echo
echo "Commands (PORT a free port, DIR a fresh store directory, N the message count below):"
for side in "${SIDE_LIST[@]}"; do
  server_cmd "$side" PORT DIR print
  printf '  %-19s %s' "$side:" "$(printf '%q ' "${SRV[@]}")"
  [ "$side" = nats-server-always ] && printf '  # DIR.conf: jetstream { store_dir: "DIR", sync_interval: always }'
  echo
done
for row in "${ROW_LIST[@]}"; do
  if [ "$row" = many ]; then cli_args many "N/$STREAMS" K; else cli_args "$row" N; fi
  echo "  ${TITLE[$row]}:"
  if is_prefilled "$row"; then
    local_cmd=("${CMD[@]}")
    if [ "$row" = kvget ]; then cli_args kvput N; else cli_args async N; fi
    echo "    $(printf '%q ' "$NATS" --no-context -s nats://127.0.0.1:PORT "${CMD[@]}")  # prefill, unmeasured"
    CMD=("${local_cmd[@]}")
  fi
  [ "$row" = many ] && printf '    K = 1..%s, all at once:\n' "$STREAMS"
  echo "    $(printf '%q ' "$NATS" --no-context -s nats://127.0.0.1:PORT "${CMD[@]}")"
  counts=""
  for side in "${SIDE_LIST[@]}"; do counts+=" $side=${COUNT[$row.$side]:-?}"; done
  echo "    N:$counts"
done
if [ "$PRECREATE" = 1 ]; then
  echo "  before each run (PRECREATE=1), for each stream of the row, e.g.:"
  add_args async; echo "    $(printf '%q ' "$NATS" --no-context -s nats://127.0.0.1:PORT "${ADD[@]}")"
fi
echo "  after each run: nats --no-context -s nats://127.0.0.1:PORT req --raw '\$JS.API.STREAM.LIST' ''   (stored-count check)"
echo "  after fetch and consume: nats --no-context -s nats://127.0.0.1:PORT req --raw '\$JS.API.CONSUMER.INFO.benchstream.nats-bench' ''   (ack floor = N)"
