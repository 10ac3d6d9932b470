from __future__ import annotations

import pytest

from hybridmem.config import PRESETS, RankConfig, Settings, load_settings, preset, settings_from_dict
from hybridmem.config.ranking import DECISION_DEPTH
from hybridmem.errors import ConfigError


def test_defaults_match_design():
    s = Settings()
    assert (s.chunking.tokens, s.chunking.overlap, s.chunking.max_chars, s.chunking.overlap_chars) == (400, 80, 1600, 320)
    r = s.ranking
    assert (r.vector_weight, r.text_weight, r.rrf_k, r.max_results, r.candidate_multiplier) == (0.5, 0.5, 60, 6, 4)
    assert (preset("reference").vector_weight, preset("reference").text_weight) == (0.7, 0.3)
    assert (r.min_score, r.snippet_chars, r.max_injected_chars, r.half_life_days, r.mmr_lambda) == (0.0, 700, 4000, 30.0, 0.7)
    assert (r.bm25_norm, r.vector_norm, r.rescue_keyword) == ("calibrated", "calibrated", False)  # #16
    # #22: the order is the joint model, whether to answer is the gate's; the #16 default stays by name
    assert r.fusion == "joint" and 0.0 < r.answer_threshold < 1.0
    c = preset("calibrated")
    assert (c.fusion, c.min_score, c.answer_threshold) == ("weighted", 0.04, 0.0)
    m = preset("minmax")  # the default before #16
    assert (m.bm25_norm, m.vector_norm, m.min_score, m.rescue_keyword) == ("minmax", "minmax", 0.35, True)
    assert r.pool == DECISION_DEPTH == 40  # 6 x 4 = 24, raised to the depth the order and the gate were fitted at
    assert c.pool == m.pool == 24  # fixed fusions without the gate keep max_results x candidate_multiplier
    assert RankConfig(max_results=100, candidate_multiplier=20).pool == 200
    assert RankConfig(max_candidates=16).pool == 16  # max_candidates still caps it


def test_reference_preset_reproduces_reference():
    ref = preset("reference")
    assert (ref.fusion, ref.bm25_norm, ref.vector_norm, ref.mmr, ref.decay) == ("weighted", "reference", "raw", False, False)
    with pytest.raises(ConfigError, match="expected one of"):
        preset("nope")
    assert {"keyword", "vector", "weighted", "rrf", "reference"} <= set(PRESETS)


@pytest.mark.parametrize(
    "section,values,name",
    [
        ("ranking", {"mmr_lambda": 1.5}, "ranking.mmr_lambda"),
        ("ranking", {"bm25_norm": "bogus"}, "ranking.bm25_norm"),
        ("ranking", {"candidate_multiplier": 0}, "ranking.candidate_multiplier"),
        ("ranking", {"vector_weight": -1.0}, "ranking.vector_weight"),
        ("chunking", {"overlap": 500}, "chunking.overlap"),
        ("embedding", {"provider": "magic"}, "embedding.provider"),
        ("embedding", {"query_runtime": "tensorrt"}, "embedding.query_runtime"),
        ("ranking", {"unknown_key": 1}, "ranking.unknown_key"),
        ("ranking", {"max_results": "six"}, "ranking.max_results"),
        # an infinite wait passed the check (>= 0) and hung a server's first search on an OverflowError
        ("serve", {"alignment_wait_s": float("inf")}, "serve.alignment_wait_s"),
        ("serve", {"model_wait_s": 1e10}, "serve.model_wait_s"),
        ("sync", {"interval_s": float("inf")}, "sync.interval_s"),
        ("sync", {"watch_max_wait_s": float("nan")}, "sync.watch_max_wait_s"),
        ("embedding", {"timeout_s": float("inf")}, "embedding.timeout_s"),
    ],
)
def test_invalid_values_name_the_setting(section, values, name):
    with pytest.raises(ConfigError, match=name.replace(".", r"\.")):
        Settings().override(**{section: values})


def test_toml_loading_and_override(tmp_path):
    p = tmp_path / "hybridmem.toml"
    p.write_text('[ranking]\nfusion = "rrf"\nrrf_k = 30\n[chunking]\ntokens = 200\n[sources]\nextra_paths = ["docs"]\n')
    s = load_settings(p)
    assert s.ranking.fusion == "rrf" and s.ranking.rrf_k == 30 and s.chunking.tokens == 200
    assert s.sources.extra_paths == ("docs",)
    assert load_settings(workspace=tmp_path).ranking.rrf_k == 30
    with pytest.raises(ConfigError, match="cannot parse"):
        p.write_text("[ranking\n")
        load_settings(p)
    with pytest.raises(ConfigError, match="unknown settings section"):
        settings_from_dict({"rankin": {}})


def test_index_hash_tracks_index_settings_only():
    s = Settings()
    assert s.index_hash(384) == Settings().index_hash(384)
    assert s.index_hash(384) != s.index_hash(768)
    assert s.index_hash() != s.override(chunking={"tokens": 200}).index_hash()
    assert s.index_hash() != s.override(tokenizer={"stem": False}).index_hash()
    assert s.index_hash() != s.override(tokenizer={"stem_scripts": True}).index_hash()
    assert s.index_hash() != s.override(embedding={"model": "other"}).index_hash()
    # ranking and query-only settings never force a reindex
    assert s.index_hash() == s.override(ranking={"fusion": "rrf"}, tokenizer={"query_mode": "and"}).index_hash()


@pytest.mark.parametrize(
    "data,message",
    [
        ({"ranking": {"rrf_k": True}}, "invalid setting ranking.rrf_k=True: expected int"),
        ({"ranking": {"max_results": False}}, "invalid setting ranking.max_results=False: expected int"),
        ({"ranking": {"vector_weight": True}}, "invalid setting ranking.vector_weight=True: expected float"),
        ({"sources": {"extra_paths": [1, 2]}}, "invalid setting sources.extra_paths=[1, 2]: expected a list of strings"),
        ({"sources": {"extra_paths": "docs"}}, "invalid setting sources.extra_paths='docs': expected a list"),
        ({"sources": {"session_paths": ["s", None]}}, "sources.session_paths"),
        ({"sources": {"redact_memory": 1}}, "invalid setting sources.redact_memory=1: expected bool"),
    ],
)
def test_bools_are_not_numbers_and_lists_hold_strings(data, message):
    with pytest.raises(ConfigError) as exc:
        settings_from_dict(data)
    assert message in str(exc.value)


def test_bool_refused_where_dataclasses_are_built_directly():
    with pytest.raises(ConfigError, match="ranking.rrf_k"):
        RankConfig(rrf_k=True)


@pytest.mark.parametrize("command", [["watch", "ws", "--debounce"], ["watch", "ws", "--interval"],
                                     ["mcp", "ws", "--debounce"]])
@pytest.mark.parametrize("value", ["inf", "-1", "nan", "1e10"])
def test_flags_in_seconds_follow_the_settings_rule(command, value, capsys):
    """``--debounce inf`` killed the MCP server's watcher thread (an OverflowError in threading.Timer) while
    memory_status still said it was watching; the same value in hybridmem.toml was refused. One line, exit 2."""
    from hybridmem.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*command, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and len(err) == 1 and "expected a number of seconds from 0 to 86400" in err[0], err


def test_a_settings_file_that_is_a_folder_or_a_dangling_link_is_an_error(tmp_path):
    """A hybridmem.toml that was a folder, or a link to nothing, was passed over: the defaults (another model) were
    served without a word."""
    import os

    from hybridmem.config import load_settings

    folder, link = tmp_path / "a", tmp_path / "b"
    (folder / "hybridmem.toml").mkdir(parents=True)
    link.mkdir()
    os.symlink(tmp_path / "nothing.toml", link / "hybridmem.toml")
    for ws in (folder, link):
        with pytest.raises(ConfigError, match=r"is not a readable file \(a folder, or a link to nothing\)$"):
            load_settings(workspace=ws)
    assert load_settings(workspace=tmp_path).embedding == Settings().embedding
