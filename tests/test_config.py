"""Settings: defaults, YAML file, environment, explicit overrides, in that order."""

import os

import pytest

from hugginggpt.config import Settings, load_settings


def test_defaults_without_anything():
    s = load_settings(environ={})
    assert s == Settings() and not s.uses_server and s.inference == "hybrid" and s.top_k == 5


def test_file_then_environment_then_overrides(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("llm_base_url: http://file/v1\ntop_k: 3\nallow_urls: true\ncatalog_paths: [a.jsonl]\n")
    env = {"HUGGINGGPT_CONFIG": str(config), "HUGGINGGPT_TOP_K": "7", "OPENAI_API_KEY": "sk-env"}
    s = load_settings(environ=env)
    assert (s.llm_base_url, s.top_k, s.allow_urls, s.catalog_paths, s.llm_api_key) == (
        "http://file/v1",
        7,
        True,
        ("a.jsonl",),
        "sk-env",
    )
    assert (
        s.with_overrides(top_k=2, llm_model=None).top_k == 2
        and s.with_overrides(llm_model=None).llm_model is None
    )
    assert "sk-env" not in repr(s)


@pytest.mark.parametrize(
    "env, words",
    [
        ({"HUGGINGGPT_INFERENCE": "cloud"}, "inference must be one of"),
        ({"HUGGINGGPT_TOP_K": "0"}, "at least 1"),
        ({"HUGGINGGPT_TOP_K": "many"}, "invalid literal"),
        ({"HUGGINGGPT_MAX_PLAN_RETRIES": "-1"}, "max_plan_retries"),
        ({"HUGGINGGPT_TASK_TIMEOUT": "0"}, "task_timeout"),
        ({"HUGGINGGPT_LLM_TIMEOUT": "-5"}, "llm_timeout"),
    ],
)
def test_bad_values_are_clear_errors(env, words):
    with pytest.raises(ValueError, match=words):
        load_settings(environ=env)


def test_unknown_keys_in_the_file_are_refused(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("top_kk: 3\n")
    with pytest.raises(ValueError, match="unknown settings: top_kk"):
        load_settings(config, environ={})


@pytest.mark.parametrize(
    "env, public",
    [
        ({}, False),
        ({"GRADIO_SERVER_NAME": "127.0.0.1"}, False),
        ({"GRADIO_SERVER_NAME": "localhost"}, False),
        ({"GRADIO_SERVER_NAME": "0.0.0.0"}, True),  # a LAN sees it
        ({"GRADIO_SERVER_NAME": "192.168.1.5"}, True),
        ({"SPACE_ID": "me/hugginggpt"}, True),
        ({"GRADIO_SERVER_NAME": "0.0.0.0", "HUGGINGGPT_PUBLIC": "0"}, False),  # the operator's explicit word
        ({"HUGGINGGPT_PUBLIC": "1"}, True),
    ],
)
def test_public_means_reachable_by_strangers(env, public):
    assert load_settings(environ=env).is_public is public


def test_the_app_limits_and_catalog_files_are_settings_too(tmp_path):
    s = load_settings(
        environ={
            "HUGGINGGPT_APP_MAX_UPLOAD_MB": "2.5",
            "HUGGINGGPT_APP_CONCURRENCY": "3",
            "HUGGINGGPT_CATALOG": f"{tmp_path / 'a.yaml'}{os.pathsep}{tmp_path / 'b.jsonl'}",
        }
    )
    assert (s.max_upload_bytes, s.app_concurrency) == (2_500_000, 3)
    assert s.catalog_paths == (str(tmp_path / "a.yaml"), str(tmp_path / "b.jsonl"))
    with pytest.raises(ValueError, match="app_concurrency"):
        load_settings(environ={"HUGGINGGPT_APP_CONCURRENCY": "0"})


def sections() -> dict[str, list[str]]:
    """The Settings fields under each `# ==== <section>:` comment of hugginggpt/config.py, in order."""
    import ast
    import inspect
    import re

    from hugginggpt import config

    source = inspect.getsource(config)
    heads = [
        (n, m.group(1))
        for n, line in enumerate(source.splitlines(), 1)
        if (m := re.match(r"    # ==== (\w+):", line))
    ]
    cls = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    out: dict[str, list[str]] = {name: [] for _, name in heads}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            section = [name for n, name in heads if n < node.lineno]
            assert section, f"{node.target.id} is above the first section"
            out[section[-1]].append(node.target.id)
    return out


def test_settings_are_grouped_by_audience_and_the_core_reads_only_its_own():
    import re
    from dataclasses import fields
    from pathlib import Path

    groups = sections()
    assert list(groups) == ["core", "app", "server"]
    assert sorted(sum(groups.values(), [])) == sorted(f.name for f in fields(Settings))
    root = Path(__file__).resolve().parent.parent
    read = set()
    for path in (root / "hugginggpt").rglob("*.py"):
        if path.name != "config.py":
            read |= set(re.findall(r"settings\.(\w+)", path.read_text(encoding="utf-8")))
    assert read & set(groups["app"] + groups["server"]) == set()  # those are the page's and the server's
    documented = (root / "docs" / "settings.md").read_text(encoding="utf-8")  # by hand, besides the table
    for name in sum(groups.values(), []):
        assert f"`{name}`" in documented, f"docs/settings.md's prose does not list {name}"
