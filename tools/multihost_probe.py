"""What the scheduler of ``tools/multihost.sh`` sees: its workers, and which tasks ran where.

Run from the host namespace by ``multihost.sh`` (it is not part of the package)::

    python multihost_probe.py workers tcp://10.147.14.10:8786 10.147.14.0/24 2
    python multihost_probe.py tasks tcp://10.147.14.10:8786 STATE.json "embed"
    python multihost_probe.py total tcp://10.147.14.10:8786

``workers`` waits for the workers, prints their addresses as the scheduler knows them, fails
unless every one is in the namespaces' subnet on a host of its own, and installs a worker
plugin that counts the tasks each worker executes, by task prefix. ``tasks`` prints what each
worker executed since the previous call (the counts are kept in STATE.json). ``total`` prints
the counts of the whole run and fails unless every worker executed daskauc tasks.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
from collections import Counter
from urllib.parse import urlparse

from distributed import Client, WorkerPlugin

PLUGIN = "daskauc-multihost-task-counter"


class TaskCounter(WorkerPlugin):
    """Counts the tasks this worker executes (executing -> memory or error), by prefix."""

    def setup(self, worker):
        self.counts = Counter()

    def transition(self, key, start, finish, **kwargs):
        if start == "executing" and finish in ("memory", "error"):
            from dask.utils import key_split

            self.counts[key_split(key)] += 1


def _counts(dask_worker) -> dict:
    plugin = dask_worker.plugins.get(PLUGIN)
    return dict(plugin.counts) if plugin is not None else {}


def _host(address: str) -> str:
    return urlparse(address).hostname or ""


def _worker_table(client: Client) -> dict:
    """address -> (name, host) of the scheduler's workers, sorted by name."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    return dict(sorted(((a, (str(w.get("name")), _host(a))) for a, w in info.items()),
                       key=lambda item: item[1][0]))


def cmd_workers(address: str, subnet: str, n: int) -> int:
    net = ipaddress.ip_network(subnet)
    with Client(address, timeout="30s") as client:
        client.wait_for_workers(n, timeout=60)
        info = client.scheduler_info(n_workers=-1)
        print(f"scheduler {info['address']} sees {len(info['workers'])} workers:")
        ok = True
        hosts = set()
        for addr, w in sorted(info["workers"].items(), key=lambda kv: str(kv[1]["name"])):
            host = _host(addr)
            inside = ipaddress.ip_address(host) in net
            ok &= inside and host not in hosts
            hosts.add(host)
            print(f"  {w['name']}: {addr}  nthreads={w['nthreads']}  "
                  f"memory_limit={w['memory_limit'] / 2**30:.1f} GiB  "
                  f"local_directory={w.get('local_directory', '?')}  "
                  f"{'in ' + subnet if inside else 'NOT in ' + subnet}")
        if not ok or len(hosts) < n:
            print(f"error: expected {n} workers on distinct hosts in {subnet}", file=sys.stderr)
            return 1
        client.register_plugin(TaskCounter(), name=PLUGIN)
    return 0


def cmd_tasks(address: str, state_path: str, label: str) -> int:
    previous = {}
    if os.path.exists(state_path):
        with open(state_path) as f:
            previous = json.load(f)
    with Client(address, timeout="30s") as client:
        table = _worker_table(client)
        counts = client.run(_counts)
    print(f"tasks executed during {label}, per worker (daskauc-* prefixes; others summed):")
    for addr, (name, _) in table.items():
        delta = Counter(counts.get(addr, {}))
        delta.subtract(previous.get(addr, {}))
        ours = {k: v for k, v in sorted(delta.items()) if k.startswith("daskauc") and v > 0}
        other = sum(v for k, v in delta.items() if not k.startswith("daskauc") and v > 0)
        shown = ", ".join(f"{k} {v}" for k, v in ours.items()) or "no daskauc tasks"
        print(f"  {name} {addr}: {shown}; other {other}")
    with open(state_path, "w") as f:
        json.dump(counts, f)
    return 0


def cmd_total(address: str) -> int:
    with Client(address, timeout="30s") as client:
        table = _worker_table(client)
        counts = client.run(_counts)
    print("tasks executed over the whole run, per worker:")
    idle = []
    for addr, (name, _) in table.items():
        c = counts.get(addr, {})
        ours = sum(v for k, v in c.items() if k.startswith("daskauc"))
        print(f"  {name} {addr}: {sum(c.values())} tasks, {ours} of them daskauc-*")
        if ours == 0:
            idle.append(name)
    if idle:
        print(f"error: no daskauc task ran on {', '.join(idle)}", file=sys.stderr)
        return 1
    print(f"daskauc tasks ran on all {len(table)} workers")
    return 0


def main(argv: list[str]) -> int:
    commands = {"workers": (cmd_workers, 3), "tasks": (cmd_tasks, 3), "total": (cmd_total, 1)}
    if not argv or argv[0] not in commands or len(argv) - 1 != commands[argv[0]][1]:
        print(__doc__, file=sys.stderr)
        return 2
    func, _ = commands[argv[0]]
    args = argv[1:]
    if argv[0] == "workers":
        args[2] = int(args[2])
    return func(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
