#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests: munged, slurmctld and
# slurmd from Debian's slurm-wlm, all state in one directory, nothing under
# /etc touched (the daemons and clients find the config through SLURM_CONF,
# Slurm finds munged through AuthInfo=socket=..., munged gets its own key).
#
#   scripts/slurm/local_cluster.sh start   # idempotent; waits until the node is idle
#   scripts/slurm/local_cluster.sh stop    # kills the daemons, removes the directory
#   scripts/slurm/local_cluster.sh status
#   export SLURM_CONF=$(scripts/slurm/local_cluster.sh conf)   # then srun, sbatch, sinfo
#
# Settings (environment):
#   TESSERA_SLURM_DIR    state directory (default /tmp/tessera-slurm)
#   TESSERA_SLURM_PORT   slurmctld port; slurmd uses the next one (default 16817,
#                        away from Slurm's 6817/6818 so a real installation is not disturbed)
#   TESSERA_SLURM_CPUS   CPUs the node advertises (default max(4, nproc)): more than
#                        the machine has, so multi-rank tests fit on 2 cores
#
# Why this configuration works in a container (no systemd, cgroup v1 mounted
# read-mostly, not our own cgroup tree): no cgroup plugin anywhere --
# proctrack/linuxproc tracks a job's processes through /proc parentage,
# task/none does no binding, jobacct_gather/none, no accounting database. The
# daemons run as root in the foreground (-D) under nohup, their pids in the
# state directory. Every wait has a deadline; every client call a timeout.
set -euo pipefail

dir=${TESSERA_SLURM_DIR:-/tmp/tessera-slurm}
port=${TESSERA_SLURM_PORT:-16817}
cpus=${TESSERA_SLURM_CPUS:-$(( $(nproc) > 4 ? $(nproc) : 4 ))}
node=tessera-node
conf=$dir/slurm.conf
export SLURM_CONF=$conf

die() { echo "local_cluster.sh: $*" >&2; exit 1; }

alive() {  # alive NAME: the daemon whose pid file is $dir/NAME.pid is running
  local pid
  pid=$(cat "$dir/$1.pid" 2>/dev/null) || return 1
  # The process must still be that daemon: after a reboot the pid may be another's.
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

ctld_up() {
  timeout 5 scontrol ping 2>/dev/null | grep -q ' is UP'
}

node_idle() {
  [ "$(timeout 10 sinfo -h -n "$node" -o %T 2>/dev/null)" = idle ]
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
  echo "local_cluster.sh: $what" >&2
}

show_logs() {
  local f
  for f in "$dir"/*.log; do
    [ -f "$f" ] || continue
    echo "---- $f (last lines)" >&2
    tail -n 15 "$f" >&2
  done
}

write_config() {
  mkdir -p "$dir/state" "$dir/spool/$node" "$dir/munge"
  chmod 700 "$dir" "$dir/munge"
  cat >"$conf" <<EOF
# Written by scripts/slurm/local_cluster.sh: one node, root, no cgroups, no accounting.
ClusterName=tessera
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.daemon.pid
SlurmdPidFile=$dir/slurmd.daemon.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: track processes through /proc, bind nothing, gather no accounting.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# pmix: the PMIx server Open MPI 4.1 (Debian) connects to; see README "Slurm".
MpiDefault=pmix
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The node advertises more CPUs than the machine has (tests oversubscribe);
# config_overrides makes slurmd trust slurm.conf instead of the hardware.
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=$node NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
  if [ ! -s "$dir/munge/munge.key" ]; then
    # 1024 random bytes, as mungekey(8) makes; only munged reads it.
    head -c 1024 /dev/urandom >"$dir/munge/munge.key"
    chmod 400 "$dir/munge/munge.key"
  fi
}

start_daemon() {  # start_daemon NAME COMMAND...: run in the foreground under nohup, record the pid
  local name=$1
  shift
  nohup "$@" >"$dir/$name.out" 2>&1 </dev/null &
  echo $! >"$dir/$name.pid"
}

start() {
  for cmd in munged slurmctld slurmd sinfo; do
    command -v "$cmd" >/dev/null || die "$cmd not found; install slurm-wlm and munge (scripts/setup.sh)"
  done
  [ "$(id -u)" -eq 0 ] || die "start needs root (the daemons run as root; SlurmUser=root)"
  if alive munged && alive slurmctld && alive slurmd && node_idle; then
    echo "local_cluster.sh: already running (SLURM_CONF=$conf)" >&2
    return 0
  fi
  stop_daemons  # a half-started cluster from an earlier run: start over
  write_config

  # munged refuses keys and sockets in group/world-writable places unless
  # --force; the state directory is 0700, but /tmp above it is world-writable.
  start_daemon munged munged --foreground --force \
    --socket "$dir/munge/munge.socket" --key-file "$dir/munge/munge.key" \
    --pid-file "$dir/munge/munged.pid" --seed-file "$dir/munge/munge.seed" \
    --log-file "$dir/munged.log"
  wait_for 15 "munged up" test -S "$dir/munge/munge.socket" \
    || { show_logs; die "munged did not create its socket within 15 s"; }

  # -i: ignore saved state (a fresh cluster each start).
  start_daemon slurmctld slurmctld -D -i -f "$conf"
  wait_for 30 "slurmctld up" ctld_up \
    || { show_logs; stop_daemons; die "slurmctld did not answer within 30 s"; }
  start_daemon slurmd slurmd -D -N "$node" -f "$conf"
  if ! wait_for 60 "node $node idle (SLURM_CONF=$conf)" node_idle; then
    # A node that registered after being DOWN stays down until resumed.
    timeout 10 scontrol update nodename="$node" state=resume 2>/dev/null || true
    wait_for 15 "node $node idle after resume" node_idle \
      || { show_logs; stop_daemons; die "node $node not idle within 75 s"; }
  fi
}

stop_daemons() {  # TERM, then KILL after 10 s, each daemon we started
  local name pid
  for name in slurmd slurmctld munged; do
    alive "$name" && kill -TERM "$(cat "$dir/$name.pid")" 2>/dev/null
  done
  for name in slurmd slurmctld munged; do
    for _ in $(seq 50); do alive "$name" || break; sleep 0.2; done
    alive "$name" && kill -KILL "$(cat "$dir/$name.pid")" 2>/dev/null
    rm -f "$dir/$name.pid"
  done
  return 0
}

stop() {
  [ -d "$dir" ] || return 0
  # Jobs still running would otherwise outlive slurmd (linuxproc cannot
  # reap them once the daemon is gone).
  if alive slurmctld; then
    timeout 10 scancel --full --quiet --partition debug 2>/dev/null || true
  fi
  stop_daemons
  # Remove the directory only if it is ours (TESSERA_SLURM_DIR could name anything).
  if grep -q '^# Written by scripts/slurm/local_cluster.sh' "$conf" 2>/dev/null; then
    rm -rf "$dir"
  fi
  echo "local_cluster.sh: stopped" >&2
}

status() {
  if alive munged && alive slurmctld && alive slurmd; then
    timeout 10 sinfo
  else
    echo "local_cluster.sh: not running" >&2
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  conf) echo "$conf" ;;
  *) echo "usage: $0 start|stop|status|conf" >&2; exit 2 ;;
esac
