"""The in-memory keyword index gives FTS5's bm25() results bit for bit: same ids, order and scores."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridmem.config import Settings, TokenizerConfig
from hybridmem.index import MemoryIndex
from hybridmem.retrieve.keywords import KeywordIndex, fts_tokens
from hybridmem.retrieve import Scope, keyword_leg
from hybridmem.retrieve.legs import term_doc_counts
from hybridmem.store import Store
from hybridmem.tokenization import tokenize

WORDS = ["payment", "retry", "backoff", "car", "timing", "belt", "mechanic", "thanh", "toán", "支付处理", "決済",
         "1¼", "alpha", "beta", "gamma", "delta", "dark", "mode"]


def store_with(tmp_path, texts: list[str], paths: list[str] | None = None) -> Store:  # noqa: ANN001
    store = Store(tmp_path / "kw.sqlite")
    paths = paths or [f"memory/{i % 4}.md" for i in range(len(texts))]
    with store.transaction():
        by_path: dict[str, list[dict]] = {}
        for i, (t, p) in enumerate(zip(texts, paths)):
            by_path.setdefault(p, []).append({"start_line": i + 1, "end_line": i + 1, "hash": f"h{i}", "text": t,
                                              "tokens": " ".join(tokenize(t)), "timestamp": 0.0, "evergreen": True})
        for p, chunks in by_path.items():
            src = "sessions" if p.startswith("sessions/") else "memory"
            store.upsert_file({"path": p, "abspath": None, "source": src, "hash": p, "mtime": 0.0, "size": 0,
                               "date": None, "evergreen": 1}, chunks, [None] * len(chunks))
    return store


def both(store: Store, query: str, pool: int = 50, scope: Scope = Scope(), cfg: TokenizerConfig | None = None):  # noqa: ANN201
    cfg = cfg or TokenizerConfig()
    memory = KeywordIndex.build(*store.keyword_rows())
    return keyword_leg(store, query, pool, cfg, scope, memory), keyword_leg(store, query, pool, cfg, scope)


def test_scores_are_bit_identical_to_fts5(tmp_path) -> None:  # noqa: ANN001
    texts = [" ".join(np.random.default_rng(i).choice(WORDS, size=3 + i % 11)) for i in range(120)]
    store = store_with(tmp_path, texts)
    for q in ["payment retry", "car timing belt mechanic", "thanh toan", "支付处理器", "alpha alpha beta", "dark",
              "the mode of payment", "決済 gamma"]:
        mem, fts = both(store, q)
        assert mem == fts and mem  # LegHit compares chunk id, raw bm25 (exactly) and rank
    assert both(store, "nothing-matches-zzz") == ([], [])


def test_scope_and_and_mode_match_fts5(tmp_path) -> None:  # noqa: ANN001
    texts = [" ".join(np.random.default_rng(i).choice(WORDS, size=5)) for i in range(80)]
    paths = [("sessions/s1.jsonl" if i % 3 == 0 else f"memory/{i % 5}.md") for i in range(80)]
    store = store_with(tmp_path, texts, paths)
    for scope in (Scope(source="sessions"), Scope(path_prefix="memory/2"), Scope("memory", "memory/4")):
        mem, fts = both(store, "payment alpha dark", scope=scope)
        assert mem == fts
    mem, fts = both(store, "payment alpha", cfg=TokenizerConfig(query_mode="and"))
    assert mem == fts


def test_fts_tokens_splits_what_unicode61_splits() -> None:
    assert fts_tokens("retri") == ("retri",)
    assert fts_tokens("1\u20444") == ("1", "4")  # NFKC of ¼ has a FRACTION SLASH, a separator for FTS5
    assert fts_tokens("toán") == ("toán",)


def test_a_query_fts5_reads_as_a_phrase_goes_to_fts5(tmp_path) -> None:  # noqa: ANN001
    store = store_with(tmp_path, ["1¼ cups of flour", "4 cups", "1 cup"])
    memory = KeywordIndex.build(*store.keyword_rows())
    assert memory.search(["1\u20444"], 10) is None
    mem, fts = both(store, "1¼ cups")
    assert mem == fts and mem[0].chunk_id == 1


@settings(max_examples=30, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=1, max_size=40),
       query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), pool=st.integers(1, 30))
def test_property_same_results_as_fts5(tmp_path_factory, docs, query, pool) -> None:  # noqa: ANN001
    store = store_with(tmp_path_factory.mktemp("kw"), [" ".join(d) for d in docs])
    mem, fts = both(store, " ".join(query), pool=pool)
    assert mem == fts
    store.close()


def test_facade_serves_the_second_query_from_memory(tmp_path, workspace) -> None:  # noqa: ANN001
    idx = MemoryIndex(workspace, index_path=tmp_path / "i.sqlite", settings=Settings().override(
        embedding={"provider": "none"}), embedder=None)
    idx.sync()
    first = idx.retrieve("payment retry backoff", 20, vector=False)
    assert not idx.retriever._keywords_build[1].started  # noqa: SLF001 - one-shot searches stay on FTS5
    idx.retrieve("payment retry backoff", 20, vector=False)  # starts the background build
    idx.retriever.wait_for_copies()
    assert idx.retriever.keyword_memory() is not None
    third = idx.retrieve("payment retry backoff", 20, vector=False)  # served from memory
    assert first.keyword == third.keyword and first.keyword
    (workspace / "memory" / "new.md").write_text("payment retries doubled\n", encoding="utf-8")
    idx.sync()
    assert idx.retriever.keyword_memory() is None  # a new generation: FTS5 until it is rebuilt
    fourth = idx.retrieve("payment retry backoff", 20, vector=False)
    assert len(fourth.keyword) == len(first.keyword) + 1
    idx.retriever.wait_for_copies()
    assert idx.retriever.keyword_memory() is not None
    assert idx.retrieve("payment retry backoff", 20, vector=False).keyword == fourth.keyword
    # the answer gate's IDF counts: the same from FTS5 (first) and from memory (now), over every chunk
    assert (first.doc_count, first.term_docs) != (0, ())
    now = idx.retrieve("payment retry backoff", 20, vector=False)
    assert now.doc_count == idx.status()["chunks"] == first.doc_count + 1
    assert len(now.term_docs) == len(now.query_tokens) and now.term_docs[0] == first.term_docs[0] + 1  # "payment"
    idx.close()


@settings(max_examples=30, deadline=None)
@given(docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12), min_size=1, max_size=40),
       query=st.lists(st.sampled_from(WORDS + ["nowhere", "không"]), min_size=1, max_size=6))
def test_term_doc_counts_are_fts5s_from_the_store_and_from_memory(tmp_path_factory, docs, query) -> None:  # noqa: ANN001
    store = store_with(tmp_path_factory.mktemp("kw"), [" ".join(d) for d in docs])
    tokens = [t for w in query for t in tokenize(w)]
    memory = KeywordIndex.build(*store.keyword_rows())
    n, counts = term_doc_counts(store, tokens)
    assert (n, counts) == term_doc_counts(store, tokens, memory)
    assert n == len(docs)
    for t, c in zip(tokens, counts):  # rows holding the token, counted by hand
        assert c == sum(1 for d in docs if t in tokenize(" ".join(d))), t
    store.close()
