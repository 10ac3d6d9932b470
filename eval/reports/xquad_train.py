"""PYTHONPATH=. python eval/reports/xquad_train.py e5 local  -> eval/reports/xquad-train.json.

XQuAD-R TRAIN split (890 questions per language), both models, the default config and its peers: the default-model
choice's XQuAD-R figures (indexes are the test report's: same sentences)."""
import json, sys
from hybridmem.config import Settings, preset
from hybridmem.eval.datasets import LANGUAGES, load_dataset
from hybridmem.eval.runner import Evaluator
CONFIGS = ("keyword", "vector", "minmax", "weighted", "adaptive")
rows = {}
for prov in sys.argv[1:]:
    for lang in LANGUAGES:
        ds = load_dataset(f"xquad-{lang}")
        ev = Evaluator(ds, Settings().override(embedding={"provider": prov}), progress=False)
        res = ev.evaluate({n: preset(n) for n in CONFIGS}, ["ndcg@10"], split="train")
        ev.close()
        rows[f"{lang}/{prov}"] = {c: round(res.means[c]["ndcg@10"], 4) for c in CONFIGS}
        print(lang, prov, rows[f"{lang}/{prov}"], flush=True)
json.dump(rows, open("eval/reports/xquad-train.json", "w"), indent=1)
