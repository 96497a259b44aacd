#!/usr/bin/env bash
# Installs the outside programs tests and the local cluster need, when they
# are missing: kcat, python3-confluent-kafka and zookeeper (Debian
# packages; zookeeper runs on the machine's Java), promtool (Debian's
# prometheus package, for the alert rules' tests), minio (built from
# source with `go install`, about two minutes the first time) and kafka
# (Apache Kafka's jars from Maven Central with mvn, about 45 MB, for the
# benchmark's kafka targets), and for the client matrix (compat/):
# compat-java (compat/java built with Maven: Kafka's Java client and
# tools), compat-streams (compat/streams built with Maven: a Kafka
# Streams application), compat-kafkajs (compat/node's kafkajs and codecs
# from npm) and compat-confluent-kafka (compat/python's pinned
# confluent-kafka from PyPI, with the librdkafka its wheel bundles, in a
# virtual environment).
# Usage: install-deps.sh NAME...
# `install-deps.sh --path minio|kafka|compat-java|compat-streams|compat-kafkajs|compat-confluent-kafka`
# prints where MinIO's binary or the directory of the others is (or goes).
set -euo pipefail

need_apt_update=1
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    echo "install-deps: $1 is missing and we are not root; install Debian package $1" >&2
    exit 1
  fi
  if [ "$need_apt_update" = 1 ]; then
    echo "install-deps: apt-get update" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    need_apt_update=0
  fi
  echo "install-deps: installing $1" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1" >/dev/null
}

# MinIO: the version internal/testenv runs (MinIOVersion there), installed
# where testenv looks for it: $STRATA_MINIO, or
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/minio-$MINIO_VERSION/minio.
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
minio_path() { echo "${STRATA_MINIO:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/minio-$MINIO_VERSION/minio}"; }
minio_install() {
  local bin
  bin="$(minio_path)"
  [ -x "$bin" ] && return 0
  local go="${GO:-go}"
  if ! command -v "$go" >/dev/null 2>&1; then
    echo "install-deps: minio is built with go install, and $go is not on PATH (set GO=/path/to/go)" >&2
    exit 1
  fi
  local dir tmp
  dir="$(dirname "$bin")"
  mkdir -p "$dir"
  tmp="$(mktemp -d "$dir/.install-XXXXXX")"
  echo "install-deps: building minio $MINIO_VERSION (go install; a few minutes the first time)" >&2
  if ! (cd "$tmp" && GOBIN="$tmp" GOFLAGS=-buildvcs=false "$go" install "github.com/minio/minio@$MINIO_VERSION"); then
    rm -rf "$tmp"
    echo "install-deps: go install github.com/minio/minio@$MINIO_VERSION failed" >&2
    exit 1
  fi
  mv "$tmp/minio" "$bin"
  rm -rf "$tmp"
}

# Apache Kafka: the version in bench/kafka/pom.xml (kafka.version, its one
# place; the bench package embeds that file), fetched with Maven into
# $STRATA_KAFKA, or ${XDG_CACHE_HOME:-$HOME/.cache}/strata/kafka-$version:
# libs/ holds kafka_2.13 and its runtime dependencies.
KAFKA_POM="$(cd "$(dirname "$0")/.." && pwd)/bench/kafka/pom.xml"
kafka_version() { sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$KAFKA_POM"; }
kafka_path() { echo "${STRATA_KAFKA:-${XDG_CACHE_HOME:-$HOME/.cache}/strata/kafka-$(kafka_version)}"; }
kafka_install() {
  local version dir tmp
  version="$(kafka_version)"
  dir="$(kafka_path)"
  [ -f "$dir/libs/kafka_2.13-$version.jar" ] && return 0
  for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "install-deps: kafka needs $tool on PATH (Java 17 or later, and Maven)" >&2
      exit 1
    fi
  done
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.install-XXXXXX")"
  echo "install-deps: fetching Apache Kafka $version with Maven (kafka_2.13 and its runtime dependencies, about 45 MB)" >&2
  if ! mvn -B -Dstyle.color=never -f "$KAFKA_POM" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp/libs" >&2; then
    rm -rf "$tmp"
    echo "install-deps: mvn could not fetch org.apache.kafka:kafka_2.13:$version" >&2
    exit 1
  fi
  # Another install may have finished first: keep its copy.
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
  [ -f "$dir/libs/kafka_2.13-$version.jar" ] || { echo "install-deps: $dir/libs lacks kafka_2.13-$version.jar" >&2; exit 1; }
  echo "install-deps: Apache Kafka $version in $dir" >&2
}

# The client matrix's Java program (compat/java: a pom with kafka-clients
# and kafka-tools, the version of bench/kafka/pom.xml), built with Maven
# once per hash of its sources into
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-java-HASH: classes/ and
# libs/ (the runtime dependencies).
COMPAT_DIR="$(cd "$(dirname "$0")/.." && pwd)/compat"
compat_hash() { (cd "$COMPAT_DIR/$1" && find . -type f ! -path './target/*' ! -name .gitignore | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16); }
compat_java_path() { compat_maven_path java; }
compat_java_install() { compat_maven_install java strata/compat/Main.class "kafka-clients, kafka-tools"; }

# The Kafka Streams application of compat/streams_test.go (compat/streams:
# a pom with kafka-streams, the version of compat/java/pom.xml), built
# with Maven the same way into
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-streams-HASH.
compat_streams_path() { compat_maven_path streams; }
compat_streams_install() { compat_maven_install streams strata/streams/CountApp.class "kafka-streams"; }

# compat_maven_path NAME: where compat/NAME's build goes.
compat_maven_path() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-$1-$(compat_hash "$1")"; }

# compat_maven_install NAME CLASS WHAT builds the Maven project compat/NAME
# (its classes and runtime dependencies) unless CLASS is built already.
compat_maven_install() {
  local name="$1" class="$2" what="$3" dir tmp
  dir="$(compat_maven_path "$name")"
  [ -f "$dir/classes/$class" ] && return 0
  for tool in java mvn; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "install-deps: compat-$name needs $tool on PATH (Java 17 or later, and Maven)" >&2
      exit 1
    fi
  done
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.install-XXXXXX")"
  echo "install-deps: building compat/$name with Maven ($what)" >&2
  if ! mvn -B -q -Dstyle.color=never -f "$COMPAT_DIR/$name/pom.xml" package dependency:copy-dependencies \
      -DincludeScope=runtime -Dcompat.out="$tmp/build" -DoutputDirectory="$tmp/libs" >&2; then
    rm -rf "$tmp"
    echo "install-deps: mvn could not build compat/$name" >&2
    exit 1
  fi
  mv "$tmp/build/classes" "$tmp/classes"
  rm -rf "$tmp/build"
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
}

# kafkajs and its codecs for the client matrix (compat/node/package.json,
# exact versions), installed with npm once per hash of that file into
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-kafkajs-HASH.
compat_kafkajs_path() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-kafkajs-$(compat_hash node)"; }
compat_kafkajs_install() {
  local dir tmp
  dir="$(compat_kafkajs_path)"
  [ -f "$dir/node_modules/kafkajs/package.json" ] && return 0
  for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "install-deps: compat-kafkajs needs $tool on PATH (Debian packages nodejs and npm)" >&2
      exit 1
    fi
  done
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.install-XXXXXX")"
  cp "$COMPAT_DIR/node/package.json" "$tmp/"
  echo "install-deps: installing kafkajs and its codecs with npm" >&2
  if ! (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error >&2); then
    rm -rf "$tmp"
    echo "install-deps: npm install of compat/node/package.json failed" >&2
    exit 1
  fi
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
}

# confluent-kafka from PyPI for the client matrix
# (compat/python/requirements.txt, an exact version), installed with pip
# from binary wheels (each bundles its librdkafka) into a virtual
# environment of Debian's python3, once per hash of that folder, at
# ${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-confluent-kafka-HASH.
# The suite runs its bin/python; the environment is built under a
# temporary name and renamed, so use `bin/python -m pip`, not bin/pip.
compat_confluent_kafka_path() { echo "${XDG_CACHE_HOME:-$HOME/.cache}/strata/compat-confluent-kafka-$(compat_hash python)"; }
compat_confluent_kafka_install() {
  local dir tmp
  dir="$(compat_confluent_kafka_path)"
  [ -f "$dir/installed" ] && return 0
  # Debian splits venv and ensurepip out of python3 (package python3-venv).
  [ -x /usr/bin/python3 ] || apt_install python3
  /usr/bin/python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || apt_install python3-venv
  mkdir -p "$(dirname "$dir")"
  tmp="$(mktemp -d "$dir.install-XXXXXX")"
  echo "install-deps: installing $(grep -v '^#' "$COMPAT_DIR/python/requirements.txt" | xargs) from PyPI into a virtual environment" >&2
  if ! /usr/bin/python3 -m venv "$tmp" >&2 ||
     ! "$tmp/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
         -r "$COMPAT_DIR/python/requirements.txt" >&2 ||
     ! "$tmp/bin/python" -c 'import confluent_kafka' >&2; then
    rm -rf "$tmp"
    echo "install-deps: pip install of compat/python/requirements.txt failed" >&2
    exit 1
  fi
  touch "$tmp/installed"
  mv -T "$tmp" "$dir" 2>/dev/null || rm -rf "$tmp"
}

if [ "${1:-}" = --path ]; then
  case "${2:-}" in
    minio) minio_path; exit 0 ;;
    kafka) kafka_path; exit 0 ;;
    compat-java) compat_java_path; exit 0 ;;
    compat-streams) compat_streams_path; exit 0 ;;
    compat-kafkajs) compat_kafkajs_path; exit 0 ;;
    compat-confluent-kafka) compat_confluent_kafka_path; exit 0 ;;
    *) echo "install-deps: --path knows minio, kafka, compat-java, compat-streams, compat-kafkajs and compat-confluent-kafka" >&2; exit 2 ;;
  esac
fi

for dep in "$@"; do
  case "$dep" in
    kcat) command -v kcat >/dev/null 2>&1 || apt_install kcat ;;
    # librdkafka's Python client, for Debian's own python3.
    python3-confluent-kafka) /usr/bin/python3 -c 'import confluent_kafka' >/dev/null 2>&1 || apt_install python3-confluent-kafka ;;
    # internal/testenv runs QuorumPeerMain from this jar with the java on PATH.
    zookeeper) [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || apt_install zookeeper ;;
    # promtool checks and unit-tests deploy/prometheus/alerts.yml.
    promtool) command -v promtool >/dev/null 2>&1 || apt_install prometheus ;;
    minio) minio_install ;;
    kafka) kafka_install ;;
    compat-java) compat_java_install ;;
    compat-streams) compat_streams_install ;;
    compat-kafkajs) compat_kafkajs_install ;;
    compat-confluent-kafka) compat_confluent_kafka_install ;;
    *) echo "install-deps: unknown dependency $dep" >&2; exit 2 ;;
  esac
done
