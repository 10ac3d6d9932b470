"""What a sync counts per file (languages, scripts the model does not read), and the languages a refusal names."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from hybridmem.index import MemoryIndex
from hybridmem.ranking.language import ASK_MOST, ask_in, text_language
from hybridmem.sync.census import LANGUAGE_TOTALS_META, LANGUAGES_META, UNREAD_META
from hybridmem.embeddings.fake import HashEmbedder

EN = "# 2026-03-01\n\n- The staging Redis server listens on port 6380, not the default one.\n"
ES = "# 2026-03-02\n\n- El seguro del coche vence el 12 de noviembre; la póliza es de Mapfre.\n"
RU = "# 2026-03-03\n\n- Родители Ольги прилетают двадцатого декабря и остаются до пятого января.\n"


def write(ws: Path, rel: str, text: str) -> None:
    path = ws / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_sync_counts_each_files_languages_and_keeps_their_sum(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", EN)
    write(ws, "memory/es.md", ES)
    write(ws, "memory/ru.md", RU)
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        idx.sync()
        assert idx.status()["languages"] == {"en": 1, "es": 1, "ru": 1}
        write(ws, "memory/es.md", "# 2026-03-02\n\n- The car insurance expires on 12 November; Mapfre holds it.\n")
        (ws / "memory" / "ru.md").unlink()
        idx.sync()
        assert idx.status()["languages"] == {"en": 2}
        idx.sync(force=True)  # a full reindex counts afresh, to the same
        assert idx.status()["languages"] == {"en": 2}


def test_deleting_many_files_commits_them_in_batches_and_keeps_the_counts(tmp_path: Path) -> None:
    """Each commit rewrites the count maps, which grow with the memory: one commit per deleted file made deleting half
    of 16,000 notes take 132 s. Deletions now commit a batch at a time (the generation counts the commits)."""
    ws = tmp_path / "ws"
    for i in range(600):
        write(ws, f"memory/n{i:03d}.md", EN if i % 3 else ES)
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        idx.sync()
        assert idx.status()["languages"] == {"en": 400, "es": 200}
        for i in range(0, 600, 2):
            (ws / "memory" / f"n{i:03d}.md").unlink()
        before = int(idx.generation())
        assert idx.sync().deleted == 300
        assert int(idx.generation()) - before <= 10  # batches of 16, 32, 64, 128, ...; one a file made 300
        assert idx.status()["languages"] == {"en": 200, "es": 100}
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        assert idx.status()["languages"] == {"en": 200, "es": 100}  # as stored, read by a new process


def test_a_file_stored_again_reads_only_the_chunks_that_came_or_went(tmp_path: Path, monkeypatch) -> None:
    """Reading a chunk's language costs about 0.25 ms: a 10,000-chunk transcript grown by a few messages read every
    chunk again. Only the chunks that came or went are read now, and the counts are what a rebuild counts: with
    chunks repeated, a script the model does not read, and one hash held by two texts (its NFC and NFD forms)."""
    import unicodedata

    from hybridmem.chunking import chunk_hash
    from hybridmem.sync import census

    lines = [f"- {i}: " + ["the staging Redis port moved to 6380 on host h7.",
                           "el seguro del coche vence el doce de noviembre.",
                           "ยายไปตรวจความดันที่โรงพยาบาลศิริราชทุกเดือน",
                           "Tiền điện tháng này đã thanh toán qua ví MoMo rồi."][i // 60] for i in range(240)]
    lines += ["- the same note, repeated word for word in its own chunk."] * 3
    ws = tmp_path / "ws"
    write(ws, "memory/long.md", "# Long\n\n" + "\n".join(lines) + "\n")
    vi = "Tiền điện tháng này đã thanh toán qua ví MoMo rồi. " * 18  # two chunks of one hash, each a line of its own
    write(ws, "memory/nfd.md", f"{vi}\n{unicodedata.normalize('NFD', vi)}\n")
    latin = HashEmbedder(dims=32)
    latin.scripts = frozenset({"LATIN"})
    read: list[str] = []
    real = census.text_language
    monkeypatch.setattr(census, "text_language", lambda text: read.append(text) or real(text))
    keys = (LANGUAGES_META, LANGUAGE_TOTALS_META, UNREAD_META)
    cases = [("memory/long.md", lambda t: t + "- 240: ruồi giấm sống được bao lâu?\n", 2),  # grown at the end
             ("memory/long.md", lambda t: t.replace("- 7: the", "- 7: The", 1), 4),  # one word edited
             ("memory/long.md", lambda t: "\n".join(t.splitlines()[40:]) + "\n", 99),  # every chunk moves
             ("memory/nfd.md", lambda t: t + "- Hoá đơn nước đã thanh toán.\n", 99)]  # one hash, two texts: all read
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=latin) as idx:
        idx.sync()
        assert idx.status()["chunks"] > 12
        assert json.loads(idx.store.get_meta(UNREAD_META)) == {"memory/long.md": {"THAI": 3}}
        assert idx.store.stored_tokens(["memory/nfd.md"])[("memory/nfd.md", chunk_hash(vi))][::2] == (None, 2)
        for rel, edit, most in cases:
            write(ws, rel, edit((ws / rel).read_text(encoding="utf-8")))
            read.clear()
            assert idx.sync().changed == 1
            assert len(read) <= most
            with MemoryIndex(ws, index_path=tmp_path / "rebuilt.sqlite", embedder=latin) as rebuilt:
                rebuilt.sync(force=True)
                assert [json.loads(idx.store.get_meta(k)) for k in keys] == [
                    json.loads(rebuilt.store.get_meta(k)) for k in keys]
        assert set(idx.status()["languages"]) == {"en", "es", "th", "vi"}
        assert set(idx.status()["languages"]) >= {"en", "es", "th", "vi"}


def test_an_index_from_before_the_counts_is_counted_by_its_next_sync(tmp_path: Path) -> None:
    """An index built before this count existed has none; the first sync that finds it missing counts the chunks the
    index holds (here with nothing changed on disk), so a refusal can name its languages without a reindex."""
    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", EN)
    write(ws, "memory/es.md", ES)
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        idx.sync()
    with closing(sqlite3.connect(tmp_path / "i.sqlite")) as db, db:  # the meta an older release wrote
        db.execute("DELETE FROM meta WHERE key IN (?, ?)", (LANGUAGES_META, LANGUAGE_TOTALS_META))
    with MemoryIndex(ws, index_path=tmp_path / "i.sqlite", embedder=HashEmbedder(dims=32)) as idx:
        assert idx.status()["languages"] == {}
        report = idx.sync()
        assert (report.added, report.changed) == (0, 0) and idx.status()["languages"] == {"en": 1, "es": 1}


def test_a_refusal_names_the_languages_of_its_nearest_notes_and_of_the_memory() -> None:
    census = {"en": 50, "vi": 30, "zh": 25, "th": 4}  # zh 23% of the chunks, th 4%
    assert ask_in("when was the water filter cartridge replaced?", census) == ("vi", "zh")
    # its nearest notes first, though few in memory; never the question's own language, nor more than ASK_MOST
    nearest = ["คุณยายไปตรวจความดันโลหิตที่โรงพยาบาลศิริราชเมื่อวันจันทร์", "The filter was changed in May."]
    assert ask_in("when was the water filter cartridge replaced?", census, nearest) == ("th", "vi", "zh")
    assert len(ask_in("when is it?", {"de": 1, "fr": 1, "es": 1, "it": 1, "pt": 1}, [])) <= ASK_MOST
    assert ask_in("lõi lọc nước được thay khi nào?", census) == ("en", "zh")
    # a question too short to read, or a memory in its own language alone, names none
    assert ask_in("E1042", census) == () and ask_in("when was the filter replaced?", {"en": 9}) == ()
    # an Arabic note read as Egyptian Arabic counts as Arabic; an identifier has no language
    assert text_language("زرعنا أشجار الزيتون والليمون في الحديقة الخلفية يوم السبت.") == "ar"
    assert text_language("ERR_CONN_RESET E1042 fetchUserProfile") is None


def test_a_question_refused_across_languages_is_told_where_to_ask_again(tmp_path: Path) -> None:
    """The real model and gate, through memory_search's backend: a question in English about a note written only in
    Spanish is refused (the gate reads questions across languages less surely) and the reply names Spanish; asked
    again in Spanish, as the reply says, it is answered with the note first. A question about nothing in memory is
    told the same, and asked again it is refused again. In a memory written in English alone nothing is named."""
    from hybridmem.serve.service import MemoryService

    ws = tmp_path / "ws"
    write(ws, "MEMORY.md", "# Memory\n\n- User: Mateo, data engineer in Madrid; works for a Berlin startup.\n"
          "- Dog: Tofu, a shiba inu. Vet: Clínica Veterinaria Retiro.\n")
    write(ws, "memory/work.md", "# Work\n\n- The Airflow DAG route_eta_daily moved to 05:30 UTC after the warehouse "
          "hit its credit quota.\n- Kafka consumers switched to cooperative-sticky assignment.\n")
    write(ws, "memory/hogar.md", "# Hogar\n\n- Alquiler: 1.450 € al mes, se paga el día 1.\n- Seguro del coche "
          "(Mapfre) vence el 12 de noviembre; póliza 88-431-2207.\n- La caldera se revisó el 20 de junio.\n")
    write(ws, "hybridmem.toml", '[embedding]\nprovider = "e5"\nshared_cache = false\n')
    with MemoryService(ws, watch=False, preload=False) as svc:
        refused = svc.search("when does the car insurance expire?")
        assert not refused["results"] and refused["ask_in"] == ["es"], refused
        assert refused["message"].endswith("Memory also holds notes in Spanish, and a question is answered less "
                                           "surely across languages: ask it again in Spanish."), refused["message"]
        again = svc.search("¿cuándo vence el seguro del coche?")
        assert again["results"][0]["path"] == "memory/hogar.md" and "ask_in" not in again, again
        assert svc.status()["languages"] == {"en": 2, "es": 1}  # memory_status: chunks per language
        nothing = svc.search("what did the plumber charge for the bathroom sink?")
        assert not nothing["results"] and nothing["ask_in"] == ["es"], nothing
        assert not svc.search("¿cuánto cobró el fontanero por el lavabo del baño?")["results"]
    (ws / "memory" / "hogar.md").unlink()
    with MemoryService(ws, watch=False, preload=False) as svc:
        refused = svc.search("what did the plumber charge for the bathroom sink?")
        assert not refused["results"] and "ask_in" not in refused and "ask it again" not in refused["message"]
