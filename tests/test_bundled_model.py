"""The bundled model (Q2): the package's int8 weights run as integer products, built once
into the user's cache. A text's vector is its own whatever it is embedded with; the
integer graph stays close to the package's float32 one; a cache that is missing, broken,
unwritable or built by two processes at once still gives the same model. The real
model, real files, real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memdir.errors import EmbeddingError
from memdir.settings import load_settings
from memdir.storage import embeddings

pytestmark = pytest.mark.skipif(not embeddings.available(), reason="no embeddings extra")

TEXTS = [
    "we picked PostgreSQL for billing because of row-level security",
    "the deploy script lives in ops/deploy.sh",
    "standup",
    "Ada prefers tabs over spaces and reviews every migration herself, "
    "usually on Thursday mornings before the release train leaves at noon",
    "the cat sleeps on the keyboard",
    "a feline pet",
]

# a child process loading the model: its id, whether onnx was imported, its vectors
CHILD = """\
import json, sys
from memdir.storage import embeddings
assert embeddings.preload(lambda: False)  # as a server's background load does
model = embeddings.MiniLM()
vectors = model.embed(json.loads(sys.argv[1]))
print(json.dumps({"name": model.name, "onnx": "onnx" in sys.modules,
                  "vectors": vectors.tolist()}))
"""


def child(cache: Path, texts: list[str]) -> dict[str, object]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(texts)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def graphs(cache: Path) -> list[str]:
    folder = cache / "memdir"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_a_texts_vector_is_its_own_whatever_it_is_embedded_with() -> None:  # Q2
    model = embeddings.default_embedder()
    together = model.embed(TEXTS)
    for i, text in enumerate(TEXTS):
        alone = model.embed([text])[0]
        assert (alone == together[i]).all(), text
    assert (model.embed(list(reversed(TEXTS)))[::-1] == together).all()


def test_the_integer_graph_keeps_the_meaning_of_the_float_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # Q2
    model = embeddings.default_embedder()
    assert model.name == embeddings.DEFAULT_MODEL
    monkeypatch.setattr(embeddings, "INTEGER", False)
    shipped = embeddings.MiniLM()
    assert shipped.name == embeddings.SHIPPED_MODEL
    now, before = model.embed(TEXTS), shipped.embed(TEXTS)
    assert ((now * before).sum(axis=1) > 0.97).all()
    # what is alike stays alike: the cat is nearer the feline pet than anything else
    for vectors in (now, before):
        nearest = (vectors[4] @ vectors.T).argsort()[::-1][1]
        assert TEXTS[nearest] == "a feline pet"


def test_the_graph_is_built_once_and_then_loaded_without_onnx(tmp_path: Path) -> None:  # Q2
    first = child(tmp_path, TEXTS)
    assert first["name"] == embeddings.DEFAULT_MODEL
    assert first["onnx"] is True  # it built the graph
    built = graphs(tmp_path)
    assert len(built) == 1 and built[0].endswith(".onnx")
    second = child(tmp_path, TEXTS)
    assert second["onnx"] is False  # it read the cached graph
    assert second["vectors"] == first["vectors"]
    assert graphs(tmp_path) == built


def test_a_broken_or_unwritable_cache_still_gives_the_model(tmp_path: Path) -> None:  # Q2
    good = child(tmp_path / "good", TEXTS[:2])
    [name] = graphs(tmp_path / "good")
    broken = tmp_path / "broken"
    (broken / "memdir").mkdir(parents=True)
    (broken / "memdir" / name).write_bytes(b"half a graph")
    assert child(broken, TEXTS[:2])["vectors"] == good["vectors"]
    again = child(broken, TEXTS[:2])  # the broken graph was replaced
    assert again["onnx"] is False and again["vectors"] == good["vectors"]
    unwritable = tmp_path / "unwritable"
    unwritable.mkdir()
    (unwritable / "memdir").write_text("a file where the folder would be\n")
    assert child(unwritable, TEXTS[:2])["vectors"] == good["vectors"]
    assert (unwritable / "memdir").read_text() == "a file where the folder would be\n"


def test_two_processes_building_at_once_leave_one_graph(tmp_path: Path) -> None:  # Q2
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    argv = [sys.executable, "-c", CHILD, json.dumps(TEXTS[:3])]
    runs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [json.loads(run.communicate(timeout=120)[0]) for run in runs]
    assert all(run.returncode == 0 for run in runs)
    assert all(out["vectors"] == outs[0]["vectors"] for out in outs)
    built = graphs(tmp_path)
    assert len(built) == 1 and built[0].endswith(".onnx")  # no part file left behind


def test_a_graph_memdir_does_not_know_is_refused_in_one_line(tmp_path: Path) -> None:  # Q2
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 4), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "float",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [weight],
    )
    path = tmp_path / "other.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(EmbeddingError) as caught:
        embeddings.integer_graph(str(path))
    assert "not the graph memdir knows" in str(caught.value)
    assert "\n" not in str(caught.value)


def test_every_integer_product_is_exact_on_every_cpu() -> None:  # Q2
    """uint8 x int8 sums saturate in 16 bits on x86 without VNNI, so the same text got
    another vector (and the model another calibration) on another machine. Every product
    of the rewritten graph is uint8 x uint8, the weights the package's shifted by 128."""
    import numpy as np
    import onnx
    from onnx import TensorProto, numpy_helper

    source = embeddings._shipped()
    original_graph = onnx.load(source).graph
    shipped = {i.name: i for i in original_graph.initializer}
    made_by = {out: node for node in original_graph.node for out in node.output}
    float_products = [
        node
        for node in original_graph.node
        if embeddings._int8_product(node, made_by, shipped) is not None
    ]
    graph = onnx.load_from_string(embeddings.integer_graph(source)).graph
    initial = {i.name: i for i in graph.initializer}
    products = [node for node in graph.node if node.op_type == "MatMulInteger"]
    assert float_products and len(products) == len(float_products)  # every one rewritten
    for node in products:
        weight, zero = initial[node.input[1]], initial[node.input[3]]
        assert weight.data_type == zero.data_type == TensorProto.UINT8
        assert numpy_helper.to_array(zero) == 128
        name = node.input[1].removeprefix("memdir_").removesuffix("_u8")
        original = numpy_helper.to_array(shipped[name])
        assert original.dtype == np.int8
        assert np.array_equal(numpy_helper.to_array(weight).astype(np.int16) - 128, original)
        assert name not in initial  # the int8 copy is gone


@pytest.mark.parametrize("model", [embeddings.DEFAULT_MODEL, embeddings.SHIPPED_MODEL])
def test_config_may_name_the_bundled_model_by_either_id(tmp_path: Path, model: str) -> None:
    """Q2 S: a config.toml written before the integer graph still loads."""
    (tmp_path / "config.toml").write_text(
        f'[embeddings]\nprovider = "bundled"\nmodel = "{model}"\n', encoding="utf-8"
    )
    settings = load_settings(str(tmp_path / "config.toml"))
    assert settings.embeddings_provider == "bundled"
