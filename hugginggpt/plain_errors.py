"""Errors in plain words: what a person reads in the chat says what went wrong, not which class of
exception a library raised ("UnidentifiedImageError", "ConnectError: [Errno -2] ...").

Matched by class name, so no library is imported here; anything unknown keeps its own message.
"""

from __future__ import annotations

from hugginggpt.text import shorten

_BY_NAME = {
    "UnidentifiedImageError": "the file is not a picture format that can be read",
    "DecompressionBombError": "the picture is too large to process",
    "LibsndfileError": "the file is not a sound format that can be read",
    "SoundFileError": "the file is not a sound format that can be read",
    "ConnectTimeout": "the server did not answer in time",
    "ReadTimeout": "the server did not answer in time",
    "WriteTimeout": "the server did not answer in time",
    "PoolTimeout": "the server did not answer in time",
    "TimeoutError": "it took too long and was given up",
    "RemoteProtocolError": "the connection broke off",
    "ReadError": "the connection broke off",
    "OutOfMemoryError": "out of memory",
    "MemoryError": "out of memory",
    "JSONDecodeError": "the reply was not valid JSON",
}
_NOT_FOUND = ("Errno -2", "Errno -3", "Errno -5", "Name or service not known", "nodename nor servname")


def in_words(exc: BaseException) -> str:
    name = type(exc).__name__
    message = shorten(exc, 200)
    if name == "ConnectError":
        if any(mark in message for mark in _NOT_FOUND):
            return "the server's name could not be found (no such host, or no network)"
        if "refused" in message.lower():
            return "the server refused the connection (nothing listens at that address)"
        return "could not connect to the server"
    if name in _BY_NAME:
        return _BY_NAME[name]
    if name == "FileNotFoundError":
        return f"a file is missing: {getattr(exc, 'filename', None) or message}"
    return message if len(message) >= 12 else f"{name}: {message}".rstrip(": ")
