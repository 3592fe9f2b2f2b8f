"""``actrone-pg demo``: store a conversation and a few memories, then show what retrieval picks.

The story: the user plans this week's meals, and their sister Ana comes to dinner on Friday. The
default query is what the user would ask next; the memories it needs are the user's peanut
allergy and Ana's lactose intolerance, and the hashing embedder and all-MiniLM-L6-v2 both admit
them (MiniLM also the diet). Every memory left out is listed with the reason: below the
admission threshold (its cosine), or over the L2 token share.

The data stays in the store under fixed, readable ids, so that the SQL of README.md and docs/
runs on it as written (``tests/sql/test_docs_sql.py`` runs every block): the agent
``actrone-demo``, sessions ``last-week`` and ``today``, turns ``<session>-<n>``, and memories
named by topic (``allergy``, ``diet``, ...). Its lifecycle shows too: ``diet`` has two
versions, ``seats`` came from a turn of last week's session (lineage), ``piano`` expires, and
``ana`` carries a tag and metadata. None of this changes what retrieval picks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from actrone_pg._cli._store import BACKEND_HELP, default_backend
from actrone_pg.config import BACKENDS, EMBEDDING_PROVIDERS, MemoryConfig, redact
from actrone_pg.manager import MemoryManager
from actrone_pg.models import Memory, RetrievedContext

AGENT = "actrone-demo"
DEFAULT_QUERY = "Friday dinner with Ana: which foods, allergies or dairy should we avoid?"

# Two earlier sessions and today's; the demo erases its own agent first so reruns start clean.
CONVERSATION: list[tuple[str, str, str]] = [
    ("last-week", "Hi! I'm planning a trip to Lisbon in March.", "Lovely. Shall I note the dates?"),
    ("last-week", "Yes, March 12 to 19. I prefer window seats.", "Noted: Lisbon, 12–19 March."),
    ("today", "Morning! Can you help me plan meals this week?", "Of course. Any constraints?"),
    ("today", "Quick ones, I get home late on weekdays.", "Got it: under 30 minutes on weekdays."),
    ("today", "And my sister Ana is visiting on Friday.", "Great, I'll plan a dinner for two."),
]

# (id, content, days ago, content type, importance)
MEMORIES: list[tuple[str, str, float, str, float]] = [
    ("allergy", "Food allergies: the user is allergic to peanuts.", 40, "fact", 0.95),
    ("diet", "Diet preferences: mostly vegetarian, eats fish on weekends.", 12, "preference", 0.8),
    (
        "ana",
        "The user's sister Ana is lactose intolerant, so meals with her avoid dairy.",
        3,
        "fact",
        0.7,
    ),
    ("seats", "The user prefers window seats on flights.", 9, "preference", 0.5),
    ("work", "The user works as a nurse and often does night shifts.", 60, "fact", 0.6),
    ("coriander", "The user dislikes coriander in food.", 1, "preference", 0.6),
    ("thai", "The user's favourite cuisine is Thai food, mild on spice.", 20, "preference", 0.7),
    ("piano", "The user is learning to play the piano on Sunday mornings.", 5, "fact", 0.3),
]
# What the lifecycle adds to some of them (README.md and docs/ query it in SQL):
#: the first version of "diet", which the demo then updates to the text above
DIET_BEFORE = "Diet preferences: vegetarian."
#: "seats" came from this turn (the second of last week's session)
SEATS_FROM = ("last-week-2",)
#: "piano" is a course that ends in this many days
PIANO_EXPIRES_DAYS = 90
#: "ana" is tagged and carries metadata
ANA_TAGS = ("family",)
ANA_METADATA = {"person": "Ana", "diet": "lactose-free"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``actrone-pg demo``."""
    parser.add_argument(
        "--backend",
        choices=("auto", *BACKENDS),
        default="auto",
        help=f"store to use; 'auto' (the default): the rule of every command ({BACKEND_HELP})",
    )
    parser.add_argument("--dsn", help="PostgreSQL DSN (default: the embedded server)")
    parser.add_argument(
        "--embedder",
        choices=EMBEDDING_PROVIDERS,
        help="embedding provider (default: ACTRONE_EMBEDDING_PROVIDER or 'local')",
    )
    parser.add_argument("--query", default=DEFAULT_QUERY, help="the query to retrieve context for")
    parser.add_argument("--budget", type=int, default=320, help="token budget (default 320)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


@dataclass(frozen=True)
class LeftOut:
    """A memory retrieval did not hand back, and why."""

    content: str
    cosine: float
    token_count: int
    #: ``"below_threshold"`` (not admitted) or ``"over_budget"`` (admitted, did not fit)
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "content": self.content,
            "cosine": self.cosine,
            "token_count": self.token_count,
            "reason": self.reason,
            "detail": self.detail,
        }


def run(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit code."""
    choice = None if args.backend == "auto" else args.backend
    overrides: dict[str, Any] = {"backend": default_backend(choice, args.dsn)}
    if args.dsn:
        overrides["postgres_dsn"] = args.dsn
    if args.embedder:
        overrides["embedding_provider"] = args.embedder
    config = MemoryConfig(**overrides)
    if config.backend == "postgres" and not config.postgres_dsn:
        # Start the embedded server here, as every other command does, so that a start (the
        # first, or after `server stop`) is said on stderr with how to stop it.
        from actrone_pg._cli._pg import start_embedded

        config = config.replace(postgres_dsn=start_embedded(config.postgres_data_dir, create=True))
    result = asyncio.run(_demo(config, args.query, args.budget))
    if args.json:
        print(json.dumps(result["json"], indent=2, ensure_ascii=False))
    else:
        _render(result)
    return 0


async def _demo(config: MemoryConfig, query: str, budget: int) -> dict[str, Any]:
    async with await MemoryManager.create(config) as mm:
        await mm.erase_agent(AGENT)
        count: dict[str, int] = {}
        for session, user, assistant in CONVERSATION:
            count[session] = count.get(session, 0) + 1
            turn_id = f"{session}-{count[session]}"
            await mm.store_turn(AGENT, session, user, assistant, turn_id=turn_id)
        now = datetime.now(UTC)
        items: list[dict[str, Any]] = []
        for memory_id, content, days, kind, importance in MEMORIES:
            item: dict[str, Any] = {
                "memory_id": memory_id,
                "content": DIET_BEFORE if memory_id == "diet" else content,
                "created_at": now - timedelta(days=days),
                "content_type": kind,
                "importance": importance,
                "source": "demo",
            }
            if memory_id == "seats":
                item.update(source="consolidated", source_turn_ids=SEATS_FROM)
            elif memory_id == "piano":
                item["expires_at"] = now + timedelta(days=PIANO_EXPIRES_DAYS)
            elif memory_id == "ana":
                item.update(tags=ANA_TAGS, metadata=ANA_METADATA)
            items.append(item)
        await mm.inject_memories(AGENT, items)
        diet = next(content for memory_id, content, *_ in MEMORIES if memory_id == "diet")
        await mm.update_memory(AGENT, "diet", content=diet)  # version 2
        ctx = await mm.retrieve_context(AGENT, "today", query, budget, explain=True)
        ranked = await mm.search_memories(AGENT, query, limit=len(MEMORIES), explain=True)
        left_out = await _left_out(mm, ctx, ranked)
        dsn = getattr(mm.store, "dsn", None)
        info = {
            "backend": mm.backend,
            "embedder": mm.embedder.name,
            "relevance_threshold": mm.relevance_threshold,
            "rrf_k": mm.config.rrf_k,
            "rrf_weights": list(mm.config.rrf_weights),
            "dsn": redact(dsn) if isinstance(dsn, str) else None,  # shown: no password
        }
    payload = {
        **info,
        "context": ctx.to_dict(),
        "ranked_candidates": [_row(m) for m in ranked],
        "left_out": [x.as_dict() for x in left_out],
    }
    return {"info": info, "ctx": ctx, "ranked": ranked, "left_out": left_out, "json": payload}


async def _left_out(
    mm: MemoryManager, ctx: RetrievedContext, ranked: list[Memory]
) -> list[LeftOut]:
    """The demo's memories missing from ``ctx``, each with the reason, in the demo's order.

    An admitted memory that is missing was skipped by the packing (a memory that does not
    fit the L2 share is skipped and the next one tried); any other scored below the threshold.
    Their cosines are computed here with the same embedder, as the store never returns them.
    """
    chosen = {m.id for m in ctx.episodic_memories}
    out: list[LeftOut] = []
    used = 0
    for m in ranked:  # best first: replay the packing to say how much of the share was left
        if m.id in chosen:
            used += m.token_count
            continue
        assert m.explain is not None
        left = ctx.episodic_budget - used
        out.append(
            LeftOut(
                m.content,
                m.explain.cosine,
                m.token_count,
                "over_budget",
                f"over budget: {m.token_count} tokens, {left} of the "
                f"{ctx.episodic_budget}-token L2 share left",
            )
        )
    admitted = {m.content for m in ranked}
    contents = [c for _, c, *_ in MEMORIES if c not in admitted]
    if contents:
        raw = np.asarray(await mm.embedder.embed_batch([ctx.query, *contents]), dtype=np.float64)
        unit = raw / np.linalg.norm(raw, axis=1, keepdims=True)
        threshold = ctx.relevance_threshold
        for content, cosine in zip(contents, unit[1:] @ unit[0], strict=True):
            out.append(
                LeftOut(
                    content,
                    float(cosine),
                    mm.count_tokens(content),
                    "below_threshold",
                    f"below threshold: cosine {cosine:.3f} < {threshold:.3f}",
                )
            )
    return out


def _row(m: Memory) -> dict[str, Any]:
    e = m.explain
    return {
        "id": m.id,
        "content": m.content,
        "token_count": m.token_count,
        **(e.as_dict() if e else {}),
    }


def _render(result: dict[str, Any]) -> None:
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    from actrone_pg._cli._output import console as make_console

    console = make_console()
    info = result["info"]
    ctx: RetrievedContext = result["ctx"]
    ranked: list[Memory] = result["ranked"]
    chosen = {m.id for m in ctx.episodic_memories}

    head = Text()
    head.append("backend ", style="dim")
    head.append(info["backend"], style="bold")
    head.append("   embedder ", style="dim")
    head.append(info["embedder"], style="bold")
    head.append("   threshold ", style="dim")
    head.append(f"{info['relevance_threshold']:.3f}", style="bold")
    if info["dsn"]:
        head.append("\npsql ", style="dim")
        head.append(f'"{info["dsn"]}"', style="cyan")
    console.print(Panel(head, title="actrone-pg demo", expand=False))
    console.print(Text("query: ", style="dim") + Text(ctx.query, style="italic"))
    console.print()
    console.print(_budget_bar(ctx))
    console.print()

    turns = Table(title=f"L1 · recent turns of session 'today' ({len(ctx.recent_turns)} chosen)")
    turns.add_column("#", justify="right", style="dim")
    turns.add_column("user")
    turns.add_column("assistant")
    turns.add_column("tokens", justify="right")
    for i, t in enumerate(ctx.recent_turns, 1):
        turns.add_row(str(i), t.user_message, t.assistant_message, str(t.token_count))
    console.print(turns)

    mems = Table(
        title=f"L2 · memories admitted at cosine ≥ {ctx.relevance_threshold:.3f}, best first "
        f"(✓ in the {ctx.episodic_budget}-token L2 share, ✗ over it)"
    )
    for col, justify in [
        ("", "center"),
        ("memory", "left"),
        ("cosine", "right"),
        ("dense", "right"),
        ("lexical", "right"),
        ("recency", "right"),
        ("fused", "right"),
        ("tokens", "right"),
    ]:
        mems.add_column(col, justify=justify)  # type: ignore[arg-type]
    for m in ranked:
        e = m.explain
        assert e is not None
        mems.add_row(
            "[green]✓[/]" if m.id in chosen else "[red]✗[/]",
            m.content,
            f"{e.cosine:.3f}",
            _rank(e.dense_rank),
            _rank(e.lexical_rank),
            _rank(e.recency_rank),
            f"{e.fused_score:.4f}",
            str(m.token_count),
        )
    if not ranked:
        mems.add_row("", "[dim](no memory reached the threshold)[/]", "", "", "", "", "", "")
    console.print(mems)

    left_out: list[LeftOut] = result["left_out"]
    if left_out:
        gone = Table(title="left out, and why")
        gone.add_column("memory")
        gone.add_column("cosine", justify="right")
        gone.add_column("why")
        for x in sorted(left_out, key=lambda x: (x.reason != "over_budget", -x.cosine)):
            gone.add_row(x.content, f"{x.cosine:.3f}", x.detail)
        console.print(gone)
    weights = ", ".join(f"{w:g}" for w in info["rrf_weights"])
    console.print(
        f"[dim]retrieved in {ctx.retrieval_ms:.1f} ms · fused = Σ w / ({info['rrf_k']} + rank) "
        f"over dense, lexical and recency, w = {weights} · a rank of – means absent from that "
        "ranking · a smaller --budget shows the L2 share overflow[/]"
    )


def _rank(r: int | None) -> str:
    return "–" if r is None else str(r)


def _budget_bar(ctx: RetrievedContext, width: int = 60) -> Any:
    from rich.text import Text

    total = ctx.token_budget
    parts = [
        ("L1 · recent turns", ctx.session_budget, ctx.session_tokens, "blue"),
        ("L2 · memories", ctx.episodic_budget, ctx.episodic_tokens, "magenta"),
        ("yours", ctx.reserved_budget, 0, "grey50"),
    ]
    bar = Text()
    legend = Text()
    for label, share_tokens, used, colour in parts:
        cells = round(width * share_tokens / total) if total else 0
        filled = round(cells * used / share_tokens) if share_tokens else 0
        bar.append("█" * filled, style=colour)
        bar.append("░" * (cells - filled), style=colour)
        pct = 100 * share_tokens / total if total else 0
        if label == "yours":
            legend.append(f"  {label}: {share_tokens} ({pct:.0f}%, system prompt + current turn)")
        else:
            legend.append(f"  {label}: {used}/{share_tokens} ({pct:.0f}%)", style=colour)
    out = Text(f"budget {total} tokens  ")
    out.append(bar)
    out.append("\n")
    out.append(legend)
    return out
