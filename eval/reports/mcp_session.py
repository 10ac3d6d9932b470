"""The real MCP session shown in hybridmem/serve/README.md: the official SDK's client over stdio against
`hybridmem mcp` on a fresh copy of the demo workspace, indexed with the default model.

    .venv/bin/python eval/reports/mcp_session.py
"""
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

ROOT = Path(__file__).resolve().parents[2]
HYBRIDMEM = str(Path(sys.executable).parent / "hybridmem")
ws = Path(tempfile.mkdtemp()) / "workspace"
shutil.copytree(ROOT / "datasets/demo-memory/workspace", ws, ignore=shutil.ignore_patterns(".hybridmem"))
subprocess.run([HYBRIDMEM, "index", str(ws)], check=True, capture_output=True)
params = StdioServerParameters(command=HYBRIDMEM, args=["mcp", str(ws)], env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})


def cut(s, n=110):
    return s if len(s) <= n else s[:n] + "…"


async def main():
    t0 = time.perf_counter()
    async with Client(params) as c:
        tools = (await c.list_tools()).tools
        print(f">>> tools/list  ({time.perf_counter()-t0:.2f} s after spawn)")
        for t in tools:
            print(f"  {t.name}: {cut(t.description, 200)}")
        a = tools[0].annotations
        print(f"  (each: read_only_hint {a.read_only_hint}, idempotent_hint {a.idempotent_hint}, destructive_hint {a.destructive_hint}, open_world_hint {a.open_world_hint})")
        for i, (q, full) in enumerate([("what did we decide about retry backoff for payments?", False),
                                       ("công thức phở bò của Mẹ cần những gia vị gì?", True),
                                       ("谁负责退款接口", False), ("chocolate cake recipe", False),
                                       ("how tall is Mount Everest?", False),
                                       ("ai là người phụ trách gia hạn thẻ Employment Pass?", False),
                                       ("who handles the renewal of the Employment Pass?", False)]):
            s = time.perf_counter()
            r = await c.call_tool("memory_search", {"query": q, "max_results": 3})
            ms = (time.perf_counter() - s) * 1000
            extra = f", {time.perf_counter()-t0:.2f} s after spawn: the first answer" if i == 0 else ""
            print(f"\n>>> tools/call memory_search {json.dumps({'query': q, 'max_results': 3}, ensure_ascii=False)}  ({ms:.0f} ms{extra})")
            text = r.content[0].text
            if full:
                print("--- text content ---")
                print("\n".join(cut(line) for line in text.splitlines()[:6]) + "\n…")
                print("--- structured content ---")
                sc = dict(r.structured_content)
                hits = sc.pop("results")
                print("{")
                print(f' "query": {json.dumps(sc.pop("query"), ensure_ascii=False)},')
                print(' "results": [')
                for h in hits[:1]:
                    h["snippet"] = cut(h["snippet"], 50)
                    print("  " + json.dumps(h, ensure_ascii=False) + ",")
                print(f"  … ({len(hits) - 1} more)\n ],")
                print(" " + json.dumps(sc, ensure_ascii=False)[1:-1])
                print("}")
            else:
                print("\n".join([line for line in text.splitlines() if "(score" in line] or text.splitlines()[:2]))
                if r.structured_content.get("ask_in"):
                    print(f'(structured content: "ask_in": {json.dumps(r.structured_content["ask_in"])})')
        r = await c.call_tool("memory_get", {"path": "memory/topics/recipes.md", "from": 1, "lines": 3})
        print('\n>>> tools/call memory_get {"path": "memory/topics/recipes.md", "from": 1, "lines": 3}')
        print(r.content[0].text)
        r = await c.call_tool("memory_get", {"path": "../../etc/passwd"})
        print('\n>>> tools/call memory_get {"path": "../../etc/passwd"}')
        print(f"is_error: {r.is_error} | {r.content[0].text}")


asyncio.run(main())
