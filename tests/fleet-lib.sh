# What the fleet tests and bench/fleet.sh share: private ClickHouse servers started as
# children from Debian's clickhouse-server, each in its own temporary directory with
# ports picked free at run time, forming one cluster of N shards on loopback; waited on
# through their HTTP /ping; stopped and removed at exit. Sourced by bash scripts.
#   ch_need                 skips (77) naming what is missing: the package, python3
#   ch_start N [ADDR..]     starts N servers (shard i's HTTP port in ch_http[i], TCP port in
#                           ch_tcp[i]), listening on 127.0.0.1 and each ADDR, in one cluster
#                           named $ch_cluster of N shards; fails when one is not ready in 30 s.
#                           With CH_TLS_CERT and CH_TLS_KEY set (PEM files), each also serves
#                           HTTPS on ch_https[i] with that certificate. With CH_USER and
#                           CH_PASSWORD set, that user exists too (beside default)
#   ch_stop I / ch_restart I  stops / starts server I again, same directory and ports
#   ch_query I SQL          runs SQL on server I through its HTTP interface, prints the answer
#   ch_cleanup              kills the servers and removes their directories (call it from
#                           the script's own EXIT trap)
ch_cluster=viprof_test
ch_http=() ch_tcp=() ch_https=() ch_pid=() ch_dir=()

ch_need() {
	command -v clickhouse-server >/dev/null || [ -x /usr/sbin/clickhouse-server ] ||
		{ echo "SKIP: clickhouse-server is not installed (apt-get install clickhouse-server, scripts/deps.sh)"; exit 77; }
	command -v python3 >/dev/null || { echo "SKIP: python3 is missing (picks free ports)"; exit 77; }
	command -v curl >/dev/null || { echo "SKIP: curl is missing (asks the servers)"; exit 77; }
}

ch_free_ports() {   # ch_free_ports N: N TCP ports free now on every address
	python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("0.0.0.0", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

ch_write_config() {   # ch_write_config I ADDR..
	local i=$1; shift
	local d=${ch_dir[$i]} listen="" shards="" k a
	for a in 127.0.0.1 "$@"; do listen+="<listen_host>$a</listen_host>"; done
	local tls=""
	if [ -n "${CH_TLS_CERT:-}" ]; then
		tls="<https_port>${ch_https[$i]}</https_port><openSSL><server><certificateFile>$CH_TLS_CERT</certificateFile>"
		tls+="<privateKeyFile>$CH_TLS_KEY</privateKeyFile><verificationMode>none</verificationMode>"
		tls+="<loadDefaultCAFile>false</loadDefaultCAFile><disableProtocols>sslv2,sslv3</disableProtocols></server></openSSL>"
	fi
	for k in "${!ch_tcp[@]}"; do
		shards+="<shard><replica><host>127.0.0.1</host><port>${ch_tcp[$k]}</port></replica></shard>"
	done
	cat >"$d/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>$d/log/server.log</log><errorlog>$d/log/error.log</errorlog><console>0</console></logger>
  <http_port>${ch_http[$i]}</http_port>
  <tcp_port>${ch_tcp[$i]}</tcp_port>
  $tls
  $listen
  <path>$d/data/</path>
  <tmp_path>$d/tmp/</tmp_path>
  <user_files_path>$d/user_files/</user_files_path>
  <format_schema_path>$d/format_schemas/</format_schema_path>
  <users_config>$d/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>268435456</mark_cache_size>
  <uncompressed_cache_size>268435456</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <remote_servers><$ch_cluster>$shards</$ch_cluster></remote_servers>
  <mlock_executable>false</mlock_executable>
</yandex>
XML
	cat >"$d/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>4000000000</max_memory_usage></default></profiles>
  <users>
    <default><password></password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></default>
    ${CH_USER:+<$CH_USER><password>$CH_PASSWORD</password><networks><ip>::/0</ip></networks><profile>default</profile><quota>default</quota></$CH_USER>}
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
}

ch_wait_ready() {   # ch_wait_ready I: its /ping answers Ok. (30 s at most)
	local i=$1 n
	for n in $(seq 300); do
		[ "$(curl -s --max-time 1 "http://127.0.0.1:${ch_http[$i]}/ping" 2>/dev/null)" = "Ok." ] && return 0
		kill -0 "${ch_pid[$i]}" 2>/dev/null || { echo "clickhouse-server $i exited:"; tail -20 "${ch_dir[$i]}/log/error.log" "${ch_dir[$i]}/stderr" 2>/dev/null; return 1; }
		sleep 0.1
	done
	echo "clickhouse-server $i did not answer /ping in 30 s"; tail -20 "${ch_dir[$i]}/log/error.log"
	return 1
}

ch_run() {   # ch_run I: starts server I in the background
	local i=$1 d=${ch_dir[$1]}
	(cd "$d" && exec /usr/sbin/clickhouse-server --config-file="$d/config.xml" >"$d/stderr" 2>&1) &
	ch_pid[$i]=$!
}

ch_start() {
	local n=$1; shift
	local ports i
	ports=($(ch_free_ports $((3 * n))))
	for ((i = 0; i < n; i++)); do
		ch_http[$i]=${ports[$((3 * i))]} ch_tcp[$i]=${ports[$((3 * i + 1))]} ch_https[$i]=${ports[$((3 * i + 2))]}
		ch_dir[$i]=$(mktemp -d "/tmp/vp-fleet-ch$i.XXXXXX")
		mkdir -p "${ch_dir[$i]}"/{log,data,tmp,user_files,format_schemas}
	done
	for ((i = 0; i < n; i++)); do ch_write_config "$i" "$@"; ch_run "$i"; done
	for ((i = 0; i < n; i++)); do ch_wait_ready "$i" || return 1; done
}

ch_stop() {
	local i=$1
	[ -n "${ch_pid[$i]:-}" ] || return 0
	kill -TERM "${ch_pid[$i]}" 2>/dev/null
	wait "${ch_pid[$i]}" 2>/dev/null
	ch_pid[$i]=
}

ch_restart() { ch_run "$1" && ch_wait_ready "$1"; }

ch_query() {
	local i=$1; shift
	curl -sS --fail-with-body --max-time 60 "http://127.0.0.1:${ch_http[$i]}/" --data-binary "$*"
}

ch_cleanup() {
	local i
	for i in "${!ch_dir[@]}"; do
		[ -n "${ch_pid[$i]:-}" ] && kill -KILL "${ch_pid[$i]}" 2>/dev/null && wait "${ch_pid[$i]}" 2>/dev/null
		[ -n "${ch_dir[$i]}" ] && rm -rf "${ch_dir[$i]}"
	done
}
