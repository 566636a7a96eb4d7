#!/bin/sh
# First start: a cluster whose superuser is POSTGRES_USER with POSTGRES_PASSWORD,
# a database POSTGRES_DB, password logins from other containers. Then postgres
# in the foreground as PID 1's child-free replacement (exec), like the official image.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | tail -n1)
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    chown postgres "$pwfile"
    runuser -u postgres -- "$bin/initdb" -D "$PGDATA" --username="$user" \
        --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >> "$PGDATA/postgresql.conf"
    if [ "$db" != postgres ]; then
        runuser -u postgres -- "$bin/postgres" --single -D "$PGDATA" postgres \
            <<SQL >/dev/null
CREATE DATABASE "$db" OWNER "$user";
SQL
    fi
fi
exec runuser -u postgres -- "$bin/postgres" -D "$PGDATA"
