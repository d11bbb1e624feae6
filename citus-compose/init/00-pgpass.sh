#!/bin/sh
# Runs once, as the postgres user, when a node's data directory is created:
# gives the server a libpq password file so that the coordinator can connect
# to the workers with the cluster password.
set -e
umask 077
printf '*:*:*:%s:%s\n' "$POSTGRES_USER" "$POSTGRES_PASSWORD" > "$PGPASSFILE"
