"""Usage and cost: tokens by stage as the LLM server reported them, priced at the operator's
per-million prices, in the trace, the CLI's summary line and --json."""

from __future__ import annotations

import io
import json

from fakes.llm_server import FakeLLMServer

from hugginggpt.commands import cli
from hugginggpt.llms.interface import LLMCall
from hugginggpt.llms.interface import Usage as Tokens
from hugginggpt.observability.usage import Prices, Usage


def test_tokens_are_summed_by_stage_and_priced_per_million():
    calls = [
        LLMCall("plan", [], usage=Tokens(1000, 100)),
        LLMCall("plan", [], usage=Tokens(1200, 80)),
        LLMCall("respond", [], usage=Tokens(500, None)),  # type: ignore[arg-type]  # a server left it out
    ]
    spent = Usage.summed(calls, Prices(input=2.0, output=10.0)).to_json()
    assert spent["by_stage"]["plan"] == {"input_tokens": 2200, "output_tokens": 180, "cost": 0.0062}
    assert (spent["input_tokens"], spent["output_tokens"], spent["total_tokens"]) == (2700, 180, 2880)
    assert spent["cost"] == round((2700 * 2.0 + 180 * 10.0) / 1e6, 6)
    assert Usage.summed(calls).cost is None  # no prices set: no cost is made up


def test_the_cli_shows_tokens_and_cost_in_its_summary_line_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("HUGGINGGPT_LLM_INPUT_PRICE", "3")
    monkeypatch.setenv("HUGGINGGPT_LLM_OUTPUT_PRICE", "15")
    out, err = io.StringIO(), io.StringIO()
    with FakeLLMServer() as llm:
        llm.script("plan", '{"tasks": []}').script("respond", "Hello there, friend!")
        code = cli.main(
            ["--llm-base-url", llm.url, "--workdir", str(tmp_path / "ws"), "--json", "say hello"],
            stdout=out,
            stderr=err,
        )
    assert code == 0, err.getvalue()
    result = json.loads(out.getvalue())
    spent = result["usage"]
    assert set(spent["by_stage"]) == {"plan", "respond"}
    assert spent["by_stage"]["respond"]["output_tokens"] == 3  # the fake server counts words
    assert spent["cost"] == round((spent["input_tokens"] * 3 + spent["output_tokens"] * 15) / 1e6, 6) > 0
    trace = json.loads(open(result["trace_file"], encoding="utf-8").read())
    assert trace["usage"] == spent
    line = next(line for line in err.getvalue().splitlines() if line.startswith("[done]"))
    assert (
        f"{spent['total_tokens']:,} tokens ({spent['input_tokens']:,} in, {spent['output_tokens']} out)"
        in line
    )
    assert f"cost {spent['cost']:.6g}" in line
