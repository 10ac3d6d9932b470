"""The evaluation runner: index once (cached on disk), retrieve once, rank many, score with ranx.

1. **Index** per (dataset, index settings, embedder): ``$HYBRIDMEM_CACHE`` or ``<repo>/.cache/hybridmem/eval/``
   ``<dataset>-<fingerprint>-<settings hash>.sqlite``. Document datasets go through ``index_documents``, workspace
   datasets through ``MemoryIndex(workspace).sync()``; both are incremental, so a second run embeds nothing.
   Query vectors are cached in the same file's embedding cache (keyed ``query\\0<text>``).
2. **Retrieve** every query once, at the largest pool any config asks for (a smaller pool is a prefix), within the
   query's scope (a path prefix) when it has one.
3. **Rank** each config with :func:`hybridmem.ranking.rank` (the engine's only ranking function), at the dataset's
   reference time. What the eval changes in a config, and only this: ``max_results`` becomes the metric's depth (its
   cutoff, at least 10; 100 without one, see :func:`~hybridmem.eval.metrics.metric_depths`: each metric is scored on
   a ranking to its own depth, so ``ndcg@10`` does not move when a deeper metric is asked beside it), so the pool is
   ``min(max_candidates, depth * candidate_multiplier)``; ``max_injected_chars`` becomes 0 (no snippet budget; the
   budget is measured by ``budget_recall`` instead). ``min_score`` is the config's own, as in production (presets
   ``keyword``/``vector``/``rrf`` use 0; the calibrated default's abstains on low probabilities, ``minmax`` cuts at
   0.35; both cost recall); pass
   ``min_score=`` to override it for every config.
4. **Score**: hits -> units (:mod:`hybridmem.eval.units`) -> ranx per-query scores (:mod:`hybridmem.eval.metrics`).

Example:
    >>> ev = Evaluator(load_dataset("demo"))                                    # doctest: +SKIP
    >>> ev.evaluate({"rrf": preset("rrf")}, ["ndcg@10"]).means["rrf"]["ndcg@10"]  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from hybridmem.config import DEFAULT_EVAL_CONFIGS, PRESETS, ChunkingConfig, RankConfig, Settings, preset
from hybridmem.embeddings import Embedder, create_embedder
from hybridmem.eval.datasets.base import REPO_ROOT, Dataset
from hybridmem.eval.metrics import DEFAULT_METRICS, QueryRuns, Scorer, metric_depths
from hybridmem.eval.units import judged_units
from hybridmem.index import MemoryIndex
from hybridmem.ranking import RankMemo, rank
from hybridmem.records import Candidates, Ranking
from hybridmem.retrieve import Scope

AUTO = "auto"


def cache_dir() -> Path:
    """Where eval indexes live: ``$HYBRIDMEM_CACHE`` or ``<repo>/.cache/hybridmem/eval``."""
    env = os.environ.get("HYBRIDMEM_CACHE")
    return Path(env) if env else REPO_ROOT / ".cache" / "hybridmem" / "eval"


def resolve_configs(configs: Sequence[str] | Mapping[str, RankConfig] | None) -> dict[str, RankConfig]:
    """Named configs: a mapping as given, or preset names (``keyword``, ``vector``, ``weighted``, ``rrf``, ...)."""
    if configs is None:
        configs = DEFAULT_EVAL_CONFIGS
    if isinstance(configs, Mapping):
        return dict(configs)
    return {name: preset(name) for name in configs}


def eval_config(config: RankConfig, depth: int, min_score: float | None = None) -> RankConfig:
    """The config as the eval ranks it (see module doc)."""
    changes: dict[str, Any] = {"max_results": depth, "max_injected_chars": 0}
    if min_score is not None:
        changes["min_score"] = min_score
    return config.replace(**changes)


def _tqdm(total: int, desc: str, enabled: bool):  # noqa: ANN202
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, leave=False, file=sys.stderr, disable=not sys.stderr.isatty())


@dataclass
class EvalResult:
    """Scores of named configs over one query set.

    Attributes:
        depth: the deepest ranking's depth (``configs`` and ``runs`` are that ranking's).
        per_query: ``{config: {metric: array aligned with query_ids}}``.
        means: ``{config: {metric: mean}}``.
        configs: the configs as ranked (after :func:`eval_config`).
        runs: ``{config: QueryRuns}`` (ranked units per query).
        depths: ``{metric: the depth it was ranked to}`` (:func:`~hybridmem.eval.metrics.metric_depths`).
    """

    dataset: str
    split: str | None
    query_ids: list[str]
    categories: list[str]
    metrics: list[str]
    depth: int
    per_query: dict[str, dict[str, np.ndarray]]
    means: dict[str, dict[str, float]]
    configs: dict[str, RankConfig]
    runs: dict[str, QueryRuns] = field(repr=False, default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)

    @property
    def shallowest(self) -> int:
        """The depth of the shallowest ranking (the one the top-k metrics scored)."""
        return min(self.depths.values(), default=self.depth)

    def depth_words(self) -> str:
        """How deep the metrics were ranked, for a report's header: ``"depth 10"``, or ``"depth 10, recall@100 to
        100"`` where a metric was ranked deeper than the first."""
        first = self.shallowest
        return ", ".join([f"depth {first}", *(f"{m} to {d}" for m, d in self.depths.items() if d != first)])

    def by_category(self) -> dict[str, dict[str, dict[str, float]]]:
        """``{category: {config: {metric: mean}}}`` (queries grouped by their category)."""
        cats = np.asarray(self.categories)
        out: dict[str, dict[str, dict[str, float]]] = {}
        for cat in sorted(set(self.categories)):
            mask = cats == cat
            out[cat] = {c: {m: float(v[mask].mean()) for m, v in per.items()} for c, per in self.per_query.items()}
        return out


class Evaluator:
    """Runs configs over a dataset with a cached index and one retrieval per query.

    Args:
        dataset: any :class:`Dataset`.
        settings: index and tokenizer settings (default: the built-in defaults plus the dataset's own chunking, so results never depend on a
            workspace's ``hybridmem.toml``).
        embedder: an :class:`Embedder`, None for keyword-only, or ``"auto"`` (built from ``settings.embedding``).
        cache: the folder for cached indexes (default :func:`cache_dir`); ``":memory:"`` for no file.
        progress: show tqdm bars on stderr (only when it is a terminal).
    """

    def __init__(self, dataset: Dataset, settings: Settings | None = None, embedder: Embedder | None | str = AUTO,
                 cache: str | Path | None = None, progress: bool = True) -> None:
        self.dataset = dataset
        self.settings = settings or Settings()
        if dataset.chunking is not None and self.settings.chunking == ChunkingConfig():
            self.settings = self.settings.override(chunking=dataset.chunking)  # the caller chose no chunking
        if embedder == AUTO:
            embedder = create_embedder(self.settings.embedding).embedder
        self.embedder: Embedder | None = embedder  # type: ignore[assignment]
        self.cache = cache
        self.progress = progress
        self._index: MemoryIndex | None = None
        self._cands: dict[str, Candidates] = {}
        self._cand_key: tuple[int, bool, bool, bool] | None = None
        self.timings: dict[str, float] = {}
        self.query_embedded = 0

    # -- index ---------------------------------------------------------------------------------------------------
    def index_path(self) -> Path | str:
        if str(self.cache) == ":memory:":
            return ":memory:"
        e = self.embedder
        ident = "none" if e is None else f"{e.name}|{e.model}|{e.provider_key}|{e.dims}"
        key = hashlib.sha256(f"{self.settings.index_hash(e.dims if e else 0)}|{ident}".encode()).hexdigest()[:12]
        root = Path(self.cache) if self.cache else cache_dir()
        root.mkdir(parents=True, exist_ok=True)
        return root / f"{self.dataset.name}-{self.dataset.fingerprint()}-{key}.sqlite"

    @property
    def index(self) -> MemoryIndex:
        """The dataset's index, built or brought up to date on first use."""
        if self._index is None:
            t0 = time.perf_counter()
            ds = self.dataset
            idx = MemoryIndex(ds.workspace, index_path=self.index_path(), settings=self.settings,
                              embedder=self.embedder)
            bars: dict[str, Any] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage == "embed-tokens":  # tokens embedded so far: a rate beside the chunks'
                    embed = bars.get("embed")
                    if embed is not None and (elapsed := embed.format_dict.get("elapsed") or 0) > 0:
                        embed.set_postfix_str(f"{done / elapsed:,.0f} tokens/s", refresh=False)
                    return
                bar = bars.get(stage) or bars.setdefault(stage, _tqdm(total, f"{ds.name}: {stage}", self.progress))
                if bar is not None:
                    bar.n = done
                    bar.refresh()

            if ds.workspace is not None:
                report = idx.sync(progress=progress)
            else:
                report = idx.index_documents(ds.documents, prune=True, progress=progress)
            for bar in bars.values():
                if bar is not None:
                    bar.close()
            self.index_report = report
            self._index = idx
            self.timings["index"] = time.perf_counter() - t0
        return self._index

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None

    # -- retrieval -----------------------------------------------------------------------------------------------
    def query_vectors(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors of query texts, from the index's embedding cache or embedded in batches (then cached)."""
        e = self.embedder
        if e is None:
            return {}
        vectors, embedded = self.index.cached_query_vectors(texts, e)
        self.query_embedded += embedded
        return vectors

    def candidates(self, pool: int, keyword: bool = True, vector: bool = True,
                   with_vectors: bool = False) -> dict[str, Candidates]:
        """Candidates for every query of the dataset, retrieved once and reused while ``pool`` and legs allow."""
        vector = vector and self.embedder is not None
        have = self._cand_key
        if have and have[0] >= pool and (have[1] or not keyword) and (have[2] or not vector) and (have[3] or not with_vectors):
            return self._cands
        if have:  # widen to cover what was asked before too
            pool, keyword, vector, with_vectors = (max(pool, have[0]), keyword or have[1], vector or have[2],
                                                   with_vectors or have[3])
        idx = self.index
        t0 = time.perf_counter()
        queries = self.dataset.queries
        vecs = self.query_vectors([q.text for q in queries]) if vector else {}
        bar = _tqdm(len(queries), f"{self.dataset.name}: retrieve", self.progress)
        shared: dict[int, Any] = {}
        out: dict[str, Candidates] = {}
        for q in queries:
            c = idx.retrieve(q.text, pool, keyword=keyword, vector=vector, with_vectors=with_vectors,
                             query_vector=vecs.get(q.text), scope=Scope(path_prefix=q.scope) if q.scope else None)
            # one ChunkInfo object per chunk across queries keeps memory bounded on large query sets
            chunks = {cid: shared.setdefault(cid, ci) for cid, ci in c.chunks.items()}
            out[q.id] = replace(c, chunks=chunks)
            if bar is not None:
                bar.update()
        if bar is not None:
            bar.close()
        self._cands, self._cand_key = out, (pool, keyword, vector, with_vectors)
        self.timings["retrieve"] = time.perf_counter() - t0
        return out

    # -- ranking and scoring -------------------------------------------------------------------------------------
    def prepare(self, configs: Mapping[str, RankConfig], depth: int,
                min_score: float | None = None) -> tuple[dict[str, RankConfig], dict[str, Candidates]]:
        """The eval configs and the candidates they need (retrieved once for all)."""
        cfgs = {n: eval_config(c, depth, min_score) for n, c in configs.items()}
        pool = max(c.pool for c in cfgs.values())
        keyword = any(c.text_weight > 0 for c in cfgs.values())
        vector = any(c.vector_weight > 0 for c in cfgs.values())
        with_vectors = any(c.needs_vectors for c in cfgs.values())
        return cfgs, self.candidates(pool, keyword, vector, with_vectors)

    def rank_runs(self, config: RankConfig, query_ids: Sequence[str], cands: Mapping[str, Candidates]) -> QueryRuns:
        """Rank every query under ``config`` and map the hits to judged units."""
        return self.rank_runs_many({"config": config}, query_ids, cands)["config"]

    def rank_runs_many(
        self, configs: Mapping[str, RankConfig], query_ids: Sequence[str], cands: Mapping[str, Candidates]
    ) -> dict[str, QueryRuns]:
        """:meth:`rank_runs` for many configs, query by query: every config ranks one query's candidates in turn
        with one :class:`~hybridmem.ranking.RankMemo` (each leg cut and normalized per pool, the earlier order, MMR's
        token bitsets, snippets, worked out once for every config). Same runs as calling :meth:`rank_runs` per
        config. Only hits are ranked (``explain=False``) and their snippets are the lead of the text, which the eval
        never reads: the same hits in the same order."""
        ds = self.dataset
        now = ds.reference_time
        acc: dict[str, tuple[list, list, list]] = {name: ([], [], []) for name in configs}
        for qid in query_ids:
            cand = cands[qid]
            memo = RankMemo(cand)
            for name, config in configs.items():
                hits = rank(cand, config, now=now, memo=memo, explain=False, centred_snippets=False).hits
                r, f = judged_units([h.path for h in hits], [h.chunk_id for h in hits], [h.start_line for h in hits],
                                    [h.end_line for h in hits], ds.qrels[qid], ds.evidence, ds.kind)
                ranked, first, lengths = acc[name]
                ranked.append(r)
                first.append(f)
                lengths.append([len(h.text) for h in hits])
        return {name: QueryRuns(*lists) for name, lists in acc.items()}

    def score_at_depths(self, configs: Mapping[str, RankConfig], groups: Mapping[int, Sequence[str]],
                        query_ids: Sequence[str], cands: Mapping[str, Candidates], scorer: Scorer,
                        min_score: float | None = None,
                        ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, QueryRuns]]:
        """Score ``configs`` (as named, before :func:`eval_config`) with each metric of ``groups`` (``{depth:
        metrics}``, :func:`~hybridmem.eval.metrics.metric_depths`, shallowest first) on a ranking to its own depth;
        returns ``{config: {metric: per-query array}}`` and the deepest ranking's runs."""
        scores: dict[str, dict[str, np.ndarray]] = {name: {} for name in configs}
        runs: dict[str, QueryRuns] = {}
        for d, asked in groups.items():
            runs = self.rank_runs_many({n: eval_config(c, d, min_score) for n, c in configs.items()}, query_ids, cands)
            for name in configs:
                scores[name].update(scorer.score(runs[name], asked))
        return scores, runs

    def rankings(self, query_id: str, configs: Mapping[str, RankConfig], depth: int) -> dict[str, Ranking]:
        """Each config's full ranking (every candidate, centred snippets) of one query as the evaluation ranks it:
        the configs as :meth:`prepare` makes them, the same candidates, the dataset's clock."""
        cfgs, cands = self.prepare(configs, depth)
        cand = cands[query_id]
        memo = RankMemo(cand)
        return {name: rank(cand, config, now=self.dataset.reference_time, memo=memo) for name, config in cfgs.items()}

    def evaluate(
        self,
        configs: Sequence[str] | Mapping[str, RankConfig] | None = None,
        metrics: Sequence[str] = DEFAULT_METRICS,
        split: str | None = None,
        categories: Sequence[str] | None = None,
        min_score: float | None = None,
        depth: int | None = None,
    ) -> EvalResult:
        """Score named configs on the queries of ``split`` (None: all) and ``categories`` (None: all); each metric on
        a ranking to its own depth (:func:`~hybridmem.eval.metrics.metric_depths`), or every one to ``depth``."""
        named = resolve_configs(configs)
        metrics = list(metrics)
        groups = metric_depths(metrics) if depth is None else {depth: metrics}
        deepest = max(groups)
        sub = self.dataset.select(split, categories)
        qids = [q.id for q in sub.queries]
        cfgs, cands = self.prepare(named, deepest, min_score)  # one retrieval, at the deepest pool
        t0 = time.perf_counter()
        scores, runs = self.score_at_depths(named, groups, qids, cands, Scorer(qids, sub.qrels), min_score)
        per_query = {n: {m: pq[m] for m in metrics} for n, pq in scores.items()}
        self.timings["rank_and_score"] = time.perf_counter() - t0
        means = {n: {m: float(v.mean()) for m, v in pq.items()} for n, pq in per_query.items()}
        return EvalResult(self.dataset.name, split, qids, [q.category for q in sub.queries], metrics, deepest,
                          per_query, means, cfgs, runs, dict(self.timings),
                          {m: d for d, asked in groups.items() for m in asked})


__all__ = ["AUTO", "EvalResult", "Evaluator", "PRESETS", "cache_dir", "eval_config", "resolve_configs"]
