#!/bin/bash
# spamd protocol throughput, spamnb against SpamAssassin's spamd, the same corpus messages
# through the same spamc in the same run; and spamnb's RSS with a model learned from the
# whole corpus. Not a test: numbers for the closing note of issue 4.
#
#   benches/spamd.sh [SPAMNB_BINARY] [MESSAGES] [CONCURRENCY]
#
# Needs spamc and spamd (Debian: spamc, spamd) and the corpus (SA_CORPUS, default
# /tmp/spamnb-corpus/package/data). Uses ports 17930-17932 on 127.0.0.1.
set -eu
BIN=${1:-target/release/spamnb}
N=${2:-400}
P=${3:-4}
CORPUS=${SA_CORPUS:-/tmp/spamnb-corpus/package/data}
WORK=$(mktemp -d /tmp/spamnb-bench.XXXXXX)
chmod 755 "$WORK"
cleanup() {
    [ -n "${SPAMNB_PID:-}" ] && kill "$SPAMNB_PID" 2>/dev/null || true
    [ -f "$WORK/sa.pid" ] && kill "$(cat "$WORK/sa.pid")" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# Messages to score: unseen by the model (spam-2 and easy-ham-2), half and half.
ls "$CORPUS"/spam-2/* | head -n $((N / 2)) > "$WORK/messages"
ls "$CORPUS"/easy-ham-2/* | head -n $((N / 2)) >> "$WORK/messages"
N=$(wc -l < "$WORK/messages")

echo "== training spamnb on the whole corpus ($(ls "$CORPUS"/*/* | wc -l) messages)"
export SPAMNB_CONFIG=/dev/null
for g in spam-1 spam-2; do "$BIN" --db "$WORK/db" learn --spam "$CORPUS/$g" 2>&1 | tail -1; done
for g in easy-ham-1 easy-ham-2 hard-ham-1; do "$BIN" --db "$WORK/db" learn --ham "$CORPUS/$g" 2>&1 | tail -1; done
du -sh "$WORK/db"

cat > "$WORK/spamnb.toml" <<TOML
[daemon]
runtime_dir = "$WORK/run"
[spamd]
listen = ["inet:127.0.0.1:17930"]
[http]
listen = "inet:127.0.0.1:17931"
TOML
"$BIN" --config "$WORK/spamnb.toml" --db "$WORK/db" daemon 2> "$WORK/spamnb.log" &
SPAMNB_PID=$!

echo "== starting SpamAssassin spamd (local tests only, $P children)"
spamd -L -i 127.0.0.1 -p 17932 -u debian-spamd -m "$P" --min-children="$P" --min-spare=1 --max-spare="$P" \
    -s "$WORK/sa.log" --pidfile "$WORK/sa.pid" -d
for _ in $(seq 1 120); do spamc -p 17932 -K >/dev/null 2>&1 && break; sleep 0.5; done
spamc -p 17930 -K >/dev/null

# Each message through `spamc` (PROCESS, the procmail/maildrop use), P at a time.
run() { # port
    local port=$1 start end
    start=$(date +%s.%N)
    xargs -P "$P" -I{} sh -c "spamc -p $port < '{}' > /dev/null" < "$WORK/messages"
    end=$(date +%s.%N)
    echo "$start $end" | awk -v n="$N" '{ d = $2 - $1; printf "%.2f s, %.1f msg/s\n", d, n / d }'
}
# Warm both (SpamAssassin compiles its rules on first use).
head -n 8 "$WORK/messages" | xargs -I{} sh -c "spamc -p 17932 < '{}' > /dev/null; spamc -p 17930 < '{}' > /dev/null"

echo "== $N messages through spamc, $P concurrent"
SA=$(run 17932)
NB=$(run 17930)
echo "SpamAssassin spamd: $SA"
echo "spamnb daemon:      $NB"
echo "$SA|$NB" | awk -F'|' '{ split($1, a, ", "); split($2, b, ", "); printf "ratio: %.1fx\n", b[2] / a[2] }'

# spamnb alone, without spamc's process start per message: one client process, P threads.
python3 - "$WORK/messages" "$P" <<'PY'
import socket, sys, time, threading
files = [l.strip() for l in open(sys.argv[1])]
msgs = [open(f, 'rb').read() for f in files]
P = int(sys.argv[2]); lat = []; lock = threading.Lock()
def worker(part):
    for m in part:
        t = time.perf_counter()
        s = socket.create_connection(('127.0.0.1', 17930))
        s.sendall(b'PROCESS SPAMC/1.5\r\nContent-length: %d\r\n\r\n' % len(m) + m)
        while s.recv(65536): pass
        s.close()
        with lock: lat.append(time.perf_counter() - t)
start = time.perf_counter()
rounds = 5
ts = [threading.Thread(target=worker, args=(msgs * rounds,)) for i in range(P)]
[t.start() for t in ts]; [t.join() for t in ts]
d = time.perf_counter() - start; lat.sort()
print("spamnb, protocol only (%d x %d requests): %.1f msg/s, p50 %.2f ms, p99 %.2f ms" % (
    P, len(msgs) * rounds, len(lat) / d, lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3))
PY

echo "== spamnb daemon RSS with the whole corpus learned"
grep -E 'VmRSS|VmHWM' /proc/$SPAMNB_PID/status
curl -s 127.0.0.1:17931/metrics | grep -E '^spamnb_messages_total\{protocol="spamd"' || true
