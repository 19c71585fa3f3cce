#!/usr/bin/env bash
# Makes sure a Docker engine answers, for the PostgreSQL integration tests.
# Exits 0 at once when `docker info` works. Otherwise, as root, installs
# Debian's docker.io if dockerd is missing, starts dockerd detached (log in
# /var/log/keyledger-dockerd.log) and waits up to 60 s for it. Without root
# and without an engine it says what is needed and exits 1. Output goes to
# stderr.
set -euo pipefail

log() { printf 'docker: %s\n' "$*" >&2; }

engine_answers() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
dockerd_running() { command -v pgrep >/dev/null 2>&1 && pgrep -x dockerd >/dev/null 2>&1; }

if engine_answers; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  log "no Docker engine answers and this script is not running as root."
  log "The PostgreSQL integration tests need either a running Docker engine"
  log "(e.g. 'sudo apt-get install docker.io' and 'sudo systemctl start docker',"
  log "with your user in the docker group), or an existing server given as"
  log "KEYLEDGER_TEST_DATABASE_URL=postgres://superuser:password@127.0.0.1:5432/postgres"
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v docker >/dev/null 2>&1; then
  log "installing docker.io from the configured apt sources"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update >&2
  apt-get install -y --no-install-recommends docker.io >&2
fi

if ! dockerd_running; then
  logfile=/var/log/keyledger-dockerd.log
  log "starting dockerd (log: $logfile)"
  # Detached from this script: its own session, no shared stdio, so callers
  # that wait on our output (go test's exec) are not held open by dockerd.
  setsid nohup dockerd </dev/null >>"$logfile" 2>&1 &
else
  log "dockerd is running but does not answer yet; waiting"
fi

for _ in $(seq 60); do
  if engine_answers; then
    log "Docker engine is up"
    exit 0
  fi
  sleep 1
done
log "Docker engine did not answer within 60 s; see /var/log/keyledger-dockerd.log"
exit 1
