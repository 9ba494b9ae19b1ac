"""Errors in plain words (issue 20): the chat names what went wrong, not an exception class."""

import io

import httpx
import pytest
from PIL import Image

from hugginggpt.plain_errors import in_words
from webui.host.uploads import check_upload


def test_common_failures_read_as_words_not_class_names(tmp_path):
    with pytest.raises(Exception) as bad_image:
        Image.open(io.BytesIO(b"not a picture at all"))
    assert in_words(bad_image.value) == "the file is not a picture format that can be read"
    with pytest.raises(httpx.ConnectError) as refused:
        httpx.get("http://127.0.0.1:9/", timeout=2)
    assert in_words(refused.value).startswith("the server refused the connection")
    no_name = httpx.ConnectError("[Errno -2] Name or service not known")
    assert in_words(no_name).startswith("the server's name could not be found")
    assert in_words(httpx.ReadTimeout("timed out")) == "the server did not answer in time"
    assert in_words(ValueError("the prompt is longer than the model allows")) == (
        "the prompt is longer than the model allows"
    )
    assert in_words(KeyError("x")) == "KeyError: 'x'"  # too short to stand alone: the class says more
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"junk" * 10)
    problem = check_upload(str(broken), max_bytes=10**6)
    assert "not a readable image" in problem and "Error" not in problem, problem
