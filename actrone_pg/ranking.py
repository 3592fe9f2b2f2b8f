"""The ranking rules: admission order, BM25, the rankings, RRF, the blend (README, step 4-6).

This module does no I/O. :mod:`actrone_pg.pipeline` applies these rules for every Python store,
and PostgreSQL's SQL is tested for parity against it, so every rule here is the contract:

* **Admission**: a memory is a candidate only if ``cosine >= threshold``; at most ``limit``
  candidates are kept, nearest first (ties: newer first, then smaller id).
* **The rankings** (:data:`CHANNELS`, one :class:`Channel` each; a new one is added there).
  **Dense**: cosine descending. **Lexical**: BM25 descending, only candidates that share at
  least one query term (the others are absent: rank ``None``). **Recency**: ``created_at``
  descending. Every ranking breaks ties newer first, then by id ascending, and assigns distinct
  1-based ranks.
* **RRF**: ``fused = Σ weight_i / (k + rank_i)`` over the rankings a memory appears in, summed in
  the order of :data:`CHANNELS`, dense, lexical, recency (floating-point addition is not
  associative; a fixed order keeps every backend bit-identical).
* **Classic blend** (hybrid off): ``relevance_weight × cosine + recency_weight × recency`` with
  recency falling linearly from 1 (written now) to 0 (30 days or older).
* Final order: score descending, then newer first, then id ascending. (After the store, the
  manager lifts each of the best hits to a share of its session predecessor's score:
  ``pipeline.inherit_from_predecessors``, ``MemoryConfig.neighbour_weight``.)

**Tokenisation** (shared by every backend's BM25): lower-case the text, then take the maximal runs
of Unicode letters and digits (``[^\\W_]+``); everything else separates terms. ``"Don't e-mail
me!"`` gives ``["don", "t", "e", "mail", "me"]``. An :class:`Analyzer` then turns the tokens into
terms (``english``, the default: each token's Snowball English stem; ``simple``: the tokens as
they are). Every backend gets its terms from here, and each store records the analyzer its
stored terms were built with. With ``lexical_dates`` a memory's document is its content
followed by the terms of its date (:func:`date_text`); the analyzer names what a store recorded
(:attr:`Analyzer.index_name`). A query's terms are its distinct terms; with
``drop_question_words`` (the manager's default) the tokens of :data:`QUESTION_WORDS` are left
out of them first, unless nothing else would remain. Documents keep every token.

**BM25**: ``k1`` and ``b`` from :class:`RankingParams` (by default ``BM25_K1`` and
``BM25_B``); ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` where ``N``
is the number of the agent's memories and ``df`` how many contain ``t``; document length is its
term count, ``avgdl`` the agent's mean. Statistics cover the agent's whole corpus, not only the
admitted candidates.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from actrone_pg._scan import cosines, nearest_first, recency_places
from actrone_pg.errors import ConfigurationError

__all__ = [
    "ANALYZERS",
    "BM25_B",
    "BM25_K1",
    "CHANNELS",
    "DEFAULT_RRF_WEIGHTS",
    "DEFAULT_ANALYZER",
    "DEFAULT_LEXICAL_DATES",
    "DEFAULT_RELEVANCE_THRESHOLD",
    "QUESTION_WORDS",
    "Analyzer",
    "Channel",
    "RECENCY_HORIZON_SECONDS",
    "CorpusStats",
    "RankedArrays",
    "RankRule",
    "RankingParams",
    "analyzer",
    "analyzer_mismatch",
    "bm25",
    "code_point_ranks",
    "cosines",
    "date_text",
    "follow_recorded",
    "full_weights",
    "idf",
    "micros",
    "nearest_first",
    "query_terms",
    "rank_arrays",
    "recency_places",
    "required_weights",
    "term_counts",
    "tokenize",
]

logger = logging.getLogger("actrone_pg.ranking")

BM25_K1 = 1.2
#: Length normalisation: 0.3, not the textbook 0.75, because a dialog turn's length says little
#: about how much of it is about a query (spec §3.5 and §11; measured: docs/quality.md).
BM25_B = 0.3
#: Used when neither the config nor the embedder declares a threshold.
DEFAULT_RELEVANCE_THRESHOLD = 0.72
#: The classic blend's recency reaches 0 at this age (30 days).
RECENCY_HORIZON_SECONDS = 30 * 24 * 3600.0

_TOKEN = re.compile(r"[^\W_]+")

#: What makes a query a question rather than what it asks about: the English interrogatives and
#: the auxiliary and modal verbs that form questions ("What did ...", "When was ..."). Left out
#: of a query's BM25 terms, they no longer match the turns that are themselves questions, which
#: in a conversation are rarely what is asked for (measured: docs/notes/quality.md, "Question
#: words").
#: "may" stays: it is also a month. A closed class of the language, not a list fitted to data.
QUESTION_WORDS = frozenset(
    "what when where which who whom whose why how "
    "do does did is are was were am be been has have had "
    "can could will would shall should might must".split()
)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case tokens (see the module docstring), before any analysis."""
    return _TOKEN.findall(text.lower())


#: The analyzers a store can index with (``MemoryConfig.text_analyzer``).
ANALYZERS = ("english", "simple")
DEFAULT_ANALYZER = "english"
#: What ``MemoryConfig.lexical_dates`` left unset (``None``) means for a store that holds no terms
#: yet: on, because questions name dates ("in May 2023") and a turn never says its own (measured:
#: docs/notes/quality.md, "Round 5"). A store that already holds terms keeps the choice it recorded
#: (:func:`follow_recorded`), so an upgrade never stops a deployment.
DEFAULT_LEXICAL_DATES = True
#: Appended to the analyzer's name in the index name of an analyzer with date terms.
_DATES_SUFFIX = "+dates"
#: English month names, written out here so that no locale changes a memory's terms.
_MONTHS = (
    "January February March April May June July August September October November December".split()
)


def date_text(created_at: datetime) -> str:
    """The day of ``created_at`` in UTC as questions name it: ``"8 May 2023"`` (day, English
    month name, year; no locale, no leading zero). A naive datetime is taken as UTC.

    ``lexical_dates`` adds its terms to a memory's lexical document, so that "in May 2023" or
    "in 2022" meets the memories written then (measured: docs/notes/quality.md, "Round 5").
    """
    day = created_at.replace(tzinfo=UTC) if created_at.tzinfo is None else created_at
    day = day.astimezone(UTC)
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year}"


#: How many tokens' stems an analyzer keeps (Snowball in pure Python costs 50-90 µs a token):
#: the most recently used, about 10 MB at most (docs/reliability.md, "Bounded state").
STEM_CACHE_SIZE = 50_000


class Analyzer:
    """Turns text into BM25 terms, the same way in every backend.

    ``simple``: the tokens of :func:`tokenize`. ``english``: each of those tokens reduced to its
    stem by the Snowball English stemmer (Porter2, the algorithm of PostgreSQL's ``english_stem``
    dictionary), so "cats running" and "cat runs" share their terms. No stop words: IDF already
    weighs function words down, and dropping them measured worse (docs/quality.md). Stems are
    cached: a vocabulary is small, its texts are not.

    ``dates`` (``MemoryConfig.lexical_dates``): a memory's document (:meth:`document_counts`)
    also holds the terms of its date, :func:`date_text`. Only documents: a query's terms, the
    stored content and the embedding stay as they are.
    """

    __slots__ = ("_local", "_stems", "dates", "name")

    def __init__(self, name: str = DEFAULT_ANALYZER, *, dates: bool = False) -> None:
        if name not in ANALYZERS:
            raise ValueError(f"unknown analyzer {name!r} (known: {', '.join(ANALYZERS)})")
        self.name = name
        self.dates = dates
        self._local = threading.local()
        # token -> stem, the STEM_CACHE_SIZE most recently used
        self._stems: Callable[[str], str] = functools.lru_cache(maxsize=STEM_CACHE_SIZE)(self._stem)

    @property
    def index_name(self) -> str:
        """What a store records with the terms it holds: the analyzer's name, followed by
        ``"+dates"`` with date terms (``"english+dates"``)."""
        return self.name + _DATES_SUFFIX if self.dates else self.name

    def document_terms(self, content: str, created_at: datetime) -> list[str]:
        """The terms of a memory's lexical document: its content's, then (with ``dates``) those
        of :func:`date_text` of its ``created_at``. Every store indexes memories through this."""
        tokens = tokenize(content)
        if self.dates:
            tokens += tokenize(date_text(created_at))
        return self.terms_of(tokens)

    def document_counts(self, content: str, created_at: datetime) -> tuple[Counter[str], int]:
        """Term frequencies and length (in terms) of a memory's lexical document."""
        terms = self.document_terms(content, created_at)
        return Counter(terms), len(terms)

    def terms_of(self, tokens: Sequence[str]) -> list[str]:
        """The terms of already tokenized text, in order (repeats kept)."""
        if self.name == "simple":
            return list(tokens)
        stem = self._stems
        return [stem(token) for token in tokens]

    def _stem(self, token: str) -> str:
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:  # stemmer objects keep state between calls: one per thread
            import snowballstemmer

            stemmer = self._local.stemmer = snowballstemmer.stemmer("english")
        return str(stemmer.stemWord(token))

    def stems_cached(self) -> int:
        """How many tokens' stems the analyzer keeps (at most :data:`STEM_CACHE_SIZE`)."""
        return int(self._stems.cache_info().currsize)  # type: ignore[attr-defined]

    def terms(self, text: str) -> list[str]:
        """The terms of ``text``, in order (repeats kept)."""
        return self.terms_of(tokenize(text))

    def query_terms(self, text: str, *, drop_question_words: bool = False) -> list[str]:
        """The distinct terms of a query, in order of first appearance.

        ``drop_question_words`` leaves the tokens of :data:`QUESTION_WORDS` out, unless the
        query has no other token.
        """
        tokens = tokenize(text)
        if drop_question_words:
            content = [t for t in tokens if t not in QUESTION_WORDS]
            tokens = content or tokens
        return list(dict.fromkeys(self.terms_of(tokens)))

    def term_counts(self, text: str) -> tuple[Counter[str], int]:
        """Term frequencies and length (in terms) of a document."""
        terms = self.terms(text)
        return Counter(terms), len(terms)


_ANALYZERS: dict[tuple[str, bool], Analyzer] = {}


def analyzer(name: str = DEFAULT_ANALYZER, *, dates: bool | None = False) -> Analyzer:
    """The shared :class:`Analyzer` called ``name`` (one stem cache per analyzer).

    Every store builds its analyzer here, so a ``dates`` that is not a bool is refused here;
    ``None`` (``lexical_dates`` unset) is :data:`DEFAULT_LEXICAL_DATES`.
    """
    if dates is None:
        dates = DEFAULT_LEXICAL_DATES
    if not isinstance(dates, bool):
        raise ConfigurationError("lexical_dates", f"expected true or false, got {dates!r}")
    found = _ANALYZERS.get((name, dates))
    if found is None:
        found = _ANALYZERS.setdefault((name, dates), Analyzer(name, dates=dates))
    return found


def _settings(index_name: str) -> str:
    name, dated = index_name.removesuffix(_DATES_SUFFIX), index_name.endswith(_DATES_SUFFIX)
    return f"text_analyzer={name!r}, lexical_dates={'true' if dated else 'false'}"


def analyzer_mismatch(store: str, recorded: str, configured: str) -> ConfigurationError:
    """The error of a store whose stored terms were built otherwise than configured.

    ``recorded`` and ``configured`` are :attr:`Analyzer.index_name` values.
    """
    same_analyzer = recorded.removesuffix(_DATES_SUFFIX) == configured.removesuffix(_DATES_SUFFIX)
    return ConfigurationError(
        "lexical_dates" if same_analyzer else "text_analyzer",
        f"{store} holds BM25 terms built by the analyzer {recorded!r}, not {configured!r}: "
        f"rebuild them with `actrone-pg reindex` (it uses the configured {_settings(configured)}; "
        "ACTRONE_TEXT_ANALYZER and ACTRONE_LEXICAL_DATES, or --text-analyzer and "
        f"--lexical-dates/--no-lexical-dates), or configure {_settings(recorded)}",
    )


def follow_recorded(store: str, current: Analyzer, recorded: str, *, dates_given: bool) -> Analyzer:
    """The analyzer a store indexes with, given the one its terms were ``recorded`` with.

    ``current`` is the configured analyzer; ``dates_given`` says whether ``lexical_dates`` was
    set (``False``: left at ``None``). An unset ``lexical_dates`` follows what the store
    recorded, so a store indexed before date terms existed keeps working, without them (a
    warning says how to add them); any other difference is :func:`analyzer_mismatch`.
    """
    if recorded == current.index_name:
        return current
    name, dated = recorded.removesuffix(_DATES_SUFFIX), recorded.endswith(_DATES_SUFFIX)
    if dates_given or name != current.name:
        raise analyzer_mismatch(store, recorded, current.index_name)
    if not dated:
        logger.warning(
            "%s holds BM25 terms without memories' dates (indexed before lexical_dates): it "
            "goes on without them; `actrone-pg reindex --lexical-dates` adds them "
            '(docs/notes/quality.md, "Round 5"), lexical_dates=false silences this',
            store,
        )
    return analyzer(name, dates=dated)


def query_terms(
    text: str, analyzer_name: str = DEFAULT_ANALYZER, *, drop_question_words: bool = False
) -> list[str]:
    """The distinct terms of a query, in order of first appearance (see
    :meth:`Analyzer.query_terms`)."""
    return analyzer(analyzer_name).query_terms(text, drop_question_words=drop_question_words)


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """BM25 statistics of one agent's memories."""

    n_docs: int
    total_length: int
    doc_freq: Mapping[str, int]

    @property
    def avgdl(self) -> float:
        """Mean document length in tokens (1.0 for an empty corpus, to avoid dividing by 0)."""
        return self.total_length / self.n_docs if self.n_docs and self.total_length else 1.0


def idf(n_docs: int, df: int) -> float:
    """Inverse document frequency, always positive (the "+1 inside the log" variant)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25(
    tf: npt.NDArray[np.float64],
    lengths: npt.NDArray[np.float64],
    doc_freqs: Sequence[int],
    stats: CorpusStats,
    k1: float = BM25_K1,
    b: float = BM25_B,
) -> npt.NDArray[np.float64]:
    """BM25 of each document for the distinct query terms; 0.0 where it shares none.

    ``tf`` holds each term's frequency in each document (one row per term, in query order),
    ``lengths`` each document's token count and ``doc_freqs`` each term's document frequency. The
    terms are summed in query order (floating-point addition is not associative; the SQL adds
    them in the same order). ``k1`` saturates term frequency, ``b`` normalises by length.
    """
    score = np.zeros(lengths.size, dtype=np.float64)
    if len(doc_freqs) == 0:
        return score
    norm = k1 * (1.0 - b + b * lengths / stats.avgdl)
    weights = np.array([idf(stats.n_docs, df) for df in doc_freqs], dtype=np.float64)
    # Every term's row at once (faster: docs/benchmarks.md), the same operations per element as
    # one term at a time; the rows are added in query order. Divided only where the term occurs
    # (elsewhere 0.0), so no 0/0 is computed and no error state needs silencing.
    parts = np.zeros(tf.shape, dtype=np.float64)
    np.divide(weights[:, None] * (tf * (k1 + 1.0)), tf + norm, out=parts, where=tf > 0)
    for part in parts:
        score += part
    return score


def term_counts(text: str, analyzer_name: str = DEFAULT_ANALYZER) -> tuple[Counter[str], int]:
    """Term frequencies and length (in terms) of a document."""
    return analyzer(analyzer_name).term_counts(text)


def micros(dt: datetime) -> int:
    """Whole microseconds since the Unix epoch (exact, the resolution PostgreSQL keeps)."""
    delta = dt - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def code_point_ranks(ids: Sequence[str]) -> npt.NDArray[np.int64]:
    """Integers that sort like ``ids``: the ``id_order`` of :func:`rank_arrays`.

    Python compares strings by code point, as the spec orders ids.
    """
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[order] = np.arange(len(ids), dtype=np.int64)
    return ranks


#: What a channel's rule reads: the admitted candidates' columns by name (``cosine``, ``bm25``,
#: ``created_us``, ``id_order``, and whatever else the store gave :func:`rank_arrays` as
#: ``columns``), then the candidates' positions in the order every ranking breaks ties by (newer
#: first, then id ascending). It returns each candidate's 1-based rank, 0 where it is absent.
RankRule = Callable[[Mapping[str, npt.NDArray[Any]], npt.NDArray[np.intp]], npt.NDArray[np.int64]]


@dataclass(frozen=True, slots=True)
class Channel:
    """One ranking of the fusion: its name, its rule, and its weight's default.

    Its rank is ``Explain.<name>_rank`` (:attr:`field`), and its place in :data:`CHANNELS` is its
    place everywhere else: its entry in ``rrf_weights``, its term in the fusion's sum, its
    element of the ``ranks`` array the SQL functions return (docs/architecture.md, "A new
    ranking channel").
    """

    name: str
    rank: RankRule
    #: ``MemoryConfig.rrf_weights``' default entry (measured: docs/quality.md).
    weight: float
    #: It ranks only some candidates (rank 0 for the others): they get no term in the fusion.
    partial: bool = False
    #: Reported only in hybrid mode (``None`` in the classic blend).
    hybrid_only: bool = False
    #: A ranking added after the spec's three: a list of weights may stop before it, and it then
    #: weighs 0, so that a configuration written before it ranks as it did. Every channel after
    #: an optional one is optional.
    optional: bool = False

    @property
    def field(self) -> str:
        """The name of its rank in :class:`~actrone_pg.models.Explain` and in SQL."""
        return self.name + "_rank"


def _ranks_of(order: npt.NDArray[np.intp], n: int) -> npt.NDArray[np.int64]:
    """1-based ranks of ``n`` candidates of which ``order`` lists some, best first (0: absent)."""
    ranks = np.zeros(n, dtype=np.int64)
    ranks[order] = np.arange(1, order.size + 1, dtype=np.int64)
    return ranks


# Every ranking breaks ties newer first, then by id: the recency order. Stable sorts of the
# candidates taken in that order break them so, each on one key (faster: docs/benchmarks.md).
def _dense(
    values: Mapping[str, npt.NDArray[Any]], recent: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """Cosine descending."""
    return _ranks_of(recent[np.argsort(-values["cosine"][recent], kind="stable")], recent.size)


def _lexical(
    values: Mapping[str, npt.NDArray[Any]], recent: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """BM25 descending, only candidates that share a query term (BM25 > 0)."""
    bm25 = values["bm25"]
    has_term = recent[bm25[recent] > 0.0]
    return _ranks_of(has_term[np.argsort(-bm25[has_term], kind="stable")], recent.size)


def _recency(
    values: Mapping[str, npt.NDArray[Any]], recent: npt.NDArray[np.intp]
) -> npt.NDArray[np.int64]:
    """``created_at`` descending: the tie order itself."""
    return _ranks_of(recent, recent.size)


#: The rankings RRF fuses, in the order of their weights and of the fusion's sum
#: (floating-point addition is not associative: every backend adds them in this order).
CHANNELS: tuple[Channel, ...] = (
    Channel("dense", _dense, weight=1.0),
    Channel("lexical", _lexical, weight=4.0, partial=True, hybrid_only=True),
    Channel("recency", _recency, weight=0.1),
)


def required_weights() -> int:
    """How many weights ``rrf_weights`` holds at least: the channels before the optional ones."""
    return next((i for i, c in enumerate(CHANNELS) if c.optional), len(CHANNELS))


def full_weights(weights: Sequence[float]) -> tuple[float, ...]:
    """One weight per channel of :data:`CHANNELS`: ``weights``, then 0.0 for each optional
    channel past them (a list longer than the channels is the caller's error, checked there)."""
    return (*weights, *(0.0,) * (len(CHANNELS) - len(weights)))


def _without_optional_zeros(weights: tuple[float, ...]) -> tuple[float, ...]:
    keep = len(weights)
    while keep > required_weights() and weights[keep - 1] == 0.0:
        keep -= 1
    return weights[:keep]


#: ``MemoryConfig.rrf_weights``' default: each channel's measured weight (docs/quality.md),
#: without the trailing zeros of optional channels (a new channel off by default leaves it as
#: it was).
DEFAULT_RRF_WEIGHTS = _without_optional_zeros(tuple(c.weight for c in CHANNELS))


#: ``RankingParams.rrf_weights``' default: unweighted RRF of the required channels.
_UNWEIGHTED = (1.0,) * required_weights()


@dataclass(frozen=True, slots=True)
class RankingParams:
    """Everything a ranking depends on besides the candidates.

    ``rrf_weights`` has one entry per channel of :data:`CHANNELS`, in its order, or stops before
    the optional ones (:func:`full_weights`); by default 1.0 each: unweighted RRF.
    """

    hybrid: bool = True
    rrf_k: int = 60
    rrf_weights: tuple[float, ...] = _UNWEIGHTED
    relevance_weight: float = 0.7
    recency_weight: float = 0.3
    bm25_k1: float = BM25_K1
    bm25_b: float = BM25_B


@dataclass(frozen=True, slots=True)
class RankedArrays:
    """The result of :func:`rank_arrays`: positions into the input, best first, and channel ranks.

    ``ranks`` holds each channel's ranks by its name, 0 where a candidate is absent from it.
    """

    order: npt.NDArray[np.intp]
    ranks: dict[str, npt.NDArray[np.int64]]
    score: npt.NDArray[np.float64]


def rank_arrays(
    id_order: npt.NDArray[np.int64],
    created_us: npt.NDArray[np.int64],
    cosine: npt.NDArray[np.float64],
    bm25: npt.NDArray[np.float64],
    params: RankingParams,
    now: datetime,
    columns: Mapping[str, npt.NDArray[Any]] | None = None,
    *,
    recent: npt.NDArray[np.intp] | None = None,
    orders: Mapping[str, npt.NDArray[np.intp]] | None = None,
) -> RankedArrays:
    """Rank admitted candidates: every channel's ranking and their fusion (or the classic blend).

    ``id_order`` must order the candidates as their ids compare (any integers that sort the same
    way); ``columns`` are further inputs of the channels' rules, by name. A caller that already
    holds the candidates' recency order (``recent``: positions newest first, then id ascending)
    or a channel's order (``orders``, by channel name: positions best first, ties broken as the
    channel's rule breaks them) passes it, and it is not computed again. A test holds it, bit
    for bit, to a plain-Python oracle on random inputs full of ties.
    """
    n = cosine.shape[0]
    values = {
        **(columns or {}),
        "id_order": id_order,
        "created_us": created_us,
        "cosine": cosine,
        "bm25": bm25,
    }
    if recent is None:
        recent = np.lexsort((id_order, -created_us))  # np.lexsort sorts by the last key first
    known = orders or {}
    ranks = {
        c.name: _ranks_of(known[c.name], n) if c.name in known else c.rank(values, recent)
        for c in CHANNELS
    }
    score: npt.NDArray[np.float64]
    if params.hybrid:
        k = float(params.rrf_k)
        total: Any = None
        for channel, weight in zip(CHANNELS, full_weights(params.rrf_weights), strict=True):
            rank = ranks[channel.name]
            if channel.partial:
                term = np.where(rank > 0, weight / (k + np.maximum(rank, 1)), 0.0)
            else:
                term = weight / (k + rank)
            total = term if total is None else total + term  # summed in channel order
        score = np.asarray(total)
    else:
        age = (micros(now) - created_us) / 1_000_000.0
        rec = np.where(age <= 0, 1.0, np.maximum(0.0, 1.0 - age / RECENCY_HORIZON_SECONDS))
        score = np.asarray(params.relevance_weight * cosine + params.recency_weight * rec)
        for channel in CHANNELS:
            if channel.hybrid_only:
                ranks[channel.name] = np.zeros(n, dtype=np.int64)
    order = recent[np.argsort(-score[recent], kind="stable")]
    return RankedArrays(order, ranks, score)
