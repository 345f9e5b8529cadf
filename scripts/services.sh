# shellcheck shell=bash disable=SC2016,SC2012
# scripts/services.sh — make the services txmq's tests talk to available.
#
# SOURCE this file (scripts/test does):   source scripts/services.sh
# Then call txmq_services_stop when done (scripts/test traps it on EXIT).
#
# For each service: if one already answers (on the endpoint an already-set
# TXMQ_* variable names, else on the standard local port) it is reused and
# never stopped; otherwise what is missing is installed with apt-get / npm and
# a private instance is started. Only instances started here are recorded and
# stopped by txmq_services_stop. Sourcing again in the same shell is safe:
# running services are reused and the stop list is kept.
#
# Exports:
#   TXMQ_POSTGRES_URL      postgres://USER@127.0.0.1:PORT/test?sslmode=disable
#   TXMQ_PGBOUNCER_URL     postgres://USER@127.0.0.1:PORT/test?sslmode=disable: a PgBouncer
#                          (Debian's pgbouncer) in transaction pooling mode in front of
#                          TXMQ_POSTGRES_URL's server, always started here (never reused)
#   TXMQ_REDIS_URL         redis://127.0.0.1:PORT/0
#   TXMQ_REDIS_CLUSTER_URL redis+cluster://127.0.0.1:P1,...,127.0.0.1:P6/ (3 masters + 3 replicas)
#   TXMQ_SQS_ENDPOINT      http://127.0.0.1:PORT   (fauxqs 1.9.2, .ci/fauxqs)
#   TXMQ_MYSQL_URL         mysql://root@127.0.0.1:PORT/test (MariaDB; the machine's, started when silent)
#   TXMQ_REQUIRE_SERVICES  1  (Go tests fail instead of skipping when a service is missing)
#   TXMQ_NATS_URL          NOT exported by default: see the NATS section below.
#
# Knobs (optional): TXMQ_POSTGRES_PORT (5432), TXMQ_PGBOUNCER_PORT (16432), TXMQ_REDIS_PORT (6379),
# TXMQ_REDIS_CLUSTER_PORT (17000, the first of the cluster's six),
# TXMQ_MYSQL_PORT (3306),
# TXMQ_SQS_PORT (4566) choose the local port to probe / start on; a port taken
# by something else makes the script start its own instance on a free port.

if [ -n "${BASH_VERSION:-}" ] && [ "${BASH_SOURCE[0]}" = "$0" ]; then
	echo "scripts/services.sh must be sourced, not executed: source scripts/services.sh" >&2
	exit 2
fi

_TXMQ_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Private state (not exported: a child shell that sources this file again must
# not stop what its parent started).
if [ -z "${_TXMQ_SERVICES_DIR:-}" ] || [ ! -d "${_TXMQ_SERVICES_DIR}" ]; then
	_TXMQ_SERVICES_DIR="$(mktemp -d "${TMPDIR:-/tmp}/txmq-services.XXXXXX")"
	chmod 755 "$_TXMQ_SERVICES_DIR" # a throwaway Postgres runs as user postgres
fi
_TXMQ_STARTED="$_TXMQ_SERVICES_DIR/started" # one line per thing started here: "kind arg..."
touch "$_TXMQ_STARTED"

_txmq_say() { printf 'services: %s\n' "$*"; }
_txmq_warn() { printf 'services: %s\n' "$*" >&2; }

# _txmq_tcp HOST PORT: does anything accept a TCP connection there?
_txmq_tcp() {
	timeout 2 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null
}

# _txmq_free_port START: print the first port >= START nobody listens on.
_txmq_free_port() {
	local p=$1
	while [ "$p" -lt 65535 ]; do
		if ! _txmq_tcp 127.0.0.1 "$p"; then
			echo "$p"
			return 0
		fi
		p=$((p + 1))
	done
	return 1
}

# _txmq_as_root CMD...: run as root (directly, or through sudo -n).
_txmq_as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo -n "$@"
	else
		_txmq_warn "need root to run: $*"
		return 1
	fi
}

# _txmq_apt_install PKG...: apt-get update (once per shell) then install.
_txmq_apt_install() {
	local log="$_TXMQ_SERVICES_DIR/apt.log"
	_txmq_say "installing with apt-get: $* (this machine lacks it; log $log)"
	if [ -z "${_TXMQ_APT_UPDATED:-}" ]; then
		if ! _txmq_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >>"$log" 2>&1; then
			_txmq_warn "apt-get update failed:"
			tail -n 20 "$log" >&2
			return 1
		fi
		_TXMQ_APT_UPDATED=1
	fi
	if ! _txmq_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >>"$log" 2>&1; then
		_txmq_warn "apt-get install $* failed:"
		tail -n 20 "$log" >&2
		return 1
	fi
}

# ---------------------------------------------------------------- PostgreSQL

# _txmq_pg_user PORT: print the first of postgres/root that trust auth lets in.
_txmq_pg_user() {
	local u
	for u in postgres root "$(id -un)"; do
		if PGCONNECT_TIMEOUT=3 psql -X -q -h 127.0.0.1 -p "$1" -U "$u" -d postgres -Atc 'select 1' >/dev/null 2>&1 </dev/null; then
			echo "$u"
			return 0
		fi
	done
	return 1
}

# _txmq_pg_use PORT HOW: make sure database test exists, export the URL.
_txmq_pg_use() {
	local port=$1 how=$2 user
	if ! user="$(_txmq_pg_user "$port")"; then
		return 1
	fi
	if [ "$(psql -X -q -h 127.0.0.1 -p "$port" -U "$user" -d postgres -Atc "select 1 from pg_database where datname = 'test'" </dev/null 2>/dev/null)" != 1 ]; then
		if ! psql -X -q -h 127.0.0.1 -p "$port" -U "$user" -d postgres -c 'create database test' >/dev/null </dev/null; then
			_txmq_warn "postgres: cannot create database test on port $port"
			return 1
		fi
	fi
	export TXMQ_POSTGRES_URL="postgres://$user@127.0.0.1:$port/test?sslmode=disable"
	_txmq_say "postgres $how $TXMQ_POSTGRES_URL"
}

# _txmq_pg_capacity PORT: the suites run side by side (parity properties in parallel, each
# with pools of its own, the ledger and outbox stores, PgBouncer's server connections), which
# takes more than PostgreSQL's default 100 connections ("sorry, too many clients already").
# It fails, saying so, when the server on PORT allows fewer than 300: the caller then starts a
# private server instead. A server the project did not start is never reconfigured or
# restarted (no ALTER SYSTEM): it may be a developer's own database, or shared.
_txmq_pg_capacity() {
	local port=$1 want=300 have user
	user="$(_txmq_pg_user "$port")" || return 1
	have="$(psql -X -q -h 127.0.0.1 -p "$port" -U "$user" -d postgres -Atc 'show max_connections' </dev/null 2>/dev/null)"
	if [ -n "$have" ] && [ "$have" -lt "$want" ]; then
		_txmq_say "postgres on port $port allows $have connections, the suites side by side need $want: using a private server instead (the one on port $port is left as it is)"
		return 1
	fi
	return 0
}

# _txmq_closefds: close this shell's file descriptors above 2. Call it only in a subshell that
# is about to start a daemon, so that the daemon holds none of the caller's descriptors (a lock
# or a pipe of the caller's would otherwise stay open for as long as the daemon runs).
_txmq_closefds() {
	local fd
	for fd in /proc/self/fd/*; do
		fd="${fd##*/}"
		if [ "$fd" -gt 2 ] 2>/dev/null; then
			eval "exec $fd>&-" 2>/dev/null
		fi
	done
}

# _txmq_nofds CMD...: run CMD (a command or one of these functions) in a subshell with the
# caller's file descriptors above 2 closed (see _txmq_closefds).
_txmq_nofds() {
	(
		_txmq_closefds
		if declare -F "$1" >/dev/null; then
			"$@"
		else
			exec "$@"
		fi
	)
}

# _txmq_pg_throwaway PORT: initdb + start a private trust-auth cluster.
_txmq_pg_throwaway() {
	local port=$1 ver bin dir as_pg=()
	ver="$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)"
	bin="/usr/lib/postgresql/$ver/bin"
	if [ -z "$ver" ] || [ ! -x "$bin/initdb" ]; then
		_txmq_warn "postgres: no initdb under /usr/lib/postgresql"
		return 1
	fi
	dir="$_TXMQ_SERVICES_DIR/pg-$port"
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		# initdb refuses to run as root.
		chown postgres:postgres "$dir"
		as_pg=(runuser -u postgres --)
	fi
	if ! "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-sync >"$dir/initdb.log" 2>&1; then
		_txmq_warn "postgres: initdb failed:"
		tail -n 20 "$dir/initdb.log" >&2
		return 1
	fi
	if ! _txmq_nofds "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
		-o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
		start >/dev/null 2>&1; then
		_txmq_warn "postgres: pg_ctl start failed:"
		tail -n 20 "$dir/postgres.log" >&2
		return 1
	fi
	echo "pgdata $bin $dir/data $(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null)" >>"$_TXMQ_STARTED"
}

_txmq_postgres() {
	local port="${TXMQ_POSTGRES_PORT:-5432}" ver

	# An outside endpoint given by the caller.
	if [ -n "${TXMQ_POSTGRES_URL:-}" ]; then
		if command -v psql >/dev/null 2>&1 &&
			PGCONNECT_TIMEOUT=5 psql -X -q "$TXMQ_POSTGRES_URL" -Atc 'select 1' >/dev/null 2>&1 </dev/null; then
			_txmq_say "postgres reused $TXMQ_POSTGRES_URL"
			return 0
		fi
		_txmq_warn "postgres: TXMQ_POSTGRES_URL=$TXMQ_POSTGRES_URL does not answer; using a local server instead"
		unset TXMQ_POSTGRES_URL
	fi

	if ! command -v psql >/dev/null 2>&1 || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
		if ! _txmq_tcp 127.0.0.1 "$port" || ! command -v psql >/dev/null 2>&1; then
			_txmq_apt_install postgresql postgresql-client || return 1
		fi
	fi

	# Something on the port: reuse it if trust auth lets us in.
	if _txmq_tcp 127.0.0.1 "$port"; then
		if _txmq_pg_capacity "$port" && _txmq_pg_use "$port" reused; then
			return 0
		fi
		_txmq_warn "postgres: port $port answers but is not usable as it is (see above); starting a private server"
		port="$(_txmq_free_port 15432)" || return 1
	elif [ "$port" = 5432 ] && [ -n "$(ls /etc/postgresql 2>/dev/null)" ]; then
		# The machine's own cluster, stopped: start it the way the machine does.
		ver="$(ls /etc/postgresql | sort -V | tail -n 1)"
		if _txmq_nofds _txmq_as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main start >/dev/null 2>&1; then
			echo "pgcluster $ver main" >>"$_TXMQ_STARTED"
			if _txmq_pg_capacity "$port" && _txmq_pg_use "$port" started; then
				return 0
			fi
			_txmq_warn "postgres: cluster $ver/main started but is not usable as it is (see above); starting a private server"
		fi
		port="$(_txmq_free_port 15432)" || return 1
	fi

	_txmq_pg_throwaway "$port" || return 1
	_txmq_pg_use "$port" started
}

# ----------------------------------------------------------------- PgBouncer
#
# A private PgBouncer in transaction pooling mode in front of the PostgreSQL
# above, for the sqljobs-pgbouncer parity suite: a server connection is held
# only for the length of a transaction, so nothing of a session (prepared
# statements, LISTEN, SET) survives from one statement to the next, as in
# production poolers. Its config, pid file and log live in the services dir,
# never in /etc. auth_type=any with the database's user fixed: any client user
# name is accepted and logs in as TXMQ_POSTGRES_URL's user (trust auth). It
# holds at most 20 server connections and closes idle ones after 15 s, so that
# the other packages' tests, run at the same time, keep PostgreSQL's slots.

_txmq_pgbouncer() {
	local hostport host pgport user port dir pid runas=()
	if [ -z "${TXMQ_POSTGRES_URL:-}" ]; then
		_txmq_warn "pgbouncer: no TXMQ_POSTGRES_URL to put it in front of"
		return 1
	fi
	# A PgBouncer this shell already started: keep it.
	if [ -n "${TXMQ_PGBOUNCER_URL:-}" ] && [ -s "$_TXMQ_SERVICES_DIR/pgbouncer/pgbouncer.pid" ] &&
		kill -0 "$(cat "$_TXMQ_SERVICES_DIR/pgbouncer/pgbouncer.pid")" 2>/dev/null; then
		_txmq_say "pgbouncer reused $TXMQ_PGBOUNCER_URL"
		return 0
	fi
	if ! command -v pgbouncer >/dev/null 2>&1 && [ ! -x /usr/sbin/pgbouncer ]; then
		_txmq_apt_install pgbouncer || return 1
	fi
	hostport="${TXMQ_POSTGRES_URL#*://}"
	user="${hostport%%@*}"
	[ "$user" = "$hostport" ] && user="$(id -un)"
	user="${user%%:*}"
	hostport="${hostport##*@}"
	hostport="${hostport%%/*}"
	host="${hostport%:*}"
	pgport="${hostport##*:}"
	[ "$pgport" = "$hostport" ] && pgport=5432
	port="$(_txmq_free_port "${TXMQ_PGBOUNCER_PORT:-16432}")" || return 1
	dir="$_TXMQ_SERVICES_DIR/pgbouncer"
	mkdir -p "$dir"
	cat >"$dir/pgbouncer.ini" <<-INI
		[databases]
		* = host=$host port=$pgport user=$user

		[pgbouncer]
		listen_addr = 127.0.0.1
		listen_port = $port
		unix_socket_dir =
		auth_type = any
		pool_mode = transaction
		max_client_conn = 2000
		default_pool_size = 15
		reserve_pool_size = 5
		max_db_connections = 20
		server_idle_timeout = 15
		server_lifetime = 3600
		ignore_startup_parameters = extra_float_digits
		pidfile = $dir/pgbouncer.pid
		logfile = $dir/pgbouncer.log
	INI
	if [ "$(id -u)" = 0 ]; then
		# PgBouncer refuses to run as root: it drops to the postgres user (-u).
		chown -R postgres:postgres "$dir"
		runas=(-u postgres)
	fi
	if ! _txmq_nofds "$(command -v pgbouncer || echo /usr/sbin/pgbouncer)" -d "${runas[@]}" "$dir/pgbouncer.ini" >"$dir/start.log" 2>&1 </dev/null; then
		_txmq_warn "pgbouncer: failed to start:"
		tail -n 20 "$dir/start.log" "$dir/pgbouncer.log" >&2 2>/dev/null
		return 1
	fi
	for _ in $(seq 1 100); do
		[ -s "$dir/pgbouncer.pid" ] && _txmq_tcp 127.0.0.1 "$port" && break
		sleep 0.1
	done
	pid="$(cat "$dir/pgbouncer.pid" 2>/dev/null)"
	if [ -n "$pid" ]; then
		echo "pid $pid pgbouncer" >>"$_TXMQ_STARTED"
	fi
	export TXMQ_PGBOUNCER_URL="postgres://$user@127.0.0.1:$port/test?sslmode=disable"
	if ! PGCONNECT_TIMEOUT=5 psql -X -q "$TXMQ_PGBOUNCER_URL" -Atc 'select 1' >/dev/null 2>&1 </dev/null; then
		_txmq_warn "pgbouncer: started but $TXMQ_PGBOUNCER_URL does not answer:"
		tail -n 20 "$dir/pgbouncer.log" >&2
		unset TXMQ_PGBOUNCER_URL
		return 1
	fi
	_txmq_say "pgbouncer started $TXMQ_PGBOUNCER_URL (transaction pooling, pid $pid)"
}

# --------------------------------------------------------------------- Redis

# _txmq_redis_ping HOST PORT
_txmq_redis_ping() {
	if command -v redis-cli >/dev/null 2>&1; then
		[ "$(timeout 3 redis-cli -h "$1" -p "$2" ping 2>/dev/null)" = PONG ]
	else
		timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && printf "PING\r\n" >&3 && IFS= read -r l <&3 && [ "${l:0:5}" = "+PONG" ]' _ "$1" "$2" 2>/dev/null
	fi
}

_txmq_redis() {
	local port="${TXMQ_REDIS_PORT:-6379}" dir hostport host rport

	if [ -n "${TXMQ_REDIS_URL:-}" ]; then
		hostport="${TXMQ_REDIS_URL#*://}"
		hostport="${hostport##*@}"
		hostport="${hostport%%/*}"
		host="${hostport%:*}"
		rport="${hostport##*:}"
		[ "$rport" = "$hostport" ] && rport=6379
		if { command -v redis-cli >/dev/null 2>&1 && [ "$(timeout 3 redis-cli -u "$TXMQ_REDIS_URL" ping 2>/dev/null)" = PONG ]; } ||
			_txmq_redis_ping "$host" "$rport"; then
			_txmq_say "redis reused $TXMQ_REDIS_URL"
			return 0
		fi
		_txmq_warn "redis: TXMQ_REDIS_URL=$TXMQ_REDIS_URL does not answer; using a local server instead"
		unset TXMQ_REDIS_URL
	fi

	if _txmq_redis_ping 127.0.0.1 "$port"; then
		export TXMQ_REDIS_URL="redis://127.0.0.1:$port/0"
		_txmq_say "redis reused $TXMQ_REDIS_URL"
		return 0
	fi
	if _txmq_tcp 127.0.0.1 "$port"; then
		_txmq_warn "redis: port $port is taken by something that is not Redis; starting a private server"
		port="$(_txmq_free_port 16379)" || return 1
	fi

	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		_txmq_apt_install redis-server redis-tools || return 1
		# A package install may have started the distribution's own server.
		if _txmq_redis_ping 127.0.0.1 "$port"; then
			export TXMQ_REDIS_URL="redis://127.0.0.1:$port/0"
			_txmq_say "redis reused $TXMQ_REDIS_URL"
			return 0
		fi
	fi

	dir="$_TXMQ_SERVICES_DIR/redis-$port"
	mkdir -p "$dir"
	if ! _txmq_nofds redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
		--dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1; then
		_txmq_warn "redis: redis-server failed to start"
		return 1
	fi
	for _ in $(seq 1 100); do
		[ -s "$dir/redis.pid" ] && _txmq_redis_ping 127.0.0.1 "$port" && break
		sleep 0.1
	done
	if [ -s "$dir/redis.pid" ]; then
		echo "pid $(cat "$dir/redis.pid") redis" >>"$_TXMQ_STARTED"
	fi
	if ! _txmq_redis_ping 127.0.0.1 "$port"; then
		_txmq_warn "redis: started but does not answer on port $port:"
		tail -n 20 "$dir/redis.log" >&2
		return 1
	fi
	export TXMQ_REDIS_URL="redis://127.0.0.1:$port/0"
	_txmq_say "redis started $TXMQ_REDIS_URL"
}

# ------------------------------------------------------------------ MariaDB
# The mysql jobs backend's tests (adapters/mysql) read TXMQ_MYSQL_URL. A server
# answering on 127.0.0.1:${TXMQ_MYSQL_PORT:-3306} is reused (never restarted nor
# reconfigured) when it allows the connections the suites need (see
# _txmq_mysql_capacity); when it allows fewer (the machine's MariaDB: 151), a
# private MariaDB is started on a free port in a temp dir and stopped on exit;
# when nothing answers, the machine's MariaDB is started with the distribution's
# own settings (installed first when missing) and stopped on exit.

# _txmq_mysql_client: print the command-line client's name.
_txmq_mysql_client() {
	if command -v mariadb >/dev/null 2>&1; then echo mariadb; elif command -v mysql >/dev/null 2>&1; then echo mysql; else return 1; fi
}

# _txmq_mysql_use PORT HOW: make sure database test exists, export the URL.
_txmq_mysql_use() {
	local client
	client="$(_txmq_mysql_client)" || { _txmq_warn "mysql: no mariadb/mysql client to create database test"; return 1; }
	if ! timeout 10 "$client" -h 127.0.0.1 -P "$1" -u root -e 'CREATE DATABASE IF NOT EXISTS test' </dev/null >/dev/null 2>&1; then
		_txmq_warn "mysql: cannot create database test as root on port $1"
		return 1
	fi
	export TXMQ_MYSQL_URL="mysql://root@127.0.0.1:$1/test"
	_txmq_say "mysql $2 $TXMQ_MYSQL_URL"
}

# _txmq_mysql_capacity PORT: whether the server on PORT allows the connections the suites need
# side by side (the MySQL parity suites and the CLI's tests: each property has nodes of their
# own, each with a pool; the machine's MariaDB allows 151, and the suite once used all of them).
_txmq_mysql_capacity() {
	local port=$1 want=500 have client
	client="$(_txmq_mysql_client)" || return 0
	have="$(timeout 10 "$client" -h 127.0.0.1 -P "$port" -u root -N -e 'select @@max_connections' </dev/null 2>/dev/null)"
	if [ -n "$have" ] && [ "$have" -lt "$want" ]; then
		_txmq_say "mysql on port $port allows $have connections, the suites need $want: using a private server instead (the one on port $port is left as it is)"
		return 1
	fi
	return 0
}

# _txmq_mysql_throwaway PORT: a private MariaDB in a temp dir (mariadb-install-db, then
# mariadbd with no option files, 1,000 connections, the machine's character set), its
# descriptors closed, stopped by its PID on exit. Redo logs are flushed once a second
# (innodb_flush_log_at_trx_commit=2), as the private PostgreSQL runs without fsync: tests need
# no durability across a machine crash.
_txmq_mysql_throwaway() {
	local port=$1 dir
	dir="$_TXMQ_SERVICES_DIR/mariadb-$port"
	mkdir -p "$dir"
	if [ "$(id -u)" = 0 ]; then
		chown mysql:mysql "$dir" 2>/dev/null
	fi
	if ! mariadb-install-db --no-defaults --datadir="$dir/data" --user="$(if [ "$(id -u)" = 0 ]; then echo mysql; else id -un; fi)" --auth-root-authentication-method=normal \
		--skip-test-db >"$dir/install.log" 2>&1 </dev/null; then
		_txmq_warn "mysql: mariadb-install-db failed:"
		tail -n 20 "$dir/install.log" >&2
		return 1
	fi
	[ "$(id -u)" = 0 ] && chown -R mysql:mysql "$dir"
	_txmq_nofds /usr/sbin/mariadbd --no-defaults --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
		--socket="$dir/mysqld.sock" --pid-file="$dir/mariadbd.pid" --log-error="$dir/error.log" \
		$([ "$(id -u)" = 0 ] && echo --user=mysql) --max-connections=1000 --skip-name-resolve \
		--character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci \
		--innodb-flush-log-at-trx-commit=2 </dev/null >/dev/null 2>&1 &
	for _ in $(seq 1 300); do
		_txmq_tcp 127.0.0.1 "$port" && [ -s "$dir/mariadbd.pid" ] && break
		sleep 0.1
	done
	if [ -s "$dir/mariadbd.pid" ]; then
		echo "pid $(cat "$dir/mariadbd.pid") mariadb-$port" >>"$_TXMQ_STARTED"
	fi
	if ! _txmq_tcp 127.0.0.1 "$port"; then
		_txmq_warn "mysql: the private mariadbd does not answer on port $port:"
		tail -n 20 "$dir/error.log" >&2
		return 1
	fi
	_txmq_mysql_use "$port" "started (private, $dir)"
}

_txmq_mysql() {
	local port="${TXMQ_MYSQL_PORT:-3306}" dir
	if [ -n "${TXMQ_MYSQL_URL:-}" ]; then
		_txmq_say "mysql reused TXMQ_MYSQL_URL (set by the caller)"
		return 0
	fi
	if _txmq_tcp 127.0.0.1 "$port"; then
		if _txmq_mysql_capacity "$port"; then
			_txmq_mysql_use "$port" reused
			return
		fi
		if [ -x /usr/bin/mariadb-install-db ] || command -v mariadb-install-db >/dev/null 2>&1; then
			_txmq_mysql_throwaway "$(_txmq_free_port 13306)"
			return
		fi
		_txmq_warn "mysql: no mariadb-install-db for a private server; using port $port as it is"
		_txmq_mysql_use "$port" reused
		return
	fi
	if [ ! -x /usr/sbin/mariadbd ]; then
		_txmq_apt_install mariadb-server mariadb-client || return 1
		if _txmq_tcp 127.0.0.1 "$port"; then # the package started its own server
			_txmq_mysql_use "$port" reused
			return
		fi
	fi
	if [ "$port" != 3306 ]; then
		_txmq_warn "mysql: nothing answers on TXMQ_MYSQL_PORT=$port and the machine's MariaDB listens on 3306"
		return 1
	fi
	dir="$_TXMQ_SERVICES_DIR/mariadb"
	mkdir -p "$dir"
	_txmq_as_root install -d -o mysql -g mysql /run/mysqld 2>/dev/null
	# The machine's start command (shared/SERVICES.md): the distribution's settings, its data
	# directory; --oknodo leaves a running server alone.
	if ! _txmq_as_root start-stop-daemon --start --oknodo --background --make-pidfile --pidfile "$dir/mariadbd.pid" \
		--exec /usr/sbin/mariadbd </dev/null >"$dir/start.log" 2>&1; then
		_txmq_warn "mysql: mariadbd failed to start:"
		tail -n 20 "$dir/start.log" >&2
		return 1
	fi
	for _ in $(seq 1 300); do
		_txmq_tcp 127.0.0.1 "$port" && break
		sleep 0.1
	done
	if [ -s "$dir/mariadbd.pid" ]; then
		echo "pid $(cat "$dir/mariadbd.pid") mariadb" >>"$_TXMQ_STARTED"
	fi
	if ! _txmq_tcp 127.0.0.1 "$port"; then
		_txmq_warn "mysql: mariadbd started but does not answer on port $port"
		return 1
	fi
	_txmq_mysql_use "$port" started
}

# ------------------------------------------------------------- Redis Cluster
#
# A real Redis Cluster on loopback for parity[redis-cluster]: six
# `redis-server --cluster-enabled yes` nodes (three masters, three replicas, made
# by `redis-cli --cluster create --cluster-replicas 1`), no persistence, each in
# a directory of its own, on the first free ports from TXMQ_REDIS_CLUSTER_PORT
# (17000) up to 200 above it (each node also needs its cluster bus port, +10000).
# TXMQ_REDIS_CLUSTER_URL names them in the adapter's public cluster URL form,
# redis+cluster://127.0.0.1:P1,127.0.0.1:P2,.../ ; an already-set one that
# answers with cluster_state:ok is reused and never stopped.

# _txmq_rcluster_ok HOST PORT: does a cluster node answer there with cluster_state:ok?
_txmq_rcluster_ok() {
	timeout 3 redis-cli -h "$1" -p "$2" cluster info 2>/dev/null | tr -d '\r' | grep -qx 'cluster_state:ok'
}

_txmq_redis_cluster() {
	local first="${TXMQ_REDIS_CLUSTER_PORT:-17000}" hostport host port p dir ports=() addrs=() urlhosts ok
	local limit=$((first + 200))

	if [ -n "${TXMQ_REDIS_CLUSTER_URL:-}" ]; then
		hostport="${TXMQ_REDIS_CLUSTER_URL#*://}"
		hostport="${hostport##*@}"
		hostport="${hostport%%/*}"
		hostport="${hostport%%\?*}"
		hostport="${hostport%%,*}"
		host="${hostport%:*}"
		port="${hostport##*:}"
		[ "$port" = "$hostport" ] && port=6379
		if command -v redis-cli >/dev/null 2>&1 && _txmq_rcluster_ok "$host" "$port"; then
			_txmq_say "redis-cluster reused $TXMQ_REDIS_CLUSTER_URL"
			return 0
		fi
		_txmq_warn "redis-cluster: TXMQ_REDIS_CLUSTER_URL=$TXMQ_REDIS_CLUSTER_URL does not answer with cluster_state:ok; starting a local cluster instead"
		unset TXMQ_REDIS_CLUSTER_URL
	fi

	if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
		_txmq_apt_install redis-server redis-tools || return 1
	fi

	# Six free ports whose cluster bus ports (+10000) are free too.
	p=$first
	while [ "${#ports[@]}" -lt 6 ]; do
		p="$(_txmq_free_port "$p")" || return 1
		if [ "$p" -ge "$limit" ]; then
			_txmq_warn "redis-cluster: no 6 free ports (with their bus ports +10000) in $first..$((limit - 1)); set TXMQ_REDIS_CLUSTER_PORT"
			return 1
		fi
		if ! _txmq_tcp 127.0.0.1 $((p + 10000)); then
			ports+=("$p")
		fi
		p=$((p + 1))
	done

	for p in "${ports[@]}"; do
		dir="$_TXMQ_SERVICES_DIR/redis-cluster-$p"
		mkdir -p "$dir"
		if ! _txmq_nofds redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --save "" --appendonly no \
			--cluster-enabled yes --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 2000 \
			--dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1; then
			_txmq_warn "redis-cluster: redis-server on port $p failed to start"
			return 1
		fi
		addrs+=("127.0.0.1:$p")
	done
	for p in "${ports[@]}"; do
		dir="$_TXMQ_SERVICES_DIR/redis-cluster-$p"
		for _ in $(seq 1 100); do
			[ -s "$dir/redis.pid" ] && _txmq_redis_ping 127.0.0.1 "$p" && break
			sleep 0.1
		done
		if [ -s "$dir/redis.pid" ]; then
			echo "pid $(cat "$dir/redis.pid") redis-cluster-node" >>"$_TXMQ_STARTED"
		fi
		if ! _txmq_redis_ping 127.0.0.1 "$p"; then
			_txmq_warn "redis-cluster: node on port $p does not answer:"
			tail -n 20 "$dir/redis.log" >&2
			return 1
		fi
	done

	if ! timeout 60 redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes \
		>"$_TXMQ_SERVICES_DIR/redis-cluster-create.log" 2>&1 </dev/null; then
		_txmq_warn "redis-cluster: redis-cli --cluster create failed:"
		tail -n 20 "$_TXMQ_SERVICES_DIR/redis-cluster-create.log" >&2
		return 1
	fi
	# Every node must agree the cluster is up before a test connects.
	for _ in $(seq 1 300); do # ~30 s
		ok=1
		for p in "${ports[@]}"; do
			_txmq_rcluster_ok 127.0.0.1 "$p" || { ok=0 && break; }
		done
		[ "$ok" = 1 ] && break
		sleep 0.1
	done
	if [ "$ok" != 1 ]; then
		_txmq_warn "redis-cluster: cluster_state is not ok after 30 s"
		return 1
	fi
	urlhosts="$(
		IFS=,
		echo "${addrs[*]}"
	)"
	export TXMQ_REDIS_CLUSTER_URL="redis+cluster://$urlhosts/"
	_txmq_say "redis-cluster started $TXMQ_REDIS_CLUSTER_URL (3 masters, 3 replicas)"
}

# ---------------------------------------------------------------------- NATS
#
# TXMQ_NATS_URL is deliberately NOT exported by default, even though the
# machine runs Debian's nats-server 2.9 on 127.0.0.1:4222: when it is unset the
# Go tests embed the real nats-server v2.15 (github.com/nats-io/nats-server/v2,
# StoreDir in t.TempDir(), random port), which has features 2.9 lacks
# (consumer FilterSubjects, per-message TTL). Set TXMQ_NATS_URL yourself to run
# the tests against an outside server; it is then checked and reused.

_txmq_nats() {
	local hostport host port
	if [ -z "${TXMQ_NATS_URL:-}" ]; then
		_txmq_say "nats: the Go tests start a nats-server v2.15 process of their own (TXMQ_NATS_URL unset)"
		return 0
	fi
	hostport="${TXMQ_NATS_URL#*://}"
	hostport="${hostport##*@}"
	hostport="${hostport%%/*}"
	hostport="${hostport%%,*}"
	host="${hostport%:*}"
	port="${hostport##*:}"
	[ "$port" = "$hostport" ] && port=4222
	if timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2" && IFS= read -r l <&3 && [ "${l#INFO }" != "$l" ]' _ "$host" "$port" 2>/dev/null; then
		_txmq_say "nats reused $TXMQ_NATS_URL"
		return 0
	fi
	_txmq_warn "nats: TXMQ_NATS_URL=$TXMQ_NATS_URL does not answer"
	return 1
}

# ----------------------------------------------------------------------- SQS

# _txmq_sqs_ok ENDPOINT: does an SQS (JSON 1.0) emulator answer there?
_txmq_sqs_ok() {
	curl -fsS -m 3 -o /dev/null "$1/health" 2>/dev/null &&
		curl -fsS -m 3 -o /dev/null -X POST \
			-H 'Content-Type: application/x-amz-json-1.0' \
			-H 'X-Amz-Target: AmazonSQS.ListQueues' -d '{}' "$1/" 2>/dev/null
}

_txmq_sqs() {
	local port="${TXMQ_SQS_PORT:-4566}" dir="$_TXMQ_REPO_ROOT/.ci/fauxqs" log pid

	if ! command -v curl >/dev/null 2>&1; then
		_txmq_apt_install curl ca-certificates || return 1
	fi

	if [ -n "${TXMQ_SQS_ENDPOINT:-}" ]; then
		if _txmq_sqs_ok "${TXMQ_SQS_ENDPOINT%/}"; then
			_txmq_say "sqs reused $TXMQ_SQS_ENDPOINT"
			return 0
		fi
		_txmq_warn "sqs: TXMQ_SQS_ENDPOINT=$TXMQ_SQS_ENDPOINT does not answer; starting fauxqs instead"
		unset TXMQ_SQS_ENDPOINT
	fi

	if _txmq_sqs_ok "http://127.0.0.1:$port"; then
		export TXMQ_SQS_ENDPOINT="http://127.0.0.1:$port"
		_txmq_say "sqs reused $TXMQ_SQS_ENDPOINT"
		return 0
	fi
	if _txmq_tcp 127.0.0.1 "$port"; then
		# Taken by something that is not an SQS emulator: let the OS pick.
		port=0
	fi

	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		_txmq_apt_install nodejs npm || return 1
	fi
	# npm ci (exact versions from package-lock.json) when node_modules is
	# missing or older than the lock file.
	if [ ! -f "$dir/node_modules/fauxqs/package.json" ] || [ ! -f "$dir/node_modules/.package-lock.json" ] ||
		[ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		log="$_TXMQ_SERVICES_DIR/npm-ci.log"
		if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1 </dev/null; then
			_txmq_warn "sqs: npm ci in .ci/fauxqs failed:"
			tail -n 20 "$log" >&2
			return 1
		fi
	fi

	log="$_TXMQ_SERVICES_DIR/fauxqs.log"
	# One subshell that becomes node (exec), so that $! is the emulator's own PID.
	(
		_txmq_closefds
		exec node "$dir/start.mjs" "$port"
	) >"$log" 2>&1 </dev/null &
	pid=$!
	echo "pid $pid fauxqs" >>"$_TXMQ_STARTED"
	for _ in $(seq 1 150); do # ~30 s
		if ! kill -0 "$pid" 2>/dev/null; then
			break
		fi
		if [ "$port" = 0 ]; then
			port="$(sed -n 's|^fauxqs listening on http://127\.0\.0\.1:\([0-9][0-9]*\).*|\1|p' "$log" | head -n 1)"
			[ -n "$port" ] || port=0
		fi
		if [ "$port" != 0 ] && curl -fsS -m 2 -o /dev/null "http://127.0.0.1:$port/health" 2>/dev/null; then
			export TXMQ_SQS_ENDPOINT="http://127.0.0.1:$port"
			_txmq_say "sqs started $TXMQ_SQS_ENDPOINT (fauxqs, pid $pid)"
			return 0
		fi
		sleep 0.2
	done
	_txmq_warn "sqs: fauxqs did not answer GET /health within 30 s:"
	tail -n 20 "$log" >&2
	return 1
}

# --------------------------------------------------------------- chaos suite
#
# The chaos suite (chaos/) starts servers of its own on free ports, so that it
# can kill, pause and restart them without touching the services above: it
# needs redis-server and PostgreSQL's server binaries (initdb, postgres) even
# when those services are reused from elsewhere. Its nats-server is the Go
# module in go.mod, built with the test binary.

_txmq_chaos_deps() {
	local pkgs=()
	command -v redis-server >/dev/null 2>&1 || pkgs+=(redis-server)
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || pkgs+=(postgresql)
	if [ ${#pkgs[@]} -eq 0 ]; then
		return 0
	fi
	_txmq_apt_install "${pkgs[@]}" || return 1
	_txmq_say "chaos: installed ${pkgs[*]}"
}

# ---------------------------------------------------------------- browser test
#
# The dashboard's browser test (ui/browsertest/browser_test.go) drives Debian's Chromium,
# headless, against a server on loopback.

_txmq_chromium() {
	if [ -n "${TXMQ_CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then
		return 0
	fi
	_txmq_apt_install chromium || return 1
	_txmq_say "ui: installed chromium"
}

# ---------------------------------------------------------------------- stop

# txmq_services_stop: stop exactly what this script started, newest first.
txmq_services_stop() {
	local kind a b c pid
	[ -n "${_TXMQ_SERVICES_DIR:-}" ] && [ -f "$_TXMQ_SERVICES_DIR/started" ] || return 0
	while read -r kind a b c; do
		case "$kind" in
		pid)
			pid=$a
			kill -0 "$pid" 2>/dev/null || continue
			kill -TERM "$pid" 2>/dev/null
			for _ in $(seq 1 100); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			if kill -0 "$pid" 2>/dev/null; then
				kill -KILL "$pid" 2>/dev/null
			fi
			wait "$pid" 2>/dev/null
			_txmq_say "stopped $b (pid $pid)"
			;;
		pgdata) # a = bin dir, b = data dir
			if [ "$(id -u)" = 0 ]; then
				runuser -u postgres -- "$a/pg_ctl" -D "$b" -m fast -w -t 60 stop >/dev/null 2>&1
			else
				"$a/pg_ctl" -D "$b" -m fast -w -t 60 stop >/dev/null 2>&1
			fi
			_txmq_say "stopped postgres (pid ${c:-?}, $b)"
			;;
		pgcluster) # a = version, b = cluster name
			_txmq_as_root pg_ctlcluster --skip-systemctl-redirect "$a" "$b" stop >/dev/null 2>&1
			_txmq_say "stopped postgres cluster $a/$b"
			;;
		esac
	done < <(tac "$_TXMQ_SERVICES_DIR/started")
	rm -rf "$_TXMQ_SERVICES_DIR"
	unset _TXMQ_SERVICES_DIR _TXMQ_STARTED
}

# --------------------------------------------------------------------- start

txmq_services_start() {
	local rc=0
	_txmq_postgres || rc=1
	_txmq_pgbouncer || rc=1
	_txmq_redis || rc=1
	_txmq_mysql || rc=1
	_txmq_redis_cluster || rc=1
	_txmq_nats || rc=1
	_txmq_sqs || rc=1
	_txmq_chaos_deps || rc=1
	_txmq_chromium || rc=1
	export TXMQ_REQUIRE_SERVICES=1
	return "$rc"
}

txmq_services_start
