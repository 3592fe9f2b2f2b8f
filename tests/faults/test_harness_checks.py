"""The fault harness's own checks, without servers: a fake cluster and a fake manager."""

from __future__ import annotations

from typing import Any

from tests.faults.conftest import load_harness

VICTIM, OTHER = 9701, 9702


class _Cluster:
    """Two workers; the workload's agents all hash to the one that is killed."""

    def __init__(self, agents: list[str]) -> None:
        self.agents = set(agents)

    def victim_port(self) -> int:
        return VICTIM

    def worker_of(self, schema: str, agent: str) -> int:
        if agent in self.agents:
            return VICTIM
        return VICTIM if agent.endswith(("0", "2", "4", "6", "8")) else OTHER

    def kill9(self) -> None:
        pass

    def start(self) -> None:
        pass


class _Manager:
    """Answers every call; remembers which agents were probed."""

    def __init__(self) -> None:
        self.probed: set[str] = set()

    async def search_memories(self, agent: str, query: str, limit: int) -> list[Any]:
        self.probed.add(agent)
        return []

    async def get_recent_turns(self, agent: str, session: str) -> list[Any]:
        return []


async def test_the_other_worker_is_probed_when_every_agent_hashes_to_the_killed_one() -> None:
    # Before: "other_worker_ok 0" and exit status 1, a false alarm (issue 38).
    harness = load_harness()
    agents = [f"f1-agent{i}" for i in range(3)]
    settings = harness.Settings(
        writers=1,
        readers=1,
        agents=3,
        warm=0,
        down=0.2,
        after=0,
        max_writes=1,
        connect_timeout=1,
        statement_timeout=1,
        redis_timeout=1,
        consolidate_after=0,
    )
    mm = _Manager()
    out = await harness._kill_a_worker(mm, _Cluster(agents), agents, "faults_f1", settings)
    assert out["agents_on_killed_worker"] == 3
    assert out["other_worker_ok"] > 0 and out["other_worker_failed"] == 0, out
    assert any(a.startswith("f1-agent0-probe") for a in mm.probed - set(agents)), mm.probed
    row = {"fault": "kill9_worker", **out}
    assert harness._citus_violations(row, "kill9_worker") == []
