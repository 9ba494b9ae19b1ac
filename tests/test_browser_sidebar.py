"""Conversations in a sidebar (issue 34), in a real headless Chromium at 1280x900 and 390x844: the
list shows this browser's conversations with the open one marked; New makes one; a rename changes
the title in the list (a title another conversation has takes a number) and survives a reload;
delete asks first, and Undo brings the conversation back; Settings opens from the sidebar. The
review toggle, the trace upload and the message box are in view in the empty chat, and Stop while a
run goes. On a phone the sidebar starts closed and covers nothing; on a wide screen it is open
beside the chat."""

import pytest
from app_support import app_settings, fake_catalog, photo, running_app
from fakes.endpoints import FakeEndpoint
from test_browser import SCREENSHOTS, _browser_or_skip, chromium, open_settings, open_sidebar

SIZES = [(1280, 900), (390, 844)]
LABEL_AFTER = "(css) => getComputedStyle(document.querySelector(css), '::after').content"
# Where an element's text is drawn (its box may start under a neighbour, its padding clear of it).
TEXT_BOX = """(css) => {
  const range = document.createRange();
  range.selectNodeContents(document.querySelector(css));
  const r = range.getBoundingClientRect();
  return {x: r.x, y: r.y, width: r.width, height: r.height};
}"""
IN_VIEW = """sel => { const r = document.querySelector(sel).getBoundingClientRect();
  return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; }"""
LISTED = "#earlier label"
MARKED = "#earlier label.selected"


def listed(page) -> list[str]:
    return [t.strip() for t in page.locator(LISTED).all_inner_texts()]


def marked(page) -> str:
    return page.locator(MARKED).inner_text().strip()


def ask(page, text: str) -> None:
    page.locator("#request textarea").fill(text)
    page.locator("#request textarea").press("Enter")


@pytest.mark.browser
def test_the_sidebar_lists_makes_renames_and_deletes_conversations(llm_server, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    endpoint = FakeEndpoint(duration=1.5)  # a run long enough to see Stop
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws"), catalog=fake_catalog(), endpoint=endpoint
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        for width, height in SIZES:
            phone, tag = width < 769, f"conv-s{width}"
            context = browser.new_context(viewport={"width": width, "height": height})
            page = context.new_page()
            page.set_default_timeout(30_000)
            page.goto(demo.local_url)
            page.locator("#status").get_by_text("LLM:").wait_for()
            page.wait_for_timeout(600)  # the sidebar's script has run, and its slide ended
            sidebar, chat = page.locator("#sidebar"), page.locator("#chat")
            if phone:  # closed, off the screen: the chat is all there is
                assert "open" not in sidebar.get_attribute("class").split()
                assert sidebar.bounding_box()["x"] + sidebar.bounding_box()["width"] <= 0
                # ... but its button says what it opens, and covers none of the title
                opener = page.locator("#sidebar .toggle-button")
                assert opener.get_attribute("aria-label") == "Conversations and settings"
                assert "Conversations" in page.evaluate(LABEL_AFTER, "#sidebar .toggle-button")
                title = page.evaluate(TEXT_BOX, "#intro h2")
                assert opener.bounding_box()["x"] + opener.bounding_box()["width"] <= title["x"]
            else:  # open beside the chat, not over it
                page.locator("#sidebar.open").wait_for()
                assert sidebar.bounding_box()["width"] <= chat.bounding_box()["x"]
            for control in ("#request", "#review-toggle", "#run-trace"):
                assert page.evaluate(IN_VIEW, control), (width, control)

            # A run: Stop in view while it goes, with the message box and the review toggle.
            page.locator("#request input[type=file]").set_input_files(str(picture))
            page.locator("#request img").first.wait_for()
            ask(page, f"[{tag}a] caption this photo and read it aloud")
            page.locator("#stop").wait_for()
            for control in ("#stop", "#request", "#review-toggle"):
                assert page.evaluate(IN_VIEW, control), (width, control)
            chat.get_by_text(f"Answer for {tag}a").wait_for()
            page.locator("#stop").wait_for(state="hidden")

            open_sidebar(page)
            page.locator(MARKED, has_text=f"[{tag}a] caption this photo").wait_for()
            assert len(listed(page)) == 1
            page.locator("#new-conversation").click()
            chat.get_by_text(f"Answer for {tag}a").wait_for(state="detached")
            if phone:  # a pick or a new conversation closes the sidebar again, the chat in view
                page.wait_for_function("() => !document.querySelector('#sidebar').classList.contains('open')")
            ask(page, f"[{tag}b] say hello")
            chat.get_by_text(f"Answer for {tag}b").wait_for()
            open_sidebar(page)
            page.locator(MARKED, has_text=f"[{tag}b] say hello").wait_for()
            first_title = next(t for t in listed(page) if f"[{tag}a]" in t)

            # Rename: to the other's title, which takes a number; the list shows it, and a reload too.
            page.locator("#rename-conversation").click()
            title_field = page.locator("#rename-title textarea, #rename-title input").first
            assert title_field.input_value() == f"[{tag}b] say hello"
            title_field.fill(first_title)
            page.locator("#rename-save").click()
            page.locator(MARKED, has_text=f"{first_title} (2)").wait_for()
            assert not page.locator("#renaming").is_visible()
            page.screenshot(path=str(SCREENSHOTS / f"sidebar_renamed_{width}x{height}.png"))
            page.reload()
            page.locator("#status").get_by_text("LLM:").wait_for()
            open_sidebar(page)
            page.locator(MARKED, has_text=f"{first_title} (2)").wait_for()
            assert sorted(listed(page)) == sorted([first_title, f"{first_title} (2)"])

            # Delete: asked first; Cancel keeps it; confirmed, it goes, and Undo brings it back.
            page.locator("#delete-conversation").click()
            page.locator("#delete-question").get_by_text(f"Delete “{first_title} (2)”?").wait_for()
            page.locator("#delete-no").click()
            page.locator("#delete-confirm").wait_for(state="hidden")
            assert chat.get_by_text(f"Answer for {tag}b").is_visible()
            page.locator("#delete-conversation").click()
            page.locator("#delete-yes").click()
            chat.get_by_text(f"Answer for {tag}b").wait_for(state="detached")
            page.locator(".toast-body").get_by_text("Undo delete brings it back.").first.wait_for()
            page.locator(MARKED, has_text="New conversation").wait_for()
            assert listed(page) == ["New conversation", first_title]
            page.locator("#undo-delete").click()
            chat.get_by_text(f"Answer for {tag}b").wait_for()
            page.locator(MARKED, has_text=f"{first_title} (2)").wait_for()

            # A pick from the list opens that conversation.
            page.locator(LISTED, has_text=first_title).filter(has_not_text="(2)").click()
            chat.get_by_text(f"Answer for {tag}a").wait_for()
            if phone:
                page.wait_for_function("() => !document.querySelector('#sidebar').classList.contains('open')")

            open_settings(page)  # Settings, from the sidebar
            assert page.get_by_label("Candidate models per task (top-K)").is_visible()
            page.screenshot(path=str(SCREENSHOTS / f"sidebar_settings_{width}x{height}.png"))
            context.close()
