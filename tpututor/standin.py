"""A stand-in for the Cloud TPU API (v2) on 127.0.0.1: **not Google Cloud**, for lessons and tests.

It speaks the REST surface the official client (``google-cloud-tpu``, ``google.cloud.tpu_v2``)
uses, for the calls a TPU's life needs: nodes (create, get, list, stop, start, delete), queued
resources (create, get, list, delete, with ``force``), accelerator types and long-running
operations. State lives in memory and is gone when the server stops. Point the real client at it
with REST transport, an ``http://`` endpoint and anonymous credentials (:meth:`StandIn.client`
does exactly that)::

    with StandIn() as api:
        client = api.client()            # tpu_v2.TpuClient(transport="rest", ...)
        client.list_nodes(parent=api.parent("us-central1-a"))

How it follows the API (the proto docs of google-cloud-tpu 1.28.0's ``tpu_v2`` types):

- every create, stop, start and delete answers with an operation that is **not done**; the node
  shows the transient state (CREATING, STOPPING, STARTING, DELETING) until a client polls the
  operation (``GET .../operations/...``, what ``operation.result()`` does) ``operation_polls``
  times. :meth:`StandIn.settle` finishes every pending operation, as time would;
- stop and start are only for single-host, non-spot nodes (the client's ``stop_node`` doc: "only
  available with single TPU nodes"; Cloud TPU's Spot page: Spot VMs can't be restarted);
- a queued resource starts CREATING, then WAITING_FOR_RESOURCES, PROVISIONING and ACTIVE (its
  nodes READY), one step per read, ACTIVE on read number ``provision_after``. One with a
  ``valid_until_duration`` or ``valid_until_time`` that passes first turns FAILED and stays listed
  until deleted. Deleting one of its nodes is allowed and suspends it (SUSPENDING, SUSPENDED), as
  does preempting a spot node it holds;
- maintenance: :meth:`StandIn.schedule_maintenance` posts an upcoming-maintenance notice in the
  shape of the ``v2alpha1`` API's ``Node.upcoming_maintenance`` (the ``v2`` Node has no such
  field; read it under ``/v2alpha1/``), and the node's ``health`` turns UNHEALTHY_MAINTENANCE only
  while the window is under way ("under maintenance ... will resume running once rescheduled");
- a node created without ``network_config`` gets ``enable_external_ips`` false (the proto's
  default; gcloud sends true unless ``--internal-ips``).

What the real service does on its own, the stand-in does when told: :meth:`StandIn.preempt`,
:meth:`StandIn.schedule_maintenance`, :meth:`StandIn.seed` (a VM someone created days ago), :meth:`StandIn.preempt_instance`,
:meth:`StandIn.advance` (time passes). Accelerator types a zone offers come from
``data/tpu_zones.csv`` (sourced, dated); the stand-in rejects the others the way the API does
(HTTP 400), and rejects TPU7x, which the Cloud TPU API does not serve. It checks no quota and
validates no runtime version. Every response carries the header ``X-Stand-In``.

The server binds 127.0.0.1 only, stops itself after ``lifetime_s`` seconds, and :meth:`stop`
(or leaving the ``with`` block) closes its port.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .hardware import offered_types, zones_table  # the zones table lives with the hardware data

__all__ = ["StandIn", "STANDIN_HEADER", "HOST", "zones_table", "offered_types", "single_host"]

HOST = "127.0.0.1"
STANDIN_HEADER = "X-Stand-In"
_BANNER = "tpututor stand-in of the Cloud TPU API v2 (not Google Cloud)"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # resource ids, as the API documents them
_LOCATION = r"/(?P<ver>v2|v2alpha1)/projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"
_ROUTES = [  # (method, pattern, handler name)
    ("GET", rf"^{_LOCATION}/nodes$", "list_nodes"),
    ("POST", rf"^{_LOCATION}/nodes$", "create_node"),
    ("GET", rf"^{_LOCATION}/nodes/(?P<id>[^/:]+)$", "get_node"),
    ("DELETE", rf"^{_LOCATION}/nodes/(?P<id>[^/:]+)$", "delete_node"),
    ("POST", rf"^{_LOCATION}/nodes/(?P<id>[^/:]+):stop$", "stop_node"),
    ("POST", rf"^{_LOCATION}/nodes/(?P<id>[^/:]+):start$", "start_node"),
    ("GET", rf"^{_LOCATION}/queuedResources$", "list_queued"),
    ("POST", rf"^{_LOCATION}/queuedResources$", "create_queued"),
    ("GET", rf"^{_LOCATION}/queuedResources/(?P<id>[^/:]+)$", "get_queued"),
    ("DELETE", rf"^{_LOCATION}/queuedResources/(?P<id>[^/:]+)$", "delete_queued"),
    ("GET", rf"^{_LOCATION}/acceleratorTypes$", "list_types"),
    ("GET", rf"^{_LOCATION}/acceleratorTypes/(?P<id>[^/:]+)$", "get_type"),
    ("GET", rf"^{_LOCATION}/operations/(?P<id>[^/:]+)$", "get_operation"),
]
# Compute Engine's v1 REST surface for TPU VM instances (machine types such as ct6e-standard-4t): the path
# Google recommends for v6e and TPU7x now that the Cloud TPU API gets bug fixes only.
_ZONE = r"/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)"
_CE_ROUTES = [
    ("GET", rf"^{_ZONE}/instances$", "ce_list"),
    ("POST", rf"^{_ZONE}/instances$", "ce_insert"),
    ("GET", rf"^{_ZONE}/instances/(?P<id>[^/:]+)$", "ce_get"),
    ("DELETE", rf"^{_ZONE}/instances/(?P<id>[^/:]+)$", "ce_delete"),
    ("GET", rf"^{_ZONE}/operations/(?P<id>[^/:]+)$", "ce_operation"),
    ("POST", rf"^{_ZONE}/operations/(?P<id>[^/:]+)/wait$", "ce_wait"),
]
# TPU machine types of Compute Engine and GKE: family prefix -> (generation, chips per VM by suffix).
# ct5lp-hightpu-{1,4,8}t are on Google's v5e page; ct6e-standard-{1,4,8}t, ct5p-hightpu-4t and
# tpu7x-standard-4t are the names Google's GKE and Compute Engine TPU pages and public scripts use.
_MACHINE = re.compile(r"^(?P<family>ct5lp-hightpu|ct6e-standard|ct5p-hightpu|tpu7x-standard)-(?P<chips>[0-9]+)t$")
_MACHINE_GEN = {"ct5lp-hightpu": "v5e", "ct6e-standard": "v6e", "ct5p-hightpu": "v5p", "tpu7x-standard": "7x"}
_PROVISIONING = ("STANDARD", "SPOT", "FLEX_START", "RESERVATION_BOUND")
_V2ALPHA1_ROUTES = {"list_nodes", "get_node"}  # read-only: where the upcoming-maintenance notice lives
_TYPE_URL = "type.googleapis.com/google.cloud.tpu.v2."
# Chips one host of a slice drives: v5e and v6e slices have 8 chips per host (Google's v5e and v6e
# pages, as data/tpu_zones.csv notes them); v5p and v4 hosts drive 4 chips (a v5p-8 is 4 chips, one VM).
_CHIPS_PER_HOST = {"v5e": 8, "v6e": 8, "v5p": 4, "v4": 4}
_RUNTIME = {
    "v5e": "v2-alpha-tpuv5-lite",
    "v6e": "v2-alpha-tpuv6e",
    "v5p": "v2-alpha-tpuv5",
    "v4": "tpu-ubuntu2204-base",
}  # what seed() fills in; the stand-in validates none
_WAITING = ("CREATING", "WAITING_FOR_RESOURCES")  # ACCEPTED is retired (WAITING_FOR_RESOURCES replaced it)


class ApiError(Exception):
    """An error the stand-in returns as Google's JSON error body (``{"error": {...}}``)."""

    def __init__(self, code: int, status: str, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def single_host(accelerator_type: str) -> bool:
    """Whether a slice is one TPU VM (the only kind ``stop`` and ``start`` accept)."""
    from .runtime import parse_accelerator_type

    parsed = parse_accelerator_type(accelerator_type)
    return bool(parsed) and parsed[1] <= _CHIPS_PER_HOST.get(parsed[0], 4)


def _stamp(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _seconds(duration: Any) -> float:
    """A protobuf Duration as REST sends it (``"21600s"``) or as a dict (``{"seconds": 21600}``)."""
    if isinstance(duration, dict):
        return float(duration.get("seconds", 0)) + float(duration.get("nanos", 0)) / 1e9
    return float(str(duration).rstrip("s"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False


class StandIn:
    """An in-memory Cloud TPU API v2 on ``http://127.0.0.1:<port>``; a stand-in, not Google Cloud.

    ``port=0`` takes a free port. ``lifetime_s`` bounds how long it runs if nobody stops it.
    ``provision_after`` is how many reads of a queued resource it takes to become ACTIVE;
    ``operation_polls`` how many polls of an operation before it is done.
    """

    def __init__(
        self,
        project: str = "standin-project",
        *,
        port: int = 0,
        lifetime_s: float = 600.0,
        provision_after: int = 2,
        operation_polls: int = 1,
    ):
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0 (any free port) or 1-65535, got {port!r}")
        if not (isinstance(lifetime_s, (int, float)) and lifetime_s > 0):
            raise ValueError(f"lifetime_s must be a positive number of seconds, got {lifetime_s!r}")
        if not (isinstance(operation_polls, int) and operation_polls >= 1):
            raise ValueError(f"operation_polls must be a whole number >= 1, got {operation_polls!r}")
        self.project = project
        self.lifetime_s = float(lifetime_s)
        self.provision_after = int(provision_after)
        self.operation_polls = operation_polls
        self.requests: list[tuple[str, str]] = []  # (method, path) of every call, for a lesson to show
        self._port = port
        self._lock = threading.RLock()
        self._stopping = threading.Lock()
        self._offset = timedelta(0)
        self._nodes: dict[str, dict[str, Any]] = {}
        self._queued: dict[str, dict[str, Any]] = {}
        self._qr_meta: dict[str, dict[str, Any]] = {}  # reads, deadline
        self._maintenance: dict[str, dict[str, Any]] = {}  # node name -> window
        self._ops: dict[str, dict[str, Any]] = {}  # name -> {"op", "polls", "finish"}
        self._instances: dict[str, dict[str, Any]] = {}  # Compute Engine: selfLink path -> instance
        self._ce_ops: dict[str, dict[str, Any]] = {}  # Compute Engine zone operations
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> StandIn:
        if self._server is not None:
            return self
        server = _Server((HOST, self._port), _handler_for(self))
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="tpututor-standin", daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(self.lifetime_s, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port (safe to call twice)."""
        with self._stopping:
            server = self._server
            if server is None:
                return
            if self._timer is not None and self._timer is not threading.current_thread():
                self._timer.cancel()
            server.shutdown()
            server.server_close()
            self._server = None  # only now: `running` turns False once the port is closed
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the stand-in is not running: call start() or use `with StandIn() as api:`")
        return self._server.server_address[1]

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def __repr__(self) -> str:
        where = self.endpoint if self.running else "stopped"
        return f"<{_BANNER} at {where}>"

    def parent(self, zone: str) -> str:
        """``projects/<project>/locations/<zone>``, the parent every list and create call takes."""
        return f"projects/{self.project}/locations/{zone}"

    def client(self):
        """The official ``tpu_v2.TpuClient``, pointed here: REST transport, anonymous credentials."""
        from google.api_core.client_options import ClientOptions
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import tpu_v2

        return tpu_v2.TpuClient(
            transport="rest",
            credentials=AnonymousCredentials(),
            client_options=ClientOptions(api_endpoint=self.endpoint),
        )

    # ------------------------------------------------------------------ what Google would do

    def now(self) -> datetime:
        """The stand-in's clock: the real time plus whatever :meth:`advance` added."""
        return datetime.now(UTC) + self._offset

    def advance(self, *, hours: float = 0.0, minutes: float = 0.0) -> datetime:
        """Let time pass on the stand-in's clock (queued requests expire, maintenance windows open)."""
        if not all(isinstance(v, (int, float)) and v >= 0 for v in (hours, minutes)):
            raise ValueError("advance() moves the clock forward: hours and minutes must be >= 0")
        with self._lock:
            self._offset += timedelta(hours=hours, minutes=minutes)
            return self.now()

    def settle(self) -> int:
        """Finish every pending operation, as the service would in time; how many there were."""
        with self._lock:
            pending = [name for name, op in self._ops.items() if not op["op"]["done"]]
            for name in pending:
                self._finish(name)
            ce = [key for key, op in self._ce_ops.items() if op["op"]["status"] != "DONE"]
            for key in ce:
                self._ce_finish(key)
            return len(pending) + len(ce)

    def seed(
        self,
        zone: str,
        node_id: str,
        accelerator_type: str,
        *,
        created: datetime,
        labels: dict[str, str] | None = None,
        spot: bool = False,
        state: str = "READY",
    ) -> str:
        """Add a node as if someone had created it at ``created`` (a VM left running); its name."""
        from .runtime import parse_accelerator_type

        parsed = parse_accelerator_type(accelerator_type)
        with self._lock:
            node = self._new_node(
                zone,
                node_id,
                {
                    "acceleratorType": accelerator_type,
                    "labels": labels or {},
                    "runtimeVersion": _RUNTIME.get(parsed[0] if parsed else "", "v2-alpha-tpuv5-lite"),
                    "schedulingConfig": {"spot": spot},
                },
            )
            node["createTime"] = _stamp(created)
            node["state"] = state
            return node["name"]

    def preempt(self, name: str) -> None:
        """Take a spot (or preemptible) node back, as the service may at any time; a queued
        resource that held it is suspended by the service."""
        with self._lock:
            node = self._node(name)
            sched = node.get("schedulingConfig", {})
            if not (sched.get("spot") or sched.get("preemptible")):
                raise ValueError(f"{name} is not a spot or preemptible node; only those are preempted")
            node["state"] = "PREEMPTED"
            qr = node.get("queuedResource")
            if qr in self._queued:
                self._queued[qr]["state"] = {"state": "SUSPENDED", "suspendedData": {}, "stateInitiator": "SERVICE"}

    def schedule_maintenance(
        self,
        name: str,
        *,
        in_hours: float = 24.0,
        hours: float = 4.0,
        kind: str = "SCHEDULED",
        can_reschedule: bool = True,
    ) -> None:
        """Post an upcoming-maintenance notice for a node: a window opening ``in_hours`` from now on
        the stand-in's clock and lasting ``hours`` (``kind`` SCHEDULED or UNSCHEDULED)."""
        if kind not in ("SCHEDULED", "UNSCHEDULED"):
            raise ValueError(f"kind must be SCHEDULED or UNSCHEDULED, got {kind!r}")
        if not (isinstance(in_hours, (int, float)) and in_hours >= 0 and isinstance(hours, (int, float)) and hours > 0):
            raise ValueError("in_hours must be >= 0 and hours > 0")
        with self._lock:
            self._node(name)
            start = self.now() + timedelta(hours=in_hours)
            self._maintenance[name] = {
                "start": start,
                "end": start + timedelta(hours=hours),
                "kind": kind,
                "can_reschedule": can_reschedule,
            }

    # ------------------------------------------------------------------ internals

    def _node(self, name: str) -> dict[str, Any]:
        if name not in self._nodes:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        return self._nodes[name]

    def _maintain(self, name: str) -> None:
        """Bring a node's maintenance notice and health up to the stand-in's clock."""
        window, node = self._maintenance.get(name), self._nodes.get(name)
        if window is None or node is None:
            return
        now = self.now()
        if now >= window["end"]:
            del self._maintenance[name]
            node.pop("upcomingMaintenance", None)
            node["health"] = "HEALTHY"
            node.pop("healthDescription", None)
            return
        ongoing = now >= window["start"]
        node["upcomingMaintenance"] = {
            "type": window["kind"],
            "canReschedule": window["can_reschedule"] and not ongoing,
            "windowStartTime": _stamp(window["start"]),
            "windowEndTime": _stamp(window["end"]),
            "latestWindowStartTime": _stamp(window["start"]),
            "maintenanceStatus": "ONGOING" if ongoing else "PENDING",
        }
        if ongoing:
            node["health"] = "UNHEALTHY_MAINTENANCE"
            node["healthDescription"] = f"under maintenance until {_stamp(window['end'])} (stand-in)"
        else:
            node["health"] = "HEALTHY"
            node.pop("healthDescription", None)

    def _view(self, name: str, version: str) -> dict[str, Any]:
        """A node as ``version`` of the API shows it: v2 has no upcoming-maintenance field."""
        self._maintain(name)
        node = copy.deepcopy(self._nodes[name])
        if version == "v2":
            node.pop("upcomingMaintenance", None)
        else:
            node["apiVersion"] = "V2_ALPHA1"
        return node

    def _check_type(self, zone: str, accelerator_type: str) -> None:
        from .runtime import parse_accelerator_type

        if not accelerator_type:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                "node.accelerator_type is required (this stand-in does not read accelerator_config)",
            )
        parsed = parse_accelerator_type(accelerator_type)
        if parsed and parsed[0] == "7x":
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"{accelerator_type}: the Cloud TPU API does not serve TPU7x; create it through Compute Engine or GKE",
            )
        offered = offered_types(zone)
        if not offered:
            raise ApiError(400, "INVALID_ARGUMENT", f"zone {zone!r} offers no TPUs in this stand-in's table")
        if accelerator_type not in offered:
            gens = sorted({r["generation"] for r in zones_table() if r["zone"] == zone})
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"accelerator type {accelerator_type!r} is not available in zone {zone} (it offers {', '.join(gens)})",
            )

    def _new_node(self, zone: str, node_id: str, body: dict[str, Any], state: str = "READY") -> dict[str, Any]:
        if not node_id or not _NAME.match(node_id):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"node_id {node_id!r} must be 1-63 lowercase letters, digits or hyphens, starting with a letter",
            )
        name = f"{self.parent(zone)}/nodes/{node_id}"
        if name in self._nodes:
            raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists")
        self._check_type(zone, body.get("acceleratorType", ""))
        node = copy.deepcopy(body)
        node.update(
            name=name,
            id=str(next(self._ids)),
            state=state,
            health="HEALTHY",
            createTime=_stamp(self.now()),
            apiVersion="V2",
        )
        node.setdefault("networkConfig", {"network": "default", "subnetwork": "default", "enableExternalIps": False})
        self._nodes[name] = node
        return node

    def _operation(
        self, zone: str, verb: str, target: str, finish: Callable[[], dict[str, Any] | None], type_name: str = "Node"
    ) -> dict[str, Any]:
        """A long-running operation, not done yet; ``finish`` runs when it completes and returns the
        response (None for Empty)."""
        name = f"{self.parent(zone)}/operations/operation-{next(self._ids)}"
        op = {
            "name": name,
            "done": False,
            "metadata": {
                "@type": _TYPE_URL + "OperationMetadata",
                "createTime": _stamp(self.now()),
                "target": target,
                "verb": verb,
                "apiVersion": "v2",
            },
        }
        self._ops[name] = {"op": op, "polls": 0, "finish": finish, "type": type_name}
        return copy.deepcopy(op)

    def _finish(self, name: str) -> None:
        entry = self._ops[name]
        response = entry["finish"]()
        op = entry["op"]
        op["done"] = True
        op["metadata"]["endTime"] = _stamp(self.now())
        if response is None:
            op["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
        else:
            op["response"] = {"@type": _TYPE_URL + entry["type"], **copy.deepcopy(response)}

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, list[str]], key: str) -> dict[str, Any]:
        size = int(query.get("pageSize", ["0"])[0] or 0) or 50
        start = int(query.get("pageToken", ["0"])[0] or 0)
        page = items[start : start + size]
        out: dict[str, Any] = {key: page}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]) -> dict[str, Any]:
        for verb, pattern, action in _ROUTES:
            m = re.match(pattern, path)
            if m and verb == method and (m["ver"] == "v2" or action in _V2ALPHA1_ROUTES):
                with self._lock:
                    return getattr(self, "_" + action)(m.groupdict(), query, body)
        for verb, pattern, action in _CE_ROUTES:
            m = re.match(pattern, path)
            if m and verb == method:
                with self._lock:
                    return getattr(self, "_" + action)(m.groupdict(), query, body)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of this stand-in of the Cloud TPU API")

    def _zone_of(self, args) -> str:
        if args["project"] != self.project:
            raise ApiError(
                403,
                "PERMISSION_DENIED",
                f"project {args['project']!r} is not {self.project!r}, the only project this stand-in serves",
            )
        return args["zone"]

    # ------------------------------------------------------------------ nodes

    def _list_nodes(self, args, query, body):
        zone = self._zone_of(args)
        prefix = self.parent(zone) + "/nodes/"
        items = [self._view(k, args["ver"]) for k in sorted(self._nodes) if k.startswith(prefix)]
        return self._page(items, query, "nodes")

    def _create_node(self, args, query, body):
        zone = self._zone_of(args)
        node = self._new_node(zone, query.get("nodeId", [""])[0], body, state="CREATING")
        name = node["name"]

        def finish():
            live = self._nodes.get(name)
            if live is not None and live["state"] == "CREATING":
                live["state"] = "READY"
            return copy.deepcopy(live if live is not None else node)

        return self._operation(zone, "create", name, finish)

    def _get_node(self, args, query, body):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/nodes/{args['id']}"
        self._node(name)
        return self._view(name, args["ver"])

    def _delete_node(self, args, query, body):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/nodes/{args['id']}"
        node = self._node(name)
        if node["state"] == "DELETING":
            raise ApiError(400, "FAILED_PRECONDITION", f"{name} is already being deleted: wait for that operation")
        node["state"] = "DELETING"
        qr = node.get("queuedResource")
        if qr in self._queued:  # allowed: the queued resource that asked for it is suspended
            self._queued[qr]["state"] = {"state": "SUSPENDING", "suspendingData": {}, "stateInitiator": "USER"}

        def finish():
            self._nodes.pop(name, None)
            self._maintenance.pop(name, None)
            if qr in self._queued and not any(n.get("queuedResource") == qr for n in self._nodes.values()):
                self._queued[qr]["state"] = {"state": "SUSPENDED", "suspendedData": {}, "stateInitiator": "USER"}
            return None

        return self._operation(zone, "delete", name, finish)

    def _set_state(self, args, now: str, then: str, verb: str, allowed: tuple[str, ...]):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/nodes/{args['id']}"
        node = self._node(name)
        sched = node.get("schedulingConfig", {})
        if sched.get("spot") or sched.get("preemptible"):
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"cannot {verb} {name}: a spot or preemptible TPU cannot be "
                "stopped and restarted; delete it and create a new one",
            )
        if not single_host(node.get("acceleratorType", "")):
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"cannot {verb} {name}: {node.get('acceleratorType')} spans "
                "more than one host, and stop/start is only available with single TPU nodes",
            )
        if node["state"] not in allowed:
            raise ApiError(400, "FAILED_PRECONDITION", f"cannot {verb} {name} in state {node['state']}")
        node["state"] = now

        def finish():
            live = self._nodes.get(name)
            if live is not None and live["state"] == now:
                live["state"] = then
            return copy.deepcopy(live if live is not None else node)

        return self._operation(zone, verb, name, finish)

    def _stop_node(self, args, query, body):
        return self._set_state(args, "STOPPING", "STOPPED", "stop", ("READY",))

    def _start_node(self, args, query, body):
        return self._set_state(args, "STARTING", "READY", "start", ("STOPPED",))

    # ------------------------------------------------------------------ queued resources

    def _queued_name(self, zone: str, qid: str) -> str:
        return f"{self.parent(zone)}/queuedResources/{qid}"

    def _create_queued(self, args, query, body):
        zone = self._zone_of(args)
        qid = query.get("queuedResourceId", [""])[0]
        if not qid or not _NAME.match(qid):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"queued_resource_id {qid!r} must be 1-63 lowercase letters, digits or hyphens, starting with a letter",
            )
        name = self._queued_name(zone, qid)
        if name in self._queued:
            raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists")
        specs = body.get("tpu", {}).get("nodeSpec", [])
        if not specs:
            raise ApiError(400, "INVALID_ARGUMENT", "queued_resource.tpu.node_spec needs at least one node")
        for spec in specs:
            self._check_type(zone, spec.get("node", {}).get("acceleratorType", ""))
        created = self.now()
        policy = body.get("queueingPolicy", {})
        deadline = None
        if "validUntilDuration" in policy:
            deadline = created + timedelta(seconds=_seconds(policy["validUntilDuration"]))
        elif "validUntilTime" in policy:
            deadline = _parse_time(policy["validUntilTime"])
        qr = copy.deepcopy(body)
        qr.update(name=name, createTime=_stamp(created), state={"state": "CREATING", "creatingData": {}})
        self._queued[name] = qr
        self._qr_meta[name] = {"reads": 0, "deadline": deadline}
        return self._operation(
            zone, "create", name, lambda: copy.deepcopy(self._queued.get(name, qr)), "QueuedResource"
        )

    def _expire(self, name: str) -> None:
        """A request still waiting when its valid-until time passes fails, and stays until deleted."""
        qr, deadline = self._queued[name], self._qr_meta[name]["deadline"]
        if deadline is not None and qr["state"]["state"] in _WAITING and self.now() > deadline:
            qr["state"] = {
                "state": "FAILED",
                "stateInitiator": "SERVICE",
                "failedData": {
                    "error": {
                        "code": 4,
                        "message": f"the request's valid-until time {_stamp(deadline)} passed before capacity "
                        "was found (stand-in)",
                    }
                },
            }

    def _advance(self, name: str) -> None:
        """Each read moves a queued resource on: WAITING_FOR_RESOURCES, PROVISIONING, then ACTIVE
        (its nodes created READY) on read number ``provision_after``."""
        self._expire(name)
        qr = self._queued[name]
        if qr["state"]["state"] not in (*_WAITING, "PROVISIONING"):
            return
        meta = self._qr_meta[name]
        meta["reads"] += 1
        reads, needed = meta["reads"], max(1, self.provision_after)
        if reads < needed:
            qr["state"] = (
                {"state": "WAITING_FOR_RESOURCES"}
                if reads < needed - 1
                else {"state": "PROVISIONING", "provisioningData": {}}
            )
            return
        zone = name.split("/")[3]
        for spec in qr["tpu"]["nodeSpec"]:
            node_body = copy.deepcopy(spec.get("node", {}))
            if "spot" in qr:
                node_body["schedulingConfig"] = {**node_body.get("schedulingConfig", {}), "spot": True}
            node = self._new_node(zone, spec.get("nodeId", ""), node_body)
            node["queuedResource"] = name
        qr["state"] = {"state": "ACTIVE", "activeData": {}}

    def _get_queued(self, args, query, body):
        zone = self._zone_of(args)
        name = self._queued_name(zone, args["id"])
        if name not in self._queued:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        self._advance(name)
        return copy.deepcopy(self._queued[name])

    def _list_queued(self, args, query, body):
        zone = self._zone_of(args)
        prefix = self.parent(zone) + "/queuedResources/"
        names = [k for k in sorted(self._queued) if k.startswith(prefix)]
        for k in names:
            self._expire(k)
        return self._page([copy.deepcopy(self._queued[k]) for k in names], query, "queuedResources")

    def _delete_queued(self, args, query, body):
        zone = self._zone_of(args)
        name = self._queued_name(zone, args["id"])
        if name not in self._queued:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        self._expire(name)
        force = query.get("force", ["false"])[0].lower() == "true"
        mine = [k for k, n in self._nodes.items() if n.get("queuedResource") == name]
        state = self._queued[name]["state"]["state"]
        if mine and not force and state not in ("FAILED", "SUSPENDED"):
            raise ApiError(
                400,
                "FAILED_PRECONDITION",
                f"{name} still has nodes ({len(mine)}): delete them first or pass force=True",
            )
        for k in mine:
            self._nodes[k]["state"] = "DELETING"
        self._queued[name]["state"] = {"state": "DELETING", "deletingData": {}}

        def finish():
            for k in mine:
                self._nodes.pop(k, None)
                self._maintenance.pop(k, None)
            self._queued.pop(name, None)
            self._qr_meta.pop(name, None)
            return None

        return self._operation(zone, "delete", name, finish)

    # ------------------------------------------------------------------ Compute Engine (TPU VM instances)

    def _ce_instance_path(self, zone: str, name: str) -> str:
        return f"projects/{self.project}/zones/{zone}/instances/{name}"

    def _ce_check_machine(self, zone: str, machine_type: str) -> tuple[str, int]:
        short = str(machine_type).rsplit("/", 1)[-1]
        m = _MACHINE.match(short)
        if not m:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"machineType {machine_type!r} is not a TPU machine type this "
                "stand-in knows (ct5lp-hightpu-Nt, ct6e-standard-Nt, ct5p-hightpu-Nt, tpu7x-standard-Nt)",
            )
        generation, chips = _MACHINE_GEN[m["family"]], int(m["chips"])
        gens = sorted({r["generation"] for r in zones_table() if r["zone"] == zone})
        if generation not in gens:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"machine type {short!r} ({generation}) is not available in zone "
                f"{zone} (it offers {', '.join(gens) or 'no TPUs in this stand-in table'})",
            )
        return generation, chips

    def _ce_operation_new(self, zone: str, kind: str, target: str, finish: Callable[[], None]) -> dict[str, Any]:
        name = f"operation-{next(self._ids)}"
        op = {
            "kind": "compute#operation",
            "name": name,
            "zone": zone,
            "operationType": kind,
            "status": "RUNNING",
            "targetLink": f"{self.endpoint}/compute/v1/{target}",
            "insertTime": _stamp(self.now()),
            "selfLink": f"{self.endpoint}/compute/v1/projects/{self.project}/zones/{zone}/operations/{name}",
        }
        self._ce_ops[f"{zone}/{name}"] = {"op": op, "polls": 0, "finish": finish}
        return copy.deepcopy(op)

    def _ce_finish(self, key: str) -> None:
        entry = self._ce_ops[key]
        if entry["op"]["status"] != "DONE":
            entry["finish"]()
            entry["op"].update(status="DONE", endTime=_stamp(self.now()), progress=100)

    def _ce_insert(self, args, query, body):
        zone = self._zone_of(args)
        name = body.get("name", "")
        if not name or not _NAME.match(name):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"instance name {name!r} must be 1-63 lowercase letters, digits or hyphens, starting with a letter",
            )
        path = self._ce_instance_path(zone, name)
        if path in self._instances:
            raise ApiError(409, "ALREADY_EXISTS", f"The resource '{path}' already exists")
        generation, chips = self._ce_check_machine(zone, body.get("machineType", ""))
        scheduling = body.get("scheduling", {})
        model = scheduling.get("provisioningModel", "STANDARD")
        if model not in _PROVISIONING:
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                f"scheduling.provisioningModel {model!r} is not one of {', '.join(_PROVISIONING)}",
            )
        if model == "RESERVATION_BOUND" and not body.get("reservationAffinity", {}).get("values"):
            raise ApiError(
                400,
                "INVALID_ARGUMENT",
                "a RESERVATION_BOUND instance names its reservation in "
                "reservationAffinity (consumeReservationType SPECIFIC_RESERVATION, values [...])",
            )
        instance = copy.deepcopy(body)
        instance.update(
            kind="compute#instance",
            id=str(next(self._ids)),
            status="PROVISIONING",
            creationTimestamp=_stamp(self.now()),
            zone=zone,
            tpuGeneration=generation,
            tpuChips=chips,
            selfLink=f"{self.endpoint}/compute/v1/{path}",
        )
        self._instances[path] = instance

        def finish():
            live = self._instances.get(path)
            if live is not None and live["status"] == "PROVISIONING":
                live["status"] = "RUNNING"

        return self._ce_operation_new(zone, "insert", path, finish)

    def _ce_get(self, args, query, body):
        zone = self._zone_of(args)
        path = self._ce_instance_path(zone, args["id"])
        if path not in self._instances:
            raise ApiError(404, "NOT_FOUND", f"The resource '{path}' was not found")
        return copy.deepcopy(self._instances[path])

    def _ce_list(self, args, query, body):
        zone = self._zone_of(args)
        prefix = self._ce_instance_path(zone, "")
        items = [copy.deepcopy(v) for k, v in sorted(self._instances.items()) if k.startswith(prefix)]
        size = int(query.get("maxResults", ["0"])[0] or 0) or 500
        start = int(query.get("pageToken", ["0"])[0] or 0)
        out: dict[str, Any] = {"kind": "compute#instanceList", "items": items[start : start + size]}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def _ce_delete(self, args, query, body):
        zone = self._zone_of(args)
        path = self._ce_instance_path(zone, args["id"])
        if path not in self._instances:
            raise ApiError(404, "NOT_FOUND", f"The resource '{path}' was not found")
        self._instances[path]["status"] = "STOPPING"
        return self._ce_operation_new(zone, "delete", path, lambda: self._instances.pop(path, None))

    def _ce_operation(self, args, query, body):
        zone = self._zone_of(args)
        key = f"{zone}/{args['id']}"
        if key not in self._ce_ops:
            raise ApiError(404, "NOT_FOUND", f"operation {args['id']!r} was not found in {zone}")
        entry = self._ce_ops[key]
        entry["polls"] += 1
        if entry["polls"] >= self.operation_polls:
            self._ce_finish(key)
        return copy.deepcopy(entry["op"])

    def _ce_wait(self, args, query, body):
        """``zoneOperations.wait``: returns when the operation is DONE (here at once)."""
        zone = self._zone_of(args)
        key = f"{zone}/{args['id']}"
        if key not in self._ce_ops:
            raise ApiError(404, "NOT_FOUND", f"operation {args['id']!r} was not found in {zone}")
        self._ce_finish(key)
        return copy.deepcopy(self._ce_ops[key]["op"])

    def instance(self, zone: str, name: str) -> str:
        """The REST path of a Compute Engine instance: ``/compute/v1/projects/<p>/zones/<zone>/instances/<name>``."""
        return "/compute/v1/" + self._ce_instance_path(zone, name)

    def preempt_instance(self, zone: str, name: str) -> None:
        """Take a SPOT or FLEX_START Compute Engine instance back: TERMINATED (instanceTerminationAction
        STOP, the default) or gone (DELETE)."""
        with self._lock:
            path = self._ce_instance_path(zone, name)
            inst = self._instances.get(path)
            if inst is None:
                raise ValueError(f"no instance {path}")
            sched = inst.get("scheduling", {})
            if sched.get("provisioningModel") not in ("SPOT", "FLEX_START"):
                raise ValueError(f"{name} is not a SPOT or FLEX_START instance; only those are taken back")
            if sched.get("instanceTerminationAction") == "DELETE":
                del self._instances[path]
            else:
                inst["status"] = "TERMINATED"

    # ------------------------------------------------------------------ the rest

    def _list_types(self, args, query, body):
        zone = self._zone_of(args)
        items = [{"name": f"{self.parent(zone)}/acceleratorTypes/{t}", "type": t} for t in offered_types(zone)]
        return self._page(items, query, "acceleratorTypes")

    def _get_type(self, args, query, body):
        zone = self._zone_of(args)
        if args["id"] not in offered_types(zone):
            raise ApiError(404, "NOT_FOUND", f"accelerator type {args['id']!r} is not offered in {zone}")
        return {"name": f"{self.parent(zone)}/acceleratorTypes/{args['id']}", "type": args["id"]}

    def _get_operation(self, args, query, body):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/operations/{args['id']}"
        if name not in self._ops:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        entry = self._ops[name]
        if not entry["op"]["done"]:
            entry["polls"] += 1
            if entry["polls"] >= self.operation_polls:
                self._finish(name)
        return copy.deepcopy(entry["op"])


def _handler_for(api: StandIn):
    class Handler(BaseHTTPRequestHandler):
        server_version = "tpututor-standin"

        def log_message(self, *args) -> None:  # quiet: a lesson prints what it wants
            pass

        def _reply(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header(STANDIN_HEADER, _BANNER)
            self.end_headers()
            self.wfile.write(data)

        def _serve(self, method: str) -> None:
            url = urlsplit(self.path)
            api.requests.append((method, url.path))
            try:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw.strip() else {}
                self._reply(200, api.handle(method, url.path, parse_qs(url.query), body))
            except ApiError as err:
                self._reply(err.code, {"error": {"code": err.code, "message": err.message, "status": err.status}})
            except (ValueError, KeyError, TypeError) as err:
                self._reply(
                    400, {"error": {"code": 400, "message": f"bad request: {err}", "status": "INVALID_ARGUMENT"}}
                )

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._reply(
                501,
                {
                    "error": {
                        "code": 501,
                        "message": "update_node is not part of this stand-in",
                        "status": "UNIMPLEMENTED",
                    }
                },
            )

    return Handler
