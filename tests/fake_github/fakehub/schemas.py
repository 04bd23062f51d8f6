"""Request-body validation against the OpenAPI subset (its $refs resolved, `nullable` honoured,
date-time checked)."""

import json
import re

import jsonschema

from .state import DOCS

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def openapi_to_jsonschema(node):
    """OpenAPI 3.0 `nullable: true` becomes a JSON Schema type union with null."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: openapi_to_jsonschema(value) for key, value in node.items()}
    if out.pop("nullable", False):
        kind = out.get("type")
        if isinstance(kind, str):
            out["type"] = [kind, "null"]
        elif "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
        elif any(key in out for key in ("oneOf", "anyOf", "allOf", "$ref")):
            out = {"anyOf": [{"type": "null"}, out]}
    return out


class Schemas:
    """Request-body validators per (method, path template)."""

    def __init__(self, path):
        with open(path, encoding="utf-8") as handle:
            self.document = openapi_to_jsonschema(json.load(handle))
        self.resolver = jsonschema.RefResolver.from_schema(self.document)
        self.formats = jsonschema.FormatChecker(formats=())
        self.formats.checks("date-time")(lambda value: not isinstance(value, str)
                                         or bool(DATE_TIME.match(value)))
        self.routes = []
        for template, operations in self.document["paths"].items():
            pattern = self.template_regex(template)
            for method, operation in operations.items():
                body = operation.get("requestBody", {})
                schema = body.get("content", {}).get("application/json", {}).get("schema")
                validator = None
                if schema is not None:
                    validator = jsonschema.Draft4Validator(
                        schema, resolver=self.resolver, format_checker=self.formats)
                self.routes.append((method.upper(), re.compile("^" + pattern + "$"),
                                    validator, body.get("required", False),
                                    operation.get("externalDocs", {}).get("url", DOCS)))

    @staticmethod
    def template_regex(template):
        # Multi-segment parameters (ref, sha) may hold slashes; the others may not.
        pieces = re.split(r"\{(\w+)\}", template)
        out = ""
        for index, piece in enumerate(pieces):
            if index % 2 == 0:
                out += re.escape(piece)
            else:
                out += "(?P<%s>%s)" % (piece, ".+?" if piece in ("ref", "sha") else "[^/]+")
        return out

    def match(self, method, path):
        for route_method, pattern, validator, required, docs in self.routes:
            found = pattern.match(path)
            if found and route_method == method:
                return found.groupdict(), validator, required, docs
        return None
