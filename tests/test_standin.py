"""tpututor.standin: a stand-in of the Cloud TPU API on 127.0.0.1 that the official client
(google-cloud-tpu) talks to with its real request objects; it binds loopback only, stops itself,
and its port is closed once stopped (the lesson stops it and checks the same)."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tpututor import standin

ROOT = Path(__file__).resolve().parent.parent
ZONE = "us-central1-a"


def port_is_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def api():
    server = standin.StandIn(project="p", lifetime_s=120, provision_after=3).start()
    yield server
    server.stop()


@pytest.fixture
def tpu(api):
    tpu_v2 = pytest.importorskip("google.cloud.tpu_v2")
    return tpu_v2, api.client()


def test_it_binds_127_0_0_1_only_and_its_port_is_closed_after_stop():
    api = standin.StandIn().start()
    host, port = api._server.server_address
    assert host == "127.0.0.1" and api.endpoint == f"http://127.0.0.1:{port}"
    assert not port_is_closed(port)
    api.stop()
    assert port_is_closed(port) and not api.running
    api.stop()  # twice is fine


def test_leaving_the_with_block_stops_it():
    with standin.StandIn() as api:
        port = api.port
        assert "not Google Cloud" in repr(api)
    assert port_is_closed(port)
    with pytest.raises(RuntimeError, match="not running"):
        _ = api.port


def test_it_stops_itself_after_its_lifetime():
    api = standin.StandIn(lifetime_s=0.3).start()
    port = api.port
    deadline = time.monotonic() + 10
    while api.running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not api.running and port_is_closed(port)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(port=-1), "port must be 0"),
        (dict(port=70000), "port must be 0"),
        (dict(lifetime_s=0), "lifetime_s must be a positive"),
    ],
)
def test_bad_settings_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        standin.StandIn(**kwargs)


def test_every_reply_says_it_is_a_stand_in_and_errors_use_googles_json_shape(api):
    with urllib.request.urlopen(f"{api.endpoint}/v2/{api.parent(ZONE)}/nodes", timeout=5) as reply:
        assert "not Google Cloud" in reply.headers[standin.STANDIN_HEADER]
        assert json.loads(reply.read()) == {"nodes": []}
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{api.endpoint}/v2/{api.parent(ZONE)}/nodes/nope", timeout=5)
    body = json.loads(err.value.read())
    assert err.value.code == 404 and body["error"]["status"] == "NOT_FOUND"


def test_the_zone_table_rows_are_sourced_and_dated_and_expand_to_accelerator_types():
    rows = standin.zones_table()
    assert {r["generation"] for r in rows} >= {"v5e", "v5p", "v6e"}
    for r in rows:
        assert r["source"].startswith("https://") and re.fullmatch(r"20\d\d-\d\d-\d\d", r["source_date"])
    assert "v5litepod-8" in standin.offered_types("us-central1-a") and "v6e-8" not in standin.offered_types(
        "us-central1-a"
    )
    assert "v5p-17920" in standin.offered_types("us-east5-a") and standin.offered_types("nowhere-1a") == []


# ----------------------------------------------------------------- the official client, for real


def test_the_official_client_creates_gets_lists_stops_starts_and_deletes_a_node(tpu, api):
    tpu_v2, client = tpu
    parent = api.parent(ZONE)
    request = tpu_v2.CreateNodeRequest(
        parent=parent,
        node_id="t1",
        node=tpu_v2.Node(accelerator_type="v5litepod-8", runtime_version="v2-alpha-tpuv5-lite", labels={"job": "x"}),
    )
    operation = client.create_node(request=request)
    assert [n.state for n in client.list_nodes(parent=parent)] == [tpu_v2.Node.State.CREATING]
    node = operation.result(timeout=10)
    assert isinstance(node, tpu_v2.Node) and node.name == f"{parent}/nodes/t1"
    assert node.state == tpu_v2.Node.State.READY and node.labels["job"] == "x"
    assert node.create_time.tzinfo is not None and node.network_config.enable_external_ips is False
    assert [n.name for n in client.list_nodes(parent=parent)] == [node.name]
    assert client.get_node(request=tpu_v2.GetNodeRequest(name=node.name)).accelerator_type == "v5litepod-8"
    stopping = client.stop_node(request=tpu_v2.StopNodeRequest(name=node.name))
    assert client.get_node(name=node.name).state == tpu_v2.Node.State.STOPPING
    stopping.result(timeout=10)
    assert client.get_node(name=node.name).state == tpu_v2.Node.State.STOPPED
    client.start_node(request=tpu_v2.StartNodeRequest(name=node.name)).result(timeout=10)
    deleting = client.delete_node(request=tpu_v2.DeleteNodeRequest(name=node.name))
    assert [n.state for n in client.list_nodes(parent=parent)] == [tpu_v2.Node.State.DELETING]
    deleting.result(timeout=10)
    assert list(client.list_nodes(parent=parent)) == []
    assert ("POST", f"/v2/{parent}/nodes") in api.requests
    polls = [path for method, path in api.requests if method == "GET" and "/operations/" in path]
    assert len(polls) == 4, "create, stop, start and delete were each waited on by polling their operation"


def test_an_operation_finishes_only_when_polled_or_settled(api):
    parent = api.parent(ZONE)
    body = json.dumps({"acceleratorType": "v5litepod-4", "runtimeVersion": "x"}).encode()
    request = urllib.request.Request(
        f"{api.endpoint}/v2/{parent}/nodes?nodeId=a",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as reply:
        op = json.loads(reply.read())
    assert op["done"] is False and "response" not in op and op["metadata"]["verb"] == "create"
    with urllib.request.urlopen(f"{api.endpoint}/v2/{op['name']}", timeout=5) as reply:
        polled = json.loads(reply.read())
    assert polled["done"] is True and polled["response"]["state"] == "READY"
    slow = standin.StandIn(operation_polls=3).start()
    try:
        slow.seed(ZONE, "b", "v5litepod-4", created=datetime.now(UTC))
        request = urllib.request.Request(f"{slow.endpoint}/v2/{slow.parent(ZONE)}/nodes/b", method="DELETE")
        urllib.request.urlopen(request, timeout=5).close()
        assert slow.settle() == 1 and slow.settle() == 0
        with urllib.request.urlopen(f"{slow.endpoint}/v2/{slow.parent(ZONE)}/nodes", timeout=5) as reply:
            assert json.loads(reply.read()) == {"nodes": []}
    finally:
        slow.stop()


def test_stop_and_start_are_refused_for_spot_and_multi_host_nodes(tpu, api):
    tpu_v2, client = tpu
    from google.api_core import exceptions

    born = datetime.now(UTC)
    spot = api.seed(ZONE, "spot", "v5litepod-8", created=born, spot=True)
    big = api.seed(ZONE, "big", "v5litepod-16", created=born)
    with pytest.raises(exceptions.BadRequest, match="spot or preemptible TPU cannot be stopped"):
        client.stop_node(request=tpu_v2.StopNodeRequest(name=spot))
    with pytest.raises(exceptions.BadRequest, match="only available with single TPU nodes"):
        client.stop_node(request=tpu_v2.StopNodeRequest(name=big))
    assert standin.single_host("v5p-8") and not standin.single_host("v5p-16") and standin.single_host("v6e-8")


def test_a_queued_resource_waits_then_becomes_active_and_force_deletes_its_node(tpu, api):
    tpu_v2, client = tpu
    parent = api.parent(ZONE)
    qr = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[
                tpu_v2.QueuedResource.Tpu.NodeSpec(
                    parent=parent, node_id="q1", node=tpu_v2.Node(accelerator_type="v5litepod-16", runtime_version="x")
                )
            ]
        ),
        spot=tpu_v2.QueuedResource.Spot(),
    )
    made = client.create_queued_resource(
        request=tpu_v2.CreateQueuedResourceRequest(parent=parent, queued_resource_id="qr1", queued_resource=qr)
    ).result(timeout=10)
    states = [made.state.state.name] + [client.get_queued_resource(name=made.name).state.state.name for _ in range(4)]
    assert states == ["CREATING", "WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE", "ACTIVE"]
    node = client.get_node(name=f"{parent}/nodes/q1")
    assert node.state == tpu_v2.Node.State.READY and node.scheduling_config.spot and node.queued_resource == made.name
    assert [q.name for q in client.list_queued_resources(parent=parent)] == [made.name]
    from google.api_core import exceptions

    with pytest.raises(exceptions.BadRequest, match="pass force=True"):
        client.delete_queued_resource(name=made.name).result(timeout=10)
    client.delete_queued_resource(request=tpu_v2.DeleteQueuedResourceRequest(name=made.name, force=True)).result(
        timeout=10
    )
    assert list(client.list_nodes(parent=parent)) == [] and list(client.list_queued_resources(parent=parent)) == []


def queue(tpu_v2, client, api, qid, node_id, **policy):
    parent = api.parent(ZONE)
    qr = tpu_v2.QueuedResource(
        tpu=tpu_v2.QueuedResource.Tpu(
            node_spec=[
                tpu_v2.QueuedResource.Tpu.NodeSpec(
                    parent=parent,
                    node_id=node_id,
                    node=tpu_v2.Node(accelerator_type="v5litepod-8", runtime_version="x"),
                )
            ]
        ),
        spot=tpu_v2.QueuedResource.Spot(),
        queueing_policy=tpu_v2.QueuedResource.QueueingPolicy(**policy),
    )
    return client.create_queued_resource(
        request=tpu_v2.CreateQueuedResourceRequest(parent=parent, queued_resource_id=qid, queued_resource=qr)
    ).result(timeout=10)


def test_deleting_or_preempting_a_queued_resources_node_suspends_the_request(tpu, api):
    tpu_v2, client = tpu
    State = tpu_v2.QueuedResourceState.State
    made = queue(tpu_v2, client, api, "qa", "na")
    while client.get_queued_resource(name=made.name).state.state != State.ACTIVE:
        pass
    deleting = client.delete_node(name=f"{api.parent(ZONE)}/nodes/na")
    assert client.get_queued_resource(name=made.name).state.state == State.SUSPENDING
    deleting.result(timeout=10)
    got = client.get_queued_resource(name=made.name).state
    assert got.state == State.SUSPENDED and got.state_initiator == tpu_v2.QueuedResourceState.StateInitiator.USER
    client.delete_queued_resource(name=made.name).result(timeout=10)  # no force needed once suspended
    other = queue(tpu_v2, client, api, "qb", "nb")
    while client.get_queued_resource(name=other.name).state.state != State.ACTIVE:
        pass
    api.preempt(f"{api.parent(ZONE)}/nodes/nb")
    got = client.get_queued_resource(name=other.name).state
    assert got.state == State.SUSPENDED and got.state_initiator == tpu_v2.QueuedResourceState.StateInitiator.SERVICE


def test_a_request_that_outlives_its_valid_until_time_fails_and_stays_until_deleted(tpu, api):
    tpu_v2, client = tpu
    State = tpu_v2.QueuedResourceState.State
    made = queue(tpu_v2, client, api, "late", "nl", valid_until_duration={"seconds": 6 * 3600})
    assert client.get_queued_resource(name=made.name).state.state == State.WAITING_FOR_RESOURCES
    api.advance(hours=7)
    failed = client.get_queued_resource(name=made.name)
    assert failed.state.state == State.FAILED and "valid-until" in failed.state.failed_data.error.message
    assert [q.state.state for q in client.list_queued_resources(parent=api.parent(ZONE))] == [State.FAILED]
    client.delete_queued_resource(name=made.name).result(timeout=10)
    assert list(client.list_queued_resources(parent=api.parent(ZONE))) == []
    with pytest.raises(ValueError, match="moves the clock forward"):
        api.advance(hours=-1)


def test_the_api_refuses_a_type_the_zone_lacks_tpu7x_duplicates_and_strangers(tpu, api):
    tpu_v2, client = tpu
    from google.api_core import exceptions

    def create(zone, node_id, accel, project=None):
        parent = f"projects/{project}/locations/{zone}" if project else api.parent(zone)
        return client.create_node(
            request=tpu_v2.CreateNodeRequest(
                parent=parent, node_id=node_id, node=tpu_v2.Node(accelerator_type=accel, runtime_version="x")
            )
        ).result(timeout=10)

    with pytest.raises(exceptions.BadRequest, match="'v6e-8' is not available in zone us-central1-a"):
        create(ZONE, "a", "v6e-8")
    with pytest.raises(exceptions.BadRequest, match="does not serve TPU7x"):
        create("us-central1-c", "b", "tpu7x-8")
    with pytest.raises(exceptions.BadRequest, match="must be 1-63 lowercase"):
        create(ZONE, "Bad_Name", "v5litepod-8")
    create(ZONE, "c", "v5litepod-8")
    with pytest.raises(exceptions.Conflict, match="already exists"):
        create(ZONE, "c", "v5litepod-8")
    with pytest.raises(exceptions.NotFound):
        client.get_node(name=f"{api.parent(ZONE)}/nodes/none")
    with pytest.raises(exceptions.Forbidden, match="only project this stand-in serves"):
        create(ZONE, "d", "v5litepod-8", project="someone-else")


def test_listing_more_nodes_than_a_page_returns_them_all_through_the_pager(tpu, api):
    tpu_v2, client = tpu
    born = datetime.now(UTC)
    names = sorted(api.seed(ZONE, f"n-{i:03d}", "v5litepod-1", created=born) for i in range(73))
    pager = client.list_nodes(parent=api.parent(ZONE))
    assert len(pager.nodes) == 50, "the first page holds 50"
    assert sorted(n.name for n in client.list_nodes(parent=api.parent(ZONE))) == names
    small = client.list_nodes(request=tpu_v2.ListNodesRequest(parent=api.parent(ZONE), page_size=10))
    assert len(small.nodes) == 10 and len(list(small)) == 73


def test_seeded_preempted_and_maintained_nodes_look_as_the_service_shows_them(tpu, api):
    tpu_v2, client = tpu
    old = api.seed(ZONE, "old", "v5litepod-8", created=datetime.now(UTC) - timedelta(hours=60), spot=True)
    api.preempt(old)
    got = client.get_node(name=old)
    assert got.state == tpu_v2.Node.State.PREEMPTED
    assert datetime.now(UTC) - got.create_time > timedelta(hours=59)
    steady = api.seed(ZONE, "steady", "v5litepod-8", created=datetime.now(UTC))
    with pytest.raises(ValueError, match="not a spot or preemptible node"):
        api.preempt(steady)


def test_upcoming_maintenance_is_a_v2alpha1_notice_and_health_changes_only_during_the_window(tpu, api):
    tpu_v2, client = tpu
    tpu_v2alpha1 = pytest.importorskip("google.cloud.tpu_v2alpha1")
    name = api.seed(ZONE, "m", "v5litepod-8", created=datetime.now(UTC))
    api.schedule_maintenance(name, in_hours=30, hours=4)

    def alpha():
        with urllib.request.urlopen(f"{api.endpoint}/v2alpha1/{name}", timeout=5) as reply:
            return tpu_v2alpha1.Node.from_json(reply.read(), ignore_unknown_fields=True)

    Status = tpu_v2alpha1.UpcomingMaintenance.MaintenanceStatus
    notice = alpha().upcoming_maintenance
    assert notice.type_ == tpu_v2alpha1.UpcomingMaintenance.MaintenanceType.SCHEDULED
    assert notice.maintenance_status == Status.PENDING and notice.can_reschedule
    assert client.get_node(name=name).health == tpu_v2.Node.Health.HEALTHY
    assert "upcomingMaintenance" not in json.loads(
        urllib.request.urlopen(f"{api.endpoint}/v2/{name}", timeout=5).read()
    )
    api.advance(hours=31)
    assert alpha().upcoming_maintenance.maintenance_status == Status.ONGOING
    assert client.get_node(name=name).health == tpu_v2.Node.Health.UNHEALTHY_MAINTENANCE
    api.advance(hours=4)
    assert client.get_node(name=name).health == tpu_v2.Node.Health.HEALTHY and not alpha().upcoming_maintenance
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(urllib.request.Request(f"{api.endpoint}/v2alpha1/{name}", method="DELETE"), timeout=5)


def test_seeded_nodes_get_their_generations_runtime(api):
    name = api.seed("us-east5-a", "s", "v6e-8", created=datetime.now(UTC))
    with urllib.request.urlopen(f"{api.endpoint}/v2/{name}", timeout=5) as reply:
        assert json.loads(reply.read())["runtimeVersion"] == "v2-alpha-tpuv6e"


def test_accelerator_types_come_from_the_zone_table(tpu, api):
    tpu_v2, client = tpu
    listed = [t.type_ for t in client.list_accelerator_types(parent=api.parent("us-east5-a"))]
    assert listed == standin.offered_types("us-east5-a") and "v6e-8" in listed
    assert client.get_accelerator_type(name=f"{api.parent('us-east5-a')}/acceleratorTypes/v6e-8").type_ == "v6e-8"


STAND_IN_LESSONS = [
    p for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.md")) if "standin.StandIn(" in p.read_text()
]


def test_some_lesson_starts_the_stand_in():
    assert STAND_IN_LESSONS


@pytest.mark.parametrize("lesson", STAND_IN_LESSONS, ids=lambda p: p.stem)
def test_the_lesson_stops_its_stand_in_and_checks_the_port_is_closed(lesson):
    text = lesson.read_text()
    assert "standin.StandIn(" in text and "lifetime_s=" in text
    tail = text[text.index("check.report()") :]
    assert "api.stop()" in tail and 'connect_ex(("127.0.0.1", port))' in tail and "assert closed" in tail


def _ce(api, method, path, body=None):
    request = urllib.request.Request(
        api.endpoint + path,
        method=method,
        data=json.dumps(body or {}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_compute_engine_tpu_instances_insert_wait_list_preempt_and_delete(api):
    zone = "us-east5-a"
    base = f"/compute/v1/projects/p/zones/{zone}"
    op = _ce(
        api,
        "POST",
        f"{base}/instances",
        {
            "name": "ce-1",
            "machineType": f"zones/{zone}/machineTypes/ct6e-standard-4t",
            "scheduling": {"provisioningModel": "SPOT"},
        },
    )
    assert op["kind"] == "compute#operation" and op["status"] == "RUNNING"
    assert _ce(api, "GET", api.instance(zone, "ce-1"))["status"] == "PROVISIONING"
    assert _ce(api, "POST", f"{base}/operations/{op['name']}/wait")["status"] == "DONE"
    inst = _ce(api, "GET", api.instance(zone, "ce-1"))
    assert inst["status"] == "RUNNING" and inst["tpuChips"] == 4 and inst["tpuGeneration"] == "v6e"
    assert [i["name"] for i in _ce(api, "GET", f"{base}/instances")["items"]] == ["ce-1"]
    api.preempt_instance(zone, "ce-1")  # instanceTerminationAction defaults to STOP: TERMINATED, still listed
    assert _ce(api, "GET", api.instance(zone, "ce-1"))["status"] == "TERMINATED"
    op = _ce(api, "DELETE", api.instance(zone, "ce-1"))
    assert _ce(api, "GET", f"{base}/operations/{op['name']}")["status"] == "DONE"  # one poll finishes it
    assert _ce(api, "GET", f"{base}/instances")["items"] == []


@pytest.mark.parametrize(
    "zone, body, message",
    [
        ("us-central1-a", {"name": "x", "machineType": "ct6e-standard-4t"}, "not available in zone us-central1-a"),
        ("us-east5-a", {"name": "x", "machineType": "n2-standard-8"}, "not a TPU machine type"),
        ("us-east5-a", {"name": "X!", "machineType": "ct6e-standard-4t"}, "lowercase"),
        (
            "us-east5-a",
            {"name": "x", "machineType": "ct6e-standard-4t", "scheduling": {"provisioningModel": "CHEAP"}},
            "provisioningModel",
        ),
        (
            "us-east5-a",
            {"name": "x", "machineType": "ct6e-standard-4t", "scheduling": {"provisioningModel": "RESERVATION_BOUND"}},
            "reservationAffinity",
        ),
    ],
)
def test_compute_engine_refuses_the_classic_mistakes(api, zone, body, message):
    with pytest.raises(urllib.error.HTTPError) as err:
        _ce(api, "POST", f"/compute/v1/projects/p/zones/{zone}/instances", body)
    assert err.value.code == 400 and message in json.loads(err.value.read())["error"]["message"]


def test_compute_engine_serves_tpu7x_where_the_cloud_tpu_api_does_not(api):
    op = _ce(
        api,
        "POST",
        "/compute/v1/projects/p/zones/us-central1-c/instances",
        {
            "name": "ironwood",
            "machineType": "zones/us-central1-c/machineTypes/tpu7x-standard-4t",
            "scheduling": {"provisioningModel": "FLEX_START", "instanceTerminationAction": "DELETE"},
        },
    )
    _ce(api, "POST", f"/compute/v1/projects/p/zones/us-central1-c/operations/{op['name']}/wait")
    api.preempt_instance("us-central1-c", "ironwood")  # DELETE: gone
    assert _ce(api, "GET", "/compute/v1/projects/p/zones/us-central1-c/instances")["items"] == []
    with pytest.raises(ValueError, match="not a SPOT or FLEX_START"):
        _ce(
            api,
            "POST",
            "/compute/v1/projects/p/zones/us-central1-c/instances",
            {"name": "standard", "machineType": "tpu7x-standard-4t"},
        )
        api.settle()
        api.preempt_instance("us-central1-c", "standard")
