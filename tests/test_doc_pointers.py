"""Every pointer to a section of the docs names a section that exists where it points.

Code and docs point into docs/ in two ways: a comment or sentence naming a file and a section,
``docs/postgres.md, "One read path"`` (also as a Markdown link, ``[notes/quality.md](notes/
quality.md), "Round 5"``), and a Markdown link with an anchor, ``(redis_qdrant.md#data-layout)``.
When a section moves (for example into docs/notes/) or is renamed, the pointers to it must move
too; this test finds the ones that did not.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {".git", ".venv", "node_modules", "dist", "build", "__pycache__"}
SUFFIXES = {".py", ".md", ".sql", ".ts", ".toml", ".sh"}

#: ``FILE.md, "Section"``, where FILE.md is a path or a Markdown link ``[text](path.md)``. The
#: section may be a heading's start ("Candidate search" for "Candidate search: complete under
#: the tenant filter").
SECTION_POINTER = re.compile(
    r"(?:\[[^\]]*\]\((?P<link>[\w./-]+\.md)(?:#[\w-]*)?\)|(?P<path>(?:docs/)?[\w./-]*\w\.md))"
    r"\)?,\s+\"(?P<section>[^\"]+)\""
)
#: A Markdown link to a heading of another document: ``](path.md#anchor)``.
ANCHOR_LINK = re.compile(r"\]\((?P<path>[\w./-]+\.md)#(?P<anchor>[\w-]+)\)")
#: A line break inside a comment or docstring, with what continues the comment on the next line.
CONTINUATION = re.compile(r"\s*\n\s*(?:#:?|--|//|\*(?!\*))?\s*")


def sources() -> list[Path]:
    """The repository's own text files that may point into docs/."""
    found = []
    for path in sorted(ROOT.rglob("*")):
        if path == Path(__file__).resolve():
            continue  # its own examples
        parts = set(path.relative_to(ROOT).parts)
        if path.is_file() and path.suffix in SUFFIXES and not parts & SKIP_DIRS:
            found.append(path)
    found += [p for p in sorted((ROOT / "scripts").iterdir()) if p.is_file() and not p.suffix]
    return found


@cache
def sections(doc: Path) -> tuple[str, ...]:
    """A document's section names: its headings, and the bold lead-ins that open a paragraph
    (``**Why not 5 ms.** ...``), outside code blocks, backticks removed."""
    names = []
    fenced = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (heading := re.match(r"#{1,6} +(.+)", line)):
            names.append(heading.group(1).strip())
        elif not fenced and (lead := re.match(r"\*\*(.+?)\.?\*\*", line)):
            names.append(lead.group(1).strip())
    return tuple(name.replace("`", "") for name in names)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.lower())
    return text.replace(" ", "-")


@cache
def anchors(doc: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    out = set()
    for name in sections(doc):
        slug = anchor(name)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return frozenset(out)


def target(source: Path, written: str, *, link: bool) -> Path:
    """The document a pointer means: a link is relative to the Markdown file holding it, a
    ``docs/...`` path to the repository, and a bare ``name.md`` to the file's own folder in
    docs/, else to docs/ (code says ``postgres.md`` for docs/postgres.md)."""
    if written.startswith("docs/") and not link:
        return ROOT / written
    if source.suffix == ".md" and (link or source.parent.is_relative_to(ROOT / "docs")):
        return (source.parent / written).resolve()
    return ROOT / "docs" / written


def pointers() -> list[tuple[str, Path, str]]:
    """``(where, document, section)`` for every section pointer in the repository."""
    found = []
    for source in sources():
        text = source.read_text(encoding="utf-8", errors="replace")
        flat = CONTINUATION.sub(" ", text)
        for match in SECTION_POINTER.finditer(flat):
            written = match.group("link") or match.group("path")
            doc = target(source, written, link=match.group("link") is not None)
            where = f"{source.relative_to(ROOT)}: {written}"
            found.append((where, doc, " ".join(match.group("section").split())))
    return found


def anchor_links() -> list[tuple[str, Path, str]]:
    found = []
    for source in sources():
        if source.suffix != ".md":
            continue
        for match in ANCHOR_LINK.finditer(source.read_text(encoding="utf-8")):
            if "://" in match.group("path"):
                continue
            doc = (source.parent / match.group("path")).resolve()
            where = f"{source.relative_to(ROOT)}: {match.group('path')}"
            found.append((where, doc, match.group("anchor")))
    return found


def params(found: list[tuple[str, Path, str]]) -> list[object]:
    """One test per pointer, named by where it is."""
    return [pytest.param(*entry, id=entry[0]) for entry in found]


def test_the_pointers_are_found() -> None:
    # the forms this test reads, each seen at least once (a regex that matches nothing passes)
    wheres = [where for where, _, _ in pointers()]
    assert any(w.startswith("actrone_pg/") and ": docs/" in w for w in wheres)
    assert any(w.startswith("docs/") and ": notes/" in w for w in wheres)
    assert len(anchor_links()) > 5


def test_the_sections_are_read_as_a_reader_sees_them(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text(
        "# Guide\n\n## `retrieve_context`, step by step\n\n**Why not 5 ms.** Because.\n\n"
        "```bash\n# not a heading\n```\n\n## Measured\n\n### Measured\n",
        encoding="utf-8",
    )
    assert sections(doc) == (
        "Guide",
        "retrieve_context, step by step",
        "Why not 5 ms",
        "Measured",
        "Measured",
    )
    assert anchors(doc) == {"guide", "retrieve_context-step-by-step", "why-not-5-ms", "measured",
                            "measured-1"}  # fmt: skip
    text = '# see docs/postgres.md, "Large\n# agents" and [x](notes/q.md), "Round 5"'
    flat = CONTINUATION.sub(" ", text)
    found = [(m.group("link") or m.group("path"), m.group("section"))
             for m in SECTION_POINTER.finditer(flat)]  # fmt: skip
    assert found == [("docs/postgres.md", "Large agents"), ("notes/q.md", "Round 5")]


@pytest.mark.parametrize(("where", "doc", "section"), params(pointers()))
def test_a_section_pointer_names_an_existing_section(where: str, doc: Path, section: str) -> None:
    assert doc.is_file(), f"{where} points to a file that does not exist"
    assert any(name.startswith(section) for name in sections(doc)), (
        f'{where}, "{section}": no such section in {doc.relative_to(ROOT)}'
    )


@pytest.mark.parametrize(("where", "doc", "slug"), params(anchor_links()))
def test_a_link_anchor_names_an_existing_heading(where: str, doc: Path, slug: str) -> None:
    assert doc.is_file(), f"{where} links to a file that does not exist"
    assert slug in anchors(doc), f"{where}#{slug}: no such heading in {doc.relative_to(ROOT)}"


def file_links() -> list[tuple[str, Path]]:
    """``(where, target)`` for every relative Markdown link to a file or folder."""
    found = []
    for source in sources():
        if source.suffix != ".md":
            continue
        for match in re.finditer(r"\]\((?P<path>[^)#\s]+)(?:#[^)]*)?\)", source.read_text()):
            written = match.group("path")
            if "://" in written or written.startswith("mailto:"):
                continue
            found.append((f"{source.relative_to(ROOT)}: {written}", source.parent / written))
    return found


@pytest.mark.parametrize(("where", "path"), [pytest.param(*f, id=f[0]) for f in file_links()])
def test_a_relative_link_names_an_existing_file(where: str, path: Path) -> None:
    assert path.exists(), f"{where}: no such file or folder"
