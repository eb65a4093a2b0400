"""Embedders: the offline MiniLM model, the hashing embedder, the OpenAI-compatible client
against the fake server, and the factory."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest

from episodic.config import EmbeddingSettings
from episodic.errors import ProviderError
from episodic.providers import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
    RetryPolicy,
    make_embedder,
)
from tests.providers.fake_openai import FakeOpenAI


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder(threads=1)
    embedder.check()
    return embedder


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


# --------------------------------------------------------------------------- MiniLM


def test_minilm_loads_offline_and_is_384_d_unit_rows(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["a short text", "another one, a bit longer than the first"])
    assert vectors.shape == (2, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert isinstance(minilm, Embedder)
    assert minilm.dimension == 384


def test_minilm_paraphrases_are_closer_than_unrelated_texts(minilm: MiniLMEmbedder) -> None:
    a, b, c = minilm.embed(
        [
            "I'm looking for a compact family car that costs less than $30k.",
            "We want an affordable small car for the family, under thirty thousand dollars.",
            "The quarterly tax report is due to the accountant on Friday.",
        ]
    )
    assert _cos(a, b) > _cos(a, c) + 0.2
    query = minilm.embed_query("car recommendations")
    assert _cos(query, a) > _cos(query, c)


def test_minilm_batch_equals_single(minilm: MiniLMEmbedder) -> None:
    texts = [
        "ok",
        "The user rejected SUVs as too big.",
        "A long message " * 200,  # longer than the 256-token window: truncated, not an error
        "",
        "Ünïcödé and emoji 🚗 work too.",
    ]
    batch = minilm.embed(texts)
    single = np.stack([minilm.embed_query(t) for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-4)


def test_minilm_small_batches_equal_one_batch(minilm: MiniLMEmbedder) -> None:
    texts = [f"message number {i} about {'cars ' * (i % 7)}" for i in range(10)]
    small = MiniLMEmbedder(threads=1, batch_size=3)
    np.testing.assert_allclose(small.embed(texts), minilm.embed(texts), atol=1e-4)


def test_minilm_empty_input(minilm: MiniLMEmbedder) -> None:
    assert minilm.embed([]).shape == (0, 384)


# --------------------------------------------------------------------------- hashing


def test_hashing_is_deterministic_with_configured_dimension() -> None:
    a = HashingEmbedder(64).embed(["Hello world", "hello   WORLD"])
    b = HashingEmbedder(64).embed(["Hello world"])
    assert a.shape == (2, 64)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[0], a[1])  # case and spacing do not matter
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)


def test_hashing_shared_words_give_higher_cosine() -> None:
    e = HashingEmbedder()
    base, near, far = e.embed(
        ["family car under 30k", "a cheap family car", "quarterly tax report due"]
    )
    assert _cos(base, near) > _cos(base, far)
    assert _cos(base, near) > 0.2


def test_hashing_empty_text_is_a_unit_vector() -> None:
    # A zero vector would make pgvector's cosine distance NaN.
    vector = HashingEmbedder(16).embed_query("")
    assert np.isclose(np.linalg.norm(vector), 1.0)


# --------------------------------------------------------------------------- OpenAI-compatible


def _client(fake: FakeOpenAI, policy: RetryPolicy, **kwargs: Any) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        base_url=fake.base_url, model="text-embed", dimension=384, retry=policy, **kwargs
    )


def test_openai_embedder_good_response(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    with _client(fake, policy, api_key="sk-test") as embedder:
        vectors = embedder.embed(["family car", "tax report"])
        embedder.check()
    expected = HashingEmbedder(384).embed(["family car", "tax report"])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    request = fake.requests_to("embeddings")[0]
    assert request.json() == {"model": "text-embed", "input": ["family car", "tax report"]}
    assert request.headers["authorization"] == "Bearer sk-test"


def test_openai_embedder_reorders_by_index_and_batches(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    a, b = [1.0] + [0.0] * 383, [0.0, 1.0] + [0.0] * 382
    fake.enqueue_embeddings(
        body={"data": [{"index": 1, "embedding": b}, {"index": 0, "embedding": a}]}
    )
    with _client(fake, policy, batch_size=2) as embedder:
        first = embedder.embed(["x", "y"])
        assert first[0][0] == 1.0 and first[1][1] == 1.0
        assert embedder.embed(["1", "2", "3", "4", "5"]).shape == (5, 384)
    assert [len(r.json()["input"]) for r in fake.requests_to("embeddings")] == [2, 2, 2, 1]


def test_openai_embedder_sends_dimensions_when_asked(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    embedder = OpenAIEmbedder(
        base_url=fake.base_url, model="m", dimension=768, retry=policy, send_dimensions=True
    )
    assert embedder.embed(["x"]).shape == (1, 768)
    assert fake.requests_to("embeddings")[0].json()["dimensions"] == 768


def test_openai_embedder_wrong_dimension(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    fake.enqueue_embeddings([[0.1] * 768])
    with pytest.raises(ProviderError, match=r"768-dimensional embeddings but 384 are configured"):
        _client(fake, policy).embed(["x"])


def test_openai_embedder_wrong_count(fake: FakeOpenAI, policy: RetryPolicy) -> None:
    fake.enqueue_embeddings([[0.1] * 384])
    with pytest.raises(ProviderError, match=r"sent 2 text\(s\) but received 1 embedding"):
        _client(fake, policy).embed(["x", "y"])


@pytest.mark.parametrize(
    "body",
    [
        {"object": "list"},
        {"data": [{"index": 0, "embedding": "abc"}]},
        "not json at all",
    ],
)
def test_openai_embedder_malformed_response(
    fake: FakeOpenAI, policy: RetryPolicy, body: object
) -> None:
    fake.enqueue_embeddings(body=body)
    with pytest.raises(ProviderError, match="openai:text-embed"):
        _client(fake, policy).embed(["x"])


def test_openai_embedder_retries_429_honouring_retry_after(
    fake: FakeOpenAI, policy: RetryPolicy, waits: list[float]
) -> None:
    fake.enqueue_embeddings(status=429, headers={"Retry-After": "2"})
    fake.enqueue_embeddings(status=503)
    assert _client(fake, policy).embed(["x"]).shape == (1, 384)
    assert len(fake.requests_to("embeddings")) == 3
    assert waits[0] == 2.0  # the server's Retry-After
    assert 0 < waits[1] <= 0.004  # exponential backoff otherwise


def test_openai_embedder_caps_retry_after(
    fake: FakeOpenAI, policy: RetryPolicy, waits: list[float]
) -> None:
    fake.enqueue_embeddings(status=429, headers={"Retry-After": "3600"})
    _client(fake, policy).embed(["x"])
    assert waits == [5.0]


def test_openai_embedder_does_not_retry_client_errors(
    fake: FakeOpenAI, policy: RetryPolicy
) -> None:
    fake.enqueue_embeddings(status=400, body={"error": {"message": "unknown model"}})
    with pytest.raises(ProviderError, match=r"HTTP 400.*unknown model"):
        _client(fake, policy).embed(["x"])
    assert len(fake.requests_to("embeddings")) == 1


def test_openai_embedder_connection_refused(policy: RetryPolicy, waits: list[float]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    embedder = OpenAIEmbedder(
        base_url=f"http://127.0.0.1:{port}/v1", model="m", dimension=8, retry=policy
    )
    with pytest.raises(ProviderError, match="cannot reach"):
        embedder.embed(["x"])
    assert len(waits) == 3  # retried max_retries times


# --------------------------------------------------------------------------- factory


def test_make_embedder_minilm_refuses_other_dimensions() -> None:
    with pytest.raises(ProviderError, match=r"384-dimensional.*dimension is 768"):
        make_embedder(EmbeddingSettings(embedding_provider="minilm"), 768)
    assert isinstance(
        make_embedder(EmbeddingSettings(embedding_provider="minilm"), 384), MiniLMEmbedder
    )


def test_make_embedder_hashing_and_openai(fake: FakeOpenAI) -> None:
    hashing = make_embedder(EmbeddingSettings(embedding_provider="hashing"), 32)
    assert isinstance(hashing, HashingEmbedder) and hashing.dimension == 32
    settings = EmbeddingSettings(
        embedding_provider="openai",
        embedding_base_url=fake.base_url,
        embedding_model="nomic-embed-text",
        embedding_api_key="sk-x",  # type: ignore[arg-type]
    )
    openai = make_embedder(settings, 384)
    assert isinstance(openai, OpenAIEmbedder)
    openai.check()
    assert fake.requests_to("embeddings")[0].headers["authorization"] == "Bearer sk-x"


class _CountingEmbedder(HashingEmbedder):
    """A real hashing embedder that remembers which texts reached it."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.seen += texts
        return super().embed(texts)


def test_cached_embedder_embeds_each_distinct_text_once_with_the_same_vectors() -> None:
    from episodic.providers.embedding import CachedEmbedder

    inner = _CountingEmbedder()
    cached = CachedEmbedder(inner, size=10)
    first = cached.embed(["a b", "c d", "a b"])
    again = cached.embed(["c d", "e f"])
    assert inner.seen == ["a b", "c d", "e f"]
    np.testing.assert_allclose(first[0], first[2])
    np.testing.assert_allclose(again[0], first[1])
    np.testing.assert_allclose(again[1], HashingEmbedder().embed(["e f"])[0])


def test_a_chunk_vector_is_the_embedding_of_the_chunk_text_through_the_shared_cache() -> None:
    """The index embeds each chunk's own text (what the relevance curve was fitted on), and
    a chunk the worker's batched call already embedded costs no second model call."""
    from episodic.providers.embedding import CachedEmbedder
    from episodic.store.recall_index import Chunk, chunk_vectors

    chunk = Chunk(1, 0, 2, "Caroline: I adopted a dog. He is called Rex.\nMel: Nice dog")
    inner = _CountingEmbedder()
    cached = CachedEmbedder(inner, size=10)
    cached.embed([chunk.text])  # the worker's batched call
    (vector,) = chunk_vectors([chunk], cached)
    assert inner.seen == [chunk.text]
    np.testing.assert_allclose(vector, HashingEmbedder().embed([chunk.text])[0], rtol=1e-5)


def test_e5_matches_meaning_across_french_spanish_and_german() -> None:
    from episodic.providers import E5Embedder

    e5 = make_embedder(EmbeddingSettings(embedding_provider="e5"), 384)
    assert isinstance(e5, E5Embedder) and isinstance(e5, Embedder)
    passages = e5.embed(
        [
            "Nous avons réservé le vol pour Lisbonne avec easyJet.",  # fr: the flight
            "El perro se llama Toby y tiene tres años.",  # es: the dog
            "Die Steuererklärung muss bis Ende Juli beim Finanzamt sein.",  # de: taxes
        ]
    )
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    for query, gold in (
        ("Quelle compagnie aérienne ai-je choisie ?", 0),
        ("¿Cómo se llama mi mascota?", 1),
        ("Wann ist die Frist für die Steuer?", 2),
    ):
        scores = passages @ e5.embed_query(query)
        assert int(np.argmax(scores)) == gold, (query, scores)


def test_e5_refuses_another_dimension() -> None:
    with pytest.raises(ProviderError, match="EPISODIC_EMBEDDING_DIMENSION=384"):
        make_embedder(EmbeddingSettings(embedding_provider="e5"), 768)


# --------------------------------------------------------------------------- MiniLM arithmetic


def test_int8_graph_multiplies_every_weight_matrix_in_integers() -> None:
    import onnx

    from episodic.providers.embedding import int8_activations_graph, minilm_model_path

    shipped = onnx.load(str(minilm_model_path()))
    rewritten = onnx.load_from_string(int8_activations_graph(minilm_model_path().read_bytes()))
    ops = [n.op_type for n in rewritten.graph.node]
    # 6 layers x (query, key, value, attention output, two feed-forward): 36 weight
    # products, now integer; the attention's 12 activation products stay float.
    assert ops.count("MatMulInteger") == 36
    assert ops.count("MatMul") == 12
    assert [n.op_type for n in shipped.graph.node].count("MatMul") == 48
    onnx.checker.check_model(rewritten)


def _one_weight_product(weights: np.ndarray, scales: np.ndarray) -> bytes:
    """A graph of the shipped pattern, MatMul(X, Mul(Cast(int8 W), column scales))."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    depth, width = weights.shape
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["w"], ["wf"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["wf", "scales"], ["ws"]),
            helper.make_node("MatMul", ["x", "ws"], ["y"], name="product"),
        ],
        "one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, None, depth])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None, width])],
        [numpy_helper.from_array(weights, "w"), numpy_helper.from_array(scales, "scales")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def _run(graph: bytes, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


def test_int8_products_are_exact_on_this_cpu() -> None:
    """The rewritten product equals its documented arithmetic computed exactly: each row
    quantised to int8 by its own scale, an integer product, then the two scales. On CPUs
    whose uint8 x int8 kernel saturates (AVX2 without VNNI) the weights go through the
    uint8 x uint8 kernel instead; without that, about half of these outputs were wrong."""
    from episodic.providers.embedding import int8_activations_graph

    rng = np.random.default_rng(7)
    depth, width = 384, 256
    weights = rng.integers(-127, 128, (depth, width), dtype=np.int8)
    scales = rng.uniform(0.001, 0.01, width).astype(np.float32)
    x = rng.standard_normal((2, 64, depth)).astype(np.float32)
    x[..., :4] *= 8  # a few outlier channels, as a transformer's activations have
    got = _run(int8_activations_graph(_one_weight_product(weights, scales)), x)

    rows = x.reshape(-1, depth)
    scale = np.maximum(np.abs(rows).max(axis=1, keepdims=True), np.float32(1e-8)) / np.float32(127)
    quantised = np.round(rows / scale).astype(np.int64)
    exact = (quantised @ weights.astype(np.int64)).astype(np.float32) * scale * scales
    np.testing.assert_allclose(got.reshape(-1, width), exact, rtol=1e-6, atol=1e-6)


def test_signed_and_shifted_weights_compute_the_same_products() -> None:
    """The two forms of the weights are the same integers: where this CPU multiplies
    uint8 by int8 exactly, both graphs give the same outputs bit for bit."""
    from episodic.providers.embedding import (
        int8_activations_graph,
        signed_weights_multiply_exactly,
    )

    if not signed_weights_multiply_exactly():
        pytest.skip("this CPU's uint8 x int8 kernel saturates: only the shifted form is exact")
    rng = np.random.default_rng(8)
    weights = rng.integers(-127, 128, (128, 64), dtype=np.int8)
    graph = _one_weight_product(weights, np.full(64, 0.01, dtype=np.float32))
    x = rng.standard_normal((1, 16, 128)).astype(np.float32)
    signed = _run(int8_activations_graph(graph, signed_weights=True), x)
    shifted = _run(int8_activations_graph(graph, signed_weights=False), x)
    assert np.array_equal(signed, shifted)


def test_int8_vectors_stay_close_to_float_and_keep_the_meaning(minilm: MiniLMEmbedder) -> None:
    texts = [
        "I'm looking for a compact family car that costs less than $30k.",
        "We want an affordable small car for the family, under thirty thousand dollars.",
        "The quarterly tax report is due to the accountant on Friday.",
        "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
        "A long message " * 200,
    ]
    as_float = MiniLMEmbedder(threads=1, compute="float").embed(texts)
    as_int8 = MiniLMEmbedder(threads=1, compute="int8").embed(texts)
    cosines = (as_float * as_int8).sum(axis=1)
    assert cosines.min() > 0.98, cosines
    assert not np.allclose(as_float, as_int8, atol=1e-3)  # really another arithmetic
    a, b, c = as_int8[:3]
    assert _cos(a, b) > _cos(a, c) + 0.2
    assert minilm.compute == "int8"  # the default


def test_int8_vector_of_a_text_does_not_depend_on_its_run() -> None:
    """Rows are quantised one by one: a text embedded alone (a query), padded in a run of
    longer texts, or next to a text with large activations, gets the same vector."""
    embedder = MiniLMEmbedder(threads=1, compute="int8")
    text = "We agreed on the Pro tier at $29 for project Atlas."
    alone = embedder.embed([text])[0]
    padded = embedder.embed([text, "word " * 150, "!!!! ???? 1234567890 " * 20])[0]
    np.testing.assert_allclose(alone, padded, atol=1e-5)


def test_make_embedder_passes_the_arithmetic_and_settings_refuse_others() -> None:
    from pydantic import ValidationError

    built = make_embedder(
        EmbeddingSettings(embedding_provider="minilm", embedding_compute="float"), 384
    )
    assert isinstance(built, MiniLMEmbedder) and built.compute == "float"
    with pytest.raises(ValidationError):
        EmbeddingSettings(embedding_compute="int4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compute"):
        MiniLMEmbedder(compute="int4")


# --------------------------------------------------------------------------- late chunking


def test_late_span_vector_of_a_one_window_document_is_the_mean_of_its_tokens(
    minilm: MiniLMEmbedder,
) -> None:
    """A span's late vector is the normalised mean of the model's token vectors over the
    span's word pieces, read once with the whole document ([CLS] document [SEP])."""
    from episodic.providers import SpanDocument
    from episodic.providers.embedding import _load_minilm

    text = "Caroline: I adopted a dog last week.\nMel: What is he called?\nCaroline: Rex!"
    second = (text.index("Mel"), text.index("?") + 1)
    document = SpanDocument(text, ((0, second[0] - 1), second))
    (vectors,) = minilm.embed_spans([document])

    model = _load_minilm(1, 256, "int8")
    encoding = model.tokenizer.encode(text)  # with [CLS] and [SEP]
    ids = np.array([encoding.ids], dtype=np.int64)
    (hidden,) = model.session.run(
        ["last_hidden_state"],
        {
            "input_ids": ids,
            "attention_mask": np.ones_like(ids),
            "token_type_ids": np.zeros_like(ids),
        },
    )
    for vector, (start, end) in zip(vectors, document.spans, strict=True):
        inside = [
            i
            for i, (a, b) in enumerate(encoding.offsets)
            if encoding.special_tokens_mask[i] == 0 and start <= a and b <= end
        ]
        expected = hidden[0, inside].mean(axis=0)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-5)
    assert vectors.shape == (2, 384)
    runs: list[int] = []

    class Counting(MiniLMEmbedder):
        def _hidden(self, model: Any, tokens: list[list[int]]) -> Any:
            runs.append(len(tokens))
            return super()._hidden(model, tokens)

    (nothing,) = Counting(threads=1).embed_spans([SpanDocument("Text nobody asked for.", ())])
    assert nothing.shape == (0, 384) and runs == []  # no span wanted: no model run


def test_late_windows_read_every_token_once_with_overlapping_context() -> None:
    embedder = MiniLMEmbedder(window_tokens=66, window_overlap=16)  # 64 word pieces a window
    for length in (1, 64, 65, 100, 129, 500):
        windows = embedder.windows(length)
        owned = [i for _, _, a, b in windows for i in range(a, b)]
        assert owned == list(range(length))  # each token from exactly one window
        for (start, end, own_start, own_end), following in zip(
            windows, [*windows[1:], None], strict=True
        ):
            assert start <= own_start <= own_end <= end and end - start <= 64
            if following is not None:  # consecutive windows overlap by at least 16
                assert end - following[0] >= 16
                # the owner of a token near the boundary reads >= 8 tokens past it
                assert end - own_end >= 8 and following[2] - following[0] >= 8


def test_late_vectors_of_a_long_document_keep_the_meaning_of_each_span() -> None:
    """A document read in several windows: each span (two lines on one topic, like a chunk
    of messages) gets a unit vector closest to its own topic, across window boundaries."""
    from episodic.providers import SpanDocument

    topics = [
        "I adopted a puppy from the shelter and we walk in the park every morning",
        "my car broke down on the highway and the mechanic replaced the gearbox",
        "we baked sourdough bread and a chocolate cake for grandma's birthday",
        "the quarterly tax return is due and the accountant wants the receipts",
    ]
    lines = [f"Speaker: {topics[(k // 2) % 4]}, part {k}." for k in range(24)]
    text = "\n".join(lines)
    spans = []
    for k in range(0, 24, 2):
        start = sum(len(line) + 1 for line in lines[:k])
        spans.append((start, start + len(lines[k]) + 1 + len(lines[k + 1])))
    embedder = MiniLMEmbedder(threads=1, window_tokens=64, window_overlap=16)
    pieces = embedder._model().document_tokenizer.encode(text, add_special_tokens=False)
    assert len(embedder.windows(len(pieces.ids))) > 4
    (late,) = embedder.embed_spans([SpanDocument(text, tuple(spans))])
    assert late.shape == (12, 384)
    np.testing.assert_allclose(np.linalg.norm(late, axis=1), 1.0, rtol=1e-5)
    own = embedder.embed(topics)
    assert [int(np.argmax(own @ v)) for v in late] == [k % 4 for k in range(12)]


def test_cached_embedder_pools_each_document_once() -> None:
    from episodic.providers import SpanDocument
    from episodic.providers.embedding import CachedEmbedder

    class Spans(HashingEmbedder):
        def __init__(self) -> None:
            super().__init__(8)
            self.read: list[str] = []

        def embed_spans(self, documents: list[SpanDocument]) -> list[np.ndarray]:
            self.read += [d.text for d in documents]
            return [self.embed([d.text[a:b] for a, b in d.spans]) for d in documents]

    inner = Spans()
    cached = CachedEmbedder(inner, size=64)
    one, two = SpanDocument("a b\nc d", ((0, 3), (4, 7))), SpanDocument("e f", ((0, 3),))
    first = cached.embed_spans([one, one])
    assert cached.uncached_documents([one, two]) == [two]
    again = cached.embed_spans([two, one])
    assert inner.read == ["a b\nc d", "e f"]
    np.testing.assert_allclose(again[1], first[0])
    with pytest.raises(TypeError, match="no token access"):
        CachedEmbedder(HashingEmbedder(8)).embed_spans([one])


def test_only_the_in_process_minilm_has_token_access(fake: FakeOpenAI) -> None:
    """EPISODIC_CHUNK_VECTORS=late needs token vectors: MiniLM has them; an HTTP embedder,
    e5 and the hashing embedder fall back to embedding each chunk separately."""
    from episodic.providers import CachedEmbedder, E5Embedder
    from episodic.providers.embedding import token_access
    from episodic.providers.factory import late_chunks

    late = EmbeddingSettings(chunk_vectors="late")
    assert EmbeddingSettings().chunk_vectors in ("late", "separate")
    minilm = MiniLMEmbedder()
    remote = make_embedder(
        EmbeddingSettings(
            embedding_provider="openai", embedding_base_url=fake.base_url, chunk_vectors="late"
        ),
        384,
    )
    assert token_access(minilm) and token_access(CachedEmbedder(minilm))
    assert late_chunks(late, minilm) and late_chunks(late, CachedEmbedder(minilm))
    assert not late_chunks(EmbeddingSettings(chunk_vectors="separate"), minilm)
    for other in (remote, E5Embedder(), HashingEmbedder()):
        assert not token_access(other) and not late_chunks(late, CachedEmbedder(other))


def test_the_graph_without_nan_guards_gives_the_same_vectors_bit_for_bit() -> None:
    """The attention's ``Where(IsNaN(p), 0, p)`` guards are dropped (an identity here, ~13 %
    of the time on long runs): every real token's vector is unchanged, padding included."""
    import onnx
    import onnxruntime as ort

    from episodic.providers.embedding import (
        int8_activations_graph,
        minilm_model_path,
        without_nan_guards,
    )

    shipped = minilm_model_path().read_bytes()
    lean = without_nan_guards(shipped)
    ops = [n.op_type for n in onnx.load_from_string(lean).graph.node]
    assert "IsNaN" not in ops and "IsNaN" in [
        n.op_type for n in onnx.load_from_string(shipped).graph.node
    ]
    rng = np.random.default_rng(7)
    ids = rng.integers(1000, 20000, size=(3, 40)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 25:] = 0  # a padded row, as in a run of texts of different lengths
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    for graph in (shipped, int8_activations_graph(shipped)):
        guarded = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
        unguarded = ort.InferenceSession(
            without_nan_guards(graph), providers=["CPUExecutionProvider"]
        )
        a = guarded.run(["last_hidden_state"], feeds)[0]
        b = unguarded.run(["last_hidden_state"], feeds)[0]
        real = mask.astype(bool)
        assert np.array_equal(a[real], b[real]) and not np.isnan(b).any()


def test_the_int8_kernel_choice_is_said_with_the_cpu(caplog: pytest.LogCaptureFixture) -> None:
    """Benchmarks print it and the model's load logs it: figures from machines with and
    without VNNI differ by ~1.5x, and an operator should see which kernel runs."""
    from episodic.providers import embedding

    said = embedding.INT8_PRODUCTS.description
    exact = embedding.signed_weights_multiply_exactly()
    assert ("uint8 x int8;" in said) == exact
    assert ("saturates" in said) == (not exact)
    assert "CPU: " in said and embedding.cpu_summary() in said
    embedding._MODELS.clear()  # a fresh load, as a starting service does
    with caplog.at_level("INFO", logger="episodic.providers.embedding"):
        MiniLMEmbedder(compute="int8").check()
    assert f"minilm: {said}" in caplog.text
