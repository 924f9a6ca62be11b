"""The `--json` format: one function turns a response into JSON, one table names each
command's response, and the same walk over the descriptors writes its JSON Schema.

The format (stable, described in docs/getting-started.md; schemas under `docs/cli-json/`):
- field names are the proto's field names; every field is present, unset ones as `null`
  (a message or an optional scalar), `[]` (a repeated field) or their zero (`0`, `""`,
  `false`);
- integers are JSON numbers (the proto3 JSON mapping's int64-as-string is not used);
- enum values are named as the text output names them (`BELIEVED`, `ACCEPTED`), without
  the type's prefix;
- times are ISO 8601 strings in UTC with a `Z`;
- a failed command prints an error object (`error_json`) on stdout, with the exit code.

Run `python -m factnode.cli._schemas` to rewrite them (a test compares them with the code).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp
from grpc_health.v1 import health_pb2

from factnode.api.v1 import factnode_pb2 as pb

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_BASE = "https://factnode.dev/cli-json/"
TIMESTAMP = Timestamp.DESCRIPTOR.full_name
# protobuf's stubs type a message's descriptor as either of two classes (pure Python or
# upb) and its fields' message and enum types as optional: they are plain values here.
Descriptor = Any
EnumDescriptor = Any

_INTEGERS = {
    FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64,
    FieldDescriptor.CPPTYPE_UINT32, FieldDescriptor.CPPTYPE_UINT64,
}  # fmt: skip
_NUMBERS = {FieldDescriptor.CPPTYPE_DOUBLE, FieldDescriptor.CPPTYPE_FLOAT}


def _prefix(enum: EnumDescriptor) -> str:
    """`BeliefState` -> `BELIEF_STATE_`: the prefix proto style puts on every value."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", enum.name).upper() + "_"


def enum_name(enum: EnumDescriptor, number: int) -> str:
    """An enum value as the CLI prints it: `BELIEVED` for BELIEF_STATE_BELIEVED."""
    value = enum.values_by_number.get(number)
    if value is None:  # a value newer than this client: its number, still a string
        return str(number)
    return str(value.name).removeprefix(_prefix(enum))


def _time(ts: Timestamp) -> str | None:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return ts.ToDatetime(tzinfo=UTC).isoformat().replace("+00:00", "Z")


def _scalar(field: Any, value: Any) -> Any:
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        return enum_name(field.enum_type, value)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    if field.cpp_type in _INTEGERS:
        return int(value)
    if field.cpp_type in _NUMBERS:
        return float(value)
    return value


def _item(field: Any, value: Any) -> Any:
    if field.cpp_type != FieldDescriptor.CPPTYPE_MESSAGE:
        return _scalar(field, value)
    if field.message_type.full_name == TIMESTAMP:
        return _time(value)
    return to_json(value)


def to_json(msg: Message) -> dict[str, Any]:
    """A message as `--json` prints it: every field, by its proto name (see the module doc)."""
    out: dict[str, Any] = {}
    for field in msg.DESCRIPTOR.fields:
        value = getattr(msg, field.name)
        if field.is_repeated:
            out[field.name] = [_item(field, v) for v in value]
        elif field.has_presence and not msg.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _item(field, value)
    return out


def error_json(
    status: str, message: str, exit_code: int, violations: Sequence[tuple[str, str]] = ()
) -> dict[str, Any]:
    """What a failed command prints with `--json`: the gRPC status name (or USAGE for a bad
    command line, UNREACHABLE, ...), the message, and one entry per bad field."""
    return {
        "error": {
            "status": status,
            "message": message,
            "exit_code": exit_code,
            "field_violations": [{"field": f, "description": d} for f, d in violations],
        }
    }


# Each command's `--json` output: the response message it prints.
OUTPUTS: Mapping[str, Descriptor] = {
    "submit": pb.SubmitFactResponse.DESCRIPTOR,
    "get": pb.Belief.DESCRIPTOR,
    "history": pb.GetHistoryResponse.DESCRIPTOR,
    "search": pb.SearchBeliefsResponse.DESCRIPTOR,
    "explain": pb.ExplainResponse.DESCRIPTOR,
    "retract": pb.RetractResponse.DESCRIPTOR,
    "decisions": pb.ListDecisionsResponse.DESCRIPTOR,
    "review-list": pb.ListContestedResponse.DESCRIPTOR,
    "review-show": pb.ContestedKey.DESCRIPTOR,
    "review-resolve": pb.ResolveContestedResponse.DESCRIPTOR,
    "erase": pb.EraseResponse.DESCRIPTOR,
    "erasures": pb.ListErasuresResponse.DESCRIPTOR,
    "erasures-show": pb.ErasureCoverage.DESCRIPTOR,
    "decay": pb.RunDecayResponse.DESCRIPTOR,
    "status": pb.GetStatusResponse.DESCRIPTOR,
    "sync": pb.SyncNowResponse.DESCRIPTOR,
    "members": pb.ListMembersResponse.DESCRIPTOR,
    "revoke": pb.RevokeResponse.DESCRIPTOR,
    "export": pb.BackupResponse.DESCRIPTOR,  # the file written and its size
    "import": pb.ImportResponse.DESCRIPTOR,
    "backup": pb.BackupResponse.DESCRIPTOR,
    "health": health_pb2.HealthCheckResponse.DESCRIPTOR,
}
# `review show` adds the key's history (every version's evidence) to the queued key.
EXTRA_FIELDS: Mapping[str, Mapping[str, Descriptor]] = {
    "review-show": {"history": pb.GetHistoryResponse.DESCRIPTOR},
}
# Fields a command's output may add (`erase --wait` adds the erasure's coverage).
OPTIONAL_FIELDS: Mapping[str, Mapping[str, Descriptor]] = {
    "erase": {"coverage": pb.ErasureCoverage.DESCRIPTOR},
}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _item_schema(field: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
        if field.message_type.full_name == TIMESTAMP:
            return {"type": "string", "format": "date-time"}
        _define(field.message_type, defs)
        return {"$ref": f"#/$defs/{field.message_type.full_name}"}
    if field.cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        values = [enum_name(field.enum_type, v.number) for v in field.enum_type.values]
        return {"type": "string", "enum": values}
    if field.type == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64"}
    if field.cpp_type in _INTEGERS:
        unsigned = field.cpp_type in (
            FieldDescriptor.CPPTYPE_UINT32,
            FieldDescriptor.CPPTYPE_UINT64,
        )
        return {"type": "integer", **({"minimum": 0} if unsigned else {})}
    if field.cpp_type in _NUMBERS:
        return {"type": "number"}
    if field.cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        return {"type": "boolean"}
    return {"type": "string"}


def _field_schema(field: Any, defs: dict[str, Any]) -> dict[str, Any]:
    item = _item_schema(field, defs)
    if field.is_repeated:
        return {"type": "array", "items": item}
    timestamp = field.message_type is not None and field.message_type.full_name == TIMESTAMP
    # An unset message or optional scalar is null; so is a zero time.
    return _nullable(item) if field.has_presence or timestamp else item


def _object(message: Descriptor, defs: dict[str, Any]) -> dict[str, Any]:
    props = {f.name: _field_schema(f, defs) for f in message.fields}
    return {
        "type": "object",
        "properties": props,
        "required": sorted(props),
        "additionalProperties": False,
    }


def _define(message: Descriptor, defs: dict[str, Any]) -> None:
    if message.full_name in defs:
        return
    defs[message.full_name] = {}  # placeholder: recursive messages refer to it
    defs[message.full_name] = _object(message, defs)


def command_schema(command: str) -> dict[str, Any]:
    """The JSON Schema of a command's `--json` output (a key of OUTPUTS)."""
    defs: dict[str, Any] = {}
    body = _object(OUTPUTS[command], defs)
    for name, message in EXTRA_FIELDS.get(command, {}).items():
        _define(message, defs)
        body["properties"][name] = {"$ref": f"#/$defs/{message.full_name}"}
        body["required"] = sorted(body["properties"])
    for name, message in OPTIONAL_FIELDS.get(command, {}).items():
        _define(message, defs)
        body["properties"][name] = {"$ref": f"#/$defs/{message.full_name}"}
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{SCHEMA_BASE}{command}.schema.json",
        "title": f"factnode {command.replace('-', ' ')} --json",
        **body,
        "$defs": dict(sorted(defs.items())),
    }


def error_schema() -> dict[str, Any]:
    """The JSON Schema of the error object every command prints with `--json` on failure."""
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"{SCHEMA_BASE}error.schema.json",
        "title": "factnode --json: a failed command",
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "minLength": 1},
                    "message": {"type": "string"},
                    "exit_code": {"type": "integer", "minimum": 1},
                    "field_violations": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "field": {"type": "string"},
                                "description": {"type": "string"},
                            },
                            "required": ["description", "field"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["exit_code", "field_violations", "message", "status"],
                "additionalProperties": False,
            }
        },
        "required": ["error"],
        "additionalProperties": False,
    }


def schemas() -> dict[str, dict[str, Any]]:
    """Every published schema by file name."""
    out = {f"{c}.schema.json": command_schema(c) for c in OUTPUTS}
    out["error.schema.json"] = error_schema()
    return out


def schema_text(schema: Mapping[str, Any]) -> str:
    """A schema as its file holds it."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def write_schemas(folder: Path) -> list[Path]:
    """Writes every schema into `folder`; returns the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in schemas().items():
        path = folder / name
        path.write_text(schema_text(schema), encoding="utf-8")
        written.append(path)
    return written
