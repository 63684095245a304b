# bench/lib.sh: helpers the bench scripts share (source it; it defines functions only).
#
#   bench_tmp NAME                 a temp dir, removed (with the servers started) on exit
#   bench_free_port                a free TCP port on 127.0.0.1
#   bench_free_port_tcp_udp        a port free for both TCP and UDP on 127.0.0.1
#   bench_cert DIR                 a self-signed cert.pem/key.pem for 127.0.0.1 in DIR
#   bench_start_h2o DIR CPU PLAIN TLS      one-thread h2o (h1 + h2c on PLAIN, h2 on TLS)
#   bench_start_httpvs_serve BIN CPU ARGS...   `httpvs serve --threads 1` with ARGS
#   bench_wait_tcp PORT            waits until something accepts on PORT
#   bench_measure PREFIX CPU [OPTS --] CMD...  runs a client via bench/measure.py (JSON line)
#   bench_peer TOOL                whether TOOL runs here (PATH includes bench/.peers)
#
# Servers started through these helpers are killed by the EXIT trap `bench_tmp` sets.

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BENCH_PEERS="$BENCH_DIR/.peers"
export PATH="$BENCH_PEERS/bin:$BENCH_PEERS/root/usr/bin:$BENCH_PEERS/root/usr/sbin:$PATH"
BENCH_PIDS=()

bench_cleanup() {
  local p
  for p in "${BENCH_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BENCH_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${BENCH_TMP:-}" ] && rm -rf "$BENCH_TMP"
}

bench_tmp() {
  BENCH_TMP=$(mktemp -d "/tmp/httpvs-$1.XXXXXX")
  trap bench_cleanup EXIT
}

bench_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

bench_free_port_tcp_udp() {
  python3 - <<'EOF'
import socket
for _ in range(100):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
    port = u.getsockname()[1]
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        t.bind(("127.0.0.1", port)); print(port); break
    except OSError:
        pass
    finally:
        t.close(); u.close()
EOF
}

bench_cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$1/key.pem" -out "$1/cert.pem" 2>/dev/null
}

# bench_start_h2o DIR CPU PLAIN_PORT TLS_PORT: serves DIR/index.txt at / (and DIR/64k.bin at
# /64k, when it exists); sets BENCH_LAST_PID.
bench_start_h2o() {
  local dir=$1 cpu=$2 plain=$3 tls=$4
  [ -s "$dir/cert.pem" ] || bench_cert "$dir"
  cat > "$dir/h2o.conf" <<CONF
num-threads: 1
pid-file: $dir/h2o.pid
error-log: $dir/h2o-error.log
user: $(id -un)
http2-max-concurrent-requests-per-connection: 128
listen:
  host: 127.0.0.1
  port: $plain
listen:
  host: 127.0.0.1
  port: $tls
  ssl:
    certificate-file: $dir/cert.pem
    key-file: $dir/key.pem
hosts:
  default:
    paths:
      /:
        file.file: $dir/index.txt
$([ -e "$dir/64k.bin" ] && printf '      /64k:\n        file.file: %s/64k.bin\n' "$dir")
CONF
  taskset -c "$cpu" h2o -c "$dir/h2o.conf" >"$dir/h2o.out" 2>&1 &
  BENCH_LAST_PID=$!
  BENCH_PIDS+=("$BENCH_LAST_PID")
}

# bench_start_httpvs_serve BIN CPU ARGS...: one-thread reference server; sets BENCH_LAST_PID.
bench_start_httpvs_serve() {
  local bin=$1 cpu=$2; shift 2
  taskset -c "$cpu" "$bin" serve --threads 1 "$@" >"$BENCH_TMP/serve.out" 2>&1 &
  BENCH_LAST_PID=$!
  BENCH_PIDS+=("$BENCH_LAST_PID")
}

bench_wait_tcp() {
  local _
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.05
  done
  echo "bench: nothing accepts on port $1" >&2
  return 1
}

# bench_measure PREFIX CPU [--sample-rss S] [--hold S] -- CMD...: prints measure.py's JSON line.
bench_measure() {
  local prefix=$1 cpu=$2 opts=()
  shift 2
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  python3 "$BENCH_DIR/measure.py" --cpu "$cpu" "${opts[@]}" "$prefix" "$@" | tee "$prefix.usage"
}

bench_peer() {
  command -v "$1" >/dev/null 2>&1
}
