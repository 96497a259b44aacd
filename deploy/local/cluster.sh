#!/usr/bin/env bash
# A local Strata cluster: ZooKeeper, MinIO (with a bucket) and three brokers
# with tiered storage on it, on free loopback ports.
#
#   cluster.sh up             install what is missing, build, start, wait until ready
#   cluster.sh status         show what runs and where
#   cluster.sh down [--purge] stop everything; --purge also removes the state dir
#
# Environment:
#   CLUSTER_DIR   state dir (logs, data, PID files); default ./cluster-data
#   STRATA_BIN    use this strata binary instead of building bin/strata
#   READY_TIMEOUT seconds to wait for ZooKeeper and each broker (default 60)
#   STOP_TIMEOUT  seconds between SIGTERM and SIGKILL on down (default 30)
#   CLUSTER_TIER  1 (default): start MinIO and give the brokers
#                 --tier s3://$TIER_BUCKET/$TIER_PREFIX on it; 0: no MinIO, no tier
#   TIER_BUCKET   bucket made in MinIO (default strata)
#   TIER_PREFIX   key prefix of the brokers' objects (default cluster)
#   BROKER_ARGS   extra arguments to every `strata serve`, split on spaces
#                 (e.g. "--set remote.log.manager.task.interval.ms=1000")
#
# MinIO's root credentials are made up once per state dir (minio/credentials)
# and given to the brokers as AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
#
# `make cluster` / `make cluster-down` run this script; so do the tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-./cluster-data}"
mkdir -p "$CLUSTER_DIR"
DIR="$(cd "$CLUSTER_DIR" && pwd)"
PIDS="$DIR/pids"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"
BROKERS=(1 2 3)
ZK_JAR=/usr/share/java/zookeeper.jar
ZK_LOG_JAR=/usr/share/java/slf4j-simple.jar
ZK_TICK_MS=200
CLUSTER_TIER="${CLUSTER_TIER:-1}"
TIER_BUCKET="${TIER_BUCKET:-strata}"
TIER_PREFIX="${TIER_PREFIX:-cluster}"
S3_REGION=us-east-1

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: error: $*" >&2; exit 1; }

# alive PIDFILE: the process recorded in PIDFILE runs (and is not a zombie).
alive() {
  local f="$1" pid state
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [ "$state" != Z ]
}

# free_ports N: N distinct loopback TCP ports that were free a moment ago.
free_ports() {
  python3 -c '
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
' "$1"
}

# minio_ready PORT: MinIO's readiness probe answers 200.
minio_ready() {
  curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$1/minio/health/ready" 2>/dev/null
}

# make_bucket PORT: create TIER_BUCKET (signed S3 CreateBucket through
# curl's SigV4); an existing bucket of ours is fine.
make_bucket() {
  local code
  code="$(curl -sS -o "$DIR/minio/make-bucket.out" -w '%{http_code}' --max-time 10 -X PUT \
    --aws-sigv4 "aws:amz:$S3_REGION:s3" --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    "http://127.0.0.1:$1/$TIER_BUCKET")" || return 1
  [ "$code" = 200 ] || grep -q BucketAlreadyOwnedByYou "$DIR/minio/make-bucket.out"
}

tail_log() { echo "--- last lines of $1:" >&2; tail -n 30 "$1" >&2 || true; }

zk_ready() {
  local out
  out="$(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/'"$1"'; printf srvr >&3; cat <&3' 2>/dev/null)" || true
  [[ "$out" == *Mode:* ]]
}

# spawn PIDFILE LOGFILE CMD...: start CMD in its own session, detached from
# this script's stdin/stdout, and record its PID.
spawn() {
  local pidf="$1" logf="$2"; shift 2
  setsid "$@" </dev/null >>"$logf" 2>&1 &
  echo $! >"$pidf"
}

cmd_up() {
  mkdir -p "$PIDS"
  local f running=0
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    if alive "$f"; then running=1; else rm -f "$f"; fi
  done
  if [ "$running" = 1 ]; then
    log "already running (state in $DIR); stop it with: $0 down"
    print_info
    return 0
  fi

  # A failed up stops whatever it started; logs stay for reading.
  trap 'st=$?; if [ "$st" != 0 ]; then log "up failed; stopping what was started (logs in $DIR)"; stop_all; fi' EXIT

  log "checking dependencies (deploy/install-deps.sh zookeeper)"
  "$ROOT/deploy/install-deps.sh" zookeeper
  command -v python3 >/dev/null || die "python3 is needed to pick free ports"

  local bin="${STRATA_BIN:-}"
  if [ -z "$bin" ]; then
    log "building bin/strata"
    (cd "$ROOT" && go build -o bin/strata ./cmd/strata)
    bin="$ROOT/bin/strata"
  fi
  [ -x "$bin" ] || die "strata binary $bin is not executable"

  local ports zk_port minio_port console_port
  read -r -a ports <<<"$(free_ports 6)"
  zk_port="${ports[0]}" minio_port="${ports[4]}" console_port="${ports[5]}"

  local tier_args=()
  if [ "$CLUSTER_TIER" = 1 ]; then
    "$ROOT/deploy/install-deps.sh" minio
    command -v curl >/dev/null || die "curl is needed to make the MinIO bucket"
    local minio_bin
    minio_bin="$("$ROOT/deploy/install-deps.sh" --path minio)"
    mkdir -p "$DIR/minio/data"
    if [ ! -f "$DIR/minio/credentials" ]; then
      (umask 077 && printf 'AWS_ACCESS_KEY_ID=strata\nAWS_SECRET_ACCESS_KEY=%s\n' \
        "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$DIR/minio/credentials")
    fi
    # shellcheck disable=SC1091
    . "$DIR/minio/credentials"
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION="$S3_REGION"
    log "starting MinIO on 127.0.0.1:$minio_port (console 127.0.0.1:$console_port)"
    (cd "$DIR/minio" && MINIO_ROOT_USER="$AWS_ACCESS_KEY_ID" MINIO_ROOT_PASSWORD="$AWS_SECRET_ACCESS_KEY" \
      MINIO_UPDATE=off MINIO_REGION="$S3_REGION" \
      spawn "$PIDS/minio.pid" "$DIR/minio.log" \
      "$minio_bin" server --address "127.0.0.1:$minio_port" --console-address "127.0.0.1:$console_port" "$DIR/minio/data")
    local mdeadline=$((SECONDS + READY_TIMEOUT))
    until minio_ready "$minio_port" && make_bucket "$minio_port"; do
      alive "$PIDS/minio.pid" || { tail_log "$DIR/minio.log"; die "MinIO exited before it was ready"; }
      [ "$SECONDS" -lt "$mdeadline" ] || { tail_log "$DIR/minio.log"; die "MinIO not ready (or bucket $TIER_BUCKET not made) within ${READY_TIMEOUT}s"; }
      sleep 0.2
    done
    log "MinIO ready, bucket $TIER_BUCKET"
    tier_args=(--tier "s3://$TIER_BUCKET/$TIER_PREFIX" --s3-endpoint "http://127.0.0.1:$minio_port"
      --s3-region "$S3_REGION" --set remote.log.storage.system.enable=true)
  fi

  mkdir -p "$DIR/zookeeper"
  cat >"$DIR/zookeeper/zoo.cfg" <<CFG
tickTime=$ZK_TICK_MS
initLimit=10
syncLimit=5
dataDir=$DIR/zookeeper/data
clientPort=$zk_port
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=$((2 * ZK_TICK_MS))
maxSessionTimeout=$((300 * ZK_TICK_MS))
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
CFG
  local cp="$DIR/zookeeper:$ZK_JAR"
  [ -f "$ZK_LOG_JAR" ] && cp="$cp:$ZK_LOG_JAR"
  log "starting ZooKeeper on 127.0.0.1:$zk_port"
  (cd "$DIR/zookeeper" && spawn "$PIDS/zookeeper.pid" "$DIR/zookeeper.log" \
    java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
    -Dzookeeper.jmx.log4j.disable=true \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zookeeper/zoo.cfg")
  local deadline=$((SECONDS + READY_TIMEOUT))
  until zk_ready "$zk_port"; do
    alive "$PIDS/zookeeper.pid" || { tail_log "$DIR/zookeeper.log"; die "ZooKeeper exited before it was ready"; }
    [ "$SECONDS" -lt "$deadline" ] || { tail_log "$DIR/zookeeper.log"; die "ZooKeeper not ready within ${READY_TIMEOUT}s"; }
    sleep 0.2
  done
  log "ZooKeeper ready"

  local extra=()
  read -r -a extra <<<"${BROKER_ARGS:-}"
  local i id addrs=()
  for i in "${!BROKERS[@]}"; do
    id="${BROKERS[$i]}"
    local port="${ports[$((i + 1))]}"
    log "starting broker $id on 127.0.0.1:$port"
    spawn "$PIDS/broker-$id.pid" "$DIR/broker-$id.log" \
      "$bin" serve --broker-id "$id" --listen "127.0.0.1:$port" \
      --data-dir "$DIR/broker-$id" --zookeeper "127.0.0.1:$zk_port/strata" \
      --set min.insync.replicas=2 --set default.replication.factor=3 "${tier_args[@]}" "${extra[@]}"
  done
  for id in "${BROKERS[@]}"; do
    local lf="$DIR/broker-$id.log" line=""
    deadline=$((SECONDS + READY_TIMEOUT))
    log "waiting for broker $id"
    until line="$(grep -o "ready broker_id=$id listen=[^ \"]*" "$lf" 2>/dev/null | tail -n 1)" && [ -n "$line" ]; do
      alive "$PIDS/broker-$id.pid" || { tail_log "$lf"; die "broker $id exited before it was ready"; }
      [ "$SECONDS" -lt "$deadline" ] || { tail_log "$lf"; die "broker $id not ready within ${READY_TIMEOUT}s"; }
      sleep 0.2
    done
    addrs+=("${line##*listen=}")
  done

  local IFS=,
  cat >"$DIR/cluster.env" <<ENV
BOOTSTRAP=${addrs[*]}
ZOOKEEPER=127.0.0.1:$zk_port/strata
ENV
  if [ "$CLUSTER_TIER" = 1 ]; then
    cat >>"$DIR/cluster.env" <<ENV
S3_ENDPOINT=http://127.0.0.1:$minio_port
S3_CONSOLE=http://127.0.0.1:$console_port
S3_REGION=$S3_REGION
TIER=s3://$TIER_BUCKET/$TIER_PREFIX
ENV
  fi
  unset IFS
  trap - EXIT
  log "cluster ready"
  print_info
}

print_info() {
  if [ -f "$DIR/cluster.env" ]; then
    # shellcheck disable=SC1091
    . "$DIR/cluster.env"
    echo "bootstrap: $BOOTSTRAP"
    echo "zookeeper: $ZOOKEEPER"
    if [ -n "${S3_ENDPOINT:-}" ]; then
      # shellcheck disable=SC1091
      . "$DIR/minio/credentials"
      echo "minio: $S3_ENDPOINT"
      echo "tier: $TIER (region $S3_REGION)"
      echo "minio console: $S3_CONSOLE (user $AWS_ACCESS_KEY_ID, password $AWS_SECRET_ACCESS_KEY)"
      echo "credentials: $DIR/minio/credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
    fi
  fi
  echo "logs: $DIR/*.log"
}

# stop NAME: SIGTERM the process in PIDS/NAME.pid, SIGKILL it after
# STOP_TIMEOUT, and remove the PID file.
stop() {
  local f="$PIDS/$1.pid" pid
  [ -f "$f" ] || return 0
  if alive "$f"; then
    pid="$(cat "$f")"
    log "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$f" && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.1; done
    if alive "$f"; then
      log "$1 still running after ${STOP_TIMEOUT}s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      while alive "$f"; do sleep 0.1; done
    fi
  fi
  rm -f "$f"
}

stop_all() {
  local id
  for id in "${BROKERS[@]}"; do stop "broker-$id"; done
  stop minio
  stop zookeeper
}

cmd_down() {
  local purge=0
  case "${1:-}" in
    "") ;;
    --purge) purge=1 ;;
    *) die "usage: $0 down [--purge]" ;;
  esac
  stop_all
  if [ "$purge" = 1 ]; then
    log "removing $DIR"
    rm -rf "$DIR"
  fi
  log "stopped"
}

cmd_status() {
  local f name any=0
  for f in "$PIDS"/*.pid; do
    [ -e "$f" ] || continue
    any=1
    name="$(basename "$f" .pid)"
    if alive "$f"; then echo "$name: running (pid $(cat "$f"))"; else echo "$name: not running"; fi
  done
  [ "$any" = 1 ] || { echo "not running (state dir $DIR)"; return 0; }
  print_info
}

case "${1:-}" in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  *) echo "usage: $0 up | down [--purge] | status" >&2; exit 2 ;;
esac
