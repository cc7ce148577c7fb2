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

What the real service does on its own, the stand-in does when told: :meth:`StandIn.preempt` (a
spot VM taken back), :meth:`StandIn.schedule_maintenance`, :meth:`StandIn.seed` (a VM someone
created days ago). A queued resource becomes ACTIVE, and its node READY, after ``provision_after``
reads. Accelerator types a zone offers come from ``data/tpu_zones.csv`` (sourced, dated); the
stand-in rejects the others the way the API does (HTTP 400), and rejects TPU7x, which the Cloud
TPU API does not serve. Every response carries the header ``X-Stand-In``.

The server binds 127.0.0.1 only, stops itself after ``lifetime_s`` seconds, and :meth:`stop`
(or leaving the ``with`` block) closes its port.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["StandIn", "STANDIN_HEADER", "HOST", "zones_table", "offered_types"]

HOST = "127.0.0.1"
STANDIN_HEADER = "X-Stand-In"
_BANNER = "tpututor stand-in of the Cloud TPU API v2 (not Google Cloud)"
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")  # resource ids, as the API documents them
_LOCATION = r"projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)"
_ROUTES = [  # (method, pattern, handler name)
    ("GET", rf"^/v2/{_LOCATION}/nodes$", "list_nodes"),
    ("POST", rf"^/v2/{_LOCATION}/nodes$", "create_node"),
    ("GET", rf"^/v2/{_LOCATION}/nodes/(?P<id>[^/:]+)$", "get_node"),
    ("DELETE", rf"^/v2/{_LOCATION}/nodes/(?P<id>[^/:]+)$", "delete_node"),
    ("POST", rf"^/v2/{_LOCATION}/nodes/(?P<id>[^/:]+):stop$", "stop_node"),
    ("POST", rf"^/v2/{_LOCATION}/nodes/(?P<id>[^/:]+):start$", "start_node"),
    ("GET", rf"^/v2/{_LOCATION}/queuedResources$", "list_queued"),
    ("POST", rf"^/v2/{_LOCATION}/queuedResources$", "create_queued"),
    ("GET", rf"^/v2/{_LOCATION}/queuedResources/(?P<id>[^/:]+)$", "get_queued"),
    ("DELETE", rf"^/v2/{_LOCATION}/queuedResources/(?P<id>[^/:]+)$", "delete_queued"),
    ("GET", rf"^/v2/{_LOCATION}/acceleratorTypes$", "list_types"),
    ("GET", rf"^/v2/{_LOCATION}/acceleratorTypes/(?P<id>[^/:]+)$", "get_type"),
    ("GET", rf"^/v2/{_LOCATION}/operations/(?P<id>[^/:]+)$", "get_operation"),
]
_TYPE_URL = "type.googleapis.com/google.cloud.tpu.v2."


class ApiError(Exception):
    """An error the stand-in returns as Google's JSON error body (``{"error": {...}}``)."""

    def __init__(self, code: int, status: str, message: str):
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def zones_table() -> list[dict[str, str]]:
    """The rows of ``data/tpu_zones.csv``: which TPU generations each zone offers, with sources."""
    from .hardware import data_rows

    return data_rows("tpu_zones.csv")


def _sizes(spec: str) -> list[int]:
    """``"1,4,8"`` -> [1, 4, 8]; ``"8,16,256..512/128"`` -> [8, 16, 256, 384, 512]."""
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if ".." in part:
            span, _, step = part.partition("/")
            lo, hi = (int(x) for x in span.split(".."))
            out += range(lo, hi + 1, int(step or 1))
        elif part:
            out.append(int(part))
    return out


def offered_types(zone: str) -> list[str]:
    """Every accelerator type tpututor's table says ``zone`` offers (empty if the zone is not in it)."""
    out = []
    for row in zones_table():
        if row["zone"] == zone:
            out += [f"{row['prefix']}-{n}" for n in _sizes(row["sizes"])]
    return out


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _stamp(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False


class StandIn:
    """An in-memory Cloud TPU API v2 on ``http://127.0.0.1:<port>``; a stand-in, not Google Cloud.

    ``port=0`` takes a free port. ``lifetime_s`` bounds how long it runs if nobody stops it.
    ``provision_after`` is how many reads of a queued resource it takes to become ACTIVE.
    """

    def __init__(self, project: str = "standin-project", *, port: int = 0, lifetime_s: float = 600.0,
                 provision_after: int = 2):
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be 0 (any free port) or 1-65535, got {port!r}")
        if not (isinstance(lifetime_s, (int, float)) and lifetime_s > 0):
            raise ValueError(f"lifetime_s must be a positive number of seconds, got {lifetime_s!r}")
        self.project = project
        self.lifetime_s = float(lifetime_s)
        self.provision_after = int(provision_after)
        self.requests: list[tuple[str, str]] = []  # (method, path) of every call, for a lesson to show
        self._port = port
        self._lock = threading.RLock()
        self._stopping = threading.Lock()
        self._nodes: dict[str, dict[str, Any]] = {}
        self._queued: dict[str, dict[str, Any]] = {}
        self._ops: dict[str, dict[str, Any]] = {}
        self._reads: dict[str, int] = {}
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> "StandIn":
        if self._server is not None:
            return self
        server = _Server((HOST, self._port), _handler_for(self))
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="tpututor-standin", daemon=True)
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

    def __enter__(self) -> "StandIn":
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

        return tpu_v2.TpuClient(transport="rest", credentials=AnonymousCredentials(),
                                client_options=ClientOptions(api_endpoint=self.endpoint))

    # ------------------------------------------------------------------ what Google would do

    def seed(self, zone: str, node_id: str, accelerator_type: str, *, created: datetime,
             labels: dict[str, str] | None = None, spot: bool = False, state: str = "READY") -> str:
        """Add a node as if someone had created it at ``created`` (a VM left running); its name."""
        with self._lock:
            node = self._new_node(zone, node_id, {"acceleratorType": accelerator_type, "labels": labels or {},
                                                  "runtimeVersion": "v2-alpha-tpuv5-lite",
                                                  "schedulingConfig": {"spot": spot}})
            node["createTime"] = _stamp(created)
            node["state"] = state
            return node["name"]

    def preempt(self, name: str) -> None:
        """Take a spot (or preemptible) node back, as the service may at any time."""
        with self._lock:
            node = self._node(name)
            sched = node.get("schedulingConfig", {})
            if not (sched.get("spot") or sched.get("preemptible")):
                raise ValueError(f"{name} is not a spot or preemptible node; only those are preempted")
            node["state"] = "PREEMPTED"

    def schedule_maintenance(self, name: str, *, in_hours: float = 24.0) -> None:
        """Give a node an upcoming maintenance notice (the API marks its health)."""
        with self._lock:
            node = self._node(name)
            node["health"] = "UNHEALTHY_MAINTENANCE"
            node["healthDescription"] = (f"maintenance scheduled to start at "
                                         f"{_stamp(_now() + timedelta(hours=in_hours))} (stand-in)")

    # ------------------------------------------------------------------ the API

    def _node(self, name: str) -> dict[str, Any]:
        if name not in self._nodes:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        return self._nodes[name]

    def _check_type(self, zone: str, accelerator_type: str) -> None:
        from .runtime import parse_accelerator_type

        if not accelerator_type:
            raise ApiError(400, "INVALID_ARGUMENT", "node.accelerator_type is required "
                           "(this stand-in does not read accelerator_config)")
        parsed = parse_accelerator_type(accelerator_type)
        if parsed and parsed[0] == "7x":
            raise ApiError(400, "INVALID_ARGUMENT", f"{accelerator_type}: the Cloud TPU API does not serve "
                           "TPU7x; create it through Compute Engine or GKE")
        offered = offered_types(zone)
        if not offered:
            raise ApiError(400, "INVALID_ARGUMENT", f"zone {zone!r} offers no TPUs in this stand-in's table")
        if accelerator_type not in offered:
            gens = sorted({r["generation"] for r in zones_table() if r["zone"] == zone})
            raise ApiError(400, "INVALID_ARGUMENT", f"accelerator type {accelerator_type!r} is not available in "
                           f"zone {zone} (it offers {', '.join(gens)})")

    def _new_node(self, zone: str, node_id: str, body: dict[str, Any]) -> dict[str, Any]:
        if not node_id or not _NAME.match(node_id):
            raise ApiError(400, "INVALID_ARGUMENT", f"node_id {node_id!r} must be 1-63 lowercase letters, "
                           "digits or hyphens, starting with a letter")
        name = f"{self.parent(zone)}/nodes/{node_id}"
        if name in self._nodes:
            raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists")
        self._check_type(zone, body.get("acceleratorType", ""))
        node = copy.deepcopy(body)
        node.update(name=name, id=str(next(self._ids)), state="READY", health="HEALTHY",
                    createTime=_stamp(_now()), apiVersion="V2")
        node.setdefault("networkConfig", {"network": "default", "enableExternalIps": True})
        node.setdefault("serviceAccount", {"email": "default", "scope": ["https://www.googleapis.com/auth/cloud-platform"]})
        self._nodes[name] = node
        return node

    def _operation(self, zone: str, verb: str, target: str, response: dict[str, Any] | None,
                   type_name: str = "Node") -> dict[str, Any]:
        name = f"{self.parent(zone)}/operations/operation-{next(self._ids)}"
        op = {"name": name, "done": True,
              "metadata": {"@type": _TYPE_URL + "OperationMetadata", "createTime": _stamp(_now()),
                           "endTime": _stamp(_now()), "target": target, "verb": verb, "apiVersion": "v2"}}
        if response is None:
            op["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
        else:
            op["response"] = {"@type": _TYPE_URL + type_name, **copy.deepcopy(response)}
        self._ops[name] = op
        return op

    @staticmethod
    def _page(items: list[dict[str, Any]], query: dict[str, list[str]], key: str) -> dict[str, Any]:
        size = int(query.get("pageSize", ["0"])[0] or 0) or 50
        start = int(query.get("pageToken", ["0"])[0] or 0)
        page = items[start:start + size]
        out: dict[str, Any] = {key: page}
        if start + size < len(items):
            out["nextPageToken"] = str(start + size)
        return out

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: dict[str, Any]) -> dict[str, Any]:
        for verb, pattern, action in _ROUTES:
            m = re.match(pattern, path)
            if m and verb == method:
                with self._lock:
                    return getattr(self, "_" + action)(m.groupdict(), query, body)
        raise ApiError(404, "NOT_FOUND", f"{method} {path} is not part of this stand-in of the Cloud TPU API")

    def _zone_of(self, args) -> str:
        if args["project"] != self.project:
            raise ApiError(403, "PERMISSION_DENIED", f"project {args['project']!r} is not {self.project!r}, the "
                           "only project this stand-in serves")
        return args["zone"]

    def _list_nodes(self, args, query, body):
        zone = self._zone_of(args)
        prefix = self.parent(zone) + "/nodes/"
        items = [copy.deepcopy(n) for k, n in sorted(self._nodes.items()) if k.startswith(prefix)]
        return self._page(items, query, "nodes")

    def _create_node(self, args, query, body):
        zone = self._zone_of(args)
        node = self._new_node(zone, query.get("nodeId", [""])[0], body)
        return self._operation(zone, "create", node["name"], node)

    def _get_node(self, args, query, body):
        zone = self._zone_of(args)
        return copy.deepcopy(self._node(f"{self.parent(zone)}/nodes/{args['id']}"))

    def _delete_node(self, args, query, body):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/nodes/{args['id']}"
        node = self._node(name)
        qr = node.get("queuedResource")
        if qr and qr in self._queued:
            raise ApiError(400, "FAILED_PRECONDITION", f"{name} belongs to queued resource {qr}: delete the "
                           "queued resource (with force=True to delete its nodes too)")
        del self._nodes[name]
        return self._operation(zone, "delete", name, None)

    def _set_state(self, args, state: str, verb: str, allowed: tuple[str, ...]):
        zone = self._zone_of(args)
        name = f"{self.parent(zone)}/nodes/{args['id']}"
        node = self._node(name)
        if node["state"] not in allowed:
            raise ApiError(400, "FAILED_PRECONDITION", f"cannot {verb} {name} in state {node['state']}")
        node["state"] = state
        return self._operation(zone, verb, name, node)

    def _stop_node(self, args, query, body):
        return self._set_state(args, "STOPPED", "stop", ("READY",))

    def _start_node(self, args, query, body):
        return self._set_state(args, "READY", "start", ("STOPPED",))

    def _queued_name(self, zone: str, qid: str) -> str:
        return f"{self.parent(zone)}/queuedResources/{qid}"

    def _create_queued(self, args, query, body):
        zone = self._zone_of(args)
        qid = query.get("queuedResourceId", [""])[0]
        if not qid or not _NAME.match(qid):
            raise ApiError(400, "INVALID_ARGUMENT", f"queued_resource_id {qid!r} must be 1-63 lowercase letters, "
                           "digits or hyphens, starting with a letter")
        name = self._queued_name(zone, qid)
        if name in self._queued:
            raise ApiError(409, "ALREADY_EXISTS", f"Resource '{name}' already exists")
        specs = body.get("tpu", {}).get("nodeSpec", [])
        if not specs:
            raise ApiError(400, "INVALID_ARGUMENT", "queued_resource.tpu.node_spec needs at least one node")
        for spec in specs:
            self._check_type(zone, spec.get("node", {}).get("acceleratorType", ""))
        qr = copy.deepcopy(body)
        qr.update(name=name, createTime=_stamp(_now()), state={"state": "ACCEPTED"})
        self._queued[name] = qr
        self._reads[name] = 0
        return self._operation(zone, "create", name, qr, "QueuedResource")

    def _advance(self, name: str) -> None:
        """Each read moves a queued resource on: WAITING_FOR_RESOURCES, PROVISIONING, then ACTIVE
        (its nodes created READY) on read number ``provision_after``."""
        qr = self._queued[name]
        if qr["state"]["state"] not in ("ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING"):
            return
        self._reads[name] += 1
        reads, needed = self._reads[name], max(1, self.provision_after)
        if reads < needed:
            qr["state"] = {"state": "WAITING_FOR_RESOURCES" if reads < needed - 1 else "PROVISIONING"}
            return
        zone = name.split("/")[3]
        for spec in qr["tpu"]["nodeSpec"]:
            node_body = copy.deepcopy(spec.get("node", {}))
            if "spot" in qr:
                node_body["schedulingConfig"] = {**node_body.get("schedulingConfig", {}), "spot": True}
            node = self._new_node(zone, spec.get("nodeId", ""), node_body)
            node["queuedResource"] = name
        qr["state"] = {"state": "ACTIVE"}

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
        items = [copy.deepcopy(q) for k, q in sorted(self._queued.items()) if k.startswith(prefix)]
        return self._page(items, query, "queuedResources")

    def _delete_queued(self, args, query, body):
        zone = self._zone_of(args)
        name = self._queued_name(zone, args["id"])
        if name not in self._queued:
            raise ApiError(404, "NOT_FOUND", f"Resource '{name}' was not found")
        force = query.get("force", ["false"])[0].lower() == "true"
        mine = [k for k, n in self._nodes.items() if n.get("queuedResource") == name]
        state = self._queued[name]["state"]["state"]
        if mine and not force and state not in ("ACCEPTED", "FAILED", "SUSPENDED"):
            raise ApiError(400, "FAILED_PRECONDITION", f"{name} still has nodes ({len(mine)}): delete them first "
                           "or pass force=True")
        for k in mine:
            del self._nodes[k]
        del self._queued[name]
        return self._operation(zone, "delete", name, None)

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
        return self._ops[name]


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
                self._reply(400, {"error": {"code": 400, "message": f"bad request: {err}",
                                            "status": "INVALID_ARGUMENT"}})

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def do_PATCH(self) -> None:
            self._reply(501, {"error": {"code": 501, "message": "update_node is not part of this stand-in",
                                        "status": "UNIMPLEMENTED"}})

    return Handler
