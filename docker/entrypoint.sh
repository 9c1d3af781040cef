#!/bin/sh
# `zookeeper`: run a member of a ZooKeeper ensemble (Debian's server) with a zoo.cfg made from
# the environment; anything else is a `tritonmq` command (broker, init, status, pub, ...).
#
# ZOO_MY_ID      this member's id, 1..N (required)
# ZOO_SERVERS    host names of all members, comma-separated, in id order: zk1,zk2,zk3 (required)
# ZOO_TICK_MS    tick length (200: sessions of 0.4-4 s are allowed, failures seen quickly)
# ZOO_HEAP       JVM heap (256m)
# ZOO_DATA_DIR   where the snapshot and myid live (/var/lib/tritonmq/zookeeper)
#
# TRITONMQ_WAIT_FOR_ZK=HOST:PORT,...   a tritonmq command first waits (up to
#                TRITONMQ_WAIT_SECONDS, 120) until a majority of that ensemble serves
# TRITONMQ_START_RETRIES=N   a broker that fails (status 1) within 60 s of its start is
#                started again, up to N times (0: never; compose sets 5)
set -eu

# A broker, restarted when it fails early. Container networks' DNS (podman's aardvark-dns
# 1.4) stops answering for seconds while it reloads for another container being started;
# a broker starting then cannot resolve ZooKeeper and gives up. A restart policy would start
# it again, but podman 4.3 applies none to a container with `depends_on` (--requires) on
# one that has exited (init). Signals go to the broker, so a stop stays a planned stop.
run_broker() {
    tries=0
    while :; do
        started=$(date +%s)
        tritonmq "$@" &
        child=$!
        stopping=0
        trap 'stopping=1; kill -TERM "$child" 2>/dev/null' TERM INT
        status=0
        wait "$child" || status=$?
        while kill -0 "$child" 2>/dev/null; do # wait was cut short by a signal
            status=0
            wait "$child" || status=$?
        done
        trap - TERM INT
        if [ "$stopping" = 1 ] || [ "$status" != 1 ] \
            || [ $(($(date +%s) - started)) -ge 60 ] || [ "$tries" -ge "${TRITONMQ_START_RETRIES:-0}" ]; then
            exit "$status"
        fi
        tries=$((tries + 1))
        echo "tritonmq-entrypoint: broker failed within 60 s of its start; starting it again ($tries)" >&2
        sleep 1
    done
}

if [ "${1:-}" != zookeeper ]; then
    if [ -n "${TRITONMQ_WAIT_FOR_ZK:-}" ]; then
        tritonmq-healthcheck wait-zookeeper "$TRITONMQ_WAIT_FOR_ZK" "${TRITONMQ_WAIT_SECONDS:-120}"
    fi
    if [ "${1:-}" = broker ] && [ "${TRITONMQ_START_RETRIES:-0}" -gt 0 ]; then
        run_broker "$@"
    fi
    exec tritonmq "$@"
fi

: "${ZOO_MY_ID:?set ZOO_MY_ID to this member's id (1..N)}"
: "${ZOO_SERVERS:?set ZOO_SERVERS to the members' host names, e.g. zk1,zk2,zk3}"
data="${ZOO_DATA_DIR:-/var/lib/tritonmq/zookeeper}"
mkdir -p "$data"
echo "$ZOO_MY_ID" >"$data/myid"

{
    echo "tickTime=${ZOO_TICK_MS:-200}"
    echo "initLimit=50"
    echo "syncLimit=25"
    echo "dataDir=$data"
    echo "clientPort=2181"
    echo "admin.enableServer=false"
    echo "4lw.commands.whitelist=ruok,srvr,mntr"
    # Bind the quorum ports on every address: a container's own name may resolve to an
    # address that is not yet up when the server starts.
    echo "quorumListenOnAllIPs=true"
    id=0
    for host in $(echo "$ZOO_SERVERS" | tr ',' ' '); do
        id=$((id + 1))
        echo "server.$id=$host:2888:3888"
    done
} >"$data/zoo.cfg"

cat >"$data/log4j.properties" <<'LOG4J'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
LOG4J

jars=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
exec java "-Xmx${ZOO_HEAP:-256m}" -cp "$jars" "-Dlog4j.configuration=file:$data/log4j.properties" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$data/zoo.cfg"
