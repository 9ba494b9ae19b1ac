"""The settings reference, generated from `Settings` (hugginggpt/config.py) so it cannot drift: one
table per section (core, app, server), each field with its environment variable, its default and the
comment beside it in the source. The docs site puts it into docs/settings.md (tools/docs_hooks.py);
`python tools/settings_table.py` prints it."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hugginggpt.config import ENV_NAMES, Settings  # noqa: E402

SOURCE = ROOT / "hugginggpt" / "config.py"
_SECTION = re.compile(r"^    # ==== (\w+): (.*)$")
_FIELD = re.compile(r"^    (\w+): [^#]*?(?:#\s*(.*))?$")
_GROUP = re.compile(r"^    # ([^=].*)$")  # a comment line over a group of fields


def table() -> str:
    """The Markdown: a heading and a table per section of `Settings`, fields in source order."""
    defaults = {f.name: _default(f) for f in dataclasses.fields(Settings)}
    out: list[str] = []
    for line in SOURCE.read_text(encoding="utf-8").split("\n"):
        if section := _SECTION.match(line):
            out += ["", f"### {section.group(1)}", "", section.group(2).capitalize(), ""]
            out += ["| Setting | Environment variable | Default | What it is |", "|---|---|---|---|"]
        elif (group := _GROUP.match(line)) and out:
            out.append(f"| *{group.group(1).replace('|', '/')}* | | | |")
        elif (field := _FIELD.match(line)) and field.group(1) in defaults:
            name = field.group(1)
            env = ENV_NAMES.get(name, f"HUGGINGGPT_{name.upper()}")
            what = (field.group(2) or "").replace("|", "\\|")
            out.append(f"| `{name}` | `{env}` | {defaults.pop(name)} | {what} |")
    assert not defaults, f"fields outside a section of hugginggpt/config.py: {sorted(defaults)}"
    return "\n".join(out).strip() + "\n"


def _default(f: dataclasses.Field) -> str:
    value = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
    if value is None or value == "" or value == ():
        return "(none)"
    return f"`{value}`"


if __name__ == "__main__":
    print(table())
