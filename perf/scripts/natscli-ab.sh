#!/usr/bin/env bash
# Side-by-side with the real `nats bench` (natscli) as the load generator: pub-only, 1→1 and 1→4
# fan-out at 16 B, alternating natsd / nats-server each round, medians and ratios, plus server CPU
# per delivered message from /proc/PID/stat. Usage: natscli-ab.sh NATSD NATS_SERVER NATS [ROUNDS] [MSGS]
set -euo pipefail
NATSD=$1 REF=$2 NATS=$3 ROUNDS=${4:-5} N=${5:-2000000}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
HZ=$(getconf CLK_TCK)

ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
rate() { grep -Eo 'stats: [0-9,]+ msgs/sec' "$1" | head -1 | tr -d ', ' | sed 's/stats://; s/msgs\/sec//'; }
freeport() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# run_round SIDE SCENARIO SUBS → appends "side scenario msgs_per_sec ns_per_msg" to $TMP/rows
run_round() {
  local side=$1 scen=$2 subs=$3 bin port sp sub_pid t0 t1 delivered r
  bin=$NATSD; [ "$side" = nats-server ] && bin=$REF
  port=$(freeport)
  "$bin" -a 127.0.0.1 -p "$port" >"$TMP/server.log" 2>&1 &
  sp=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
  local url=nats://127.0.0.1:$port
  if [ "$subs" -gt 0 ]; then
    "$NATS" -s "$url" bench sub foo --clients "$subs" --msgs "$N" --size 16 --no-progress >"$TMP/sub.out" 2>&1 &
    sub_pid=$!
    sleep 1
  fi
  t0=$(ticks $sp)
  "$NATS" -s "$url" bench pub foo --msgs "$N" --size 16 --no-progress >"$TMP/pub.out" 2>&1
  if [ "$subs" -gt 0 ]; then wait "$sub_pid"; fi
  t1=$(ticks $sp)
  kill "$sp"; wait "$sp" 2>/dev/null || true
  if [ "$subs" -gt 0 ]; then
    r=$(rate "$TMP/sub.out"); delivered=$((N * subs))
  else
    r=$(rate "$TMP/pub.out"); delivered=$N
  fi
  echo "$side $scen $r $(( (t1 - t0) * 1000000000 / HZ / delivered ))" >>"$TMP/rows"
}

for i in $(seq "$ROUNDS"); do
  for scen in pub:0 pubsub:1 fanout4:4; do
    name=${scen%%:*} subs=${scen##*:}
    if [ $((i % 2)) -eq 1 ]; then order="natsd nats-server"; else order="nats-server natsd"; fi
    for side in $order; do run_round "$side" "$name" "$subs"; done
  done
done

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
printf '| scenario (nats bench, 16 B) | nats-server msgs/s | natsd msgs/s | ratio | nats-server ns/msg | natsd ns/msg | ratio |\n|---|---:|---:|---:|---:|---:|---:|\n'
for scen in pub pubsub fanout4; do
  rn=$(awk -v s=$scen '$1=="nats-server" && $2==s {print $3}' "$TMP/rows" | median)
  rd=$(awk -v s=$scen '$1=="natsd" && $2==s {print $3}' "$TMP/rows" | median)
  cn=$(awk -v s=$scen '$1=="nats-server" && $2==s {print $4}' "$TMP/rows" | median)
  cd=$(awk -v s=$scen '$1=="natsd" && $2==s {print $4}' "$TMP/rows" | median)
  awk -v s=$scen -v rn=$rn -v rd=$rd -v cn=$cn -v cd=$cd 'BEGIN {printf "| %s | %.0f | %.0f | %.2f× | %.0f | %.0f | %.2f× |\n", s, rn, rd, rd/rn, cn, cd, cd/cn}'
done
echo "($ROUNDS alternating rounds, $N msgs per round, medians; CPU = server utime+stime / messages delivered)"
