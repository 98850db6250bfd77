"""A private single-node Slurm cluster for the cluster executor's test and
benchmark: Debian's munged, slurmctld and slurmd (make setup installs them,
never starts them), configured in a folder of ours, on free ports, with their
own munge key and socket; stopped by the pids they recorded. Needs root
(slurmd starts jobs as their users)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

DAEMONS = ("munged", "slurmctld", "slurmd")


class ClusterError(RuntimeError):
    pass


def missing_binaries() -> list[str]:
    return [b for b in (*DAEMONS, "mungekey", "sbatch", "squeue", "scancel", "sinfo")
            if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def slurm_conf(root: Path, node_line: str, host: str, ports: list[int]) -> str:
    """No cgroups, no accounting, one partition: the smallest real Slurm.
    CR_CPU: a task takes one CPU, so a 2-core node runs 2 tasks at once."""
    return f"""ClusterName=tortoisetest
SlurmctldHost={host}
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
MinJobAge=600
{node_line} State=UNKNOWN
PartitionName=lab Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _pid(f: Path, timeout: float = 20) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if f.exists() and f.read_text().strip().isdigit():
            return int(f.read_text().strip())
        time.sleep(0.1)
    raise ClusterError(f"{f.name} never appeared; see the logs in {f.parent / 'log'}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 15
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


@contextmanager
def private_cluster(root: Path) -> Iterator[dict[str, str]]:
    """Start the cluster in root; yield the environment its client commands
    (and tortoise) need; cancel what is left of our jobs and stop the daemons
    by their pid files."""
    if os.geteuid() != 0:
        raise ClusterError("the private Slurm cluster needs root (slurmd starts jobs as their users)")
    if missing_binaries():
        raise ClusterError(f"missing {', '.join(missing_binaries())}: run 'make setup' (slurm-wlm, munge)")
    for sub in ("munge", "state", "spool", "log"):
        (root / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(root, 0o755)
    key = root / "munge" / "munge.key"
    subprocess.run([_sbin("mungekey"), "--create", f"--keyfile={key}"], check=True, capture_output=True)
    key.chmod(0o400)
    host = socket.gethostname().split(".")[0]
    node = subprocess.run([_sbin("slurmd"), "-C"], capture_output=True, text=True, check=True).stdout
    node_line = next(ln for ln in node.splitlines() if ln.startswith("NodeName="))
    conf = root / "slurm.conf"
    conf.write_text(slurm_conf(root, node_line, host, _free_ports(2)))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    pids: list[int] = []
    try:
        subprocess.run([_sbin("munged"), "--force", f"--key-file={key}", f"--socket={root}/munge/munge.sock",
                        f"--pid-file={root}/munge/munged.pid", f"--log-file={root}/log/munged.log",
                        f"--seed-file={root}/munge/seed"], check=True, capture_output=True)
        pids.append(_pid(root / "munge" / "munged.pid"))
        subprocess.run([_sbin("slurmctld"), "-f", str(conf)], check=True, capture_output=True, env=env)
        pids.append(_pid(root / "slurmctld.pid"))
        subprocess.run([_sbin("slurmd"), "-f", str(conf)], check=True, capture_output=True, env=env)
        pids.append(_pid(root / "slurmd.pid"))
        _wait_idle(env, root)
        yield env
    finally:
        if len(pids) == 3:
            _cancel_all(env)
        for pid in reversed(pids):
            _stop(pid)


def _wait_idle(env: dict, root: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env)
        if p.returncode == 0 and p.stdout.strip() == "idle":
            return
        time.sleep(0.5)
    raise ClusterError(f"the node never became idle; see {root / 'log'}")


def _cancel_all(env: dict, timeout: float = 60) -> None:
    """Our controller knows only our jobs: cancel them and wait until their
    processes are gone (slurmstepd outlives slurmd otherwise)."""
    subprocess.run(["scancel", "--user=root"], capture_output=True, env=env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, env=env)
        if p.returncode != 0 or not p.stdout.strip():
            return
        time.sleep(0.5)
