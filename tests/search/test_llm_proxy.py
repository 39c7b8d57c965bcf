"""The LLM client through an HTTP proxy from the environment: absolute URIs for http endpoints, CONNECT
tunnels (TLS end to end) for https ones, proxy credentials, NO_PROXY, loopback kept direct, clear
errors when the proxy refuses or is down."""

from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import threading
import time

import pytest

from kegen.search.operators.llm.client import ChatClient
from kegen.search.operators.llm.proxy import parse_proxy, proxy_for
from tests.search.llm_fake_proxy import FakeProxy
from tests.search.llm_fake_server import FakeLLM

HOST = "llm.example.test"  # never resolved: the fake proxy sends everything to the fake server
MSGS = [{"role": "user", "content": "write code"}]
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy", "KEGEN_LLM_PROXY", "REQUEST_METHOD")


@pytest.fixture(autouse=True)
def no_proxy_env(monkeypatch) -> None:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture(scope="module")
def cert(tmp_path_factory) -> tuple[str, str]:
    """A self-signed certificate for HOST (the client trusts it through SSL_CERT_FILE)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    d = tmp_path_factory.mktemp("tls")
    crt, key = str(d / "server.crt"), str(d / "server.key")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt, "-days", "2",
         "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=DNS:{HOST}"],
        check=True, capture_output=True,
    )  # fmt: skip
    return crt, key


def _port(fake: FakeLLM) -> int:
    return int(fake.srv.server_address[1])


def _call(client: ChatClient):
    return client.complete("m", MSGS, max_tokens=50, temperature=0.0, deadline=time.monotonic() + 10)


def test_http_endpoint_goes_through_http_proxy_with_absolute_uris(monkeypatch) -> None:
    with (
        FakeLLM([("reply", "hello there")], n_ctx=4096, props=True) as fake,
        FakeProxy(("127.0.0.1", _port(fake))) as proxy,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        client = ChatClient(f"http://{HOST}:{_port(fake)}/v1", "key")
        r = _call(client)
        window = client.served_context()
    assert r.status == "ok" and r.text == "hello there" and not r.tokens_estimated
    assert window == (4096, "/props n_ctx")
    posts = [s for s in proxy.seen if s["method"] == "POST"]
    assert posts[0]["target"] == f"http://{HOST}:{_port(fake)}/v1/chat/completions"
    assert posts[0]["host"] == f"{HOST}:{_port(fake)}" and posts[0]["auth"] is None
    assert any(s["method"] == "GET" and s["target"].endswith("/props") for s in proxy.seen)


def test_https_endpoint_tunnels_through_the_proxy_with_credentials(monkeypatch, cert) -> None:
    with (
        FakeLLM([("reply", "secure hello")], tls=cert) as fake,
        FakeProxy(("127.0.0.1", _port(fake)), credentials="kegen:p@ss word") as proxy,
    ):
        monkeypatch.setenv("SSL_CERT_FILE", cert[0])
        host = proxy.url.removeprefix("http://")
        monkeypatch.setenv("https_proxy", f"http://kegen:p%40ss%20word@{host}")
        monkeypatch.setenv("HTTPS_PROXY", "http://wrong.invalid:1")  # the lower-case name wins
        client = ChatClient(f"https://{HOST}:{_port(fake)}/v1", "key")
        r = _call(client)
    assert r.status == "ok" and r.text == "secure hello", r.error
    assert [s["method"] for s in proxy.seen] == ["CONNECT"]
    assert proxy.seen[0]["target"] == f"{HOST}:{_port(fake)}"
    assert proxy.seen[0]["auth"] == "Basic " + base64.b64encode(b"kegen:p@ss word").decode()
    assert fake.requests[0]["messages"] == MSGS  # the server got the request through the tunnel


def test_a_refused_connect_names_the_proxy_and_what_to_check(monkeypatch, cert) -> None:
    with (
        FakeLLM([("reply", "never")], tls=cert) as fake,
        FakeProxy(("127.0.0.1", _port(fake)), credentials="kegen:secret") as proxy,
    ):
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        r = _call(ChatClient(f"https://{HOST}:{_port(fake)}/v1"))
    assert r.status == "http_error" and r.http_status == 407 and not r.retryable
    assert f"the proxy {proxy.url} (from HTTPS_PROXY) refused to open a tunnel (CONNECT)" in (r.error or "")
    assert "check the credentials in HTTPS_PROXY" in (r.error or "") and not fake.requests


def test_an_http_proxy_asking_for_credentials_says_so(monkeypatch) -> None:
    with FakeLLM([("reply", "never")]) as fake, FakeProxy(("127.0.0.1", _port(fake)), "a:b") as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        r = _call(ChatClient(f"http://{HOST}:{_port(fake)}/v1"))
    assert r.status == "http_error" and r.http_status == 407
    assert "wants credentials: check http_proxy" in (r.error or "")


def test_a_proxy_that_is_down_is_a_connection_error_naming_it(monkeypatch) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed when the block ends: nothing listens there
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{dead}")  # no scheme: http, as urllib reads it
    r = _call(ChatClient(f"http://{HOST}:8000/v1"))
    assert r.status == "connection_error" and r.retryable
    assert f"through the proxy http://127.0.0.1:{dead} from HTTP_PROXY" in (r.error or "")


def test_loopback_stays_direct_unless_kegen_llm_proxy_names_a_proxy(monkeypatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://corp-proxy:3128")
    with FakeLLM([("reply", "direct"), ("reply", "proxied")]) as fake:
        assert ChatClient(fake.url).proxy is None  # urllib would send 127.0.0.1 to the proxy
        assert _call(ChatClient(fake.url)).text == "direct"
        with FakeProxy(("127.0.0.1", _port(fake))) as proxy:
            monkeypatch.setenv("KEGEN_LLM_PROXY", proxy.url)
            r = _call(ChatClient(fake.url))
    assert r.text == "proxied" and [s["method"] for s in proxy.seen] == ["POST"]
    for host in ("localhost", "api.localhost", "127.0.0.2", "::1"):
        monkeypatch.delenv("KEGEN_LLM_PROXY")
        assert proxy_for("http", host, 8000) is None
        monkeypatch.setenv("KEGEN_LLM_PROXY", "http://p:1")
        assert proxy_for("http", host, 8000) is not None


def test_no_proxy_and_direct(monkeypatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://corp-proxy:3128")
    monkeypatch.setenv("NO_PROXY", "internal.corp, .svc.local,10.0.0.0/8")
    got = proxy_for("https", "api.openai.com", None)
    assert got is not None and (got.url, got.source) == ("http://corp-proxy:3128", "HTTPS_PROXY")
    assert proxy_for("http", "api.openai.com", None) is None  # no HTTP_PROXY: http goes direct
    for host in ("internal.corp", "llm.internal.corp", "vllm.svc.local", "10.2.3.4"):
        assert proxy_for("https", host, 443) is None, host
    assert proxy_for("https", "11.2.3.4", 443) is not None
    monkeypatch.setenv("no_proxy", "*")
    assert proxy_for("https", "api.openai.com", None) is None
    monkeypatch.delenv("no_proxy")
    monkeypatch.setenv("KEGEN_LLM_PROXY", "direct")
    assert proxy_for("https", "api.openai.com", None) is None


def test_unusable_proxy_settings_are_named() -> None:
    with pytest.raises(ValueError, match=r"HTTPS_PROXY='socks5://h:1080'.*plain HTTP only"):
        parse_proxy("socks5://h:1080", "HTTPS_PROXY")
    with pytest.raises(ValueError, match="names no proxy host"):
        parse_proxy("http://:3128", "HTTP_PROXY")
    p = parse_proxy("proxy.corp:8080", "HTTP_PROXY")
    assert (p.host, p.port, p.authorization) == ("proxy.corp", 8080, None)


def test_cancel_closes_a_tunnelled_stream(monkeypatch, cert) -> None:
    with FakeLLM([("hang", 30.0)], tls=cert) as fake, FakeProxy(("127.0.0.1", _port(fake))) as proxy:
        monkeypatch.setenv("SSL_CERT_FILE", cert[0])
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        client = ChatClient(f"https://{HOST}:{_port(fake)}/v1")
        threading.Timer(0.5, client.cancel).start()
        t0 = time.monotonic()
        r = _call(client)
        assert r.status == "cancelled" and time.monotonic() - t0 < 3.0 and r.text.startswith("thinking")
        end = time.monotonic() + 5
        while not fake.aborted and time.monotonic() < end:  # the server stops generating
            time.sleep(0.05)
        assert fake.aborted == 1
