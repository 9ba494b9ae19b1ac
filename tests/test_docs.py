"""The README starts right and stays short; the reference lives in docs/ (an mkdocs site), and its
settings table is generated from `Settings`, so it cannot drift (issue 34)."""

import dataclasses
import importlib.util
import re
from pathlib import Path

import yaml

from hugginggpt.config import ENV_NAMES, Settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
TEST_COMMAND = "pip install -r requirements-dev.txt && python -m pytest"


def load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_starts_with_the_two_commands_after_the_space_front_matter():
    assert len(README.splitlines()) < 250
    front, after = README.split("\n---\n", 1)
    assert front.startswith("---\ntitle: HuggingGPT")
    first_block = after.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first_block[0].startswith("pip install -r requirements.txt && python app.py")
    assert first_block[1].startswith(TEST_COMMAND)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[-1] == TEST_COMMAND  # CI runs exactly the README's test command
    assert "mkdocs build --strict" in "\n".join(ci)
    quick = README.split("## Quick start", 1)[1]
    order = [
        "python3 -m venv",
        "download.pytorch.org/whl/cpu",
        "pip install -r requirements.txt",
        "python app.py",
    ]
    assert [quick.index(step) for step in order] == sorted(quick.index(step) for step in order)
    image = re.search(r"!\[[^\]]*\]\(([^)]+)\)", README).group(1)
    assert (ROOT / image).is_file()
    for link in re.findall(r"\]\((docs/[^)#]+)\)", README):
        assert (ROOT / link).is_file(), link


def test_every_docs_page_is_in_the_sites_navigation():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(re.findall(r"[\w-]+\.md", str(config["nav"])))
    assert listed == {p.name for p in (ROOT / "docs").glob("*.md")}
    assert config["theme"]["name"] == "material" and "tools/docs_hooks.py" in str(config["hooks"])


def test_the_settings_table_is_generated_from_settings_with_every_field():
    table = load_tool("settings_table").table()
    for f in dataclasses.fields(Settings):
        env = ENV_NAMES.get(f.name, f"HUGGINGGPT_{f.name.upper()}")
        assert f"| `{f.name}` | `{env}` |" in table, f.name
    assert "| `top_k` | `HUGGINGGPT_TOP_K` | `5` |" in table
    assert "| `workdir` | `HUGGINGGPT_WORKDIR` | `workspaces` |" in table
    page = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    hooks = load_tool("docs_hooks")
    assert hooks.MARKER in page and table in hooks.on_page_markdown(page, None, None, None)
