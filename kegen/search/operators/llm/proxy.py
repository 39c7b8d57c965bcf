"""Which HTTP proxy the LLM client goes through, read from the environment as urllib and requests read it.

- `KEGEN_LLM_PROXY` (kegen's own, for the LLM endpoint only): a proxy URL used for every endpoint,
  loopback included, whatever `NO_PROXY` says; `direct` (or `none`) ignores every proxy variable.
- Otherwise `https_proxy`/`HTTPS_PROXY` for an https endpoint and `http_proxy`/`HTTP_PROXY` for an
  http one (the lower-case name wins when both are set; on macOS and Windows the system settings, as
  `urllib.request.getproxies()` reads them), unless the host is bypassed: `no_proxy`/`NO_PROXY`
  (`*`, host names and domain suffixes as urllib matches them, and CIDR ranges such as `10.0.0.0/8` as
  requests matches them), and loopback hosts (`localhost`, `*.localhost`, 127.0.0.0/8, ::1), which
  always stay direct here — urllib would send them to the proxy, which cannot reach this machine's
  own server — unless `KEGEN_LLM_PROXY` names a proxy.

Proxies speak plain HTTP (`http://[user:password@]host:port`, the scheme may be left out); the
credentials become a `Proxy-Authorization: Basic` header. An http endpoint is reached with absolute
URIs through the proxy, an https endpoint through a CONNECT tunnel (TLS end to end with the server).
"""

from __future__ import annotations

import base64
import ipaddress
import os
import urllib.request
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

DIRECT = ("direct", "none")


@dataclass(frozen=True)
class Proxy:
    """One HTTP proxy: where it is, its credentials as a header value, and which setting named it."""

    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization header's value
    source: str  # e.g. "HTTPS_PROXY"

    @property
    def url(self) -> str:
        """The proxy's address without its credentials, for messages."""
        return f"http://{self.host}:{self.port}"

    def headers(self) -> dict[str, str]:
        return {"Proxy-Authorization": self.authorization} if self.authorization else {}


def parse_proxy(url: str, source: str) -> Proxy:
    """A proxy URL (`http://user:password@host:port`, scheme optional) as a `Proxy`; ValueError names
    the setting when it is not one kegen can use."""
    raw = url.strip()
    parts = urlsplit(raw if "://" in raw else "http://" + raw)
    if parts.scheme != "http":
        raise ValueError(
            f"{source}={url!r}: kegen's LLM client talks to proxies over plain HTTP only (http://host:port;"
            f" a {parts.scheme}:// proxy is not supported): set {source} to the proxy's http:// address,"
            " list the endpoint's host in NO_PROXY, or set KEGEN_LLM_PROXY=direct"
        )
    try:
        port = parts.port or 80
    except ValueError as exc:
        raise ValueError(f"{source}={url!r} has a bad port: {exc}") from exc
    if not parts.hostname:
        raise ValueError(f"{source}={url!r} names no proxy host (expected http://host:port)")
    auth = None
    if parts.username is not None:
        user_pass = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        auth = "Basic " + base64.b64encode(user_pass.encode()).decode("ascii")
    return Proxy(parts.hostname, port, auth, source)


def proxy_for(scheme: str, host: str, port: int | None) -> Proxy | None:
    """The proxy a call to `scheme://host:port` goes through (read from the environment now), or None
    for a direct connection."""
    explicit = os.environ.get("KEGEN_LLM_PROXY", "").strip()
    if explicit.lower() in DIRECT:
        return None
    if explicit:
        return parse_proxy(explicit, "KEGEN_LLM_PROXY")
    if is_loopback(host):
        return None
    proxies = urllib.request.getproxies()
    url = proxies.get(scheme)
    if not url or _bypassed(host, port, proxies.get("no", "")):
        return None
    return parse_proxy(url, _source(scheme))


def _source(scheme: str) -> str:
    for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
        if os.environ.get(name):
            return name
    return f"the system's {scheme} proxy setting"


def is_loopback(host: str) -> bool:
    h = host.strip("[]").lower()
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _bypassed(host: str, port: int | None, no_proxy: str) -> bool:
    """NO_PROXY as urllib matches it (names, suffixes, `*`), plus CIDR ranges for IP hosts."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        ip = None
    for entry in (e.strip() for e in no_proxy.split(",")):
        if ip is not None and "/" in entry:
            try:
                if ip in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return bool(urllib.request.proxy_bypass(f"{host}:{port}" if port else host))
