"""Recognising a built-in model by what it computes, not by where it lies (no I/O here).

A calibrated threshold belongs to the similarity scale of a model's vectors, so that is what
identifies the model: the cosines between every pair of a few fixed probe sentences. Anything
that leaves the model's function alone leaves them alone up to float rounding: the directory's
name, another ONNX export of the same weights, onnxruntime's version; measured here
(onnxruntime 1.32), one or two threads, batches of one or six, and graph optimisations on or off
gave the recorded values to 4 decimals. A rotation or scaling of the output space does not move
them either, and would not change an admission decision. A fine-tuned, distilled or quantised
model moves them: an int8 dynamic quantisation of all-MiniLM-L6-v2 moved one by 0.075 here, so it
is not taken for the original and should be calibrated on its own (``actrone-pg calibrate``).

``FINGERPRINTS`` holds the cosines recorded for each built-in model whose weights were at hand
when this was written; a model matches when every cosine lies within ``TOLERANCE`` of the
record. bge-small-en-v1.5 has none recorded (no model hub was reachable), so it is still
recognised only by its id. To record one, run :func:`fingerprint` on its vectors of ``PROBES``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["FINGERPRINTS", "PROBES", "TOLERANCE", "fingerprint", "recognise"]

#: Short texts of different kinds (a fact, its topic, unrelated English, German, a number), so
#: that related and unrelated pairs, and the tokenizer's handling of other scripts, all count.
PROBES: tuple[str, ...] = (
    "The user is allergic to peanuts.",
    "food allergies",
    "The quarterly report is due on Friday.",
    "A cat sleeps on the windowsill.",
    "Wie spät ist es?",
    "42",
)

#: Largest difference of any one cosine from the record that still counts as the same model:
#: a hundred times the float noise between runtimes, a seventh of an int8 quantisation's shift.
TOLERANCE = 0.01

#: Model id -> cosines of the probe pairs (0,1), (0,2), ... (4,5), rounded to 4 decimals.
#: all-MiniLM-L6-v2: measured on the ONNX export of scripts/export_test_model.py.
FINGERPRINTS: Mapping[str, tuple[float, ...]] = {
    "sentence-transformers/all-MiniLM-L6-v2": (
        0.5247,
        0.0032,
        -0.0249,
        0.0718,
        0.0811,
        0.0297,
        -0.0043,
        0.097,
        0.0633,
        -0.0345,
        -0.0154,
        -0.0638,
        -0.033,
        0.064,
        0.1214,
    ),
}


def fingerprint(vectors: np.ndarray) -> tuple[float, ...]:
    """The cosines between every pair of ``vectors`` (the model's vectors of :data:`PROBES`)."""
    v = np.asarray(vectors, dtype=np.float64)
    if v.ndim != 2 or v.shape[0] != len(PROBES):
        raise ValueError(f"expected {len(PROBES)} vectors, one per probe, got shape {v.shape}")
    unit = v / np.clip(np.linalg.norm(v, axis=1, keepdims=True), 1e-12, None)
    gram = unit @ unit.T
    rows, cols = np.triu_indices(len(PROBES), 1)
    return tuple(round(float(x), 4) for x in gram[rows, cols])


def recognise(vectors: np.ndarray) -> str | None:
    """The id of the built-in model whose recorded fingerprint ``vectors`` match, else ``None``."""
    got = np.asarray(fingerprint(vectors))
    if not np.all(np.isfinite(got)):
        return None
    for model_id, recorded in FINGERPRINTS.items():
        if float(np.max(np.abs(got - np.asarray(recorded)))) <= TOLERANCE:
            return model_id
    return None
