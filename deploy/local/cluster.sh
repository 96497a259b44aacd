#!/usr/bin/env bash
# A local Strata cluster: ZooKeeper, MinIO (with a bucket) and three brokers
# (more with start N) with tiered storage on it, on loopback ports chosen
# once per state dir.
# Each broker also serves Prometheus metrics (--metrics: /metrics, /healthz).
#
#   cluster.sh up             install what is missing, build, start whatever
#                             is not running (all of it, or only the parts
#                             that stopped or died), wait until ready
#   cluster.sh status         say which parts run, and where the cluster is
#   cluster.sh start N        start broker N again, with the command line,
#                             ports and data dir it last ran with; ZooKeeper
#                             (and MinIO, for a tiered broker) must be running.
#                             For an id the cluster does not have yet, add a
#                             broker: broker 1's command line (the lowest id
#                             that has run) with N's own id, data dir
#                             ($CLUSTER_DIR/broker-N) and ports, chosen as up
#                             chooses them and saved in cluster.env; from then
#                             on up, status, stop, restart and down include it
#   cluster.sh stop N         stop broker N (SIGTERM, SIGKILL after STOP_TIMEOUT)
#   cluster.sh restart N      check that N can start, stop it if it runs, start it
#   cluster.sh down [--purge] stop everything; --purge also removes the state dir
#                             (ports included); plain down keeps data and ports
#
# Environment:
#   CLUSTER_DIR   state dir (logs, data, PID files); default ./cluster-data
#   STRATA_BIN    use this strata binary instead of building bin/strata
#   READY_TIMEOUT seconds to wait for ZooKeeper, MinIO and each broker (default 60)
#   STOP_TIMEOUT  seconds between SIGTERM and SIGKILL on down/stop (default 30)
#   CLUSTER_TIER  1 (default): start MinIO and give the brokers
#                 --tier s3://$TIER_BUCKET/$TIER_PREFIX on it; 0: no MinIO, no tier
#   TIER_BUCKET   bucket made in MinIO (default strata)
#   TIER_PREFIX   key prefix of the brokers' objects (default cluster)
#   BROKER_ARGS   extra arguments to every `strata serve`, split on spaces
#                 (e.g. "--set remote.log.manager.task.interval.ms=1000")
# `up` builds each broker's command line from this environment; `start N`
# reuses the one broker N last ran with (saved in the state dir as
# broker-N.cmd, NUL-separated), whatever the environment says now. The
# cluster's brokers are 1, 2, 3 and every N with a broker-N.cmd.
#
# Ports are chosen once per state dir, the first time `up` (or `start N` of
# a new broker) needs them, and saved in $CLUSTER_DIR/cluster.env; every
# later up / start reuses them, so the addresses stay the same across
# down / up. If a saved port is taken by another process when its service
# is to start, the script fails and names the port (remove cluster.env
# while the cluster is down to choose new ones).
#
# cluster.env (rewritten by each up that starts something and each start N
# that adds a broker; `source` it):
#   BOOTSTRAP          (exported) the brokers' Kafka addresses, HOST:PORT,...
#   STRATA_BOOTSTRAP   (exported) the same, the variable `strata admin` reads first
#   ZOOKEEPER          (exported) the brokers' ZooKeeper connect string, with chroot /strata
#   METRICS            (exported) each broker's Prometheus endpoint, URL,... in
#                      broker id order; /healthz answers on the same HOST:PORT
#   S3_ENDPOINT        (exported, tier only) MinIO's S3 API, http://HOST:PORT
#   S3_CONSOLE         (exported, tier only) MinIO's web console
#   S3_REGION          (exported, tier only) the region the brokers sign with
#   TIER               (exported, tier only) the brokers' --tier, s3://BUCKET/PREFIX
#   ZK_PORT            the saved ZooKeeper client port
#   BROKER_N_PORT      the saved Kafka port of broker N (N = 1, 2, 3 and each
#                      broker added with start N)
#   METRICS_N_PORT     the saved --metrics port of broker N
#   MINIO_PORT         the saved MinIO S3 port (chosen the first time
#                      CLUSTER_TIER=1)
#   MINIO_CONSOLE_PORT the saved MinIO console port
# The script reads cluster.env back line by line; it does not source it. (A
# cluster.env of an older script, addresses only, gives its ports.)
#
# MinIO's root credentials are made up once per state dir: minio/credentials
# holds `export AWS_ACCESS_KEY_ID=…` and `export AWS_SECRET_ACCESS_KEY=…`, so
# `source`-ing it gives them to child processes; the brokers get them (and
# AWS_REGION) in their environment.
#
# `make cluster` / `make cluster-down` run this script; so do the tests.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER_DIR="${CLUSTER_DIR:-./cluster-data}"
# Only up makes the state dir; the other commands find nothing in a missing one.
[ "${1:-}" = up ] && mkdir -p "$CLUSTER_DIR"
if [ -d "$CLUSTER_DIR" ]; then
  DIR="$(cd "$CLUSTER_DIR" && pwd)"
else
  case "$CLUSTER_DIR" in /*) DIR="$CLUSTER_DIR" ;; *) DIR="$PWD/${CLUSTER_DIR#./}" ;; esac
fi
PIDS="$DIR/pids"
ENVF="$DIR/cluster.env"
CREDS="$DIR/minio/credentials"
READY_TIMEOUT="${READY_TIMEOUT:-60}"
STOP_TIMEOUT="${STOP_TIMEOUT:-30}"
# The cluster's brokers: 1-3, and those added by start N (each has a
# broker-N.cmd), in id order.
BROKERS=(1 2 3)
for f in "$DIR"/broker-*.cmd; do
  [ -f "$f" ] || continue
  f="${f##*/broker-}"; f="${f%.cmd}"
  [[ "$f" =~ ^(0|[1-9][0-9]{0,8})$ ]] && [[ " ${BROKERS[*]} " != *" $f "* ]] && BROKERS+=("$f")
done
mapfile -t BROKERS < <(printf '%s\n' "${BROKERS[@]}" | sort -n)
ZK_JAR=/usr/share/java/zookeeper.jar
ZK_LOG_JAR=/usr/share/java/slf4j-simple.jar
ZK_TICK_MS=200
CLUSTER_TIER="${CLUSTER_TIER:-1}"
TIER_BUCKET="${TIER_BUCKET:-strata}"
TIER_PREFIX="${TIER_PREFIX:-cluster}"
S3_REGION=us-east-1

log() { echo "cluster: $*" >&2; }
die() { echo "cluster: error: $*" >&2; exit 1; }

# alive PIDFILE: the process recorded in PIDFILE runs, is not a zombie, and
# is ours: its command line holds the argument that names its part of the
# state dir (so that a PID the kernel gave to another process after ours
# died is not taken for ours, nor stopped).
alive() {
  local f="$1" pid state
  [ -f "$f" ] || return 1
  pid="$(cat "$f")"
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$pid/stat" 2>/dev/null)" || return 1
  [ "$state" != Z ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF "$(marker "$(basename "$f" .pid)")"
}

# marker NAME: an argument only the command line of NAME (zookeeper, minio,
# broker-N) of this state dir has.
marker() {
  case "$1" in
    zookeeper) echo "$DIR/zookeeper/zoo.cfg" ;;
    minio) echo "$DIR/minio/data" ;;
    *) echo "$DIR/$1" ;; # broker-N: its --data-dir
  esac
}

# free_ports N [EXCLUDED...]: N distinct loopback TCP ports that were free a
# moment ago, none of them among EXCLUDED.
free_ports() {
  python3 -c '
import socket, sys
n, excluded = int(sys.argv[1]), set(int(p) for p in sys.argv[2:])
socks, ports = [], []
while len(ports) < n:
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
    p = s.getsockname()[1]
    if p not in excluded:
        ports.append(p)
print(" ".join(str(p) for p in ports))
' "$@"
}

# taken_ports PORT...: print those of PORT... that cannot be listened on at
# 127.0.0.1 now (bound with SO_REUSEADDR, as Go, Java and MinIO do, so that
# connections in TIME_WAIT left by our own last run do not count).
taken_ports() {
  python3 -c '
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(p)))
    except OSError:
        print(p)
    finally:
        s.close()
' "$@"
}

# envget KEY: KEY's value in cluster.env ("KEY=v" or "export KEY=v"); empty
# when absent.
envget() {
  [ -f "$ENVF" ] || return 0
  sed -n -E "s/^(export )?$1=//p" "$ENVF" | tail -n 1
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
# this script's stdin/stdout, and record its PID. It returns once CMD runs
# (or has died): until the child has exec'd, its command line is this
# script's, and alive would not know it for ours.
spawn() {
  local pidf="$1" logf="$2" pid i; shift 2
  setsid "$@" </dev/null >>"$logf" 2>&1 &
  pid=$!
  echo "$pid" >"$pidf"
  for ((i = 0; i < 200; i++)); do
    alive "$pidf" && return 0
    [ -r "/proc/$pid/stat" ] || return 0
    sleep 0.01
  done
}

# Ports of this state dir, loaded by load_ports and completed by
# choose_ports.
ZK_PORT="" MINIO_PORT="" MINIO_CONSOLE_PORT=""
declare -A BROKER_PORT=() METRICS_PORT=()

# load_ports: the ports saved in cluster.env. A cluster.env written before
# ports were saved has only the addresses (of brokers 1-3, in order); the
# ports are taken from those.
load_ports() {
  local id v saved
  ZK_PORT="$(envget ZK_PORT)"
  saved="$ZK_PORT" # empty in a cluster.env of addresses only
  MINIO_PORT="$(envget MINIO_PORT)"
  MINIO_CONSOLE_PORT="$(envget MINIO_CONSOLE_PORT)"
  if [ -z "$ZK_PORT" ] && v="$(envget ZOOKEEPER)" && [ -n "$v" ]; then
    v="${v%%/*}"; ZK_PORT="${v##*:}"
  fi
  if [ -z "$MINIO_PORT" ] && v="$(envget S3_ENDPOINT)" && [ -n "$v" ]; then MINIO_PORT="${v##*:}"; fi
  if [ -z "$MINIO_CONSOLE_PORT" ] && v="$(envget S3_CONSOLE)" && [ -n "$v" ]; then MINIO_CONSOLE_PORT="${v##*:}"; fi
  local legacy=()
  IFS=, read -r -a legacy <<<"$(envget BOOTSTRAP)"
  for id in "${BROKERS[@]}"; do
    BROKER_PORT[$id]="$(envget "BROKER_${id}_PORT")"
    METRICS_PORT[$id]="$(envget "METRICS_${id}_PORT")"
    if [ -z "${BROKER_PORT[$id]}" ] && [ -z "$saved" ] && [ "$id" -ge 1 ] && [ "$id" -le 3 ] && [ -n "${legacy[$((id - 1))]:-}" ]; then
      BROKER_PORT[$id]="${legacy[$((id - 1))]##*:}"
    fi
  done
}

# choose_ports: pick free ports for those not saved yet (MinIO's only when
# CLUSTER_TIER=1).
choose_ports() {
  local missing=() known=() id v
  [ -n "$ZK_PORT" ] && known+=("$ZK_PORT") || missing+=(ZK_PORT)
  for id in "${BROKERS[@]}"; do
    [ -n "${BROKER_PORT[$id]}" ] && known+=("${BROKER_PORT[$id]}") || missing+=("BROKER_PORT[$id]")
    [ -n "${METRICS_PORT[$id]}" ] && known+=("${METRICS_PORT[$id]}") || missing+=("METRICS_PORT[$id]")
  done
  if [ "$CLUSTER_TIER" = 1 ]; then
    [ -n "$MINIO_PORT" ] && known+=("$MINIO_PORT") || missing+=(MINIO_PORT)
    [ -n "$MINIO_CONSOLE_PORT" ] && known+=("$MINIO_CONSOLE_PORT") || missing+=(MINIO_CONSOLE_PORT)
  fi
  [ "${#missing[@]}" -gt 0 ] || return 0
  local ports=()
  read -r -a ports <<<"$(free_ports "${#missing[@]}" "${known[@]}")"
  local i
  for i in "${!missing[@]}"; do
    v="${missing[$i]}"
    printf -v "$v" '%s' "${ports[$i]}"
  done
  log "chose ports for $DIR (saved in cluster.env, reused by later runs)"
}

# write_env: (re)write cluster.env from the ports and the tier settings.
write_env() {
  local id boot=() metrics=()
  for id in "${BROKERS[@]}"; do
    boot+=("127.0.0.1:${BROKER_PORT[$id]}")
    metrics+=("http://127.0.0.1:${METRICS_PORT[$id]}/metrics")
  done
  local tmp="$ENVF.tmp"
  {
    echo "# Written by deploy/local/cluster.sh. The *_PORT lines are the ports chosen once"
    echo "# for this state dir and reused by every up / start; source this file for the"
    echo "# exported addresses."
    (IFS=,; echo "export BOOTSTRAP=${boot[*]}")
    (IFS=,; echo "export STRATA_BOOTSTRAP=${boot[*]}")
    echo "export ZOOKEEPER=127.0.0.1:$ZK_PORT/strata"
    (IFS=,; echo "export METRICS=${metrics[*]}")
    if [ "$CLUSTER_TIER" = 1 ]; then
      echo "export S3_ENDPOINT=http://127.0.0.1:$MINIO_PORT"
      echo "export S3_CONSOLE=http://127.0.0.1:$MINIO_CONSOLE_PORT"
      echo "export S3_REGION=$S3_REGION"
      echo "export TIER=s3://$TIER_BUCKET/$TIER_PREFIX"
    fi
    echo "ZK_PORT=$ZK_PORT"
    for id in "${BROKERS[@]}"; do echo "BROKER_${id}_PORT=${BROKER_PORT[$id]}"; done
    for id in "${BROKERS[@]}"; do echo "METRICS_${id}_PORT=${METRICS_PORT[$id]}"; done
    [ -z "$MINIO_PORT" ] || echo "MINIO_PORT=$MINIO_PORT"
    [ -z "$MINIO_CONSOLE_PORT" ] || echo "MINIO_CONSOLE_PORT=$MINIO_CONSOLE_PORT"
  } >"$tmp"
  mv "$tmp" "$ENVF"
}

# check_ports WHAT=PORT...: fail, naming the first one, when a saved port is
# taken by another process.
check_ports() {
  local pair ports=() taken
  for pair in "$@"; do ports+=("${pair##*=}"); done
  taken="$(taken_ports "${ports[@]}" | head -n 1)"
  [ -z "$taken" ] && return 0
  for pair in "$@"; do
    if [ "${pair##*=}" = "$taken" ]; then
      die "port $taken of ${pair%=*}, saved in $ENVF, is in use by another process; free it, or remove cluster.env while the cluster is down to choose new ports"
    fi
  done
}

# ensure_credentials: make MinIO's root credentials once per state dir (a
# file of `export` lines; an older file without them is rewritten), and
# export them with AWS_REGION.
ensure_credentials() {
  mkdir -p "$DIR/minio"
  if [ ! -f "$CREDS" ]; then
    (umask 077 && printf 'export AWS_ACCESS_KEY_ID=strata\nexport AWS_SECRET_ACCESS_KEY=%s\n' \
      "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$CREDS")
  elif grep -qE '^AWS_[A-Z_]+=' "$CREDS"; then
    sed -i -E 's/^(AWS_[A-Z_]+=)/export \1/' "$CREDS"
  fi
  # shellcheck disable=SC1090
  . "$CREDS"
  export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION="$S3_REGION"
}

# log_size FILE: FILE's size in bytes (0 when missing): where the lines of
# a process started now begin.
log_size() { if [ -f "$1" ]; then wc -c <"$1"; else echo 0; fi; }

declare -A BROKER_LOG_OFFSET=()

# start_broker ID CMD...: record CMD as broker ID's command line and start it.
start_broker() {
  local id="$1"; shift
  printf '%s\0' "$@" >"$DIR/broker-$id.cmd"
  BROKER_LOG_OFFSET[$id]="$(log_size "$DIR/broker-$id.log")"
  log "starting broker $id on 127.0.0.1:${BROKER_PORT[$id]:-?} (metrics 127.0.0.1:${METRICS_PORT[$id]:-?})"
  spawn "$PIDS/broker-$id.pid" "$DIR/broker-$id.log" "$@"
  STARTED+=("broker-$id")
}

# wait_broker ID: wait for broker ID's ready line among the log lines it
# wrote since start_broker.
wait_broker() {
  local id="$1" lf="$DIR/broker-$1.log" deadline=$((SECONDS + READY_TIMEOUT))
  log "waiting for broker $id"
  until tail -c "+$((${BROKER_LOG_OFFSET[$id]:-0} + 1))" "$lf" 2>/dev/null | grep -q "ready broker_id=$id listen="; do
    alive "$PIDS/broker-$id.pid" || { tail_log "$lf"; die "broker $id exited before it was ready"; }
    [ "$SECONDS" -lt "$deadline" ] || { tail_log "$lf"; die "broker $id not ready within ${READY_TIMEOUT}s"; }
    sleep 0.2
  done
}

# What this run started: a run that fails stops these (logs stay), and
# forgets the broker it was adding (ADDING, add_broker).
STARTED=()
ADDING=""
stop_started() {
  local st=$? i
  [ "$st" != 0 ] || return 0
  if [ "${#STARTED[@]}" -gt 0 ]; then
    log "failed; stopping what this run started: ${STARTED[*]} (logs in $DIR)"
    for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do stop "${STARTED[$i]}"; done
  fi
  [ -z "$ADDING" ] || forget_broker "$ADDING"
}

cmd_up() {
  mkdir -p "$PIDS"
  local names=(zookeeper) name todo=() running=()
  [ "$CLUSTER_TIER" = 1 ] && names=(minio zookeeper)
  for name in "${BROKERS[@]/#/broker-}"; do names+=("$name"); done
  for name in "${names[@]}"; do
    if alive "$PIDS/$name.pid"; then running+=("$name"); else rm -f "$PIDS/$name.pid"; todo+=("$name"); fi
  done
  if [ "${#todo[@]}" = 0 ]; then
    log "already running (state in $DIR); stop it with: $0 down"
    print_info
    return 0
  fi
  [ "${#running[@]}" = 0 ] || log "already running: ${running[*]}; starting: ${todo[*]}"

  trap stop_started EXIT

  log "checking dependencies (deploy/install-deps.sh zookeeper)"
  "$ROOT/deploy/install-deps.sh" zookeeper
  command -v python3 >/dev/null || die "python3 is needed to pick free ports"

  local brokers_todo=() id
  for id in "${BROKERS[@]}"; do
    [[ " ${todo[*]} " == *" broker-$id "* ]] && brokers_todo+=("$id")
  done
  local bin="${STRATA_BIN:-}"
  if [ "${#brokers_todo[@]}" -gt 0 ]; then
    if [ -z "$bin" ]; then
      log "building bin/strata"
      (cd "$ROOT" && go build -o bin/strata ./cmd/strata)
      bin="$ROOT/bin/strata"
    fi
    [ -x "$bin" ] || die "strata binary $bin is not executable"
  fi

  load_ports
  choose_ports
  write_env

  # Every saved port of what is to start must be free before anything starts.
  local checks=()
  for name in "${todo[@]}"; do
    case "$name" in
      minio) checks+=("MinIO=$MINIO_PORT" "the MinIO console=$MINIO_CONSOLE_PORT") ;;
      zookeeper) checks+=("ZooKeeper=$ZK_PORT") ;;
      broker-*) id="${name#broker-}"; checks+=("broker $id=${BROKER_PORT[$id]}" "broker $id's metrics=${METRICS_PORT[$id]}") ;;
    esac
  done
  check_ports "${checks[@]}"

  local tier_args=()
  if [ "$CLUSTER_TIER" = 1 ]; then
    command -v curl >/dev/null || die "curl is needed to make the MinIO bucket"
    ensure_credentials
    if [[ " ${todo[*]} " == *" minio "* ]]; then
      "$ROOT/deploy/install-deps.sh" minio
      local minio_bin
      minio_bin="$("$ROOT/deploy/install-deps.sh" --path minio)"
      mkdir -p "$DIR/minio/data"
      log "starting MinIO on 127.0.0.1:$MINIO_PORT (console 127.0.0.1:$MINIO_CONSOLE_PORT)"
      (cd "$DIR/minio" && MINIO_ROOT_USER="$AWS_ACCESS_KEY_ID" MINIO_ROOT_PASSWORD="$AWS_SECRET_ACCESS_KEY" \
        MINIO_UPDATE=off MINIO_REGION="$S3_REGION" \
        spawn "$PIDS/minio.pid" "$DIR/minio.log" \
        "$minio_bin" server --address "127.0.0.1:$MINIO_PORT" --console-address "127.0.0.1:$MINIO_CONSOLE_PORT" "$DIR/minio/data")
      STARTED+=(minio)
      local mdeadline=$((SECONDS + READY_TIMEOUT))
      until minio_ready "$MINIO_PORT" && make_bucket "$MINIO_PORT"; do
        alive "$PIDS/minio.pid" || { tail_log "$DIR/minio.log"; die "MinIO exited before it was ready"; }
        [ "$SECONDS" -lt "$mdeadline" ] || { tail_log "$DIR/minio.log"; die "MinIO not ready (or bucket $TIER_BUCKET not made) within ${READY_TIMEOUT}s"; }
        sleep 0.2
      done
      log "MinIO ready, bucket $TIER_BUCKET"
    fi
    tier_args=(--tier "s3://$TIER_BUCKET/$TIER_PREFIX" --s3-endpoint "http://127.0.0.1:$MINIO_PORT"
      --s3-region "$S3_REGION" --set remote.log.storage.system.enable=true)
  fi

  if [[ " ${todo[*]} " == *" zookeeper "* ]]; then
    mkdir -p "$DIR/zookeeper"
    cat >"$DIR/zookeeper/zoo.cfg" <<CFG
tickTime=$ZK_TICK_MS
initLimit=10
syncLimit=5
dataDir=$DIR/zookeeper/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=$((2 * ZK_TICK_MS))
maxSessionTimeout=$((300 * ZK_TICK_MS))
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
CFG
    local cp="$DIR/zookeeper:$ZK_JAR"
    [ -f "$ZK_LOG_JAR" ] && cp="$cp:$ZK_LOG_JAR"
    log "starting ZooKeeper on 127.0.0.1:$ZK_PORT"
    (cd "$DIR/zookeeper" && spawn "$PIDS/zookeeper.pid" "$DIR/zookeeper.log" \
      java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xshare:auto \
      -Dzookeeper.jmx.log4j.disable=true \
      -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
      -Dorg.slf4j.simpleLogger.showDateTime=true \
      -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$DIR/zookeeper/zoo.cfg")
    STARTED+=(zookeeper)
    local deadline=$((SECONDS + READY_TIMEOUT))
    until zk_ready "$ZK_PORT"; do
      alive "$PIDS/zookeeper.pid" || { tail_log "$DIR/zookeeper.log"; die "ZooKeeper exited before it was ready"; }
      [ "$SECONDS" -lt "$deadline" ] || { tail_log "$DIR/zookeeper.log"; die "ZooKeeper not ready within ${READY_TIMEOUT}s"; }
      sleep 0.2
    done
    log "ZooKeeper ready"
  fi

  local extra=()
  read -r -a extra <<<"${BROKER_ARGS:-}"
  for id in "${brokers_todo[@]}"; do
    start_broker "$id" "$bin" serve --broker-id "$id" --listen "127.0.0.1:${BROKER_PORT[$id]}" \
      --metrics "127.0.0.1:${METRICS_PORT[$id]}" \
      --data-dir "$DIR/broker-$id" --zookeeper "127.0.0.1:$ZK_PORT/strata" \
      --set min.insync.replicas=2 --set default.replication.factor=3 "${tier_args[@]}" "${extra[@]}"
  done
  for id in "${brokers_todo[@]}"; do wait_broker "$id"; done

  trap - EXIT
  log "cluster ready"
  print_info
}

# broker_id ARG: ARG when it names a broker of the cluster; fails otherwise.
broker_id() {
  local id
  for id in "${BROKERS[@]}"; do [ "${1:-}" = "$id" ] && { echo "$id"; return 0; }; done
  die "no broker ${1:-(none given)}: N is one of ${BROKERS[*]} (start N adds a broker)"
}

# valid_id ARG: ARG is a broker id (broker.id: a number, 0 or more, without
# leading zeros, so that it names one broker-N).
valid_id() { [[ "${1:-}" =~ ^(0|[1-9][0-9]{0,8})$ ]]; }

# load_argv ID: broker ID's last command line into ARGV, after checking
# that it can start again now: ZooKeeper (and MinIO for a tiered broker)
# runs and the binary is there.
ARGV=()
load_argv() {
  local id="$1" cmdf="$DIR/broker-$1.cmd"
  [ -f "$cmdf" ] || die "broker $id has not run in $DIR yet; start the cluster with: $0 up"
  mapfile -d '' -t ARGV <"$cmdf"
  [ "${#ARGV[@]}" -gt 0 ] || die "$cmdf is empty; start the cluster with: $0 up"
  alive "$PIDS/zookeeper.pid" || die "ZooKeeper is not running; start the cluster with: $0 up"
  if [[ " ${ARGV[*]} " == *" --s3-endpoint "* ]]; then
    alive "$PIDS/minio.pid" || die "MinIO (broker $id's tier) is not running; start the cluster with: $0 up"
  fi
  [ -x "${ARGV[0]}" ] || die "strata binary ${ARGV[0]} (broker $id's last command line) is not executable"
  command -v python3 >/dev/null || die "python3 is needed to check the ports"
}

# start_again ID: start broker ID with ARGV (load_argv) on its saved ports
# and wait until it is ready; a broker that does not get ready is stopped.
start_again() {
  local id="$1"
  load_ports
  local checks=()
  [ -z "${BROKER_PORT[$id]}" ] || checks+=("broker $id=${BROKER_PORT[$id]}")
  [ -z "${METRICS_PORT[$id]}" ] || checks+=("broker $id's metrics=${METRICS_PORT[$id]}")
  [ "${#checks[@]}" = 0 ] || check_ports "${checks[@]}"
  if [ -f "$CREDS" ]; then
    # shellcheck disable=SC1090
    . "$CREDS"
    export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION="$S3_REGION"
  fi
  trap stop_started EXIT
  start_broker "$id" "${ARGV[@]}"
  wait_broker "$id"
  trap - EXIT
  log "broker $id ready"
}

cmd_start() {
  local id="${1:-}"
  valid_id "$id" || die "broker id $id: want a number, 0 or more"
  if [[ " ${BROKERS[*]} " != *" $id "* ]]; then
    add_broker "$id"
    return 0
  fi
  mkdir -p "$PIDS"
  if alive "$PIDS/broker-$id.pid"; then
    log "broker $id already running (pid $(cat "$PIDS/broker-$id.pid"))"
    return 0
  fi
  rm -f "$PIDS/broker-$id.pid"
  load_argv "$id"
  start_again "$id"
}

# add_broker ID: start broker ID, which the cluster does not have yet,
# with the command line of the lowest-numbered broker that has run (broker
# 1 in a cluster made by up: ZooKeeper, tier, BROKER_ARGS and binary as it
# has them) and ID's own --broker-id, --listen and --metrics ports (chosen
# as up chooses them, saved in cluster.env) and --data-dir. Its log is
# broker-ID.log beside the others'. If it does not get ready, it is
# stopped and forgotten (cluster.env as before, no broker-ID.cmd).
add_broker() {
  local id="$1" tmpl="" b
  for b in "${BROKERS[@]}"; do
    [ -f "$DIR/broker-$b.cmd" ] && { tmpl="$b"; break; }
  done
  [ -n "$tmpl" ] || die "no broker has run in $DIR yet; start the cluster with: $0 up"
  mkdir -p "$PIDS"
  load_argv "$tmpl" # checks that ZooKeeper (and MinIO) run and the binary is there
  load_ports
  mapfile -t BROKERS < <(printf '%s\n' "${BROKERS[@]}" "$id" | sort -n)
  BROKER_PORT[$id]="" METRICS_PORT[$id]=""
  choose_ports
  local -A own=([--broker-id]="$id" [--listen]="127.0.0.1:${BROKER_PORT[$id]}"
    [--metrics]="127.0.0.1:${METRICS_PORT[$id]}" [--data-dir]="$DIR/broker-$id")
  local argv=() a k skip=0 replaced=0
  for a in "${ARGV[@]}"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$a" in
      --broker-id | --listen | --metrics | --data-dir) argv+=("$a" "${own[$a]}"); skip=1; replaced=$((replaced + 1)) ;;
      --broker-id=* | --listen=* | --metrics=* | --data-dir=*) k="${a%%=*}"; argv+=("$k=${own[$k]}"); replaced=$((replaced + 1)) ;;
      *) argv+=("$a") ;;
    esac
  done
  [ "$replaced" = 4 ] || die "broker $tmpl's command line ($DIR/broker-$tmpl.cmd) lacks one of --broker-id, --listen, --metrics, --data-dir; cannot copy it for broker $id"
  ARGV=("${argv[@]}")
  ADDING="$id"
  trap stop_started EXIT
  write_env
  log "adding broker $id with broker $tmpl's command line"
  start_again "$id"
  ADDING=""
  log "broker $id added; \`strata admin cluster rebalance\` gives it partitions"
}

# forget_broker ID: undo add_broker: no broker-ID.cmd, cluster.env without
# its ports (its data dir and log stay).
forget_broker() {
  local id="$1" b keep=()
  rm -f "$DIR/broker-$id.cmd" "$PIDS/broker-$id.pid"
  for b in "${BROKERS[@]}"; do [ "$b" = "$id" ] || keep+=("$b"); done
  BROKERS=("${keep[@]}")
  write_env
  log "broker $id not added (its log: $DIR/broker-$id.log)"
}

cmd_stop() {
  local id
  id="$(broker_id "${1:-}")"
  if ! alive "$PIDS/broker-$id.pid"; then
    rm -f "$PIDS/broker-$id.pid"
    log "broker $id is not running"
    return 0
  fi
  stop "broker-$id"
  log "broker $id stopped"
}

# restart N checks that broker N can start again before it stops it.
cmd_restart() {
  local id
  id="$(broker_id "${1:-}")"
  mkdir -p "$PIDS"
  load_argv "$id"
  cmd_stop "$id"
  start_again "$id"
}

print_info() {
  [ -f "$ENVF" ] || { echo "logs: $DIR/*.log"; return 0; }
  local metrics
  metrics="$(envget METRICS)"
  echo "bootstrap: $(envget BOOTSTRAP)"
  echo "zookeeper: $(envget ZOOKEEPER)"
  echo "metrics: ${metrics//,/, }"
  if [ -n "$(envget S3_ENDPOINT)" ]; then
    echo "minio: $(envget S3_ENDPOINT)"
    echo "tier: $(envget TIER) (region $(envget S3_REGION))"
    if [ -f "$CREDS" ]; then
      local user pass
      user="$(sed -n -E 's/^(export )?AWS_ACCESS_KEY_ID=//p' "$CREDS")"
      pass="$(sed -n -E 's/^(export )?AWS_SECRET_ACCESS_KEY=//p' "$CREDS")"
      echo "minio console: $(envget S3_CONSOLE) (user $user, password $pass)"
      echo "credentials: $CREDS (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)"
    fi
  fi
  echo "env: $ENVF"
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
  if [ ! -f "$ENVF" ] && ! compgen -G "$PIDS/*.pid" >/dev/null; then
    echo "not running (state dir $DIR)"
    return 0
  fi
  local names=(zookeeper) name id
  if [ -f "$PIDS/minio.pid" ] || [ -n "$(envget S3_ENDPOINT)" ]; then names=(minio zookeeper); fi
  for id in "${BROKERS[@]}"; do names+=("broker-$id"); done
  for name in "${names[@]}"; do
    if alive "$PIDS/$name.pid"; then
      echo "$name: running (pid $(cat "$PIDS/$name.pid"))"
    else
      echo "$name: not running"
    fi
  done
  print_info
}

usage() {
  echo "usage: $0 up | status | start N | stop N | restart N | down [--purge]   (N: ${BROKERS[*]}; start N of another id adds a broker)" >&2
  exit 2
}

case "${1:-}" in
  up) cmd_up ;;
  down) shift; cmd_down "$@" ;;
  status) cmd_status ;;
  start) [ $# = 2 ] || usage; cmd_start "$2" ;;
  stop) [ $# = 2 ] || usage; cmd_stop "$2" ;;
  restart) [ $# = 2 ] || usage; cmd_restart "$2" ;;
  *) usage ;;
esac
