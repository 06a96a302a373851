"""Which ``Host`` a request may name: the dashboard's answer to DNS rebinding.

A page on ``evil.example`` whose name the attacker re-points at 127.0.0.1
reaches a server on this machine with ``Host: evil.example:PORT`` -- and,
its origin being that host too, passes a websocket origin check that
compares Origin with Host (tornado's).  So every request, the websocket
upgrade included, is answered 403 unless its Host names the address the
dashboard serves, as Jupyter's server does for local addresses:

- ``localhost``, ``127.0.0.1`` (any loopback address) and ``[::1]``;
- the host the dashboard was given (``Dashboard("myhost:8787")``);
- bound to every interface (``0.0.0.0``, ``::``): this machine's names
  (``socket.gethostname()``, its fully qualified name) and any IP address
  written as such (a rebinding attack needs a name, never an address);
- the names in ``allowed_hosts`` (``Dashboard(allowed_hosts=[...])``, or
  comma-separated in ``LOCALSCHED_DASHBOARD_ALLOWED_HOSTS``): a reverse
  proxy's public name; ``"*"`` allows any (only behind a proxy that checks);
- any, when ``LOCALSCHED_DASHBOARD_LINK`` says the page is reached through
  a proxy (JupyterHub's jupyter-server-proxy forwards the browser's Host
  unchanged, and authenticates every request itself; the browser is then
  on another machine, whose localhost a rebinding page cannot reach).

The port is not compared (a proxy may forward from another one); names are
compared without case and without a trailing dot.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable

from ...system import settings

__all__ = ["HostPolicy", "ALLOWED_HOSTS_ENV_VAR", "guarded"]

ALLOWED_HOSTS_ENV_VAR = "LOCALSCHED_DASHBOARD_ALLOWED_HOSTS"
#: (``dash.LINK_ENV_VAR``: the link's template, set behind a proxy)
PROXY_LINK_ENV_VAR = "LOCALSCHED_DASHBOARD_LINK"
LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def _name(host: str) -> str:
    """``host`` without its port, brackets, case and trailing dot.

    >>> _name("[::1]:8787"), _name("LocalHost.:80"), _name("10.0.0.1")
    ('::1', 'localhost', '10.0.0.1')
    """
    text = host.strip().lower()
    if text.startswith("["):  # [v6]:port
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # name:port (a bare v6 address has several)
        text = text.partition(":")[0]
    return text.rstrip(".")


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


class HostPolicy:
    """Whether a request's ``Host`` header names this dashboard (see the module docstring).

    >>> p = HostPolicy("127.0.0.1")
    >>> [p.allows(h) for h in ("127.0.0.1:8787", "localhost:1", "[::1]:2", "evil.example:8787")]
    [True, True, True, False]
    >>> HostPolicy("0.0.0.0").allows("192.168.1.7:8787"), HostPolicy("127.0.0.1").allows("10.1.1.1")
    (True, False)
    >>> HostPolicy("127.0.0.1", ["dash.example.org"]).allows("Dash.Example.org:443")
    True
    """

    def __init__(self, bound: str, allowed: Iterable[str] = ()):
        extra = [*allowed, *filter(None, (settings.text(ALLOWED_HOSTS_ENV_VAR) or "").split(","))]
        self.any = any(a.strip() == "*" for a in extra) or \
            bool(settings.text(PROXY_LINK_ENV_VAR))
        self.wildcard = bound in WILDCARDS
        names = {*LOCAL_NAMES, _name(bound)}
        if self.wildcard:
            hostname = socket.gethostname()
            names.update({_name(hostname), _name(socket.getfqdn(hostname))})
        names.update(_name(a) for a in extra)
        names.discard("")
        self.names = frozenset(names)

    def allows(self, host: str | None) -> bool:
        if self.any:
            return True
        name = _name(host or "")
        if name in self.names:
            return True
        address = _address(name)
        if address is None:
            return False
        return address.is_loopback or self.wildcard


def guarded(app, policy: HostPolicy):
    """``app`` (a tornado Application) behind ``policy``: a request naming
    another host gets 403 from every route, the websocket upgrade included
    (a router in front of the application, so no handler of it runs)."""
    from tornado.routing import AnyMatches, Matcher, Rule, RuleRouter
    from tornado.web import Application, RequestHandler

    class HostAllowed(Matcher):
        def match(self, request):
            return {} if policy.allows(request.host) else None

    class Refuse(RequestHandler):
        def prepare(self) -> None:
            self.set_status(403)
            self.set_header("Content-Type", "text/plain; charset=utf-8")
            self.finish("403: this dashboard answers only requests naming its own address "
                        "(Host header); see LOCALSCHED_DASHBOARD_ALLOWED_HOSTS\n")

    refuse = Application([(r".*", Refuse)])
    return RuleRouter([Rule(HostAllowed(), app), Rule(AnyMatches(), refuse)])
