"""What ``actrone-pg bench`` and ``actrone-pg eval`` share to draw a PNG: matplotlib, headless."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["MISSING", "pyplot", "save"]

#: The message a command prints instead of a chart when the ``[bench]`` extra is missing.
MISSING = 'matplotlib is not installed, so no chart (pip install "actrone-pg[bench]")'


def pyplot() -> Any | None:
    """``matplotlib.pyplot`` on the file-only Agg backend, or ``None`` without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def save(plt: Any, fig: Any, path: Path) -> None:
    """Lay ``fig`` out, write it to ``path`` (creating its folder) and release it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
