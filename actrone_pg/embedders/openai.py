"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` server (OpenAI, vLLM, Ollama, TEI...).

Needs the ``[openai]`` extra (httpx). Configured by ``embedding_api_url`` (the server's base URL,
``…/v1``, or the full ``…/v1/embeddings`` URL; default OpenAI's), ``embedding_api_key`` (else
``OPENAI_API_KEY``), ``embedding_model`` (default ``text-embedding-3-small``) and
``embedding_dimensions`` (sent to the server when set; required for a model whose size is not
known here, unless the server can be asked once at start-up).

Transient failures (connection errors, timeouts, HTTP 408, 429, 500, 502, 503, 504) are retried
with exponential backoff, honouring ``Retry-After``; anything else fails at once with an
:class:`~actrone_pg.errors.EmbedderError` saying what the server said. The embedder declares no
relevance threshold, so the library default (0.72) applies until you run ``actrone-pg calibrate
--embedder openai`` on your own pairs.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from actrone_pg.errors import ConfigurationError, EmbedderError, MissingDependencyError

if TYPE_CHECKING:
    import httpx

    from actrone_pg.config import MemoryConfig

__all__ = ["DEFAULT_API_URL", "DEFAULT_MODEL", "KNOWN_DIMENSIONS", "OpenAIEmbedder", "from_config"]

logger = logging.getLogger("actrone_pg.embedders")

DEFAULT_API_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "text-embedding-3-small"
#: Sizes of well-known models, so no request is needed to learn them.
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def _httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise MissingDependencyError("openai", "httpx") from None
    return httpx


def embeddings_url(base: str) -> str:
    """The ``/embeddings`` endpoint of ``base`` (a server root, a ``/v1`` URL or the endpoint)."""
    url = base.rstrip("/")
    if url.endswith("/embeddings"):
        return url
    if url.endswith("/v1"):
        return url + "/embeddings"
    return url + "/v1/embeddings"


class OpenAIEmbedder:
    """Client of an OpenAI-compatible embeddings endpoint.

    ``dimensions`` must be known when the embedder is built (the manager checks vectors against
    it): pass it, use a model in :data:`KNOWN_DIMENSIONS`, or build with :meth:`probe`, which
    asks the server once.
    """

    relevance_threshold: float | None = None

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        dimensions: int | None = None,
        api_url: str = DEFAULT_API_URL,
        api_key: str | None = None,
        send_dimensions: bool = False,
        timeout: float = 30.0,
        max_retries: int = 3,
        backoff: float = 0.5,
        max_batch: int = 256,
    ) -> None:
        self._httpx = _httpx()
        if not model.strip():
            raise ConfigurationError("embedding_model", "must name the server's model")
        dims = dimensions if dimensions is not None else KNOWN_DIMENSIONS.get(model)
        if dims is None:
            raise ConfigurationError(
                "embedding_dimensions",
                f"the size of model {model!r} is not known here; set embedding_dimensions "
                "(ACTRONE_EMBEDDING_DIMENSIONS) to the vector length the server returns",
            )
        if dims < 1:
            raise ConfigurationError("embedding_dimensions", f"must be at least 1, got {dims}")
        if timeout <= 0 or max_retries < 0 or backoff < 0 or max_batch < 1:
            raise ConfigurationError(
                "embedding", "timeout and max_batch must be positive, retries and backoff ≥ 0"
            )
        self.model = model
        self.dimensions = dims
        self.url = embeddings_url(api_url)
        self.name = f"openai:{model}:{dims}"
        self._send_dimensions = send_dimensions
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = timeout
        self._max_retries = max_retries
        self._backoff = backoff
        self._max_batch = max_batch
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def probe(cls, **kwargs: Any) -> OpenAIEmbedder:
        """Build an embedder whose ``dimensions`` come from one request to the server."""
        httpx = _httpx()
        model = kwargs.get("model", DEFAULT_MODEL)
        url = embeddings_url(kwargs.get("api_url", DEFAULT_API_URL))
        headers = {"Content-Type": "application/json"}
        if kwargs.get("api_key"):
            headers["Authorization"] = f"Bearer {kwargs['api_key']}"
        try:
            response = httpx.post(
                url,
                json={"model": model, "input": ["dimension probe"]},
                headers=headers,
                timeout=kwargs.get("timeout", 30.0),
            )
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"cannot reach the embeddings server {url} ({type(exc).__name__}: {exc}); set "
                "embedding_dimensions to skip this start-up probe, or check embedding_api_url"
            ) from None
        rows = _parse(response, url, 1)
        return cls(**{**kwargs, "dimensions": len(rows[0])})

    def _client_for_loop(self) -> httpx.AsyncClient:
        # An AsyncClient's pool belongs to one event loop; a new loop gets a new client.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            self._client = self._httpx.AsyncClient(timeout=self._timeout, headers=self._headers)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` as a ``(len(texts), dimensions)`` float32 array."""
        items = list(texts)
        out = np.zeros((len(items), self.dimensions), dtype=np.float32)
        for start in range(0, len(items), self._max_batch):
            chunk = items[start : start + self._max_batch]
            out[start : start + len(chunk)] = await self._request(chunk)
        return out

    async def _request(self, texts: list[str]) -> np.ndarray:
        httpx = self._httpx
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._send_dimensions:
            payload["dimensions"] = self.dimensions
        attempt = 0
        while True:
            client = self._client_for_loop()
            delay = self._backoff * (2**attempt)
            try:
                response = await client.post(self.url, json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if attempt >= self._max_retries:
                    raise EmbedderError(
                        f"embeddings server {self.url} unreachable after {attempt + 1} attempts "
                        f"({type(exc).__name__}: {exc}); check embedding_api_url and the server"
                    ) from None
            else:
                if response.status_code not in TRANSIENT_STATUS:
                    rows = _parse(response, self.url, len(texts))
                    arr = np.asarray(rows, dtype=np.float32)
                    if arr.shape != (len(texts), self.dimensions):
                        raise EmbedderError(
                            f"{self.url} returned vectors of shape {arr.shape}; expected "
                            f"{(len(texts), self.dimensions)} (is embedding_dimensions right?)"
                        )
                    return arr
                if attempt >= self._max_retries:
                    raise EmbedderError(
                        f"embeddings server {self.url} answered HTTP {response.status_code} "
                        f"{attempt + 1} times: {_snippet(response)}; try again later"
                    )
                delay = max(delay, _retry_after(response))
            attempt += 1
            logger.warning(
                "embeddings request failed (attempt %s of %s); retrying in %.2fs",
                attempt,
                self._max_retries + 1,
                delay,
            )
            await asyncio.sleep(delay)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, url={self.url!r})"


def _snippet(response: Any) -> str:
    try:
        body = response.json()
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
        if isinstance(message, str):
            return message[:300]
    except ValueError:
        pass
    return str(response.text)[:300]


def _retry_after(response: Any) -> float:
    value = response.headers.get("retry-after")
    try:
        return min(float(value), 30.0) if value is not None else 0.0
    except ValueError:
        return 0.0


def _parse(response: Any, url: str, count: int) -> list[list[float]]:
    status = response.status_code
    if status in (401, 403):
        raise EmbedderError(
            f"{url} refused the credentials (HTTP {status}: {_snippet(response)}); set "
            "embedding_api_key (ACTRONE_EMBEDDING_API_KEY) to a valid key"
        )
    if status == 404:
        raise EmbedderError(
            f"{url} answered 404 ({_snippet(response)}); check embedding_api_url and "
            "embedding_model"
        )
    if status >= 400:
        raise EmbedderError(f"{url} answered HTTP {status}: {_snippet(response)}")
    try:
        body = response.json()
        data = sorted(body["data"], key=lambda d: d.get("index", 0))
        rows = [d["embedding"] for d in data]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise EmbedderError(
            f"{url} did not answer like an OpenAI embeddings endpoint: {str(response.text)[:200]}"
        ) from None
    if len(rows) != count:
        raise EmbedderError(f"{url} returned {len(rows)} vectors for {count} texts")
    return rows


def from_config(config: MemoryConfig) -> OpenAIEmbedder:
    """The embedder ``embedding_provider="openai"`` builds (used by ``create_embedder``)."""
    model = config.embedding_model or DEFAULT_MODEL
    kwargs: dict[str, Any] = {
        "model": model,
        "api_url": config.embedding_api_url or DEFAULT_API_URL,
        "api_key": config.embedding_api_key or os.environ.get("OPENAI_API_KEY"),
        "send_dimensions": config.embedding_dimensions is not None,
    }
    if config.embedding_dimensions is None and model not in KNOWN_DIMENSIONS:
        return OpenAIEmbedder.probe(**kwargs)
    return OpenAIEmbedder(dimensions=config.embedding_dimensions, **kwargs)
