"""Which embedding model a store's search uses (Q2), and loading it.

The bundled MiniLM (embeddings.py) is the default and works offline. `[embeddings]` in
config.toml picks another: a sentence-transformers or fastembed model by name, or any
OpenAI-compatible embeddings endpoint (Ollama, llama.cpp, vLLM, a hosted API) by URL, its
key read from the environment variable `api_key_env` names, never from the file. Each is
an optional extra, imported only when the model is loaded: nothing here imports one, and
`model_id` names the model without loading it (a search asks the warm worker by that name).

The id is what vectors record (the `model` column): the bundled model keeps its old name,
so existing stores keep their vectors; the others are `provider:model` (`@dims` when the
endpoint is asked for a size). A different id is a different vector space: search compares
a question only with vectors of its own model, and `memdir reindex` re-embeds after a change.
"""

from __future__ import annotations

import _thread
import contextlib
import os

from ..errors import EmbeddingError, MissingExtraError
from ..records import Record
from . import embeddings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ..types import Embedder
    from .embeddings import Vectors

PROVIDERS = ("bundled", "sentence-transformers", "fastembed", "openai")
# the model each provider uses when [embeddings] model is not given (openai: required)
DEFAULT_MODELS = {
    "bundled": embeddings.DEFAULT_MODEL,
    "sentence-transformers": "sentence-transformers/all-MiniLM-L6-v2",
    "fastembed": "BAAI/bge-small-en-v1.5",
}
EXTRAS = {
    "bundled": "embeddings",
    "sentence-transformers": "sentence-transformers",
    "fastembed": "fastembed",
    "openai": "endpoint",
}
REQUIRED = {
    "bundled": embeddings.REQUIRED,
    "sentence-transformers": ("numpy", "sentence_transformers"),
    "fastembed": ("numpy", "fastembed"),
    "openai": ("numpy",),
}
DEFAULT_URL = "http://localhost:11434/v1"  # Ollama's OpenAI-compatible API
BATCH = 64  # texts a request to an endpoint carries


class Choice(Record):
    """The [embeddings] table, checked (settings.py)."""

    provider: str = "bundled"
    model: str = ""  # "" : the provider's default
    url: str = DEFAULT_URL
    api_key_env: str = ""  # the environment variable holding the endpoint's key
    dimensions: int = 0  # 0: the model's own size (an endpoint may be asked for fewer)
    timeout: float = 30.0  # seconds one request to an endpoint may take
    path: str = ""  # fastembed: a folder holding the model's files (no fetch from the hub)

    @property
    def model_name(self) -> str:
        return self.model or DEFAULT_MODELS.get(self.provider, "")


BUNDLED = Choice()


def model_id(choice: Choice) -> str:
    """The name vectors of this model are stored under: cheap, loads nothing."""
    if choice.provider == "bundled":
        return embeddings.DEFAULT_MODEL
    size = f"@{choice.dimensions}" if choice.provider == "openai" and choice.dimensions else ""
    return f"{choice.provider}:{choice.model_name}{size}"


def loadable(model: str) -> bool:
    """Whether `model` is an id memdir itself loads from a configuration (not a caller's
    own Embedder): those get their calibration measured once (search/calibration.py)."""
    return model.split(":", 1)[0] in PROVIDERS[1:] and ":" in model


def available(choice: Choice) -> bool:
    """Whether the chosen provider's extra is installed (finds, does not import)."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in REQUIRED[choice.provider])


def install_hint(choice: Choice) -> str:
    """What a missing extra's one-line message says: the command that installs it."""
    if choice.provider == "bundled":
        return embeddings.install_hint()
    from ..extras import install_command

    extra = EXTRAS[choice.provider]
    what = "an OpenAI-compatible endpoint" if choice.provider == "openai" else choice.provider
    return (
        f"[embeddings] provider = {choice.provider!r} needs the {extra} extra for {what}; "
        f"install it with: {install_command(extra)}"
    )


_loaded: dict[Choice, Embedder] = {}  # by the whole choice: a new url is a new endpoint
_loading = _thread.allocate_lock()


def load(choice: Choice) -> Embedder:
    """The process's one instance of the chosen model, loaded on first use;
    MissingExtraError when its extra is not installed, EmbeddingError when it cannot be
    loaded (a model name the library does not know, an endpoint that does not answer)."""
    if choice.provider == "bundled":
        return embeddings.default_embedder()
    found = _loaded.get(choice)
    if found is not None:
        return found
    if not available(choice):
        raise MissingExtraError(install_hint(choice), extra=EXTRAS[choice.provider])
    with _loading:
        found = _loaded.get(choice)
        if found is None:
            found = _make(choice, model_id(choice))
            _loaded[choice] = found
    return found


def _make(choice: Choice, name: str) -> Embedder:
    if choice.provider == "openai":
        return Endpoint(choice, name)
    if choice.provider == "fastembed":
        return FastEmbed(choice.model_name, name, choice.path)
    return SentenceTransformerModel(choice.model_name, name)


def preload(choice: Choice, stop: Callable[[], bool]) -> bool:
    """embeddings.preload for the chosen model: its libraries imported one at a time,
    `stop` asked between them (a thread must be able to end at a boundary)."""
    if choice.provider == "bundled":
        return embeddings.preload(stop)
    from importlib import import_module

    for module in REQUIRED[choice.provider]:
        if stop():
            return False
        with _loading:
            import_module(module)
    return not stop()


def _normalised(vectors: Any) -> Vectors:
    import numpy as np

    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim != 2:
        array = array.reshape(len(array), -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    result: Vectors = (array / np.clip(norms, 1e-12, None)).astype(np.float32)
    return result


class SentenceTransformerModel:
    """A sentence-transformers model by name or local path (on CPU); the library fetches
    it from the Hugging Face hub on first use unless it is in the local cache."""

    def __init__(self, model: str, name: str) -> None:
        from sentence_transformers import SentenceTransformer

        with contextlib.suppress(ImportError, AttributeError):  # its bar would hit stderr
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()
        try:
            self._model = SentenceTransformer(model, device="cpu")
        except Exception as exc:  # the library raises OSError, ValueError, HTTP errors...
            raise EmbeddingError(
                f"cannot load the sentence-transformers model {model!r}: {_why(exc)}"
            ) from exc
        self.name = name
        size = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension  # before sentence-transformers 6
        )
        self.dim = int(size() or 0)

    def embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        found = self._model.encode(
            texts, batch_size=32, convert_to_numpy=True, show_progress_bar=False
        )
        return _normalised(found)


class FastEmbed:
    """A fastembed model (ONNX, no torch) by name; fastembed fetches it on first use
    unless it is in its cache ($FASTEMBED_CACHE_PATH) or `path` names a folder holding its
    files (model.onnx, tokenizer.json and the configs beside them)."""

    def __init__(self, model: str, name: str, path: str = "") -> None:
        from fastembed import TextEmbedding

        local = {"specific_model_path": path} if path else {}
        try:
            self._model = TextEmbedding(
                model_name=model, threads=min(2, os.cpu_count() or 1), **local
            )
        except Exception as exc:  # an unknown model is a ValueError, a failed fetch anything
            raise EmbeddingError(f"cannot load the fastembed model {model!r}: {_why(exc)}") from exc
        self.name = name
        self.dim = int(self.embed(["the size of a vector"]).shape[1])

    def embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        return _normalised(np.stack(list(self._model.embed(texts, batch_size=32))))


class Endpoint:
    """An OpenAI-compatible `POST {url}/embeddings`: {"model", "input": [texts]} answered
    by {"data": [{"index", "embedding"}]}. The key, when `api_key_env` names a variable,
    goes in an `Authorization: Bearer` header and nowhere else (not in a message, not in
    the store). Vectors are L2-normalised here: not every server does."""

    def __init__(self, choice: Choice, name: str) -> None:
        base = choice.url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self.model = choice.model_name
        self.timeout = choice.timeout
        self.name = name
        self._size = choice.dimensions
        self._key: str | None = None
        if choice.api_key_env:
            self._key = os.environ.get(choice.api_key_env) or None
            if self._key is None:
                raise EmbeddingError(
                    f"the embeddings endpoint's key is read from ${choice.api_key_env}, "
                    "which is not set: export it, or remove api_key_env from [embeddings]"
                )
        self.dim = choice.dimensions or 0
        if not self.dim:
            self.dim = int(self.embed(["the size of a vector"]).shape[1])

    def embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._request(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
        out = np.concatenate(parts)
        if self.dim and out.shape[1] != self.dim:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered vectors of {out.shape[1]} "
                f"dimensions for model {self.model!r}, not {self.dim}: the model behind it "
                "changed; run `memdir reindex`"
            )
        return out

    def _request(self, texts: list[str]) -> Vectors:
        import json
        import urllib.error
        import urllib.request

        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self._size:
            body["dimensions"] = self._size
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read(300).decode("utf-8", "replace").strip()
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered HTTP {exc.code}"
                + (f": {detail}" if detail else "")
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise EmbeddingError(
                f"cannot reach the embeddings endpoint {self.url}: {_why(exc)}"
            ) from exc
        except ValueError as exc:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered something that is not JSON"
            ) from exc
        try:
            rows = sorted(answer["data"], key=lambda row: int(row["index"]))
            vectors = [row["embedding"] for row in rows]
            if len(vectors) != len(texts) or not all(
                isinstance(v, list) and v and len(v) == len(vectors[0]) for v in vectors
            ):
                raise ValueError("a vector per text, all of one size")
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(
                f"the embeddings endpoint {self.url} answered without {len(texts)} vectors "
                'in "data" (is it OpenAI-compatible?)'
            ) from exc
        return _normalised(vectors)


def _why(exc: BaseException) -> str:
    """An exception as a short phrase for a one-line message."""
    reason = getattr(exc, "reason", None)
    text = str(reason if reason is not None else exc) or type(exc).__name__
    return " ".join(text.split())[:300]


__all__ = [
    "BUNDLED",
    "PROVIDERS",
    "Choice",
    "Endpoint",
    "available",
    "install_hint",
    "load",
    "loadable",
    "model_id",
    "preload",
]
