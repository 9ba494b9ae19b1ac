"""Settings that stay, in a real headless Chromium at 1280x900 and 390x844 (issue 34): every field
of the Settings panel, the limits on the models included, is kept by the browser across a reload and
an app restart; a stored value that is not valid is corrected and said, not dropped silently."""

import socket

import pytest
from app_support import app_settings, fake_catalog, running_app
from test_browser import SCREENSHOTS, _browser_or_skip, chromium
from test_browser import open_settings as open_sidebar_settings

SIZES = [(1280, 900), (390, 844)]
STORE = "() => localStorage.getItem('hugginggpt')"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def open_settings(page) -> None:
    page.locator("#status").get_by_text("LLM:").wait_for()
    open_sidebar_settings(page)  # in the sidebar, which a phone opens first
    page.get_by_label("Licences allowed (e.g. mit,apache-2.0)").wait_for()


def typed(page, label: str, value: str) -> None:
    """`value` typed into the field, and the browser's store written with it."""
    before = page.evaluate(STORE)
    field = page.get_by_label(label)
    field.fill(value)
    field.blur()
    page.wait_for_function(f"before => ({STORE})() !== before", arg=before)


def shown(page) -> dict[str, str]:
    return {
        "top_k": page.get_by_label("Candidate models per task (top-K)").input_value(),
        "max_model": page.get_by_label("Largest model (GB, 0: no limit)").input_value(),
        "max_download": page.get_by_label("Most to download per request (GB)").input_value(),
        "licences": page.get_by_label("Licences allowed (e.g. mit,apache-2.0)").input_value(),
        "model": page.get_by_label("LLM model").input_value(),
        "hybrid": str(page.get_by_label("hybrid").is_checked()),
    }


@pytest.mark.browser
def test_every_setting_is_kept_across_a_reload_and_a_restart_and_a_bad_one_is_corrected(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    settings, port = app_settings(llm_server, tmp_path / "ws"), free_port()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    want = {
        "top_k": "3", "max_model": "0.5", "max_download": "2", "licences": "mit",
        "model": "fake-controller", "hybrid": "True",
    }  # fmt: skip
    with sync_playwright() as p, chromium(p) as browser:
        contexts = {
            size: browser.new_context(viewport={"width": size[0], "height": size[1]}) for size in SIZES
        }
        pages = {size: context.new_page() for size, context in contexts.items()}
        with running_app(settings, port=port, catalog=fake_catalog()) as demo:
            for page in pages.values():
                page.set_default_timeout(30_000)
                page.goto(demo.local_url)
                open_settings(page)
                before = page.evaluate(STORE)
                page.get_by_label("hybrid").check()
                page.wait_for_function(f"before => ({STORE})() !== before", arg=before)
                typed(page, "Candidate models per task (top-K)", "3")
                typed(page, "Largest model (GB, 0: no limit)", "0.5")
                typed(page, "Most to download per request (GB)", "2")
                typed(page, "Licences allowed (e.g. mit,apache-2.0)", "mit")
                typed(page, "LLM model", "fake-controller")
                page.reload()
                open_settings(page)
                assert shown(page) == want
        with running_app(settings, port=port, catalog=fake_catalog()) as demo:  # the app restarted
            for (width, height), page in pages.items():
                page.goto(demo.local_url)
                open_settings(page)
                assert shown(page) == want
                assert not page.locator("#settings-corrected").is_visible()
                page.locator("#settings").scroll_into_view_if_needed()
                page.screenshot(path=str(SCREENSHOTS / f"settings_after_restart_{width}x{height}.png"))
            # A value the browser kept that is not valid: shown corrected, with what it was.
            page = pages[SIZES[0]]
            typed(page, "Candidate models per task (top-K)", "99")
            page.reload()
            page.locator(".toast-body").get_by_text("A saved setting was not valid").wait_for()
            open_settings(page)
            note = page.locator("#settings-corrected")
            note.get_by_text("the saved 99 is not a whole number from 1 to 10; now 10").wait_for()
            assert page.get_by_label("Candidate models per task (top-K)").input_value() == "10"
        for context in contexts.values():
            context.close()
