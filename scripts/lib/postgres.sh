# A PostgreSQL cluster of its own for make run-ha and make bench: Debian's
# binaries (the postgresql package; its service need not run), a cluster in
# a directory of the caller's, a loopback port, its unix socket beside the
# cluster. Sourced, not run; the caller defines say and die.

# pg_find: pgbin is the directory of initdb, postgres and psql: initdb on
# the PATH, else the newest /usr/lib/postgresql/VERSION/bin (as
# coordinator/harness/pgtest finds it).
pg_find() {
	local newest
	pgbin=
	if command -v initdb >/dev/null; then
		pgbin=$(dirname "$(readlink -f "$(command -v initdb)")")
	else
		newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
		[ -n "$newest" ] && pgbin=$newest
	fi
	[ -n "$pgbin" ] && [ -x "$pgbin/postgres" ] && [ -x "$pgbin/psql" ] ||
		die "PostgreSQL is not installed: apt-get install postgresql (a cluster of its own is run; the package's service need not run)"
}

# pg_place DIR OPEN…: the cluster goes in DIR/pg (PG). PostgreSQL refuses to
# run as root, so as root it runs as the postgres user (or nobody), which
# must reach DIR: the directories OPEN… (DIR and those above it that the
# caller made) let others pass through (0711, no listing; what is in them
# stays private). If a directory above them is closed too (a home
# directory), the cluster lives in a temporary directory (PG_TEMP) that
# pg_stop removes.
pg_place() {
	local dir=$1
	shift
	pg_as=()
	PG_TEMP=
	if [ "$(id -u)" = 0 ]; then
		pguser=postgres
		id -u "$pguser" >/dev/null 2>&1 || pguser=nobody
		pg_as=(setpriv --reuid="$(id -u "$pguser")" --regid="$(id -g "$pguser")" --clear-groups --)
		chmod 711 "$@"
	fi
	PG=$dir/pg
	if [ "${#pg_as[@]}" -gt 0 ] && ! "${pg_as[@]}" test -x "$dir"; then
		PG_TEMP=$(mktemp -d "${TMPDIR:-/tmp}/gridcity-pg.XXXXXX")
		chmod 711 "$PG_TEMP"
		say "PostgreSQL runs as $pguser, which cannot reach $dir (a directory above it is closed to other users): its cluster is in $PG_TEMP for this run only"
		PG=$PG_TEMP/pg
	fi
	mkdir -p "$PG"
	chmod 700 "$PG"
	[ "${#pg_as[@]}" -eq 0 ] || chown "$pguser:$(id -gn "$pguser")" "$PG"
}

# pg_init PASSWORD_FILE LOG: initialise the cluster unless it is there, its
# superuser postgres with a new password kept in PASSWORD_FILE (0600).
pg_init() {
	local pw
	[ ! -f "$PG/data/PG_VERSION" ] || return 0
	say "initialising a PostgreSQL cluster in $PG/data ($pgbin)…"
	rm -rf "${PG:?}/data"
	pw=gridcity-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	(umask 077 && echo "$pw" >"$1")
	(umask 077 && echo "$pw" >"$PG/pwfile")
	[ "${#pg_as[@]}" -eq 0 ] || chown "$pguser" "$PG/pwfile"
	"${pg_as[@]}" "$pgbin/initdb" -D "$PG/data" -U postgres --no-instructions --no-locale -E UTF8 \
		--auth-local trust --auth-host scram-sha-256 --pwfile "$PG/pwfile" >>"$2" 2>&1 ||
		{ rm -f "$PG/pwfile"; die "initdb failed"; }
	rm -f "$PG/pwfile"
}

# pg_start PORT LOG [SETTING=VALUE…]: run the cluster on 127.0.0.1:PORT
# (pg_pid) until it accepts connections. In a session of its own, so that
# Ctrl-C reaches only the processes that use it: pg_stop stops it after them.
pg_start() {
	local port=$1 log=$2 opt _
	shift 2
	local -a opts=()
	for opt in "$@"; do opts+=(-c "$opt"); done
	setsid "${pg_as[@]}" "$pgbin/postgres" -D "$PG/data" -p "$port" -c listen_addresses=127.0.0.1 \
		-c unix_socket_directories="$PG" -c logging_collector=off -c max_connections=300 "${opts[@]}" >>"$log" 2>&1 &
	pg_pid=$!
	pg_port=$port
	for _ in $(seq 1 600); do
		kill -0 "$pg_pid" 2>/dev/null || die "PostgreSQL did not start"
		"$pgbin/pg_isready" -q -h "$PG" -p "$port" 2>/dev/null && return 0
		sleep 0.1
	done
	die "PostgreSQL did not accept connections within a minute"
}

# pg_createdb NAME LOG: make the database NAME unless it is there.
pg_createdb() {
	local -a psql=("${pg_as[@]}" "$pgbin/psql" -X -q -h "$PG" -p "$pg_port" -U postgres -d postgres -v ON_ERROR_STOP=1)
	[ "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$1'")" != 1 ] || return 0
	"${psql[@]}" -c "CREATE DATABASE $1" >>"$2" 2>&1 || die "could not create the database $1"
}

# pg_stop: a fast shutdown, and the temporary directory gone.
pg_stop() {
	if [ -n "${pg_pid:-}" ]; then
		kill -INT "$pg_pid" 2>/dev/null || true
		wait "$pg_pid" 2>/dev/null || true
		pg_pid=
	fi
	[ -z "${PG_TEMP:-}" ] || rm -rf "$PG_TEMP"
}
