#!/usr/bin/env bash
# Installs the outside programs tests and the local cluster need, when they
# are missing: kcat and zookeeper (Debian packages; zookeeper runs on the
# machine's Java). Usage: install-deps.sh NAME...
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

for dep in "$@"; do
  case "$dep" in
    kcat) command -v kcat >/dev/null 2>&1 || apt_install kcat ;;
    # internal/testenv runs QuorumPeerMain from this jar with the java on PATH.
    zookeeper) [ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || apt_install zookeeper ;;
    *) echo "install-deps: unknown dependency $dep" >&2; exit 2 ;;
  esac
done
