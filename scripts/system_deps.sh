#!/usr/bin/env bash
# System packages the sandboxes need (Debian): bubblewrap for the local backend's namespaces,
# libseccomp2 for its seccomp filter, util-linux for prlimit/setpriv/nsenter/unshare,
# slirp4netns and iproute2 for its private network when the network is on; procps, gcc and
# libc6-dev (a static escape probe) for the sandbox tests.
# `system_deps.sh test` adds what only the tests need (`make test`): chromium, the browser the
# report's test drives, and every language's toolchain (node and npm, cmake, meson, g++, Go, Rust,
# Maven and a JDK, autotools), so `make demo` stays lean.
# Idempotent: installs only what is missing (one `apt-get update` at most). Elsewhere, or without
# root, it prints what is missing and exits 0: the local backend then says what isolation it lacks.
set -euo pipefail

packages=(bubblewrap libseccomp2 util-linux slirp4netns iproute2 procps gcc libc6-dev)
test_packages=(chromium fonts-dejavu-core)
# The toolchains the launch tests of every language use on the local backend, by the command that
# names each: a command already on the PATH (a toolchain installed some other way) is kept.
toolchains=(node:nodejs npm:npm cmake:cmake meson:meson ninja:ninja-build g++:g++ go:golang-go rustc:rustc
            cargo:cargo mvn:maven javac:default-jdk-headless autoreconf:autoconf automake:automake
            libtoolize:libtool make:make)

case "${1:-}" in
    "") ;;
    test) packages+=("${test_packages[@]}")
          for pair in "${toolchains[@]}"; do
              command -v "${pair%%:*}" >/dev/null || packages+=("${pair#*:}")
          done ;;
    *) echo "system_deps: unknown argument ${1}; usage: system_deps.sh [test]" >&2; exit 2 ;;
esac

have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    echo "system_deps: not a Debian system; install by hand: ${packages[*]}" >&2
    exit 0
fi

missing=()
for p in "${packages[@]}"; do have "$p" || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ]; then
    echo "system_deps: missing ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
    exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "system_deps: installed ${missing[*]}"
