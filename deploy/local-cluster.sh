#!/usr/bin/env bash
# Starts an N-node federation on this machine (loopback only), with development
# certificates, and prints how to reach each node. Ctrl-C stops them all and removes
# the temporary directory (a DIR you give is kept).
#   deploy/local-cluster.sh [N] [DIR]
set -euo pipefail
n="${1:-3}"
if ! [[ "$n" =~ ^[0-9]+$ ]] || (( n < 1 || n > 20 )); then
  echo "usage: $0 [N (1-20)] [DIR]" >&2
  exit 2
fi
# A directory made here is removed on exit; one given as DIR is kept.
made_dir=""
if [[ -n "${2:-}" ]]; then
  dir="$2"
else
  dir="$(mktemp -d -t factnode-cluster-XXXX)"
  made_dir="$dir"
fi
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n "$made_dir" ]]; then rm -rf -- "$made_dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
factnode="${FACTNODE_BIN:-factnode}"
base_port="${FACTNODE_BASE_PORT:-17400}"

ids=()
for i in $(seq 1 "$n"); do ids+=("node-$i"); done
"$factnode" certs --out "$dir/certs" "${ids[@]}" >/dev/null

for i in $(seq 1 "$n"); do
  cfg="$dir/node-$i.toml"
  {
    echo "listen = \"127.0.0.1:$((base_port + 2 * i))\""
    echo "node_id = \"node-$i\""
    echo "data_dir = \"$dir/data-$i\""
    echo "[federation]"
    echo "listen = \"127.0.0.1:$((base_port + 2 * i + 1))\""
    echo "cert = \"$dir/certs/node-$i.crt\""
    echo "key = \"$dir/certs/node-$i.key\""
    echo "ca = \"$dir/certs/ca.crt\""
    echo "sync_interval_seconds = ${FACTNODE_SYNC_INTERVAL:-2}"
    for j in $(seq 1 "$n"); do
      [[ "$i" == "$j" ]] && continue
      echo ""
      echo "[[peers]]"
      echo "address = \"127.0.0.1:$((base_port + 2 * j + 1))\""
      echo "node_id = \"node-$j\""
    done
  } > "$cfg"
  "$factnode" serve --config "$cfg" > "$dir/node-$i.log" 2>&1 &
  pids+=("$!")
  echo "node-$i: factnode status --address 127.0.0.1:$((base_port + 2 * i))   (log $dir/node-$i.log)"
done
# Ready when every node's grpc.health.v1 says SERVING (bounded: 30 s per node).
for i in $(seq 1 "$n"); do
  address="127.0.0.1:$((base_port + 2 * i))"
  for _ in $(seq 1 60); do
    "$factnode" health --address "$address" --timeout 1 >/dev/null 2>&1 && break
    sleep 0.5
  done
  "$factnode" health --address "$address" --timeout 1 >/dev/null 2>&1 \
    || { echo "node-$i did not start: see $dir/node-$i.log" >&2; exit 1; }
done
echo "all $n nodes serving; cluster files in $dir; Ctrl-C stops the nodes${made_dir:+ and removes it}"
wait
