#!/usr/bin/env bash
# Make sure a Docker Engine answers and the locally made images exist; both cached, quiet when done.
#
# 1. `docker info` fails and we are root on Debian: install Debian's docker.io, start dockerd in
#    the background (log: $SWEDOJO_DOCKERD_LOG), storage driver overlay2, else vfs.
# 2. No registry is reachable, so images are made here: debootstrap a minimal bookworm root from
#    the mirror apt already uses, give it the host's CA bundle and apt network settings, and
#    `docker import` it as $SWEDOJO_BASE_IMAGE; then $SWEDOJO_PYTHON_IMAGE = base + what grading
#    needs (python3, pytest, git, procps), built FROM the base. Each is skipped if its tag exists.
set -euo pipefail

BASE_IMAGE=${SWEDOJO_BASE_IMAGE:-swedojo/base:bookworm}
PYTHON_IMAGE=${SWEDOJO_PYTHON_IMAGE:-swedojo/python:bookworm}
DOCKERD_LOG=${SWEDOJO_DOCKERD_LOG:-/var/log/swedojo-dockerd.log}
WAIT_S=${SWEDOJO_DOCKER_WAIT_S:-90}
DRIVERS=${SWEDOJO_STORAGE_DRIVERS:-overlay2 vfs}
SUITE=bookworm

say() { echo "ensure_docker: $*" >&2; }
die() { say "error: $*"; exit 1; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

engine_answers() { docker info >/dev/null 2>&1; }

# Run a command; show its output only if it fails.
quietly() {
    local out
    out=$(mktemp)
    "$@" >"$out" 2>&1 || { tail -n 30 "$out" >&2; rm -f "$out"; die "failed: $*"; }
    rm -f "$out"
}

install_packages() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]} with apt"
    export DEBIAN_FRONTEND=noninteractive
    quietly apt-get update -qq
    quietly apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# Start dockerd with one storage driver; succeed once `docker info` answers.
start_dockerd() {
    local driver=$1 pid deadline
    say "starting dockerd (storage driver $driver), log: $DOCKERD_LOG"
    setsid nohup dockerd --storage-driver="$driver" >>"$DOCKERD_LOG" 2>&1 </dev/null &
    pid=$!
    deadline=$(( $(date +%s) + WAIT_S ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
        engine_answers && return 0
        kill -0 "$pid" 2>/dev/null || { say "dockerd exited with storage driver $driver"; return 1; }
        sleep 0.5
    done
    kill "$pid" 2>/dev/null || true
    die "dockerd did not answer within ${WAIT_S}s; see $DOCKERD_LOG"
}

ensure_engine() {
    engine_answers && return 0
    [ "$(id -u)" -eq 0 ] && [ -f /etc/debian_version ] \
        || die "no Docker Engine answers (docker info fails) and this is not root on Debian: start one yourself"
    local t0 driver
    t0=$(date +%s)
    install_packages docker.io
    engine_answers && { say "engine started by the docker.io package (init system)"; return 0; }
    for driver in $DRIVERS; do
        if start_dockerd "$driver"; then
            [ "$driver" = overlay2 ] || say "using storage driver $driver (overlay2 does not work here): slower, more disk"
            say "engine up in $(elapsed "$t0")"
            return 0
        fi
    done
    die "dockerd failed with every storage driver ($DRIVERS); see $DOCKERD_LOG"
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

# The Debian mirror apt already uses for $SUITE (apt's own view of its sources; needs fetched lists).
debian_mirror() {
    apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 'Created-By: Packages' 2>/dev/null \
        | awk -v s="$SUITE" '$2 == s { print $1; exit }'
}

# Host settings that let apt and pip inside the image reach the registries: CA bundle, apt sources
# signed by keys the image has, apt network options (proxy, snapshot validity), pip's config.
copy_host_network_config() {
    local root=$1 f key
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/host-ca-bundle.crt"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -s "$f" ] || continue
        key=$(sed -nE 's/.*[Ss]igned-[Bb]y[:=] *([^] ]+).*/\1/p' "$f" | head -n1)
        [ -z "$key" ] || [ -e "$root$key" ] || continue
        install -D -m 0644 "$f" "$root$f"
    done
    for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
        [ -f "$f" ] && grep -q 'Acquire::' "$f" && install -D -m 0644 "$f" "$root$f"
    done
    [ -f /etc/pip.conf ] && install -D -m 0644 /etc/pip.conf "$root/etc/pip.conf"
    return 0
}

build_base() {
    local t0 mirror work
    t0=$(date +%s)
    [ "$(id -u)" -eq 0 ] || die "$BASE_IMAGE is missing and building it (debootstrap) needs root"
    install_packages debootstrap
    mirror=$(debian_mirror)
    [ -n "$mirror" ] || { quietly apt-get update -qq; mirror=$(debian_mirror); }
    [ -n "$mirror" ] || die "apt has no source for Debian $SUITE (see /etc/apt/sources.list*)"
    work=$(mktemp -d /var/tmp/swedojo-base.XXXXXX)
    trap "rm -rf '$work'" EXIT
    say "debootstrap --variant=minbase $SUITE from $mirror (takes a few minutes)"
    quietly debootstrap --variant=minbase --include=ca-certificates "$SUITE" "$work/root" "$mirror"
    rm -f "$work/root/etc/apt/sources.list"
    copy_host_network_config "$work/root"
    rm -rf "$work/root/var/cache/apt/archives/"*.deb "$work/root/var/lib/apt/lists/"*
    tar -C "$work/root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV SSL_CERT_FILE=/etc/ssl/host-ca-bundle.crt' \
        --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/host-ca-bundle.crt' \
        --change 'ENV PIP_CERT=/etc/ssl/host-ca-bundle.crt' \
        --change 'CMD ["bash"]' \
        - "$BASE_IMAGE" >/dev/null
    say "built $BASE_IMAGE in $(elapsed "$t0")"
}

# Grading needs: python3, pytest, git, bash, procps; a non-root user (uid 1000) for sandboxes.
build_python() {
    local t0
    t0=$(date +%s)
    say "building $PYTHON_IMAGE from $BASE_IMAGE"
    quietly env DOCKER_BUILDKIT=0 docker build -q --network host -t "$PYTHON_IMAGE" - <<EOF
FROM $BASE_IMAGE
RUN apt-get update -qq \\
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \\
      python3 python3-pytest python3-pip python3-venv git procps \\
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \\
 && ln -sf python3 /usr/bin/python \\
 && useradd --uid 1000 --user-group --create-home --shell /bin/bash sandbox
EOF
    say "built $PYTHON_IMAGE in $(elapsed "$t0")"
}

ensure_engine
image_exists "$BASE_IMAGE" || build_base
image_exists "$PYTHON_IMAGE" || build_python
