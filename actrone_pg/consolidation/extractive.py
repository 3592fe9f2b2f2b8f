"""The default consolidator: extractive, deterministic, no model service.

Each message is split into sentences and each sentence scored with a few cheap features of what
is worth remembering about a person: the user speaking about themselves ("I", "my"), preferences,
plans and decisions ("love", "prefer", "decided", "going to"), times and dates (weekdays, months,
years, "yesterday"), names (capitalised words inside a sentence) and numbers; questions and
small talk ("thanks!", "sounds great") score low. The sentences that reach ``min_score`` are kept,
in conversation order, and the turns are merged ``window_turns`` at a time into one memory, whose
lineage is the turns that contributed a sentence. The same turns always give the same memories.
The window and threshold were chosen with ``actrone-pg eval --memories consolidated``
(docs/lifecycle.md, "Consolidation").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from actrone_pg.consolidation.base import ConsolidatedMemory, ConsolidationContext
from actrone_pg.errors import ConfigurationError
from actrone_pg.models import Turn

__all__ = ["ExtractiveConsolidator", "Sentence", "score_sentence", "split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")
# Single words are looked up in sets (a regex alternation per sentence cost 3× as much time);
# phrases, years, ordinals and clock times keep a small regex each.
_FIRST_PERSON = frozenset(
    "i i'm i’m i've i’ve i'd i’d i'll i’ll my mine me myself we we're we’re our ours us".split()
)
_PREFERENCE = frozenset(
    """love loves loved like likes liked prefer prefers preferred favorite favourite hate hates
    hated enjoy enjoys enjoyed want wants wanted wish plan plans planned planning decide decided
    decision chose choose will allergic need needs needed always never usually started joined
    moved bought adopted visited learn learned learning passionate dream goal married born
    """.split()
)
_PREFERENCE_PHRASE = re.compile(r"\b(going to|work(s|ed)? (at|as|for)|live[sd]? in)\b", re.I)
_TIME = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december yesterday today tomorrow tonight
    weekend ago birthday anniversary""".split()
)
_TIME_PHRASE = re.compile(
    r"\b((last|next) (week|month|year|night)|(19|20)\d\d|\d{1,2}(st|nd|rd|th)|\d{1,2}:\d\d)\b",
    re.I,
)
_SMALL_TALK = re.compile(
    r"^(thanks?|thank you|ok(ay)?|sure|great|cool|nice|wow|awesome|haha|lol|hi|hello|hey|bye|"
    r"good (night|morning|luck)|you too|sounds (good|great)|that's (great|awesome|cool)|"
    r"glad|same|yeah|yes|no|congrats|congratulations)\b",
    re.IGNORECASE,
)
# A capitalised word after the first word of a sentence: a name, a place, a title.
_NAME = re.compile(r"(?<=[\s,;:(\"“])([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)")
_NOT_NAMES = frozenset({"I", "I'm", "I've", "I'd", "I'll", "The", "A", "It", "That", "This"})


# "Caroline: Thanks!" - a speaker's name before a colon is not part of what was said: its word
# after the colon starts the sentence (no name), and its small talk is small talk.
_SPEAKER = re.compile(r"^[A-Za-z][\w'’-]*(?: [A-Z][\w'’-]*){0,2}:\s+")


def split_sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends and line breaks, blanks dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a turn, who said it, its score and the kinds of information found in it."""

    turn_id: str
    speaker: str
    text: str
    score: float
    kinds: tuple[str, ...]


def score_sentence(text: str, *, speaker_is_user: bool) -> tuple[float, tuple[str, ...]]:
    """How worth remembering ``text`` is, and which features it showed.

    The weights are simple and fixed: a self-disclosure (the user's own "I", "my") 1.0, a
    preference, plan or decision 0.8, a time or date 0.8, each name 0.5 (at most three), a
    number 0.3, length up to 0.4; a question -0.8, small talk -2.0. A leading "Speaker: " is
    not scored.
    """
    text = _SPEAKER.sub("", text, count=1)
    words = _WORD.findall(text)
    if not words:
        return 0.0, ()
    lower = {w.lower() for w in words}
    score = min(len(words) / 25.0, 0.4)
    kinds: list[str] = []
    if speaker_is_user and not lower.isdisjoint(_FIRST_PERSON):
        score += 1.0
        kinds.append("self")
    if not lower.isdisjoint(_PREFERENCE) or _PREFERENCE_PHRASE.search(text):
        score += 0.8
        kinds.append("preference")
    if not lower.isdisjoint(_TIME) or _TIME_PHRASE.search(text):
        score += 0.8
        kinds.append("time")
    names = [n for n in _NAME.findall(text) if n not in _NOT_NAMES]
    if names:
        score += 0.5 * min(len(names), 3)
        kinds.append("name")
    if any(w.isdigit() for w in words):
        score += 0.3
    if text.rstrip().endswith("?"):
        score -= 0.8
    if len(words) <= 6 and _SMALL_TALK.match(text.strip("\"'“ ")):
        score -= 2.0
    return score, tuple(kinds)


class ExtractiveConsolidator:
    """Keeps the informative sentences of a session, merged ``window_turns`` turns at a time.

    ``user_label`` and ``assistant_label`` name who said the kept sentences of a message ("User:
    I moved to Oslo."), so a memory says who said it; a message that starts with its speaker's
    name ("Caroline: ...") is named by it instead; an empty label adds nothing. A memory holds
    at most ``max_chars`` characters: its best sentences, in conversation order.
    """

    name = "extractive"

    def __init__(
        self,
        *,
        window_turns: int = 1,
        min_score: float = 0.5,
        max_chars: int = 1_000,
        user_label: str = "User",
        assistant_label: str = "Assistant",
    ) -> None:
        if window_turns < 1:
            raise ConfigurationError("window_turns", f"must be at least 1, got {window_turns}")
        if max_chars < 1:
            raise ConfigurationError("max_chars", f"must be at least 1, got {max_chars}")
        self.window_turns = window_turns
        self.min_score = float(min_score)
        self.max_chars = max_chars
        self.user_label = user_label
        self.assistant_label = assistant_label

    def sentences(self, turn: Turn) -> list[Sentence]:
        """The sentences of ``turn`` that reach ``min_score``, in the order they were said."""
        out: list[Sentence] = []
        for text, is_user, label in (
            (turn.user_message, True, self.user_label),
            (turn.assistant_message, False, self.assistant_label),
        ):
            # A message that names its speaker ("Caroline: ...") keeps that name on every
            # sentence kept, even when its first sentence is dropped: questions name people.
            named = _SPEAKER.match(text)
            if named is not None:
                label = named.group(0).rstrip().removesuffix(":")
                text = text[named.end() :]
            for sentence in split_sentences(text):
                score, kinds = score_sentence(sentence, speaker_is_user=is_user)
                if score >= self.min_score:
                    out.append(Sentence(turn.id, label, sentence, score, kinds))
        return out

    async def consolidate(
        self, turns: Sequence[Turn], context: ConsolidationContext
    ) -> list[ConsolidatedMemory]:
        """One memory per window of ``window_turns`` turns that holds a sentence worth keeping."""
        out: list[ConsolidatedMemory] = []
        for start in range(0, len(turns), self.window_turns):
            memory = self._merge(turns[start : start + self.window_turns])
            if memory is not None:
                out.append(memory)
        return out

    def _merge(self, window: Sequence[Turn]) -> ConsolidatedMemory | None:
        found = [s for turn in window for s in self.sentences(turn)]
        if not found:
            return None
        # The best sentences that fit, shown in the order they were said.
        order = sorted(range(len(found)), key=lambda i: (-found[i].score, i))
        chosen: list[int] = []
        size = 0
        for i in order:
            cost = len(found[i].speaker) + len(found[i].text) + (3 if chosen else 2)
            if size + cost > self.max_chars:
                if not chosen:  # one sentence longer than a memory: keep its head
                    chosen.append(i)
                break
            chosen.append(i)
            size += cost
        kept = [found[i] for i in sorted(chosen)]
        # The speaker is named once for each run of sentences of one message.
        parts: list[str] = []
        previous: tuple[str, str] | None = None
        for sentence in kept:
            said = (sentence.turn_id, sentence.speaker)
            named = sentence.speaker and said != previous
            parts.append(f"{sentence.speaker}: {sentence.text}" if named else sentence.text)
            previous = said
        content = " ".join(parts)[: self.max_chars]
        best = max(s.score for s in kept)
        kinds = sorted({k for s in kept for k in s.kinds})
        sources = tuple(dict.fromkeys(s.turn_id for s in kept))
        return ConsolidatedMemory(
            content=content,
            content_type="fact" if len(window) == 1 else "summary",
            # 0.3 for a sentence just over the bar, up to 0.9 for one with every feature.
            importance=round(min(0.9, 0.3 + 0.15 * max(best - self.min_score, 0.0)), 3),
            tags=tuple(kinds),
            source_turn_ids=sources,
        )
