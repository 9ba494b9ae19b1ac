"""What a browser saved of the Settings panel is read back valid (webui.page.settings_panel.restored):
every field kept, the limits too; a stored value that is not valid is corrected and said, never
dropped silently."""

from hugginggpt.config import Settings
from webui.page import saved
from webui.page.settings_panel import restored

SERVER = Settings(top_k=5, inference="hybrid", max_model_gb=4.0, max_download_gb=0.0, licenses=("mit",))


def test_every_field_a_browser_saved_comes_back_as_it_was():
    values = {
        "base_url": "https://llm.example/v1", "model": "m", "mode": "local", "top_k": 3, "review": True,
        "max_model_gb": 0.5, "max_download_gb": 2, "licenses": "mit,apache-2.0",
    }  # fmt: skip
    store = saved.with_settings(saved.empty(), values, keep_key=True, api_key="sk-x")
    back, notes = restored(saved.normal(store)["settings"], SERVER)
    assert notes == []
    assert back == {**values, "api_key": "sk-x"}


def test_a_field_never_saved_takes_the_servers_value():
    back, notes = restored({}, SERVER)
    assert notes == []
    assert (back["mode"], back["top_k"], back["max_model_gb"], back["licenses"]) == ("hybrid", 5, 4.0, "mit")
    assert back["base_url"] == back["model"] == back["api_key"] == "" and back["review"] is False


def test_each_invalid_stored_value_is_corrected_and_said():
    stored = {
        "mode": "cloud", "top_k": 99, "max_model_gb": -1, "max_download_gb": "lots",
        "licenses": "MIT, apache 2.0, <b>x</b>",
    }  # fmt: skip
    back, notes = restored(stored, SERVER)
    assert (back["mode"], back["top_k"], back["max_model_gb"], back["max_download_gb"]) == (
        "hybrid",
        10,
        4.0,
        0.0,
    )
    assert back["licenses"] == "mit"
    assert len(notes) == 5, notes
    assert "Where models run: the saved `cloud` is not one of local, hosted, hybrid" in notes[0]
    assert (
        "Candidate models per task (top-K): the saved `99` is not a whole number from 1 to 10; now 10."
        in notes
    )
    assert any("Licences allowed" in n and "`apache 2.0`" in n and "`<b>x</b>`" in n for n in notes)


def test_a_top_k_that_is_no_number_falls_back_to_the_servers():
    back, notes = restored({"top_k": "many"}, SERVER)
    assert back["top_k"] == 5 and notes == [
        "Candidate models per task (top-K): the saved `many` is not a whole number from 1 to 10; now 5."
    ]
