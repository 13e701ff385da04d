#!/bin/sh
# Regenerate the build system (configure, Makefile.in, libtool files).
#
# Needs autoconf, automake, libtool, pkg-config (for pkg.m4) and the Check
# unit-test framework (configure requires it). Where they are missing, they
# are installed when we run as root on a machine with apt-get; otherwise we
# say what to install and stop.
set -eu

cd "$(dirname "$0")"

pkgs="autoconf automake libtool pkg-config check"
install_line="apt-get update && apt-get install -y $pkgs"

missing=""
for tool in autoconf automake libtoolize pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || missing="$missing $tool"
done
if command -v pkg-config >/dev/null 2>&1; then
  pkg-config --exists check || missing="$missing check(pkg-config)"
fi

if [ -n "$missing" ]; then
  echo "autogen.sh: missing:$missing" >&2
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "autogen.sh: running: $install_line" >&2
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y $pkgs
  else
    echo "autogen.sh: install them first, as root:" >&2
    echo "  $install_line" >&2
    exit 1
  fi
fi

autoreconf -fi
