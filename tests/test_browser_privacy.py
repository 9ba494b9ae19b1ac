"""A public app keeps each visitor's secrets and files to themselves, in a real headless Chromium:
a typed API key is stored nowhere in the browser, and a conversation's files cannot be fetched
once it is deleted, from another browser or by anyone else (issues 10 and 20: closing its page
deletes nothing)."""

import time

import pytest
from app_support import app_settings, photo, running_app
from test_browser import _browser_or_skip, chromium, delete_conversation

SECRET = "sk-visitor-SECRET-4242"

STORAGE = """async () => {
  const dump = {local: {...localStorage}, session: {...sessionStorage}, cookies: document.cookie, idb: []};
  for (const info of (await indexedDB.databases())) {
    const db = await new Promise((ok, no) => {
      const r = indexedDB.open(info.name); r.onsuccess = () => ok(r.result); r.onerror = no;
    });
    for (const name of db.objectStoreNames) {
      const all = await new Promise(ok => {
        const r = db.transaction(name).objectStore(name).getAll(); r.onsuccess = () => ok(r.result);
      });
      dump.idb.push([info.name, name, all]);
    }
    db.close();
  }
  return JSON.stringify(dump);
}"""


@pytest.mark.browser
def test_a_typed_key_is_stored_nowhere_and_files_go_with_the_conversation(llm_server, tiny_catalog, tmp_path):
    sync_playwright = _browser_or_skip()
    picture = photo(tmp_path / "street.png", (64, 48))
    with (
        running_app(
            app_settings(llm_server, tmp_path / "ws", app_leave_grace_seconds=0.5), catalog=tiny_catalog
        ) as demo,
        sync_playwright() as p,
        chromium(p) as browser,
    ):
        visitor = browser.new_context(viewport={"width": 1100, "height": 1400})
        page = visitor.new_page()
        page.set_default_timeout(30_000)
        page.goto(demo.local_url)
        page.locator("#status").get_by_text("LLM:").wait_for()
        page.locator("#settings").get_by_text("Settings", exact=True).click()
        key = page.get_by_label("API key", exact=True)
        key.fill(SECRET)
        key.press("Tab")
        page.locator("#request input[type=file]").set_input_files(str(picture))
        page.locator("#request img").first.wait_for()
        box = page.locator("#request textarea")
        box.fill("[conv-private] caption this photo, draw the caption and read it aloud")
        box.press("Enter")
        chat = page.locator("#chat")
        chat.get_by_text("Answer for conv-private").wait_for()
        chat.locator("audio").first.wait_for(state="attached")

        stored = page.evaluate(STORAGE)
        assert SECRET not in stored and "conv-private" not in stored, stored[:2000]
        assert all(SECRET not in c["value"] for c in visitor.cookies())

        urls = {
            demo.local_url.rstrip("/") + u if u.startswith("/") else u
            for u in page.eval_on_selector_all(
                "#chat img[src*='/gradio_api/file='], #chat a[href*='/gradio_api/file='], "
                "#traces a[href*='/gradio_api/file=']",
                "els => els.map(e => e.getAttribute('src') || e.getAttribute('href'))",
            )
        }
        assert len(urls) >= 3, urls  # the upload, the drawing, the clip (and the trace)
        assert all(page.request.get(u).status == 200 for u in urls)  # while the page is open

        page.close()  # a closed tab deletes nothing: the conversation leaves memory, kept on disk
        deadline = time.time() + 15
        while demo.chat_app.conversations and time.time() < deadline:
            time.sleep(0.1)
        assert not demo.chat_app.conversations
        page = visitor.new_page()  # back: the conversation is there; deleting it makes its files unreachable
        page.goto(demo.local_url)
        page.locator("#chat").get_by_text("Answer for conv-private").wait_for()
        delete_conversation(page)
        page.locator("#undo-delete").wait_for()
        stranger = browser.new_context()
        statuses = {u: stranger.request.get(u).status for u in urls}
        assert all(status in (403, 404) for status in statuses.values()), statuses
