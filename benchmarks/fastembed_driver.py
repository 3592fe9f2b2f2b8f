"""Time fastembed for ``benchmarks/embedder_vs_fastembed.py``, inside fastembed's own venv.

    FASTEMBED_PYTHON benchmarks/fastembed_driver.py --model-dir DIR [--threads N]

fastembed is the reference system's embedder, not a dependency of actrone_pg: this script runs
with the Python of a separate virtual environment that has fastembed installed, and imports only
the standard library, numpy and fastembed (never actrone_pg). It loads ``DIR/model.onnx`` through
``TextEmbedding(model_name="sentence-transformers/all-MiniLM-L6-v2", specific_model_path=DIR)``,
which fastembed registers as mean pooling + L2 normalisation, the same rule as actrone_pg's, so
both sides run the same file and compute the same vectors.

Protocol: one JSON object per line. It first prints what it loaded (versions, model file,
providers, threads), then answers each command read from stdin with one line:

* ``{"op": "vectors", "texts": [...]}`` -> ``{"vectors": [[...], ...]}``;
* ``{"op": "time", "calls": [[text, ...], ...], "batch_size": B}`` -> ``{"seconds": [...]}``,
  the wall time of ``list(model.embed(call, batch_size=B))`` for each call, one after another;
* ``{"op": "quit"}`` (or end of input) ends it.

The caller interleaves these timed rounds with its own, so machine drift hits both sides alike.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def _reply(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    """Load the model, describe it, then serve commands until ``quit`` or end of input."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", required=True, help="directory holding model.onnx")
    parser.add_argument(
        "--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)"
    )
    args = parser.parse_args()

    import fastembed
    import onnxruntime
    from fastembed import TextEmbedding

    model = TextEmbedding(
        model_name=MODEL_NAME,
        specific_model_path=args.model_dir,
        local_files_only=True,
        threads=args.threads or None,
    )
    # fastembed keeps the onnxruntime session and tokenizer on the model object it dispatches to.
    inner: Any = model.model
    session = inner.model
    options = session.get_session_options()
    _reply(
        {
            "fastembed": fastembed.__version__,
            "onnxruntime": onnxruntime.__version__,
            "model_file": str(inner._model_dir / inner.model_description.model_file),
            "providers": session.get_providers(),
            "intra_op_threads": options.intra_op_num_threads,
            "graph_optimization": str(options.graph_optimization_level),
            "max_length": (inner.tokenizer.truncation or {}).get("max_length"),
        }
    )
    for line in sys.stdin:
        command = json.loads(line)
        op = command.get("op")
        if op == "quit":
            break
        if op == "vectors":
            vectors = list(model.embed(command["texts"], batch_size=len(command["texts"])))
            _reply({"vectors": [v.tolist() for v in vectors]})
        elif op == "time":
            batch_size = int(command["batch_size"])
            seconds = []
            for call in command["calls"]:
                t0 = time.perf_counter()
                list(model.embed(call, batch_size=batch_size))
                seconds.append(time.perf_counter() - t0)
            _reply({"seconds": seconds})
        else:
            _reply({"error": f"unknown op {op!r}"})


if __name__ == "__main__":
    main()
