"""Addresses that name the node itself. A multi-node job whose master address is one of them has every node wait for
a rendezvous with itself (torchrun's, msrun's or Ray's on 127.0.0.1), so no node ever meets another: the plan
refuses it at cluster.master_addr, and launch.sh refuses one given at run time by the same rule."""

from __future__ import annotations

import re

# The loopback block 127.0.0.0/8 and ::1 (RFC 1122 s3.2.1.3, RFC 4291 s2.5.3) in any spelling, the unspecified
# 0.0.0.0 and :: (a connection to them reaches the host itself), and "localhost" with its subdomains (RFC 6761
# s6.3): an extended regular expression over the lower-cased address, for Python and for bash's =~ alike.
LOOPBACK_RULE = r"^(localhost\.?|.+\.localhost\.?|127(\.[0-9]{1,3}){3}|0\.0\.0\.0|(0{0,4}:){2,7}0{0,4}[01]?)$"
LOOPBACK_WHY = ("names the node itself (loopback or unspecified), so with more than one node every node would meet "
                "only itself at the rendezvous: give node 0's address that the other nodes reach")


def is_loopback(address: str) -> bool:
    """`address` (a host name or an IP address, as cluster.master_addr takes it) names the node itself."""
    return re.fullmatch(LOOPBACK_RULE, address.lower()) is not None
