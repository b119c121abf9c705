"""The guard of outgoing calls (``portal.lib.egress``) by itself: which addresses may be called (public ones,
IPv4 carried in IPv6 judged by that IPv4, an operator's own networks), that good URLs still register, and that
the lookup counts against the attempt's one deadline. The behaviour through webhooks and app endpoints is
tested in ``tests/webhooks/test_egress.py`` and ``tests/marketplace/test_endpoint_egress.py``.

DNS is replaced at its boundary (``socket.getaddrinfo``); nothing here opens a connection off this machine."""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from portal.lib import egress
from portal.webhooks.models import WebhookEndpoint
from portal.webhooks.services import webhook_endpoint_create

sys.path.insert(0, str(Path(__file__).resolve().parent))
from egress_fakes import PUBLIC, Jail, Resolver  # the DNS and network stand-ins


@pytest.fixture
def guarded(settings):
    settings.APP_ALLOW_HTTP_ENDPOINTS = False
    settings.OUTGOING_ALLOWED_NETWORKS = []


@pytest.mark.parametrize(
    "address",
    [
        PUBLIC,
        "8.8.8.8",
        "1.1.1.1",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "::ffff:8.8.8.8",  # IPv4-mapped: its packets go to 8.8.8.8
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8 (an IPv6-only network's way to IPv4-only receivers)
        "2002:808:808::1",  # 6to4 of 8.8.8.8
    ],
)
def test_public_addresses_may_be_called(guarded, address):
    assert egress.address_allowed(ipaddress.ip_address(address)) is True


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "10.0.0.1",
        "172.31.255.255",
        "192.168.0.1",
        "169.254.169.254",
        "169.254.170.2",  # ECS task metadata
        "100.64.0.1",
        "100.127.255.254",
        "0.0.0.0",  # noqa: S104  (an address refused, not a bind)
        "0.1.2.3",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "192.0.0.1",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.1",
        "203.0.113.1",
        "::",
        "::1",
        "fe80::1",
        "fe80::1%eth0",
        "fc00::1",
        "fd00:ec2::254",
        "fec0::1",
        "ff02::1",
        "ff0e::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::127.0.0.1",
        "::8.8.8.8",  # IPv4-compatible: deprecated, refused whatever it carries
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",  # local-use NAT64
        "2002:7f00:1::",
        "2002:a00:1::",
        "2001::1",  # Teredo
        "2001:db8::1",
        "100::1",  # discard-only
    ],
)
def test_addresses_of_the_portals_own_and_special_networks_may_not(guarded, address):
    assert egress.address_allowed(ipaddress.ip_address(address)) is False


def test_an_operator_may_allow_networks_of_their_own_and_nothing_more(settings):
    settings.OUTGOING_ALLOWED_NETWORKS = ["10.20.0.0/16", "fd12:3456::/48"]
    allowed = {
        a: egress.address_allowed(ipaddress.ip_address(a))
        for a in ["10.20.3.4", "10.21.0.1", "fd12:3456::7", "fd12:3457::7", "::ffff:10.20.3.4", "127.0.0.1"]
    }
    assert allowed == {
        "10.20.3.4": True,
        "10.21.0.1": False,
        "fd12:3456::7": True,
        "fd12:3457::7": False,
        "::ffff:10.20.3.4": True,  # the same address, written as IPv4-mapped
        "127.0.0.1": False,
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.partner.com/gpu",
        "https://8.8.8.8/hook",
        "https://[2606:4700:4700::1111]:8443/hook",
        "https://[::ffff:8.8.8.8]/hook",
        "https://bücher.example/hook",  # an IDN, looked up in its ASCII form
    ],
)
def test_public_urls_still_register(alice, alice_org, guarded, monkeypatch, url):
    resolver = Resolver({"hooks.partner.com": [[PUBLIC, "2606:4700::6810:84e5"]], "xn--bcher-kva.example": [[PUBLIC]]})
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    endpoint, _ = webhook_endpoint_create(organization=alice_org, user=alice, url=url, event_types=["job.finished"])
    assert list(WebhookEndpoint.objects.values_list("url", flat=True)) == [endpoint.url] == [url]


def test_a_slow_lookup_counts_against_the_attempts_deadline(guarded, monkeypatch):
    """The resolver takes 5 s; an attempt of 0.5 s ends after 0.5 s with ``EgressFailed``, sending nothing."""
    jail = Jail(monkeypatch)
    release = threading.Event()

    def slow(host, port, *args, **kwargs):
        release.wait(5)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (PUBLIC, port))]

    monkeypatch.setattr(socket, "getaddrinfo", slow)
    started = time.monotonic()
    try:
        with pytest.raises(egress.EgressFailed, match=r"^The endpoint host slow.example did not resolve in time\.$"):
            egress.post("https://slow.example/hook", body=b"{}", headers={}, timeout_s=0.5, max_body_bytes=500)
        took = time.monotonic() - started
    finally:
        release.set()
    assert 0.5 <= took < 1.5, took
    assert jail.attempts == []


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.partner.com/x", "The endpoint must be an https:// URL."),
        ("ftp://hooks.partner.com/x", "ftp://hooks.partner.com/x is not a valid https:// URL."),
        ("https:///x", "The endpoint URL has no host."),
        ("https://evil.example\\@127.0.0.1/", "https://evil.example\\@127.0.0.1/ is not a valid https:// URL."),
    ],
)
def test_urls_of_other_schemes_or_without_a_host_are_refused_before_any_lookup(guarded, monkeypatch, url, message):
    resolver = Resolver({})
    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    with pytest.raises(egress.EgressRefused) as refused:
        egress.url_check(url)
    assert (str(refused.value), resolver.lookups) == (message, {})
