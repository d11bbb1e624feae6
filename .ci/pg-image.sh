#!/usr/bin/env bash
# Builds noisysim's local PostgreSQL test image when it is missing.
#
# The image is a minimal Debian bookworm root file system with Debian's
# postgresql-15 package, made by debootstrap from the mirror this machine's apt
# configuration names, and imported with `docker import` under a fixed tag, so
# it is built once per machine. Its entry point honours the official postgres
# image's POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, POSTGRES_INITDB_ARGS,
# POSTGRES_HOST_AUTH_METHOD and /docker-entrypoint-initdb.d, so noisysim's
# container backend treats both images alike.
#
# Usage: .ci/pg-image.sh [TAG]   (default: noisysim-local/postgres:15-bookworm)
# Env:   NOISYSIM_PG_IMAGE_REBUILD=1 rebuilds even when the tag exists.
# Exit:  0 built or present; 2 with one line on stderr when the machine lacks a
#        prerequisite (docker, a daemon, a Debian apt source, debootstrap that
#        installs and runs); 1 on any other failure.
set -euo pipefail

TAG="${1:-noisysim-local/postgres:15-bookworm}"
SUITE=bookworm

log() { echo "pg-image: $*" >&2; }

command -v docker >/dev/null || { log "docker is not installed"; exit 2; }
docker info >/dev/null 2>&1 || { log "no Docker daemon is reachable"; exit 2; }

exec 9>/var/tmp/noisysim-pg-image.lock
flock 9
if [ "${NOISYSIM_PG_IMAGE_REBUILD:-}" != 1 ] && docker image inspect "$TAG" >/dev/null 2>&1; then
	log "$TAG is present"
	exit 0
fi

# mirror prints the first Debian archive URI configured for $SUITE (deb822
# .sources files first, then one-line sources.list entries).
mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		awk -v suite="$SUITE" '
			function flush() { if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && uri != "") { print uri; found = 1; exit } types = suites = uri = "" }
			/^[ \t]*$/ { flush(); next }
			/^Types:/  { sub(/^Types:[ \t]*/, "");  types = $0 }
			/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
			/^URIs:/   { sub(/^URIs:[ \t]*/, "");   split($0, u, /[ \t]+/); uri = u[1] }
			END { if (!found) flush() }' "$f"
	done
	set +o pipefail
	cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | # absent files are fine
		awk -v suite="$SUITE" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ } if ($(i+1) == suite) { print $i; exit } }'
}
MIRROR="$(mirror | head -n1)" || true
[ -n "$MIRROR" ] || { log "no apt source for Debian $SUITE found in /etc/apt"; exit 2; }

WORK="$(mktemp -d /var/tmp/noisysim-pg-image.XXXXXX)"
cleanup() {
	# Nothing may stay mounted inside the root before it is removed.
	umount -l "$WORK/root/proc" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
ROOT="$WORK/root"

# fail prints one line, naming the last error line of log $1 (copied to
# $TMPDIR, default /var/tmp, for reading), and exits 2: the machine lacks what
# the build needs.
fail() {
	local log="$1" what="$2" last="" kept
	kept="${TMPDIR:-/var/tmp}/noisysim-pg-image.${1##*/}"
	if [ -s "$log" ] && cat "$log" >"$kept"; then
		last="$(awk 'NF { l = $0 } /^E:/ { e = $0 } END { print (e != "" ? e : l) }' "$log")"
		log "$what${last:+: $last} (log: $kept)"
	else
		log "$what"
	fi
	exit 2
}

# debootstrap comes from Debian's package; an install that fails, or that
# succeeds without putting debootstrap on PATH, stops the build here.
if ! command -v debootstrap >/dev/null; then
	log "installing debootstrap"
	{ DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }; } \
		>"$WORK/apt-debootstrap.log" 2>&1 || true
	command -v debootstrap >/dev/null ||
		fail "$WORK/apt-debootstrap.log" "debootstrap is not installed and apt-get could not install it; install debootstrap and run again"
fi

log "debootstrap $SUITE (minbase) into $ROOT"
debootstrap --variant=minbase "$SUITE" "$ROOT" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 ||
	fail "$WORK/debootstrap.log" "debootstrap $SUITE from $MIRROR failed"

# Never start a service inside the build root, and let the package create no
# cluster of its own: the entry point runs initdb on first start.
printf '#!/bin/sh\nexit 101\n' >"$ROOT/usr/sbin/policy-rc.d"
chmod 755 "$ROOT/usr/sbin/policy-rc.d"
mkdir -p "$ROOT/etc/postgresql-common"
echo "create_main_cluster = false" >"$ROOT/etc/postgresql-common/createcluster.conf"

log "installing postgresql-15"
chroot "$ROOT" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
	postgresql-15 >"$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; exit 1; }

# Slim the root: package lists and caches, documentation, the build-only
# policy file and the apt source (it names the build machine's mirror).
rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin "$ROOT"/var/cache/apt/archives/*.deb \
	"$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
	"$ROOT"/usr/sbin/policy-rc.d "$ROOT"/etc/apt/sources.list "$ROOT"/var/log/*.log
mkdir -p "$ROOT/docker-entrypoint-initdb.d" "$ROOT/var/lib/postgresql/data" "$ROOT/var/run/postgresql"
chroot "$ROOT" chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
chmod 1777 "$ROOT/var/lib/postgresql/data"
chmod 3777 "$ROOT/var/run/postgresql"

cat >"$ROOT/usr/local/bin/docker-entrypoint.sh" <<'ENTRY'
#!/usr/bin/env bash
# Entry point of noisysim's local PostgreSQL test image. Like the official
# postgres image's: `postgres` (or flags alone) initialises $PGDATA on first
# start as POSTGRES_USER with POSTGRES_PASSWORD, creates POSTGRES_DB, runs
# /docker-entrypoint-initdb.d/*.sh and *.sql on a temporary unix-socket-only
# server, then runs the server as the postgres user. Anything else is exec'd.
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

if [ "$1" = postgres ] && [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	chown postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

if [ "$1" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	auth="${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
		echo "error: the database is uninitialized and POSTGRES_PASSWORD is not set" >&2
		echo "       (set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow connections without one)" >&2
		exit 1
	fi
	chmod 700 "$PGDATA" 2>/dev/null || true
	pwfile="$(mktemp)"
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of words, as in the official image
	initdb --username="$POSTGRES_USER" --pwfile="$pwfile" -D "$PGDATA" ${POSTGRES_INITDB_ARGS:-}
	rm -f "$pwfile"
	printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"
	printf "\nlisten_addresses = '*'\n" >>"$PGDATA/postgresql.conf"

	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -p ${PGPORT:-5432}" -w start
	psql=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) if [ -x "$f" ]; then echo "running $f"; "$f"; else echo "sourcing $f"; . "$f"; fi ;;
		*.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
		*.sql.gz) echo "running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
		*) [ -e "$f" ] && echo "ignoring $f" ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop
	echo "PostgreSQL init process complete; ready for start up."
fi

exec "$@"
ENTRY
chmod 755 "$ROOT/usr/local/bin/docker-entrypoint.sh"

# docker import takes no STOPSIGNAL: noisysim sets SIGINT (fast shutdown) per
# container.
log "importing $TAG"
tar -C "$ROOT" -c . | docker import \
	--change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'ENV LANG=C.UTF-8' \
	--change 'ENV PGDATA=/var/lib/postgresql/data' \
	--change 'ENV PG_MAJOR=15' \
	--change 'ENTRYPOINT ["docker-entrypoint.sh"]' \
	--change 'CMD ["postgres"]' \
	--change 'EXPOSE 5432' \
	- "$TAG" >/dev/null
log "built $TAG ($(docker image inspect -f '{{.Size}}' "$TAG") bytes)"
