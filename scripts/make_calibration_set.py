"""Write ``actrone_pg/data/calibration.jsonl``: the labelled pairs thresholds are calibrated on.

The set is written by this project (no dataset was copied). It has 48 queries and 48 memories of
everyday agent memory; query ``i`` and memory ``i`` form a relevant pair, and each query is also
paired with 11 *other* memories as unrelated pairs (48 relevant + 48 × 11 = 528 unrelated).

How the 11 unrelated memories of a query are chosen:

1. every other memory that shares a content word with the query (after dropping stop words and
   folding plurals), so that keyword overlap alone cannot separate the classes; then
2. memories drawn with a fixed seed from the rest, until there are 11.

``AMBIGUOUS`` lists groups of pairs whose cross pairs a careful reader could call relevant (a
peanut allergy is a dietary restriction); no cross pair inside one group is ever used as an
unrelated example. Many relevant pairs are paraphrases sharing no content word ("food allergies"
/ "The user is allergic to peanuts.").

Run ``python scripts/make_calibration_set.py`` to regenerate; the output is deterministic.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

# (query, memory); index i is pair i (1-based in the comments below).
PAIRS: list[tuple[str, str]] = [
    # preferences
    ("food allergies", "The user is allergic to peanuts."),
    ("their favourite music", "Her favourite records are old jazz and soul LPs."),
    ("how does the user take their coffee", "Drinks espresso with oat milk and never adds sugar."),
    ("what name does the user go by", "She likes to be called Sam, not Samantha."),
    ("favourite programming language", "He writes most of his code in Rust."),
    ("dietary restrictions", "The user has been vegetarian for ten years and avoids fish."),
    (
        "communication style for replies",
        "Her preference is short answers in bullet points, no long paragraphs.",
    ),
    ("which code editor does the user use", "Codes in Neovim with a custom Lua configuration."),
    # facts about the user
    ("where does the user live", "Moved to Lisbon last spring and lives in Alfama."),
    (
        "what is the dog called",
        "Has a golden retriever; the dog's name is Biscuit and he eats grain-free food.",
    ),
    ("user's birthday", "Born on 14 March 1990."),
    ("what languages can they speak", "Fluent in Portuguese and Spanish; learning Japanese."),
    ("what does the user work as", "Works as a senior data engineer at a logistics startup."),
    ("children", "Her two kids, Maya and Leo, are in primary school."),
    # plans
    ("upcoming trips", "Flying to Tokyo on 3 October; the hotel is already paid."),
    ("plans for Saturday", "Going hiking along the river bank in Sintra with friends on Saturday."),
    (
        "when is the dentist appointment",
        "Has a check-up with Dr. Alves on Tuesday for a sore molar.",
    ),
    ("career goals", "Hopes to move into a staff engineer role within two years."),
    ("home renovation project", "Is redoing the kitchen at home; new cabinets arrive in November."),
    (
        "how often does the user run",
        "Runs 5 km every Monday, Wednesday and Friday; the goal is a half marathon in spring.",
    ),
    # tools
    (
        "what laptop do they have",
        "Works on a 14-inch MacBook Pro and keeps passwords in a password manager.",
    ),
    ("which cloud hosts the infrastructure", "The infrastructure runs on AWS in eu-west-1."),
    ("version control hosting", "Repositories live on a self-hosted GitLab instance."),
    ("note-taking app", "Writes everything down in Obsidian, synced with Syncthing."),
    (
        "which database does the team use",
        "The team's main datastore is PostgreSQL 16 with pgvector.",
    ),
    # health
    (
        "blood pressure medication",
        "Takes 10 mg of lisinopril each morning to control blood pressure.",
    ),
    ("sleep problems", "Often wakes at 3am and lies awake for an hour or two."),
    (
        "injuries to be careful about in workouts",
        "Tore a knee ligament on a ski trip in 2021 and avoids deep squats.",
    ),
    ("does the user drink alcohol", "The user has been sober for three years."),
    ("eyesight", "Wears contact lenses because she is short-sighted."),
    # work
    ("who does the user report to", "Reports to Priya Nair, the head of platform."),
    ("deadline for the migration", "The billing migration must ship before 15 December."),
    (
        "working hours",
        "Keeps a fixed schedule: online from 8 to 4 Lisbon time, offline on Friday afternoons.",
    ),
    (
        "how many engineers does the user lead",
        "Leads a group of six engineers and has a coffee chat with each one weekly.",
    ),
    # family
    ("who is the user married to", "The user is married to Tomás, a nurse at the city hospital."),
    (
        "parents",
        "Her mother lives in Porto and her father passed away in 2019; her phone number is saved.",
    ),
    (
        "does the user have a brother",
        "Has an older brother, Rui, a chef in London whose birthday is 2 June.",
    ),
    # travel
    ("seat preference on planes", "Always books an aisle seat near the front."),
    (
        "airline loyalty account",
        "The user's loyalty account with TAP Air Portugal is TP 4471 9902.",
    ),
    ("passport expiry", "Her travel document runs out in August 2027."),
    ("hotel preferences", "Likes small boutique places to stay, with a gym and a quiet room."),
    # finance
    (
        "monthly budget",
        "Tracks spending in a budgeting app and keeps it under 2,000 euros a month.",
    ),
    (
        "which bank does the user use",
        "Holds a current account with Millennium BCP; the health insurance provider is Médis.",
    ),
    (
        "investment strategy",
        "Puts 20% of salary into low-cost index funds through a monthly transfer.",
    ),
    ("rent amount", "Pays the landlord 1,150 euros on the first of each month."),
    # other
    ("hobbies", "Spends free evenings painting watercolours and building Lego sets."),
    ("what does the user drive", "Drives a 2018 Toyota Corolla hybrid to work."),
    ("favourite cuisine", "Could eat Thai green curry every single day."),
]

# Groups (1-based pair numbers) whose cross pairs are arguably relevant; never used as negatives.
AMBIGUOUS: list[set[int]] = [
    {1, 6, 48},  # allergy / vegetarian / cuisine
    {6, 29},  # dietary restrictions / sobriety
    {13, 18},  # job title / staff engineer ambition
    {20, 28},  # running schedule / knee injury in workouts
    {42, 44, 45},  # budget / saving / rent
    {5, 8},  # programming language / Lua configuration
    {2, 16, 20, 46},  # hobbies / music / hiking / running
]

UNRELATED_PER_QUERY = 11
SEED = 20261130

_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her his
    i if in into is it its me my of on or our she so than that the their them then there these
    they this to was we were what when where which who will with would you your s""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-case words minus stop words, with a light plural fold (as the hashing embedder)."""
    out = set()
    for w in re.findall(r"[^\W_]+", text.lower()):
        if w in _STOP:
            continue
        if len(w) > 4 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.add(w)
    return out


def build() -> list[dict[str, object]]:
    """The rows of the calibration set, relevant pair first for each query."""
    assert len(PAIRS) == 48, len(PAIRS)
    n = len(PAIRS)
    banned: set[tuple[int, int]] = set()
    for group in AMBIGUOUS:
        for a in group:
            for b in group:
                if a != b:
                    banned.add((a - 1, b - 1))
    rng = random.Random(SEED)
    memory_words = [content_words(m) for _, m in PAIRS]
    rows: list[dict[str, object]] = []
    for i, (query, memory) in enumerate(PAIRS):
        rows.append({"query": query, "memory": memory, "relevant": True})
        allowed = [j for j in range(n) if j != i and (i, j) not in banned]
        q_words = content_words(query)
        sharing = [j for j in allowed if q_words & memory_words[j]]
        rest = [j for j in allowed if j not in sharing]
        rng.shuffle(rest)
        chosen = (sharing + rest)[:UNRELATED_PER_QUERY]
        for j in sorted(chosen):
            rows.append({"query": query, "memory": PAIRS[j][1], "relevant": False})
    return rows


def main() -> None:
    """Write the set next to the package and print its counts."""
    rows = build()
    out = Path(__file__).resolve().parent.parent / "actrone_pg" / "data" / "calibration.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    relevant = sum(1 for r in rows if r["relevant"])
    sharing = 0
    for r in rows:
        if not r["relevant"] and content_words(str(r["query"])) & content_words(str(r["memory"])):
            sharing += 1
    no_overlap = sum(
        1
        for r in rows
        if r["relevant"] and not content_words(str(r["query"])) & content_words(str(r["memory"]))
    )
    print(
        f"{out}: {relevant} relevant ({no_overlap} share no content word), "
        f"{len(rows) - relevant} unrelated ({sharing} share a content word)"
    )


if __name__ == "__main__":
    main()
