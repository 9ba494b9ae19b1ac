"""The catalog: shipped coverage, ranking, the indexed file, user files, and the prompt budget."""

from __future__ import annotations

import json
import random

import pytest

from hugginggpt.catalog import Catalog, ModelCard, load_catalog, prompt_lines
from hugginggpt.catalog.indexed_file import IndexedFile, write_indexed
from hugginggpt.catalog.model_catalog import SHIPPED
from hugginggpt.catalog.prompt import estimate_tokens
from hugginggpt.catalog.rules import LOCAL_LIBRARIES
from hugginggpt.commands.cli import parser, settings_from_args
from hugginggpt.config import ENV_NAMES
from hugginggpt.factory import build_catalog
from hugginggpt.tasks import CONTROLS, TASKS

# Tasks for which the reference list has fewer than 20 models, and the ControlNet family it lacks.
THIN = {"visual-question-answering", "text-to-video"} | {
    f"{c}-{kind}" for c in CONTROLS for kind in ("control", "text-to-image")
}


@pytest.fixture
def no_env(monkeypatch):
    monkeypatch.delenv(ENV_NAMES["catalog_paths"], raising=False)


@pytest.fixture(scope="module")
def shipped() -> Catalog:
    return load_catalog([], shipped=SHIPPED)


# ---- the shipped catalog ------------------------------------------------------------------------


def test_shipped_covers_every_task_with_a_local_candidate(shipped):
    """Every task has candidates; every task the local runtime serves has a local one."""
    import models_local

    supported = models_local.SUPPORTED_TASKS
    assert len(supported) >= 30  # all but the annotator tasks it cannot serve (hed, mlsd)
    for task in TASKS:
        assert shipped.candidates(task, k=1), f"{task} has no candidate at all"
        if task in supported:
            local = shipped.candidates(task, k=1, runnable=lambda c: c.local)
            assert local, f"{task} has no model the local runtime can run"
            assert local[0].library in LOCAL_LIBRARIES


def test_shipped_has_20_models_per_task_where_the_reference_has_them(shipped):
    for task in TASKS:
        n = len(list(shipped.ranked(task)))
        assert n >= (1 if task in THIN else 20), (task, n)
    assert len(shipped) >= 700


def test_shipped_local_flags_agree_with_the_runtime(shipped):
    """The runtime's own cheap check accepts every local-flagged card, and no card of a task it
    does not serve is flagged local."""
    import models_local

    supported = models_local.SUPPORTED_TASKS
    for card in shipped:
        if not card.local:
            continue
        assert card.task in supported, card
        assert models_local.can_run(card.task, card.id, library=card.library, size_bytes=0), card


def test_shipped_cards_are_well_formed(shipped):
    for card in shipped:
        assert card.task in TASKS
        assert card.description and len(card.description) < 300
        assert card.downloads >= 0 and card.likes >= 0
        if not card.counts_known:
            assert card.downloads == 0 and card.likes == 0  # unknown counts are never invented
        assert not card.local or card.library in LOCAL_LIBRARIES


def test_sizes_stop_huge_models_before_download(shipped):
    bloom = shipped.get("bigscience/bloom", "text-generation")
    assert bloom.size_bytes >= 300 * 10**9 and bloom.local  # local by type; too big by size

    def fits(c):
        return c.size_bytes is None or c.size_bytes <= 8 * 2**30

    assert all(fits(c) for c in shipped.candidates("text-generation", k=5, runnable=fits))
    assert "bigscience/bloom" not in [
        c.id for c in shipped.candidates("text-generation", k=30, runnable=fits)
    ]


def test_controlnet_entries_are_known_public_models(shipped):
    canny = [c.id for c in shipped.ranked("canny-text-to-image")]
    assert canny[0] == "lllyasviel/sd-controlnet-canny"
    sdxl = shipped.get("diffusers/controlnet-canny-sdxl-1.0", "canny-text-to-image")
    assert sdxl is not None and not sdxl.local  # the local runtime pairs ControlNets with SD 1.5
    assert not sdxl.counts_known and sdxl.downloads == 0
    seg = shipped.get("openmmlab/upernet-convnext-small", "seg-control")
    assert seg is not None and seg.local and seg.library == "transformers"


def test_shipped_indexed_file_opens_lazily(shipped, tmp_path):
    indexed = IndexedFile(SHIPPED)
    assert indexed.count == len(shipped)
    assert not indexed._parsed  # nothing parsed until a task is asked for
    top = next(indexed.ranked("summarization"))
    assert list(indexed._parsed) == ["summarization"] and len(indexed._parsed["summarization"]) == 1
    assert top.task == "summarization"


# ---- ranking and the indexed file ----------------------------------------------------------------


def card(model_id: str, task: str = "summarization", downloads: int = 0, likes: int = 0, **kw) -> ModelCard:
    return ModelCard(id=model_id, task=task, downloads=downloads, likes=likes, **kw)


def test_ranking_downloads_then_likes_and_only_runnable():
    catalog = Catalog(
        [
            card("a", downloads=10, likes=1),
            card("b", downloads=10, likes=5),
            card("c", downloads=99),
            card("d", downloads=1, local=True),
            card("e", task="translation", downloads=1000),
        ]
    )
    assert [c.id for c in catalog.candidates("summarization", k=3)] == ["c", "b", "a"]
    assert [c.id for c in catalog.candidates("summarization", k=5, runnable=lambda c: c.local)] == ["d"]
    assert catalog.candidates("text-to-video") == []
    assert len(catalog) == 5 and catalog.tasks() == ["summarization", "translation"]


def test_indexed_file_with_overlay_ranks_like_a_plain_sort(tmp_path):
    rng = random.Random(7)
    tasks = ["summarization", "translation", "text-to-image"]
    base = [card(f"m{i}", rng.choice(tasks), rng.randrange(50), rng.randrange(5)) for i in range(400)]
    odd = [card('ü-ß/"q"\\1', "translation", 3), card("日本/モデル", "translation", 2)]  # escaped as written
    write_indexed(base + odd, tmp_path / "s.jsonl")
    catalog = Catalog(shipped=IndexedFile(tmp_path / "s.jsonl"))
    overrides = [card(f"m{i}", base[i].task, rng.randrange(50), 0) for i in range(0, 400, 7)]
    extra = [card(f"new{i}", rng.choice(tasks), rng.randrange(50)) for i in range(20)]
    for c in overrides + extra:
        catalog.add(c)
    for c in odd:
        assert catalog.get(c.id, "translation") == c
    catalog.add(card(odd[0].id, "translation", 10**6))
    assert catalog.candidates("translation", k=1)[0].id == odd[0].id
    final = {(c.task, c.id): c for c in base + odd[1:] + overrides + extra}
    final[("translation", odd[0].id)] = card(odd[0].id, "translation", 10**6)

    def runnable(c):
        return hash(c.id) % 3 != 0

    for task in tasks:
        expected = sorted((c for c in final.values() if c.task == task), key=lambda c: c.rank_key)
        got = list(catalog.ranked(task))
        assert [c.rank_key for c in got] == [c.rank_key for c in expected]
        assert {c.id for c in got} == {c.id for c in expected}
        top = catalog.candidates(task, k=4, runnable=runnable)
        assert [c.rank_key for c in top] == [c.rank_key for c in expected if runnable(c)][:4]
    assert len(catalog) == len(final)
    assert catalog.get("m7", base[7].task).downloads == overrides[1].downloads


# ---- user files ---------------------------------------------------------------------------------


def test_user_files_add_override_and_report_bad_entries(tmp_path, no_env):
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text(
        "models:\n"
        "  - id: my-summariser\n"  # line 2: a local folder, relative to this file
        "    task: summarization\n"
        "    path: my-finetune\n"
        "    description: Our own summariser.\n"
        "  - id: acme/hosted-sum\n"  # line 6: its own endpoint
        "    task: summarization\n"
        "    endpoint_url: http://127.0.0.1:9/generate\n"
        "    downloads: 5000000000\n"
        "  - id: broken\n"  # line 10: unknown task
        "    task: make-coffee\n"
        "  - {id: typo, task: summarization, endpont_url: http://x}\n"  # line 12: unknown field
    )
    jsonl_file = tmp_path / "more.jsonl"
    jsonl_file.write_text(
        '{"id": "facebook/bart-large-cnn", "task": "summarization", "endpoint_url": "https://my.server/bart"}\n'
        "\n"
        '{"id": "x", "task": "summarization", "downloads": -3}\n'  # line 3: bad count
        '{"id": "y", "task": "summarization", "path": "missing-folder"}\n'  # line 4: no such folder
        "{not json\n"  # line 5
        '{"id": "z", "task": "summarization", "endpoint_url": "ftp://nope"}\n'  # line 6
        '{"id": "my-summariser", "task": "summarization", "likes": 7}\n'  # line 7: overrides line 2
    )
    catalog = load_catalog([yaml_file, jsonl_file])
    where = sorted(p.split(": ")[0] for p in catalog.problems)
    assert where == sorted(
        [
            f"{yaml_file}:10",
            f"{yaml_file}:12",
            f"{jsonl_file}:3",
            f"{jsonl_file}:4",
            f"{jsonl_file}:5",
            f"{jsonl_file}:6",
        ]
    )
    assert any("make-coffee" in p for p in catalog.problems)
    assert any("endpont_url" in p for p in catalog.problems)

    mine = catalog.get("my-summariser", "summarization")
    assert mine.path == str(folder.resolve()) and mine.source == mine.path
    assert mine.library == "transformers" and mine.local  # config.json: a transformers folder
    assert mine.likes == 7 and mine.description == "Our own summariser."  # merged over line 2
    hosted = catalog.get("acme/hosted-sum")
    assert hosted.endpoint_url == "http://127.0.0.1:9/generate" and not hosted.local
    assert catalog.candidates("summarization", k=1)[0].id == "acme/hosted-sum"  # most downloads
    bart = catalog.get("facebook/bart-large-cnn", "summarization")
    assert bart.endpoint_url == "https://my.server/bart"
    assert bart.downloads > 1_000_000 and bart.local  # shipped facts kept, only the URL changed
    assert catalog.get("broken") is None and catalog.get("x") is None


def test_env_var_files_load_before_cli_files(tmp_path, monkeypatch):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"id": "m", "task": "translation", "downloads": 1, "description": "from env"}\n')
    second.write_text('{"id": "m", "task": "translation", "description": "from cli"}\n')
    monkeypatch.setenv(
        ENV_NAMES["catalog_paths"], f"{first}{__import__('os').pathsep}{tmp_path / 'gone.yaml'}"
    )
    settings = settings_from_args(parser().parse_args(["--catalog", str(second), "hi"]))
    catalog = build_catalog(settings)
    m = catalog.get("m", "translation")
    assert m.description == "from cli" and m.downloads == 1
    assert catalog.problems == [
        f"{tmp_path / 'gone.yaml'}:0: cannot read the file (No such file or directory)"
    ]


def test_yaml_list_and_syntax_error_lines(tmp_path, no_env):
    good = tmp_path / "list.yml"
    good.write_text("- id: t\n  task: translation\n  languages: fr\n  local: true\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- id: a\n  task: translation\n- id: [oops\n")
    catalog = load_catalog([good, bad], shipped=None)
    assert catalog.get("t").languages == ("fr",) and catalog.get("t").local
    assert len(catalog.problems) == 1 and catalog.problems[0].startswith(f"{bad}:")
    assert len(catalog) == 1  # a file that does not parse adds nothing


def test_malformed_user_files_are_reported_with_lines_not_raised(tmp_path, no_env):
    """Bytes that are not UTF-8, YAML keys that are numbers, unusable paths, runaway nesting: each a
    problem with file and line, and the valid entries of the same file still load."""
    jsonl = tmp_path / "odd.jsonl"
    jsonl.write_bytes(
        b'\xef\xbb\xbf{"id": "good-1", "task": "translation"}\n'  # line 1, after a byte-order mark
        b'{"id": "latin-\xe9", "task": "translation"}\n'  # line 2: Latin-1, not UTF-8
        b'{"id": "nul", "task": "translation", "path": "a\\u0000b"}\n'  # line 3: NUL in a path
        + b"["
        * 50_000
        + b"\n"  # line 4: nested past the recursion limit
        b'{"id": "good-2", "task": "translation"}\n'  # line 5
    )
    yaml_file = tmp_path / "odd.yaml"
    yaml_file.write_text(
        "- id: good-3\n  task: translation\n"  # line 1
        "- id: numbered\n  task: translation\n  1: one\n  foo: bar\n"  # line 3: number and word keys
        "- id: homeless\n  task: translation\n  path: ~no-such-user-here/model\n"  # line 7
    )
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"- id: a\n  task: translation\n  description: caf\xe9\n")  # line 3
    catalog = load_catalog([jsonl, yaml_file, latin], shipped=None)
    where = sorted(p.split(": ")[0] for p in catalog.problems)
    assert where == sorted(
        [f"{jsonl}:2", f"{jsonl}:3", f"{jsonl}:4", f"{yaml_file}:3", f"{yaml_file}:7", f"{latin}:3"]
    )
    assert sorted(card.id for card in catalog.candidates("translation", k=10)) == [
        "good-1",
        "good-2",
        "good-3",
        "numbered",  # its unknown keys are ignored, with a warning
    ]


def test_the_hubs_field_names_are_accepted_and_unknown_fields_only_warn(tmp_path):
    hub_style = tmp_path / "from-the-hub.jsonl"
    hub_style.write_text(
        '{"modelId": "acme/sum", "pipeline_tag": "summarization", "library_name": "transformers",'
        ' "downloads": 42, "createdAt": "2024-01-01", "sha": "abc"}\n'
    )
    catalog = load_catalog([hub_style], shipped=None)
    card = catalog.get("acme/sum", "summarization")
    assert card is not None and card.library == "transformers" and card.downloads == 42
    assert catalog.problems == [
        f"{hub_style}:1: warning: unknown field(s) createdAt, sha ignored (known: "
        + catalog.problems[0].split("(known: ")[1]
    ]


def test_concurrent_first_queries_never_see_a_half_merged_task(tmp_path, no_env, monkeypatch):
    """The app's conversations share one catalog; a task's user entries are merged on its first
    query. A second conversation asking meanwhile must wait for all of them, not rank a part."""
    import threading

    from hugginggpt.catalog import model_catalog

    user = tmp_path / "mine.jsonl"
    user.write_text(
        "".join(
            json.dumps({"id": f"mine-{i}", "task": "translation", "downloads": 10 - i}) + "\n"
            for i in range(3)
        )
    )
    catalog = load_catalog([user], shipped=None)
    merging, release = threading.Event(), threading.Event()
    real = model_catalog.card_from_entry

    def slow(fields, earlier):  # the real merge, held after its first card until the test says
        card = real(fields, earlier)
        merging.set()
        release.wait(5)
        return card

    monkeypatch.setattr(model_catalog, "card_from_entry", slow)
    results = {}

    def ask(name):
        results[name] = [c.id for c in catalog.candidates("translation", k=10)]

    first = threading.Thread(target=ask, args=("first",))
    second = threading.Thread(target=ask, args=("second",))
    first.start()
    assert merging.wait(5)
    second.start()
    second.join(0.3)  # under the fix it waits for the first merge to end
    release.set()
    first.join(10)
    second.join(10)
    assert results["first"] == results["second"] == ["mine-0", "mine-1", "mine-2"]


# ---- the prompt budget --------------------------------------------------------------------------


def test_prompt_lines_fit_the_budget_and_keep_ids(shipped):
    cards = shipped.candidates("text-to-image", k=5)
    for budget in (40, 120, 400, 5000):
        lines = prompt_lines(cards, max_tokens=budget)
        assert len(lines) == 5
        assert all(f'"{c.id}"' in line for c, line in zip(cards, lines, strict=False))
        if budget >= 120:
            assert estimate_tokens("\n".join(lines)) <= budget
    short = prompt_lines(cards, max_tokens=150)
    assert any(line.endswith("...") for line in short)  # descriptions are what gets cut
    roomy = prompt_lines(cards, max_tokens=5000)
    assert all(c.description in line for c, line in zip(cards, roomy, strict=False))
    assert f"(downloads: {cards[0].downloads}, likes: {cards[0].likes})" in roomy[0]


def test_prompt_lines_mark_unknown_counts():
    lines = prompt_lines(
        [card("x/cn", task="canny-text-to-image", counts_known=False, description="d")], max_tokens=100
    )
    assert "downloads: n/a" in lines[0] and lines[0].endswith(": d")
    sized = prompt_lines([card("x/big", size_bytes=14 * 10**9, description="d")], max_tokens=100)[0]
    assert "; size: 14.0 GB" in sized
    assert prompt_lines([], max_tokens=100) == []


def test_jsonl_roundtrip_of_cards(tmp_path):
    from hugginggpt.catalog.card import ProviderRoute

    c = card("a/b", languages=("en", "fr"), tags=("x",), size_bytes=10, counts_known=False)
    assert ModelCard.from_json(json.loads(json.dumps(c.to_json()))) == c
    # Providers: unknown (None) is left out; none known (()) stays, as an empty list.
    served = card("a/c", providers=(ProviderRoute("fal-ai", "live", "summarization"),))
    unserved = card("a/d", providers=())
    assert "providers" not in c.to_json() and unserved.to_json()["providers"] == ()
    write_indexed([c, served, unserved], tmp_path / "cards.jsonl")
    indexed = IndexedFile(tmp_path / "cards.jsonl")
    assert [indexed.find("summarization", x.id) for x in (c, served, unserved)] == [c, served, unserved]


# ---- the command line ---------------------------------------------------------------------------


def test_list_and_show_commands(tmp_path, capsys, no_env):
    from hugginggpt.catalog.__main__ import main

    user = tmp_path / "u.jsonl"
    user.write_text('{"id": "me/sum", "task": "summarization", "downloads": 999999999}\n{"id": 1}\n')
    assert main(["list", "--catalog", str(user), "--task", "summarization", "-k", "2"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0] == "summarization:" and lines[1].startswith('  - "me/sum" (downloads: 999999999')
    assert len(lines) == 3 and f"{user}:2:" in err
    assert main(["list"]) == 0
    out, _ = capsys.readouterr()
    assert len(out.splitlines()) == len(TASKS) and "canny-control" in out
    assert main(["show", "gpt2"]) == 0
    assert json.loads(capsys.readouterr().out)["task"] == "text-generation"
    assert main(["show", "no/such-model"]) == 1
