"""The same answers from both store engines: one dataset evaluated on SQLite and on PostgreSQL, side by side.

For each ranking config: nDCG@10 on each engine, the largest per-query difference, and the share of queries whose
top 10 (as citations ``path#Lstart-Lend``, which do not depend on an engine's chunk ids) is the same list on both.
Issue #25's target: nDCG@10 equal within 0.001 and the same top 10 on at least 99% of queries.

Example:
    >>> rows = compare_backends(load_dataset("demo"), url, embedder=HashEmbedder(64))   # doctest: +SKIP
    >>> rows[0]["same_top10"]                                                          # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from typing import Any, Mapping, Sequence

from hybridmem.config import RankConfig, Settings
from hybridmem.embeddings import Embedder
from hybridmem.eval.datasets.base import Dataset
from hybridmem.eval.runner import AUTO, Evaluator, resolve_configs
from hybridmem.ranking import rank
from hybridmem.store import open_store


def _top10(ev: Evaluator, configs: Mapping[str, RankConfig], qids: Sequence[str]) -> dict[str, list[list[str]]]:
    cfgs, cands = ev.prepare(configs, 10)
    now = ev.dataset.reference_time
    return {name: [[f"{h.path}#L{h.start_line}-L{h.end_line}" for h in rank(cands[q], cfg, now=now).hits[:10]]
                   for q in qids] for name, cfg in cfgs.items()}


def compare_backends(dataset: Dataset, url: str, configs: Sequence[str] | Mapping[str, RankConfig] | None = None,
                     settings: Settings | None = None, embedder: Embedder | None | str = AUTO,
                     namespace: str | None = None, cache: str | None = None, split: str | None = None,
                     seed_cache: bool = True) -> list[dict[str, Any]]:
    """Evaluate ``dataset`` on SQLite (an index under ``cache``) and on the PostgreSQL at ``url`` (namespace
    ``namespace``, default one per dataset and settings), with the same embedder and configs. ``seed_cache`` copies
    the SQLite index's embedding cache (documents and queries) into PostgreSQL first, so nothing is embedded twice
    (as moving an index to the server would).

    Returns one row per config: ``config``, ``sqlite``, ``postgres`` (mean nDCG@10), ``max_query_diff``,
    ``same_top10`` (share of queries), ``queries``.
    """
    base_settings = settings or Settings()
    named = resolve_configs(configs)
    cache = cache or tempfile.mkdtemp(prefix="hm-backends-")
    sqlite_ev = Evaluator(dataset, settings=base_settings, embedder=embedder, cache=cache, progress=False)
    emb = sqlite_ev.embedder
    pg_settings = replace(base_settings, store=replace(base_settings.store, backend="postgres", url=url,
                                              namespace=namespace or f"eval:{dataset.name}:{sqlite_ev.index_path()}"))
    pg_ev = Evaluator(dataset, settings=pg_settings, embedder=emb, cache=cache, progress=False)
    try:
        res = {"sqlite": sqlite_ev.evaluate(named, ["ndcg@10"], split=split)}
        if seed_cache:
            source, target = open_store(base_settings, sqlite_ev.index_path()), open_store(pg_settings, pg_ev.index_path())
            try:
                target.cache_insert_rows(source.cache_rows())
            finally:
                source.close()
                target.close()
        res["postgres"] = pg_ev.evaluate(named, ["ndcg@10"], split=split)
        qids = res["sqlite"].query_ids
        tops = {"sqlite": _top10(sqlite_ev, named, qids), "postgres": _top10(pg_ev, named, qids)}
    finally:
        sqlite_ev.close()
        pg_ev.close()
    rows = []
    for name in named:
        a, b = res["sqlite"].per_query[name]["ndcg@10"], res["postgres"].per_query[name]["ndcg@10"]
        same = sum(x == y for x, y in zip(tops["sqlite"][name], tops["postgres"][name]))
        rows.append({"config": name, "sqlite": float(a.mean()), "postgres": float(b.mean()),
                     "max_query_diff": float(abs(a - b).max()) if len(a) else 0.0,
                     "same_top10": same / len(qids) if qids else 1.0, "queries": len(qids)})
    return rows
