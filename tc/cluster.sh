#!/bin/sh
# What `harness cluster up/down` does, as plain iproute2 commands (a readable reference; the harness itself
# runs the same commands from harness/cluster/emulated.py and adds cpusets, a state file and stale cleanup).
#
#   tc/cluster.sh up   ds-demo1- 2 100mbit     # node i: netns ds-demo1-n<i>, eth0 198.18.<s>.<i+1>/24
#   tc/cluster.sh down ds-demo1- 2
#
# Only 198.18.0.0/16 (in the RFC 2544 benchmarking range) is used: <s> is the lowest /24 no interface of this
# machine has yet (a harness cluster's bridge holds <its s>.254), printed by `up`. The prefix must look like
# ds-<1-6 [a-z0-9]>-.
set -eu
action=${1:?up|down}; prefix=${2:?prefix like ds-demo1-}; nodes=${3:?number of nodes}; rate=${4:-1gbit}
case "$prefix" in ds-*-) ;; *) echo "prefix must look like ds-xxxx-" >&2; exit 2 ;; esac
echo "$prefix" | grep -Eq '^ds-[a-z0-9]{1,6}-$' || { echo "prefix must be ds-<1-6 [a-z0-9]>-" >&2; exit 2; }
br="${prefix}br"

if [ "$action" = up ]; then
    used=$(ip -4 -o addr show)
    s=0
    while echo "$used" | grep -q " 198\.18\.$s\."; do
        s=$((s + 1))
        [ "$s" -le 255 ] || { echo "every /24 of 198.18.0.0/16 is in use" >&2; exit 1; }
    done
    echo "subnet 198.18.$s.0/24"
    ip link add "$br" type bridge
    ip addr add "198.18.$s.254/24" dev "$br"
    ip link set "$br" up
    i=0
    while [ "$i" -lt "$nodes" ]; do
        ns="${prefix}n$i"; veth="${prefix}v$i"
        ip netns add "$ns"
        ip link add "$veth" type veth peer name eth0 netns "$ns"
        ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 \
            net.ipv6.conf.eth0.disable_ipv6=1
        ip link set "$veth" master "$br" up
        ip -n "$ns" addr add "198.18.$s.$((i + 1))/24" dev eth0
        ip -n "$ns" link set lo up
        ip -n "$ns" link set eth0 up
        # upload (inside the node) and download (root side of the veth); 256 KiB bucket, 20 ms queue
        tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 262144 latency 20ms
        tc qdisc add dev "$veth" root tbf rate "$rate" burst 262144 latency 20ms
        i=$((i + 1))
    done
elif [ "$action" = down ]; then
    i=0
    while [ "$i" -lt "$nodes" ]; do
        ns="${prefix}n$i"
        # processes first: `ip netns del` with a process inside only removes the name
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
        ip link del "${prefix}v$i" 2>/dev/null || true
        i=$((i + 1))
    done
    ip link del "$br" 2>/dev/null || true
else
    echo "usage: $0 up|down PREFIX NODES [RATE]" >&2; exit 2
fi
