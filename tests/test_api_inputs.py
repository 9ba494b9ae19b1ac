"""What the MCP and OpenAI doors accept: files sent as data URLs, base64 or URLs; OpenAI messages; and
the requests-at-once limit every door shares."""

import base64
import io
import threading
import time
import wave

import pytest
from app_support import photo

from hugginggpt.config import Settings
from webui.doors.api_files import MAX_FILES, InputRefused, receive
from webui.doors.openai_messages import read_messages
from webui.host.slots import Busy, RunSlots

OFF, ON = Settings(), Settings(allow_urls=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def wav_bytes() -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(8000), w.writeframes(b"\x00\x01" * 800)
    return buffer.getvalue()


def test_files_arrive_as_data_urls_or_bare_base64_and_their_bytes_say_what_they_are(tmp_path):
    png = photo(tmp_path / "p.png").read_bytes()
    saved = receive(
        f"data:image/png;base64,{b64(png)}", tmp_path / "in", settings=OFF, max_bytes=10**6, hint="image"
    )
    assert saved.name == "image-1.png" and saved.read_bytes() == png
    # A data URL that claims audio but holds a PNG is kept as what it is.
    lied = receive(
        f"data:audio/wav;base64,{b64(png)}", tmp_path / "in", settings=OFF, max_bytes=10**6, number=2
    )
    assert lied.suffix == ".png"
    clip = receive(b64(wav_bytes()), tmp_path / "in", settings=OFF, max_bytes=10**6, hint="audio", number=3)
    assert clip.name == "audio-3.wav"
    urlsafe = base64.urlsafe_b64encode(png).decode().rstrip("=")
    assert receive(urlsafe, tmp_path / "in", settings=OFF, max_bytes=10**6, number=4).suffix == ".png"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("", "it is empty"),
        ("data:text/plain,hello", "must be base64"),
        ("data:image/png;base64,%%%%", "not an image or audio file sent as"),
        (b64(b"just some text, not a picture"), "not an image or audio file sent as"),
        ("data:image/png;base64," + b64(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40), "not a readable image"),
        ("data:image/png;base64," + b64(b"\x89PNG\r\n\x1a\n" + b"\x00" * 4000), "over the"),
        ("https://example.com/a.png", "does not fetch URLs"),
    ],
)
def test_bad_files_are_refused_with_a_sentence(tmp_path, ref, message):
    with pytest.raises(InputRefused, match=message):
        receive(ref, tmp_path / "in", settings=OFF, max_bytes=2000)


def test_urls_follow_the_url_rules(tmp_path):
    with pytest.raises(InputRefused, match="private or local address"):
        receive("http://127.0.0.1:9/a.png", tmp_path / "in", settings=ON, max_bytes=10**6)
    for other in ("ftp://example.com/a.png", "file:///etc/passwd", "/etc/passwd"):
        with pytest.raises(InputRefused, match="not an image or audio file sent as a data URL"):
            receive(other, tmp_path / "in", settings=ON, max_bytes=10**6)


def test_openai_messages_become_a_request_its_files_and_history():
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    talk = read_messages(
        [
            {"role": "system", "content": "You are helpful."},
            {"role": "user", "content": [{"type": "text", "text": "what is this?"}, image]},
            {"role": "assistant", "content": "A street."},
            {"role": "user", "content": [{"type": "text", "text": "transcribe"}, audio]},
        ]
    )
    assert talk.request == "transcribe"
    assert [(f.hint, f.earlier) for f in talk.files] == [("image", True), ("audio", False)]
    assert talk.history == [
        {"role": "user", "content": "what is this?"},
        {"role": "assistant", "content": "A street."},
    ]
    # A long conversation keeps the newest earlier files, up to what one request may bring.
    many = [
        {"role": "user", "content": [{"type": "text", "text": f"{i}"}, image]} for i in range(MAX_FILES + 3)
    ]
    kept = read_messages([*many, {"role": "user", "content": [{"type": "text", "text": "now"}, audio]}])
    assert len(kept.files) == MAX_FILES and kept.files[-1].hint == "audio"


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "non-empty list"),
        ([{"role": "assistant", "content": "hi"}], "last message must be the user's"),
        ([{"role": "wizard", "content": "hi"}], "must be an object with a role"),
        ([{"role": "user", "content": [{"type": "file", "file": {}}]}], "has type 'file'"),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}],
            "has no text",
        ),
        ([{"role": "user", "content": 3}], "string or a list"),
    ],
)
def test_malformed_messages_are_refused(messages, message):
    with pytest.raises(InputRefused, match=message):
        read_messages(messages)


def test_slots_limit_requests_at_once_and_refuse_a_flood():
    slots, never = RunSlots(1, max_waiting=1), threading.Event()
    assert slots.acquire(never) and slots.running == 1
    got = []
    waiter = threading.Thread(target=lambda: got.append(slots.acquire(never)))
    waiter.start()
    deadline = time.monotonic() + 5
    while slots.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert slots.waiting == 1 and not got
    with pytest.raises(Busy, match="busy"):
        slots.acquire(never)  # one already waits: the next is refused, not queued
    slots.release()
    waiter.join(5)
    assert got == [True] and slots.running == 1 and slots.waiting == 0
    # Given up while waiting (the client left): no slot, nothing to release.
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    assert slots.acquire(cancel) is False and slots.running == 1
    slots.release()
    assert slots.running == 0
