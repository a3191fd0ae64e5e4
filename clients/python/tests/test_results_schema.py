"""The typed views of ``results.py`` held against the server's own ``/openapi.json`` (the
document the server generates from the wire types it serialises), so the two cannot drift:
every field a view reads is a property of the schemas it mirrors, and every property those
schemas require is a field of the view (or listed below with why it is not).
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import httpx
import pytest

from vivarium_client import results

# Each view and the schemas it is read from (an execution's result is read from the three
# shapes `POST /v1/execute` and a session turn answer with).
MIRRORS: dict[type, list[str]] = {
    results.PyError: ["PyError"],
    results.OutputFile: ["FileOutput"],
    results.RichOutput: ["RichOutput"],
    results.ResourceUsage: ["Usage"],
    results.NetworkUsage: ["NetworkUsage"],
    results.Truncated: ["Truncated"],
    results.Finding: ["Finding"],
    results.ToolCall: ["ToolCall"],
    results.ExecutionResult: ["ExecuteResponse", "TurnResponse", "SuspendedResponse"],
    results.SessionInfo: ["SessionInfo", "OpenSessionResponse"],
    results.SnapshotInfo: ["SnapshotInfo"],
    results.KeptTurn: ["KeptTurn"],
    results.FileEntry: ["FileEntry"],
    results.SyntaxIssue: ["SyntaxIssue"],
    results.CheckResult: ["SyntaxCheck", "CheckResult"],
    results.PackagePin: ["PackagePin"],
    results.BuiltinPackage: ["BuiltinPackage"],
    results.PackageList: ["PackageList"],
    results.QuotaUse: ["QuotaUse"],
    results.TenantUsage: ["TenantUsage"],
    results.UsageSample: ["UsageSample"],
    results.EgressTotals: ["EgressTotals"],
    results.SessionMetrics: ["SessionMetrics"],
    results.Event: ["Event"],
    results.EventPage: ["EventPage"],
    results.WebhookInfo: ["WebhookInfo"],
    results.VolumeInfo: ["VolumeInfo"],
    results.VolumeEntry: ["VolumeEntry"],
    results.TemplateInfo: ["TemplateInfo"],
    results.BuildFailure: ["BuildFailure"],
    results.StepLog: ["StepLog"],
}

# Fields of a view named otherwise than the wire's property (a Python keyword).
RENAMED: dict[tuple[type, str], str] = {
    (results.TemplateInfo, "from_"): "from",
}

# Fields of a view that are the client's own, not a property of the wire.
CLIENT_ONLY: dict[type, set[str]] = {
    # The JSON a view was read from.
    **{view: {"raw"} for view in MIRRORS},
    # The check's answer flattens `syntax: {ok, errors}` into the view.
    results.CheckResult: {"raw", "ok", "errors"},
}

# Required properties a view leaves in `raw`, with why.
NOT_MIRRORED: dict[tuple[type, str], str] = {
    (results.PackagePin, "sha256"): "a wheel's digest: the client has no use for it",
    # `syntax` is flattened into `ok` and `errors` (CLIENT_ONLY above).
    (results.CheckResult, "syntax"): "flattened into ok and errors",
}


def _resolve(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return schemas[ref.rsplit("/", 1)[-1]] if ref else schema


def _properties(name: str, schemas: dict[str, Any]) -> tuple[set[str], set[str]]:
    """A schema's properties and required ones, through `allOf` and `$ref`."""
    props: set[str] = set()
    required: set[str] = set()
    todo = [schemas[name]]
    while todo:
        s = _resolve(todo.pop(), schemas)
        props |= set(s.get("properties", {}))
        required |= set(s.get("required", []))
        todo.extend(s.get("allOf", []))
    return props, required


def _wire_names(view: type) -> set[str]:
    """A view's fields, as the wire names them."""
    return {RENAMED.get((view, f.name), f.name) for f in dataclasses.fields(view)}


@pytest.fixture(scope="module")
def schemas(server: Any) -> dict[str, Any]:
    doc = httpx.get(server.url + "/openapi.json", timeout=30).json()
    return doc["components"]["schemas"]


@pytest.mark.parametrize("view", list(MIRRORS), ids=lambda v: v.__name__)
def test_a_view_reads_only_what_the_wire_has(view: type, schemas: dict[str, Any]) -> None:
    wire: set[str] = set()
    for name in MIRRORS[view]:
        assert name in schemas, f"{name} is not in /openapi.json"
        wire |= _properties(name, schemas)[0]
    fields = _wire_names(view) - CLIENT_ONLY[view]
    assert fields <= wire, f"{view.__name__} reads {sorted(fields - wire)}, which no schema has"


@pytest.mark.parametrize("view", list(MIRRORS), ids=lambda v: v.__name__)
def test_a_view_has_what_the_wire_requires(view: type, schemas: dict[str, Any]) -> None:
    fields = _wire_names(view)
    for name in MIRRORS[view]:
        _, required = _properties(name, schemas)
        missing = {
            p for p in required - fields if (view, p) not in NOT_MIRRORED
        }
        assert not missing, f"{view.__name__} lacks {sorted(missing)}, required by {name}"


def test_template_status_and_list(schemas: dict[str, Any]) -> None:
    # `TemplateStatus` is the schema's enum; `templates()` reads `TemplateList.templates`.
    assert set(get_args(results.TemplateStatus)) == set(schemas["TemplateStatus"]["enum"])
    assert _properties("TemplateList", schemas)[1] == {"templates"}
