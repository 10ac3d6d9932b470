"""XQuAD-R (LAReQA): question -> answer-sentence retrieval, one language at a time.

Each candidate sentence is a document with id ``p<paragraph>s<sentence>`` (paragraphs numbered across articles); a
question's relevant document is the sentence whose ``sentence_breaks`` span holds its ``answer_start``. Question ids
are shared across languages.

Splits (XQuAD-R ships none): the first :data:`TEST_QUESTIONS` questions in file order (the first articles, the same
in every language) are ``test``; the rest (890 of 1,190) are ``train``. The figures quoted in issue 14 and
``eval/reports/xquad-*.md`` are "the first 300 questions" (``--split test``); choices (the default model, the
adaptive fusion's constants) are made on ``--split train``. The corpus is always all of the language's sentences.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hybridmem.errors import DatasetError
from hybridmem.eval.datasets.base import Dataset, Query, data_dir, read_provenance
from hybridmem.records import Document

LANGUAGES = ("ar", "de", "el", "en", "es", "hi", "ru", "th", "tr", "vi", "zh")
# Questions (in file order) in the test split; the rest are train. 300: the "first 300 questions".
TEST_QUESTIONS = 300


def _file(lang: str, folder: str | Path | None = None) -> Path:
    """The language's JSON file: under ``folder``, else the shipped ``datasets/xquad_r`` (all eleven languages)."""
    if lang not in LANGUAGES:
        raise DatasetError(f"unknown XQuAD-R language {lang!r}: expected one of {', '.join(LANGUAGES)}")
    roots = [Path(folder) if folder else data_dir("xquad_r")]
    path = next((r / "xquad-r" / f"{lang}.json" for r in roots if (r / "xquad-r" / f"{lang}.json").is_file()), None)
    if path is None:
        raise DatasetError(f"XQuAD-R file {lang}.json not found under {', '.join(str(r) for r in roots)}")
    return path


def article_halves(lang: str, folder: str | Path | None = None,
                   parts: int = 2) -> tuple[dict[str, int], dict[str, int]]:
    """Which half of the articles each sentence (document id) and each question belongs to: 0 for the first
    ``n // 2`` articles in file order, 1 for the rest. The no-answer set ``xquad-<lang>-cross``
    (:func:`hybridmem.eval.abstention.xquad_cross`) asks each question of the other half's sentences. ``parts``: cut
    in that many runs of ``n // parts`` articles instead (the last takes what is left).

    Example:
        >>> docs, questions = article_halves("en")  # doctest: +SKIP
        >>> docs["p0s0"], len(set(questions.values()))  # doctest: +SKIP
        (0, 2)
    """
    docs, questions, n = articles(lang, folder)
    run = n // parts
    return ({d: min(a // run, parts - 1) for d, a in docs.items()},
            {q: min(a // run, parts - 1) for q, a in questions.items()})


def articles(lang: str, folder: str | Path | None = None) -> tuple[dict[str, int], dict[str, int], int]:
    """The article (its index in file order) of each sentence (document id) and of each question, and how many."""
    data = json.loads(_file(lang, folder).read_text(encoding="utf-8"))
    docs: dict[str, int] = {}
    questions: dict[str, int] = {}
    p_index = 0
    for a, article in enumerate(data["data"]):
        for para in article["paragraphs"]:
            docs.update((f"p{p_index}s{j}", a) for j in range(len(para["sentences"])))
            questions.update((qa["id"], a) for qa in para["qas"])
            p_index += 1
    return docs, questions, len(data["data"])


def load_xquad_pair(asked: str, other: str, folder: str | Path | None = None) -> Dataset:
    """A memory written in two languages, ``xquad-<asked>+<other>``: the sentences of every other article (even
    positions in file order) in ``asked``, of the rest in ``other``, ids prefixed ``<lang>/``; every question in
    ``asked``, judged against the sentence in the language its article is in, of category ``own`` or ``across``
    (the splits as in one language). Its no-answer set asks each question of the memory without its article
    (:func:`hybridmem.eval.abstention.xquad_cross`).

    Example:
        >>> ds = load_xquad_pair("en", "vi")  # doctest: +SKIP
        >>> ds.name, sorted({q.category for q in ds.queries})  # doctest: +SKIP
        ('xquad-en+vi', ['across', 'own'])
    """
    if asked == other:
        raise DatasetError(f"xquad-{asked}+{other} names one language twice: name two, as in xquad-en+vi")
    sides = {lang: articles(lang, folder) for lang in (asked, other)}
    one, two = load_xquad(asked, folder), load_xquad(other, folder)
    docs = tuple(replace(d, path=f"{lang}/{d.path}") for lang, ds in ((asked, one), (other, two))
                 for d in ds.documents if (sides[lang][0][d.path] % 2 == 0) == (lang == asked))
    queries, qrels = [], {}
    for q in one.queries:
        lang, ds = (asked, one) if sides[asked][1][q.id] % 2 == 0 else (other, two)
        if q.id in ds.qrels:  # a question whose answer has no sentence there is dropped, as in one language
            queries.append(replace(q, category="own" if lang == asked else "across"))
            qrels[q.id] = {f"{lang}/{d}": g for d, g in ds.qrels[q.id].items()}
    return Dataset(name=f"xquad-{asked}+{other}", kind="documents", queries=tuple(queries), qrels=qrels,
                   documents=docs, provenance=one.provenance,
                   notes=(f"a memory in two languages: even articles in {asked}, odd in {other}; questions in "
                          f"{asked}",))


def load_xquad(lang: str, folder: str | Path | None = None) -> Dataset:
    """Load one language. Every language ships in ``datasets/xquad_r``."""
    path = _file(lang, folder)
    data = json.loads(path.read_text(encoding="utf-8"))
    docs: list[Document] = []
    queries: list[Query] = []
    qrels: dict[str, dict[str, int]] = {}
    p_index = 0
    n_questions = 0
    for article in data["data"]:
        for para in article["paragraphs"]:
            ids = [f"p{p_index}s{j}" for j in range(len(para["sentences"]))]
            docs += [Document(path=i, text=s.strip(), source="corpus", evergreen=True)
                     for i, s in zip(ids, para["sentences"])]
            for qa in para["qas"]:
                split = "test" if n_questions < TEST_QUESTIONS else "train"  # by file position: same ids everywhere
                n_questions += 1
                start = qa["answers"][0]["answer_start"]
                hit = [ids[j] for j, (b, e) in enumerate(para["sentence_breaks"]) if b <= start < e]
                if hit:
                    queries.append(Query(qa["id"], qa["question"], lang, split))
                    qrels[qa["id"]] = {hit[0]: 1}
            p_index += 1
    return Dataset(name=f"xquad-{lang}", kind="documents", queries=tuple(queries), qrels=qrels,
                   documents=tuple(docs), provenance=read_provenance(path.parent.parent))
