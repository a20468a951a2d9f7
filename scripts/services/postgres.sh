#!/usr/bin/env bash
# A throw-away PostgreSQL server for the test suite, from Debian's packages, on loopback only.
#
#   eval "$(bash scripts/services/postgres.sh start)"   # prints export lines (the test URL)
#   bash scripts/services/postgres.sh url               # the URL of the running server
#   bash scripts/services/postgres.sh stop              # stop it (the data directory stays)
#   bash scripts/services/postgres.sh destroy           # stop it and remove the data directory
#
# `start` is idempotent: a server already running from the same state directory is reused.
# It installs the `postgresql` package if no server binaries are found (as root, ~1 minute),
# initializes a cluster in $FLYWHEEL_PG_DIR (default /tmp/kv-flywheel-pg) owned by the
# `postgres` user, listens on 127.0.0.1 only, on $FLYWHEEL_PG_PORT or else a free port, and
# sets a random superuser password kept in a mode-600 file (never in the repository). stdout
# carries only the `export ...` lines; every message goes to stderr.
set -euo pipefail

DIR="${FLYWHEEL_PG_DIR:-/tmp/kv-flywheel-pg}"
DATA="$DIR/data"
DB="${FLYWHEEL_PG_DATABASE:-flywheel_test}"
USER_NAME="flywheel"

log() { echo "postgres.sh: $*" >&2; }

pg_bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$d" && -x "$d/initdb" ]]; then echo "$d"; return 0; fi
    if command -v initdb >/dev/null 2>&1; then dirname "$(command -v initdb)"; return 0; fi
    return 1
}

ensure_installed() {
    if pg_bindir >/dev/null; then return 0; fi
    if [[ $(id -u) -ne 0 ]]; then
        log "no PostgreSQL server binaries found; install Debian's 'postgresql' package (needs root)"
        exit 1
    fi
    log "installing Debian's postgresql package (one time, about a minute)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    # The package's own cluster is not used (or started: there is no init system here).
    apt-get install -y -qq --no-install-recommends postgresql >&2
    pg_bindir >/dev/null || { log "postgresql installed but initdb not found"; exit 1; }
}

# Run a server binary as the `postgres` user when we are root (the server refuses to run as root).
as_pg() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    local p
    for p in 55433 55434 55435 55436 55437 55438 55439 55440; do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
    done
    log "no free port among 55433-55440; set FLYWHEEL_PG_PORT"
    exit 1
}

running() {
    local bin="$1"
    [[ -f "$DATA/postmaster.pid" ]] && as_pg "$bin/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

url() {
    local pw port
    pw=$(cat "$DIR/password")
    port=$(cat "$DIR/port")
    echo "postgresql+psycopg://$USER_NAME:$pw@127.0.0.1:$port/$DB"
}

start() {
    ensure_installed
    local bin started=0
    bin=$(pg_bindir)
    mkdir -p "$DIR"
    chmod 700 "$DIR"
    if [[ ! -f "$DATA/PG_VERSION" ]]; then
        rm -rf "$DATA"
        umask 077
        if [[ ! -s "$DIR/password" ]]; then
            head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/password"
        fi
        echo "${FLYWHEEL_PG_PORT:-$(free_port)}" > "$DIR/port"
        mkdir -p "$DATA"
        if [[ $(id -u) -eq 0 ]]; then
            chown -R postgres:postgres "$DIR"
        fi
        log "initializing a cluster in $DATA"
        as_pg "$bin/initdb" -D "$DATA" -U "$USER_NAME" --pwfile="$DIR/password" \
            --auth-host=scram-sha-256 --auth-local=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
    fi
    if running "$bin"; then
        log "reusing the server already running from $DATA"
    else
        local port
        port=$(cat "$DIR/port")
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            port=$(free_port)
            echo "$port" > "$DIR/port"
        fi
        log "starting on 127.0.0.1:$port"
        # Loopback only; the Unix socket lives in the private state directory, not /var/run.
        as_pg "$bin/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$DIR' -c max_connections=60 -c shared_buffers=32MB" >/dev/null \
            || { log "server failed to start; log:"; tail -n 30 "$DIR/server.log" >&2 || true; exit 1; }
        started=1
    fi
    local port
    port=$(cat "$DIR/port")
    export PGPASSWORD
    PGPASSWORD=$(cat "$DIR/password")
    if ! "$bin/psql" -h 127.0.0.1 -p "$port" -U "$USER_NAME" -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = '$DB'" | grep -q 1; then
        "$bin/createdb" -h 127.0.0.1 -p "$port" -U "$USER_NAME" "$DB"
    fi
    echo "export FLYWHEEL_TEST_PG_URL='$(url)'"
    echo "export FLYWHEEL_TEST_PG_STARTED=$started"
}

stop() {
    local bin
    bin=$(pg_bindir) || return 0
    if running "$bin"; then
        as_pg "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null
        log "stopped"
    fi
}

case "${1:-start}" in
    start) start ;;
    url) url ;;
    stop) stop ;;
    destroy) stop; rm -rf "$DIR" ;;
    *) echo "usage: $0 start|url|stop|destroy" >&2; exit 2 ;;
esac
