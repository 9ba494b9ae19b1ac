"""The status line over the chat says in plain words which LLM answers, where models run and how
many there are (issue 34), never a key or a URL's credentials."""

from hugginggpt.config import Settings
from webui.page.status import status_line


def test_the_apps_own_endpoint_is_said_in_plain_words():
    s = Settings(llm_base_url="http://localhost:11434/v1", llm_model="qwen2.5:7b", inference="hybrid")
    line = status_line(
        s, endpoint="hybrid: local (in-process transformers/diffusers runtime), then hosted", catalog_size=730
    )
    assert line == (
        "**Your LLM:** qwen2.5:7b at http://localhost:11434/v1 · models run here first, then on Hugging "
        "Face · 730 models · top-K 5"
    )
    experts = Settings(inference="hybrid", experts_url="http://127.0.0.1:8000", llm_base_url="http://x/v1")
    assert "models run on the expert server first, then here, then on Hugging Face" in status_line(
        experts, endpoint="hybrid: remote ..., then local", catalog_size=1
    )
    hosted = Settings(inference="hosted", llm_base_url="http://u:secret@x/v1")
    line = status_line(hosted, endpoint="hosted: huggingface_hub InferenceClient", catalog_size=3)
    assert "models run on Hugging Face · 3 models" in line and "secret" not in line


def test_an_endpoint_of_its_own_is_named_as_it_describes_itself():
    line = status_line(Settings(inference="local"), endpoint="fake", catalog_size=4, catalog_problems=2)
    assert "(a local model: no LLM server is configured)" in line
    assert "models run on fake · 4 models (2 catalog entries refused: see the server log)" in line
