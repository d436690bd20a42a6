#!/usr/bin/env bash
# A single-node SLURM cluster on this Debian/Ubuntu machine, for trying and testing the SLURM path
# (tests/test_slurm_cluster.py, marked slow). Needs root and the packages slurm-wlm and munge:
#   apt-get update && apt-get install -y slurm-wlm munge      (once; about a minute, needs the network)
#
#   scripts/slurm_local.sh start    munged, slurmctld and slurmd on this machine; returns when the node is idle
#   scripts/slurm_local.sh stop     stops the daemons this script started
#   scripts/slurm_local.sh status   prints sinfo's line; exit status 0 when the node answers
#
# No systemd and no cgroups: proctrack/linuxproc, task/none, select/cons_tres, no accounting (submitit
# then reads job states from its own files). One partition, `debug`, the default. The daemons' state,
# logs and pid files go to $SLURM_LOCAL_DIR (default /tmp/slurm_local); slurm.conf must be at its
# default path /etc/slurm/slurm.conf (job steps read it there), so start refuses to replace one this
# script did not write. Environment: SLURM_LOCAL_CPUS (CPUs the node offers, default 2),
# SLURM_LOCAL_MEM_MB (default 4096), SLURM_LOCAL_KILL_WAIT (seconds between SIGTERM and SIGKILL, default 10).
# Exit status: 0 done, 1 the cluster did not come up (its logs are named), 3 cannot start here (not root,
# packages missing, a foreign slurm.conf): the line printed says which.
set -uo pipefail

DIR=${SLURM_LOCAL_DIR:-/tmp/slurm_local}
CONF=/etc/slurm/slurm.conf
MARK="# written by fedbn-bench scripts/slurm_local.sh"

cannot() { echo "cannot start a local SLURM cluster: $*" >&2; exit 3; }

write_conf() {
    local host; host=$(hostname)
    mkdir -p /etc/slurm "$DIR/state" "$DIR/spool"
    cat > "$CONF" <<EOF
$MARK
ClusterName=local
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmUser=root
SlurmdUser=root
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
ReturnToService=2
KillWait=${SLURM_LOCAL_KILL_WAIT:-10}
MinJobAge=300
AuthInfo=cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
NodeName=$host CPUs=${SLURM_LOCAL_CPUS:-2} RealMemory=${SLURM_LOCAL_MEM_MB:-4096} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge
    chown -R munge:munge /var/log/munge /var/lib/munge
    if ! munge -n </dev/null >/dev/null 2>&1; then
        runuser -u munge -- munged --force 9>&- || { echo "munged did not start" >&2; exit 1; }
    fi
}

start() {
    [ "$(id -u)" = 0 ] || cannot "needs root (it runs the daemons as root)"
    for tool in slurmctld slurmd munged sinfo sbatch; do
        command -v "$tool" >/dev/null || cannot "$tool not found; install: apt-get update && apt-get install -y slurm-wlm munge"
    done
    if [ -e "$CONF" ] && ! grep -qx "$MARK" "$CONF"; then
        cannot "$CONF exists and was not written by this script (a real cluster's?); not replaced"
    fi
    mkdir -p "$DIR"
    exec 9>"$DIR/start.lock"
    flock 9  # two starts at once (parallel test workers) start the daemons once
    if status >/dev/null 2>&1; then echo "already running: $(sinfo -h -o '%P %a %D %t')"; return 0; fi
    write_conf
    start_munge
    setsid slurmctld -D >>"$DIR/slurmctld.out" 2>&1 < /dev/null 9>&- &  # the daemons must not hold start.lock
    setsid slurmd -D >>"$DIR/slurmd.out" 2>&1 < /dev/null 9>&- &
    for _ in $(seq 60); do
        if [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; then echo "up: $(sinfo -h -o '%P %a %D %t')"; return 0; fi
        scontrol update nodename="$(hostname)" state=resume >/dev/null 2>&1
        sleep 1
    done
    echo "the node is not idle after 60 s; see $DIR/slurmctld.log and $DIR/slurmd.log" >&2
    exit 1
}

stop() {
    for daemon in slurmd slurmctld; do
        local pidfile="$DIR/$daemon.pid"
        if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
            kill "$(cat "$pidfile")"
        fi
    done
    echo "stopped"
}

status() {
    sinfo -h -o '%P %a %D %t' && [ -n "$(sinfo -h -o %t 2>/dev/null)" ]
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
