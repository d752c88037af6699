#!/bin/bash
# A one-node SLURM cluster on this machine's loopback, for `make test-slurm` (and for trying the sbatch
# script without a cluster). Needs root: it installs the distribution's slurm-wlm and munge packages when
# they are missing, then runs munged, slurmctld and slurmd with a generated slurm.conf in DIR.
#
#   deploy/slurm/local-cluster.sh start DIR [CPUS]    # prints the SLURM_CONF to export
#   deploy/slurm/local-cluster.sh stop DIR            # stops every daemon it started
set -euo pipefail
action=${1:?usage: local-cluster.sh start|stop DIR [CPUS]}
dir=$(realpath -m "${2:?usage: local-cluster.sh start|stop DIR [CPUS]}")
cpus=${3:-$(nproc)}
conf=$dir/slurm.conf

stop() {
  if [[ -f $conf ]] && SLURM_CONF=$conf squeue -h >/dev/null 2>&1; then  # jobs first: their steps outlive slurmd
    SLURM_CONF=$conf squeue -h -o %i | xargs -r env SLURM_CONF="$conf" scancel
    for _ in $(seq 30); do [[ -z $(SLURM_CONF=$conf squeue -h 2>/dev/null) ]] && break; sleep 1; done
  fi
  for name in slurmd slurmctld; do
    [[ -f $dir/$name.pid ]] && kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
  done
  if [[ -f $dir/munged.started ]]; then
    pkill -u munge -x munged 2>/dev/null || true
    rm -f "$dir/munged.started"
  fi
  for _ in $(seq 20); do pgrep -f "$conf" >/dev/null || return 0; sleep 0.5; done
  pkill -9 -f "$conf" || true
}

if [[ $action == stop ]]; then stop; exit 0; fi
[[ $action == start ]] || { echo "local-cluster.sh: unknown action $action" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "local-cluster.sh: needs root (package install, munged, slurmd)" >&2; exit 1; }

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "installing slurm-wlm and munge (apt-get)…"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null
fi

mkdir -p "$dir/state" "$dir/spool"
if [[ ! -s /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
if ! pgrep -x munged >/dev/null; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  runuser -u munge -- /usr/sbin/munged
  touch "$dir/munged.started"
fi

host=$(hostname -s)
cat > "$conf" <<EOF
ClusterName=schedlab-test
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
KillWait=10
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

export SLURM_CONF=$conf
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 60); do
  [[ $(sinfo -h -o %t 2>/dev/null) == idle ]] && { echo "SLURM_CONF=$conf"; exit 0; }
  sleep 1
done
echo "local-cluster.sh: the node did not come up; see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop
exit 1
