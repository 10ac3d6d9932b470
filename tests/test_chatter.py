"""The recall block's chatter filter (hybridmem/config/chatter.py, fitted by hybridmem/eval/chatter.py): a chat
message that asks nothing is not recalled for; a short question, in any language, still is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hybridmem.config import Settings
from hybridmem.config.chatter import CHATTER_CHARS, Chatter, chatter_model
from hybridmem.index import MemoryIndex
from hybridmem.tools import RECALL_CHATTER, RECALL_NOTHING, is_chatter, recall_context

ROOT = Path(__file__).resolve().parent.parent
E5 = "multilingual-e5-small"


def test_a_fit_reads_its_vector_and_never_a_long_message() -> None:
    fit = Chatter("m", (4.0, -4.0), 0.0, 0.9)
    assert fit.probability([1.0, 0.0]) > 0.98 and fit.probability([0.0, 1.0]) < 0.02
    assert fit.is_chatter("thanks", [1.0, 0.0]) and not fit.is_chatter("thanks " * CHATTER_CHARS, [1.0, 0.0])
    assert not fit.is_chatter("visa", [0.0, 1.0])


def test_write_fits_keeps_the_other_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hybridmem.config import chatter as config
    from hybridmem.eval import chatter as fitting

    path = tmp_path / "chatter.json"
    path.write_text(json.dumps({"other": {"coef": [1.0], "intercept": 0.5, "threshold": 0.8}}), encoding="utf-8")
    monkeypatch.setattr(fitting, "CHATTER_FILE", path)
    monkeypatch.setattr(config, "CHATTER_FILE", path)
    config._fits.cache_clear()
    try:
        fitting.write_fits([Chatter("m", (0.25, -1.5), -2.0, 0.9, "rows")])
        assert config.chatter_model("m") == Chatter("m", (0.25, -1.5), -2.0, 0.9, "rows")
        assert config.chatter_model("other").threshold == 0.8
    finally:
        config._fits.cache_clear()


def test_a_model_without_a_fit_reads_nothing_as_chatter(tmp_path: Path) -> None:
    """The hash embedder (and MiniLM, remote models) has no fit: every message is searched."""
    (tmp_path / "MEMORY.md").write_text("# Memory\n\n- thanks to Priya for the Terraform review.\n", encoding="utf-8")
    from hybridmem.embeddings.fake import HashEmbedder

    with MemoryIndex(tmp_path, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        idx.sync()
        assert chatter_model(idx.embedder.model) is None
        assert not is_chatter(idx, "thanks")
        block, why = recall_context(idx, "thanks")
        assert "[MEMORY.md#L" in block and why == ""


@pytest.mark.slow
def test_minilm_reads_chat_with_the_bundled_e5_its_gate_already_loads(demo_index) -> None:
    """MiniLM's own vectors made no usable fit; its answer gate reads e5's token alignment, so recall reads e5's
    vector of the message with e5's fit."""
    assert demo_index.embedder.model == "all-MiniLM-L6-v2" and chatter_model("all-MiniLM-L6-v2") is None
    assert is_chatter(demo_index, "thanks") and is_chatter(demo_index, "谢谢")
    assert not is_chatter(demo_index, "visa") and not is_chatter(demo_index, "dentist")
    assert recall_context(demo_index, "ok") == ("", RECALL_CHATTER)


@pytest.mark.slow
def test_the_shipped_filter_reads_chat_in_languages_it_never_saw_and_no_question() -> None:
    """The held-out rows: chat messages in eleven languages and English phrasings the fit never saw, short topical
    queries in those languages, and questions of every labeled dataset's test split."""
    from hybridmem.embeddings.e5 import E5Embedder
    from hybridmem.eval.chatter import _embed, question_rows
    from hybridmem.eval.datasets.base import data_dir, read_jsonl

    fit = chatter_model(E5)
    rows = [r for r in read_jsonl(data_dir("chatter") / "chatter.jsonl") if r["split"] == "test"]
    questions = [t for _, t in question_rows("test", per_dataset=20)]
    texts = [r["text"] for r in rows] + questions
    # the model's own reading, without the length cap that keeps every long question out anyway
    read = [fit.probability(v) >= fit.threshold for v in _embed(E5Embedder(), texts)]
    chat = [ok for r, ok in zip(rows, read) if r["kind"] == "chatter"]
    assert {r["lang"] for r in rows if r["kind"] == "chatter"} >= {"ja", "ko", "th", "ar", "hi", "ru", "tr", "el"}
    assert sum(chat) / len(chat) >= 0.8, sum(chat) / len(chat)
    wrong = [t for t, r, ok in zip(texts, rows + [None] * len(questions), read) if ok and (r is None or
                                                                                         r["kind"] == "topic")]
    assert wrong == [] and len(questions) == 300


@pytest.mark.slow
def test_recall_skips_chat_and_still_answers_a_one_word_question(tmp_path: Path) -> None:
    """A transcript holding "thanks" made the gate answer "thanks" (P 0.999) and recall inject it; now chat in any
    language injects nothing and says why, while one word that names a thing memory holds is still recalled."""
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Visa: the Japan visa was approved on 3 March; the passport is back.\n"
                                  "- The staging Redis server listens on port 6380.\n", encoding="utf-8")
    (ws / "memory" / "chat.md").write_text("# Chat\n\nUser: thanks, ok, go on. 谢谢！Cảm ơn nhé.\n", encoding="utf-8")
    settings = Settings().override(embedding={"provider": "e5", "shared_cache": False})
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", settings=settings) as idx:
        idx.sync()
        assert idx.search("thanks").results, "the gate answers it: the note holds the word"
        for chat in ("thanks", "ok", "go on", "谢谢", "cảm ơn", "ありがとう", "спасибо"):
            assert recall_context(idx, chat) == ("", RECALL_CHATTER), chat
        block, why = recall_context(idx, "visa")
        assert "[MEMORY.md#L" in block and why == ""
        assert recall_context(idx, "who won the 1998 football world cup?") == ("", RECALL_NOTHING)
    out = subprocess.run([sys.executable, "-m", "hybridmem.cli", "recall", "thanks", str(ws), "--index",
                          str(tmp_path / "i.sqlite"), "--no-sync", "--json"], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"message": "thanks", "context": "", "injected": False,
                                      "why_not": RECALL_CHATTER}
