"""Fetching an http(s) URL that a plan names, without reaching private networks.

Off unless settings allow it. Every hop of a redirect chain is checked: the host must resolve only
to public addresses (no loopback, private, link-local, cloud-metadata, multicast or reserved ones),
and the body is capped in size.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class URLRefused(ValueError):
    """The URL may not be fetched; the message says why, for the LLM and the user."""


def is_public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def resolve_host(host: str) -> list[Address]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as e:
        raise URLRefused(f"the host '{host}' could not be resolved") from e
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]


def check_url(
    url: str,
    *,
    allowed: Callable[[Address], bool] = is_public,
    resolve: Callable[[str], list[Address]] = resolve_host,
) -> list[Address]:
    """The addresses `url`'s host resolves to, all of them allowed; else URLRefused."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise URLRefused(f"only http and https URLs may be fetched, not '{parts.scheme or url}'")
    if not parts.hostname:
        raise URLRefused(f"'{url}' has no host")
    if parts.username or parts.password:
        raise URLRefused("URLs with credentials are not fetched")
    try:
        addresses = [ipaddress.ip_address(parts.hostname)]
    except ValueError:
        addresses = resolve(parts.hostname)
    refused = [str(a) for a in addresses if not allowed(a)]
    if refused or not addresses:
        raise URLRefused(
            f"'{parts.hostname}' is a private or local address ({', '.join(refused)}); it is not fetched"
        )
    return addresses


def fetch(
    url: str,
    dest_dir: Path,
    *,
    max_bytes: int = 20 * 1024 * 1024,
    max_redirects: int = 5,
    timeout: float = 20.0,
    allowed: Callable[[Address], bool] = is_public,
) -> Path:
    """Download `url` into `dest_dir`, checking every hop; return the file's path. Every refusal,
    and every transport failure (a reset, a time-out), is a URLRefused saying what happened."""
    try:
        return _fetch(url, dest_dir, max_bytes, max_redirects, timeout, allowed)
    except httpx.HTTPError as e:
        raise URLRefused(f"fetching {url} failed: {type(e).__name__}") from None


def _fetch(
    url: str,
    dest_dir: Path,
    max_bytes: int,
    max_redirects: int,
    timeout: float,
    allowed: Callable[[Address], bool],
) -> Path:
    with httpx.Client(follow_redirects=False, timeout=timeout, trust_env=False) as client:
        for _ in range(max_redirects + 1):
            pinned_url, options = _pinned(url, check_url(url, allowed=allowed)[0])
            with client.stream("GET", pinned_url, **options) as response:
                if response.is_redirect:
                    url = urljoin(url, response.headers.get("location", ""))
                    continue
                if response.status_code != 200:
                    raise URLRefused(f"fetching {url} gave HTTP {response.status_code}")
                declared = int(response.headers.get("content-length") or 0)
                if declared > max_bytes:
                    raise URLRefused(f"{url} is larger than the {max_bytes // 1_000_000} MB limit")
                return _save(response, url, dest_dir, max_bytes)
    raise URLRefused(f"more than {max_redirects} redirects")


def _pinned(url: str, address: Address) -> tuple[str, dict[str, Any]]:
    """The request for `url` sent to the address that was checked, not to a second DNS answer
    (which a rebinding name could point at a private network). Host header, TLS SNI and the
    certificate check still use the URL's own host name."""
    parts = urlsplit(url)
    host = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{host}:{parts.port}" if parts.port else host
    options: dict[str, Any] = {"headers": {"Host": parts.netloc}}
    if parts.scheme == "https":
        options["extensions"] = {"sni_hostname": parts.hostname}
    return urlunsplit(parts._replace(netloc=netloc)), options


def saved_name(url: str) -> str:
    """The file name a download of `url` gets (then -2, -3, ... when taken)."""
    name = Path(urlsplit(url).path).name or "download"
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)[:80].lstrip(".") or "download"


def _save(response: httpx.Response, url: str, dest_dir: Path, max_bytes: int) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    f, target = _new_file(dest_dir, saved_name(url))
    size = 0
    with f:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > max_bytes:
                f.close()
                target.unlink(missing_ok=True)
                raise URLRefused(f"{url} is larger than the {max_bytes // 1_000_000} MB limit")
            f.write(chunk)
    return target


def _new_file(folder: Path, name: str):
    """A file of its own: tasks running at once may fetch different URLs that end in the same name."""
    stem, suffix = Path(name).stem, Path(name).suffix
    for n in range(1, 1000):
        target = folder / (name if n == 1 else f"{stem}-{n}{suffix}")
        try:
            return open(target, "xb"), target
        except FileExistsError:
            continue
    raise URLRefused(f"too many downloads named {name}")


def public_only_client(timeout: float) -> Any:
    """An HTTP client for the openai package whose every request (each redirect hop and retry) is
    checked by urlguard and sent to the checked address, so that neither a redirect nor a second DNS
    answer reaches a private network. Host header, TLS SNI and certificate keep the host name."""
    import httpx2  # the HTTP client the openai package is built on
    import openai

    class PublicOnly(httpx2.BaseTransport):
        def __init__(self) -> None:
            self._inner = httpx2.HTTPTransport(trust_env=False)

        def handle_request(self, request: Any) -> Any:
            url = request.url
            try:
                address = check_url(str(url), allowed=is_public)[0]
            except URLRefused as e:  # as a connection error, which the openai client reports
                raise httpx2.ConnectError(str(e), request=request) from e
            request.headers["Host"] = url.netloc.decode("ascii")
            if url.scheme == "https":
                request.extensions = {**request.extensions, "sni_hostname": url.host}
            request.url = url.copy_with(host=str(address))
            return self._inner.handle_request(request)

        def close(self) -> None:
            self._inner.close()

    # trust_env=False: a proxy from the environment would bypass the transport's check.
    return openai.DefaultHttpxClient(transport=PublicOnly(), timeout=timeout, trust_env=False)
