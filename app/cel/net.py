"""`net.IP` and `net.CIDR` values of the Kubernetes CEL IP/CIDR library.

Kubernetes parses with Go's `netip` and adds two rules: no zone (`fe80::1%eth0`)
and no IPv4-mapped IPv6 (`::ffff:1.2.3.4`). Python's `ipaddress` is as
strict as `netip` about IPv4 (no leading zeros, exactly four octets). The
predicates follow Go's definitions, which differ from `ipaddress`'s (Go
counts private addresses as global unicast). Parse error texts keep the
Kubernetes prefix; the detail after it is Python's, not Go's.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_V4_LINK_LOCAL_MULTICAST = ipaddress.IPv4Network("224.0.0.0/24")
_V4_BROADCAST = ipaddress.IPv4Address("255.255.255.255")


class NetError(ValueError):
    """An address or prefix Kubernetes rejects."""


class IP:
    __slots__ = ("address",)

    CEL_KIND = "net.IP"

    def __init__(self, address: Address) -> None:
        self.address = address

    def cel_equals(self, other: object) -> bool | None:
        if not isinstance(other, IP):
            return None
        return self.address == other.address

    @property
    def family(self) -> int:
        return self.address.version

    def is_unspecified(self) -> bool:
        return self.address.is_unspecified

    def is_loopback(self) -> bool:
        if self.address.version == 4:
            return self.address in ipaddress.IPv4Network("127.0.0.0/8")
        return self.address == ipaddress.IPv6Address("::1")

    def is_link_local_multicast(self) -> bool:
        if self.address.version == 4:
            return self.address in _V4_LINK_LOCAL_MULTICAST
        return (int(self.address) >> 112) & 0xFF0F == 0xFF02

    def is_link_local_unicast(self) -> bool:
        if self.address.version == 4:
            return self.address in ipaddress.IPv4Network("169.254.0.0/16")
        return (int(self.address) >> 118) == 0xFE80 >> 6

    def is_global_unicast(self) -> bool:
        a = self.address
        return not (a == _V4_BROADCAST or a.is_unspecified or self.is_loopback()
                    or a.is_multicast or self.is_link_local_unicast())

    def __str__(self) -> str:
        return str(self.address)


class CIDR:
    __slots__ = ("address", "prefix_length")

    CEL_KIND = "net.CIDR"

    def __init__(self, address: Address, prefix_length: int) -> None:
        self.address = address  # as written; `masked()` clears the host bits
        self.prefix_length = prefix_length

    def cel_equals(self, other: object) -> bool | None:
        if not isinstance(other, CIDR):
            return None
        return (self.address, self.prefix_length) == (other.address, other.prefix_length)

    def network(self) -> Network:
        return ipaddress.ip_network(f"{self.address}/{self.prefix_length}", strict=False)

    def contains_ip(self, ip: IP) -> bool:
        return ip.address.version == self.address.version and ip.address in self.network()

    def contains_cidr(self, other: CIDR) -> bool:
        if other.address.version != self.address.version:
            return False
        return (self.prefix_length <= other.prefix_length
                and other.network().subnet_of(self.network()))  # type: ignore[arg-type]

    def masked(self) -> CIDR:
        return CIDR(self.network().network_address, self.prefix_length)

    def __str__(self) -> str:
        return f"{self.address}/{self.prefix_length}"


@lru_cache(maxsize=1024)
def parse_ip(text: str) -> IP:
    if "%" in text:
        raise NetError(f"IP address {_q(text)} with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as exc:
        raise NetError(f"IP Address {_q(text)} parse error during conversion from string: "
                       f"{exc}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise NetError(f"IPv4-mapped IPv6 address {_q(text)} is not allowed")
    return IP(address)


@lru_cache(maxsize=1024)
def parse_cidr(text: str) -> CIDR:
    addr_text, sep, bits_text = text.partition("/")
    error = NetError(f"network address {_q(text)} parse error during conversion from string: "
                     f"invalid prefix")
    if not sep or not bits_text.isdigit() or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise error
    try:
        ip = parse_ip(addr_text)
    except NetError as exc:
        if "IPv4-mapped" in str(exc):
            raise NetError(f"IPv4-mapped IPv6 address {_q(text)} is not allowed") from None
        raise error from None
    bits = int(bits_text)
    if bits > ip.address.max_prefixlen:
        raise error
    return CIDR(ip.address, bits)


def is_canonical_ip(text: str) -> bool:
    return str(parse_ip(text).address) == text


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
