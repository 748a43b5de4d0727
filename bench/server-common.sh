# Shared by bench/compare-server.sh and bench/compare-search.sh (sourced, not run).

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits up to 60 s for a server answering PING on port $1.
wait_for() {
    local port="$1"
    for _ in $(seq 1 600); do
        if [[ "$(redis-cli -p "$port" PING 2>/dev/null)" == PONG ]]; then return 0; fi
        sleep 0.1
    done
    echo "$(basename "$0"): nothing answers on port $port" >&2
    return 1
}
