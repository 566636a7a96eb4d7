#!/bin/bash
# Used by `make test-docker` (CI): installs the engine and docker-compose
# (Debian packages) when missing, and starts the engine.
# A stand-in for the python:3.11-slim base image, built from Debian packages, so the
# project's Dockerfile can really be built on a machine that reaches the package
# registries but no image registry, and one for postgres:16 (deploy/postgres-standin).
# Idempotent; prints the names of the images it provides.
set -euo pipefail
command -v dockerd >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io debootstrap >/dev/null; }
command -v docker-compose >/dev/null || { apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-compose >/dev/null; }
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
if ! docker info >/dev/null 2>&1; then
  (dockerd >/dev/null 2>&1 &)
  for _ in $(seq 1 30); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
# docker-compose.yml's database: a stand-in built on the base image from Debian's
# PostgreSQL (deploy/postgres-standin), when postgres:16 is neither here nor pullable.
postgres_standin() {
  docker image inspect postgres:16 >/dev/null 2>&1 && return
  docker pull -q postgres:16 >/dev/null 2>&1 && return
  docker build -q -t postgres:16 "$(dirname "$0")/postgres-standin" >/dev/null
  echo postgres:16
}
if docker image inspect python:3.11-slim >/dev/null 2>&1; then echo python:3.11-slim; postgres_standin; exit 0; fi
mirror=$(grep -h -m1 '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | head -n1)
[ -n "$mirror" ] || mirror=$(grep -h -m1 '^deb ' /etc/apt/sources.list | awk '{print $2}')
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates bookworm "$root" "$mirror" >/dev/null
ln -sf python3 "$root/usr/bin/python"; ln -sf pip3 "$root/usr/bin/pip"
rm -f "$root"/usr/lib/python3.*/EXTERNALLY-MANAGED
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
tar -C "$root" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' -c 'CMD ["python3"]' - python:3.11-slim >/dev/null
echo python:3.11-slim
postgres_standin
