"""The gRPC target for a coordinator address, as common/coordinator_target.h makes it in C++.

One HOST:PORT is used as given. Several, comma-separated (the coordinators of one
high-availability group), are resolved now into one "ipv4:" (or "ipv6:") address list; gRPC's
default pick_first policy connects to the first that accepts, which is the active coordinator
(standbys do not listen). Standard library only.
"""
import socket

# Dial a coordinator that went away again within 2 s (gRPC's default backoff grows to 2 min).
CHANNEL_OPTIONS = [("grpc.max_reconnect_backoff_ms", 2000)]


def coordinator_target(address, flag="coordinator"):
    """(target, options) for grpc.insecure_channel / secure_channel; ValueError naming `flag`."""
    if "," not in address:
        return address, list(CHANNEL_OPTIONS)
    v4, v6 = [], []
    for entry in address.split(","):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError("%s: several coordinators are HOST:PORT,HOST:PORT,... (each a coordinator's "
                             "--listen address), got %r in %r" % (flag, entry, address))
        name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        try:
            family, _, _, _, sockaddr = socket.getaddrinfo(name, int(port), type=socket.SOCK_STREAM)[0]
        except socket.gaierror as e:
            raise ValueError("%s: cannot resolve %r: %s" % (flag, name, e)) from None
        if family == socket.AF_INET6:
            v6.append("[%s]:%s" % (sockaddr[0], port))
        else:
            v4.append("%s:%s" % (sockaddr[0], port))
    if v4 and v6:
        raise ValueError("%s: the coordinators must all be IPv4 or all IPv6, got %r" % (flag, address))
    target = ("ipv6:" + ",".join(v6)) if v6 else ("ipv4:" + ",".join(v4))
    options = list(CHANNEL_OPTIONS) + [("grpc.default_authority", address.split(",")[0])]
    return target, options
