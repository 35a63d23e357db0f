#!/usr/bin/env python3
"""Renders the HTTP API reference chapter of the manual from the OpenAPI document.

    python3 scripts/openapi_docs.py          # write docs/src/reference/http-api.md
    python3 scripts/openapi_docs.py --check  # fail if that file differs from what it would write
                                             # (scripts/test.sh runs this)

The source is src/http/openapi.json, the contract the server serves at GET /v1/openapi.json and
that tests/openapi.rs keeps in step with the mounted routes. Every path and method becomes a
section with its role, who may call it, its parameters, its request body and every response;
every component schema becomes a field table the operations link to; the error codes of the
Error schema become one table, each code with the operations whose text names it. Nothing is
hand-written in the output, so the chapter cannot drift from the document: edit the document
and run this script. Standard library only.

A $ref that does not resolve, or a schema construct this renderer does not know, stops it with
the JSON pointer of the offending place rather than rendering something half right.
"""
import difflib
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "src", "http", "openapi.json")
TARGET = os.path.join(ROOT, "docs", "src", "reference", "http-api.md")
METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]
# Schema keywords the renderer understands; anything else is an error (see the module doc).
KNOWN_SCHEMA_KEYS = {
    "type", "description", "properties", "required", "additionalProperties", "items", "enum",
    "const", "oneOf", "anyOf", "allOf", "$ref", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "format", "default", "minItems",
    "maxItems", "uniqueItems", "examples", "example", "title", "nullable", "deprecated",
    "readOnly", "writeOnly",
}


class RenderError(Exception):
    pass


class Renderer:
    def __init__(self, doc):
        self.doc = doc
        self.schemas = doc.get("components", {}).get("schemas", {})
        self.operations = []  # (path, method, operation)
        for path, item in doc["paths"].items():
            for method in METHODS:
                if method in item:
                    self.operations.append((path, method, item[method]))

    # --- references -------------------------------------------------------------------------

    def resolve(self, value, at):
        """Follows a local $ref (any depth) and returns the target object."""
        seen = set()
        while isinstance(value, dict) and "$ref" in value:
            ref = value["$ref"]
            if ref in seen:
                raise RenderError(f"{at}: $ref cycle through {ref}")
            seen.add(ref)
            if not ref.startswith("#/"):
                raise RenderError(f"{at}: only local references are rendered, not {ref}")
            target = self.doc
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise RenderError(f"{at}: $ref {ref} does not resolve")
                target = target[part]
            value = target
        return value

    # --- schemas ----------------------------------------------------------------------------

    def check_keys(self, schema, at):
        unknown = set(schema) - KNOWN_SCHEMA_KEYS
        if unknown:
            raise RenderError(f"{at}: schema keyword(s) {sorted(unknown)} are not rendered; teach scripts/openapi_docs.py")

    def type_of(self, schema, at):
        """A one-line description of a schema's type, with links to named schemas."""
        if not isinstance(schema, dict):
            raise RenderError(f"{at}: a schema must be an object")
        if schema is True or schema == {}:
            return "any"
        self.check_keys(schema, at)
        if "$ref" in schema:
            ref = schema["$ref"]
            prefix = "#/components/schemas/"
            if not ref.startswith(prefix):
                return self.type_of(self.resolve(schema, at), at)
            name = ref[len(prefix):]
            if name not in self.schemas:
                raise RenderError(f"{at}: $ref {ref} does not resolve")
            return f"[{name}](#schema-{name})"
        if "const" in schema:
            return f"`{json.dumps(schema['const'])}`"
        if "enum" in schema:
            return " \\| ".join(f"`{json.dumps(v) if not isinstance(v, str) else v}`" for v in schema["enum"])
        for combinator, word in (("oneOf", "one of"), ("anyOf", "any of"), ("allOf", "all of")):
            if combinator in schema:
                parts = [self.type_of(s, f"{at}/{combinator}/{i}") for i, s in enumerate(schema[combinator])]
                return f"{word}: " + "; ".join(parts)
        types = schema.get("type")
        if types is None:
            if "properties" in schema or "additionalProperties" in schema:
                types = "object"
            else:
                return "any"
        if isinstance(types, str):
            types = [types]
        rendered = []
        for t in types:
            if t == "array":
                items = schema.get("items")
                rendered.append("array of " + (self.type_of(items, f"{at}/items") if items is not None else "any"))
            elif t == "object" and "properties" not in schema and isinstance(schema.get("additionalProperties"), dict):
                rendered.append("map of string to " + self.type_of(schema["additionalProperties"], f"{at}/additionalProperties"))
            else:
                rendered.append(t)
        return " \\| ".join(rendered)

    @staticmethod
    def constraints(schema):
        notes = []
        for key, text in (("minimum", "≥ {}"), ("exclusiveMinimum", "> {}"), ("maximum", "≤ {}"),
                          ("exclusiveMaximum", "< {}"), ("minLength", "at least {} characters"),
                          ("maxLength", "at most {} characters"), ("minItems", "at least {} items"),
                          ("maxItems", "at most {} items"), ("pattern", "matches `{}`"), ("format", "format `{}`")):
            if key in schema:
                notes.append(text.format(schema[key]))
        if "default" in schema:
            notes.append(f"default `{json.dumps(schema['default'])}`")
        if schema.get("uniqueItems"):
            notes.append("unique items")
        if schema.get("deprecated"):
            notes.append("deprecated")
        return notes

    def field_rows(self, schema, at, prefix=""):
        """Rows (field, type, required, description) of an object schema, nested objects inline."""
        rows = []
        required = set(schema.get("required", []))
        for name, sub in schema.get("properties", {}).items():
            sub_at = f"{at}/properties/{name}"
            if not isinstance(sub, dict):
                raise RenderError(f"{sub_at}: a schema must be an object")
            self.check_keys(sub, sub_at)
            field = prefix + name
            inline_object = "$ref" not in sub and "properties" in sub
            inline_items = (
                "$ref" not in sub
                and isinstance(sub.get("items"), dict)
                and "$ref" not in sub["items"]
                and "properties" in sub["items"]
            )
            if inline_object:
                type_text = "object"
            elif inline_items:
                type_text = "array of objects"
            else:
                type_text = self.type_of(sub, sub_at)
            # A nullable inline object: "object | null".
            if (inline_object or inline_items) and isinstance(sub.get("type"), list) and "null" in sub["type"]:
                type_text += " \\| null"
            notes = self.constraints(sub)
            description = sub.get("description", "")
            if notes:
                description = (description + " " if description else "") + "(" + "; ".join(notes) + ")"
            rows.append((field, type_text, "yes" if name in required else "", description))
            if inline_object:
                rows.extend(self.field_rows(sub, sub_at, field + "."))
            elif inline_items:
                rows.extend(self.field_rows(sub["items"], sub_at + "/items", field + "[]."))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and "properties" in schema:
            rows.append((prefix + "*", self.type_of(extra, f"{at}/additionalProperties"), "",
                         "any other key (a map entry)"))
        return rows

    def schema_block(self, schema, at):
        """Markdown for a schema: its type line, description, field table or alternatives."""
        out = []
        self.check_keys(schema, at)
        if "$ref" in schema:
            out.append(f"Schema: {self.type_of(schema, at)}.")
            return out
        description = schema.get("description")
        if description:
            out.append(cell(description, table=False))
            out.append("")
        notes = self.constraints(schema)
        if "properties" in schema:
            rows = self.field_rows(schema, at)
            if rows:
                out.append("| Field | Type | Required | Description |")
                out.append("|---|---|---|---|")
                for field, type_text, required, desc in rows:
                    out.append(f"| `{field}` | {type_text} | {required} | {cell(desc)} |")
            else:
                out.append("An object with no fields.")
            if schema.get("additionalProperties") is False:
                out.append("")
                out.append("No other fields are accepted.")
        elif any(k in schema for k in ("oneOf", "anyOf", "allOf")):
            for combinator, word in (("oneOf", "One of"), ("anyOf", "Any of"), ("allOf", "All of")):
                if combinator in schema:
                    out.append(f"{word}:")
                    out.append("")
                    for i, sub in enumerate(schema[combinator]):
                        out.append(f"- {self.type_of(sub, f'{at}/{combinator}/{i}')}")
        else:
            out.append(f"Type: {self.type_of(schema, at)}" + (f" ({'; '.join(notes)})" if notes else "") + ".")
        return out

    # --- operations -------------------------------------------------------------------------

    @staticmethod
    def anchor(operation, method, path):
        op_id = operation.get("operationId")
        if op_id:
            return "op-" + op_id
        return "op-" + method + re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")

    @staticmethod
    def who(operation):
        security = operation.get("security", [])
        ways = []
        for requirement in security:
            names = sorted(requirement)
            if not names:
                ways.append("anonymous")
            elif names == ["bearer"]:
                ways.append("bearer token")
            elif names == ["session"]:
                ways.append("UI session cookie")
            elif names == ["csrf", "session"]:
                ways.append("UI session cookie with `X-CSRF-Token`")
            else:
                ways.append(" + ".join(f"`{n}`" for n in names))
        return ", ".join(ways) if ways else "as the document's default security"

    def parameters(self, operation, at):
        params = []
        for i, p in enumerate(operation.get("parameters", [])):
            params.append(self.resolve(p, f"{at}/parameters/{i}"))
        if not params:
            return []
        out = ["**Parameters**", "", "| Name | In | Required | Type | Description |", "|---|---|---|---|---|"]
        for i, p in enumerate(params):
            schema = p.get("schema", {})
            notes = self.constraints(schema)
            desc = p.get("description", "")
            if notes:
                desc = (desc + " " if desc else "") + "(" + "; ".join(notes) + ")"
            out.append(f"| `{p['name']}` | {p['in']} | {'yes' if p.get('required') else ''} | "
                       f"{self.type_of(schema, f'{at}/parameters/{i}/schema')} | {cell(desc)} |")
        out.append("")
        return out

    def content_lines(self, content, at):
        lines = []
        for media, body in content.items():
            schema = body.get("schema")
            text = f"`{media}`"
            if schema is not None:
                text += ": " + self.type_of(schema, f"{at}/{media}/schema")
            events = body.get("x-event-data-schema")
            if events is not None:
                text += "; each event's data: " + self.type_of(events, f"{at}/{media}/x-event-data-schema")
            lines.append(text)
        return lines

    def request_body(self, operation, at):
        if "requestBody" not in operation:
            return []
        body = self.resolve(operation["requestBody"], f"{at}/requestBody")
        out = ["**Request body**" + (" (required)" if body.get("required") else " (optional)"), ""]
        if body.get("description"):
            out += [cell(body["description"], table=False), ""]
        for media, entry in body.get("content", {}).items():
            schema = entry.get("schema")
            if schema is None:
                out.append(f"`{media}`, any content.")
            elif "$ref" in schema:
                out.append(f"`{media}`: {self.type_of(schema, f'{at}/requestBody/content/{media}/schema')}.")
            else:
                out.append(f"`{media}`:")
                out.append("")
                out += self.schema_block(schema, f"{at}/requestBody/content/{media}/schema")
            out.append("")
        return out

    def responses(self, operation, at):
        responses = operation.get("responses", {})
        if not responses:
            raise RenderError(f"{at}: an operation without responses")
        out = ["**Responses**", "", "| Status | Meaning | Body | Headers |", "|---|---|---|---|"]
        for status in sorted(responses, key=lambda s: (s == "default", s)):
            r_at = f"{at}/responses/{status}"
            response = self.resolve(responses[status], r_at)
            body = "; ".join(self.content_lines(response.get("content", {}), r_at + "/content")) or "none"
            headers = []
            for name, header in response.get("headers", {}).items():
                header = self.resolve(header, f"{r_at}/headers/{name}")
                desc = header.get("description", "")
                headers.append(f"`{name}`" + (f": {desc}" if desc else ""))
            out.append(f"| {status} | {cell(response.get('description', ''))} | {body} | {cell('; '.join(headers))} |")
        out.append("")
        return out

    def operation_section(self, path, method, operation):
        at = "#/paths/" + path.replace("~", "~0").replace("/", "~1") + "/" + method
        out = [f'<a id="{self.anchor(operation, method, path)}"></a>', "",
               f"### `{method.upper()} {path}`", ""]
        if operation.get("summary"):
            out += [cell(operation["summary"], table=False) + ".", ""]
        facts = []
        if "x-tidegate-role" in operation:
            facts.append(f"**Role:** {operation['x-tidegate-role']}")
        facts.append(f"**Accepts:** {self.who(operation)}")
        if operation.get("operationId"):
            facts.append(f"**operationId:** `{operation['operationId']}`")
        if operation.get("deprecated"):
            facts.append("**Deprecated**")
        out += [". ".join(facts) + ".", ""]
        if operation.get("description"):
            out += [cell(operation["description"], table=False), ""]
        out += self.parameters(operation, at)
        out += self.request_body(operation, at)
        out += self.responses(operation, at)
        return out

    # --- error codes ------------------------------------------------------------------------

    def error_codes(self):
        error = self.schemas.get("Error")
        if error is None:
            raise RenderError("#/components/schemas/Error: the error schema is missing")
        try:
            codes = error["properties"]["error"]["enum"]
        except KeyError:
            raise RenderError("#/components/schemas/Error/properties/error/enum: the list of error codes is missing")
        # Which operations name a code in their own text (summary, description, parameters,
        # request body and responses, following references to parameters and responses only).
        named = {code: [] for code in codes}
        for path, method, operation in self.operations:
            text = self.operation_text(operation, f"#/paths/{path}/{method}")
            for code in codes:
                # A code is named as `code` or after its status ("400 missing_user_id"), so that
                # the generic code `error` does not match every use of the word.
                if names_code(text, code):
                    named[code].append((path, method, operation))
        # Shared answers (components/responses) that name a code: any operation listing that
        # answer can give it.
        shared = {code: [] for code in codes}
        for name, response in self.doc.get("components", {}).get("responses", {}).items():
            for code in codes:
                if names_code(response.get("description", ""), code):
                    users = sorted({s for _, _, o in self.operations for s, r in o.get("responses", {}).items()
                                    if r.get("$ref") == f"#/components/responses/{name}"})
                    shared[code].append(f"{'/'.join(users) or name} ({name})")
        out = ["## Error codes", "",
               "Every 4xx and 5xx answer has the body [Error](#schema-Error): `error` is one of these codes, "
               "`detail` a sentence for people. The right column lists the operations whose own text in the "
               "document (summary, description, parameters, responses) names the code, and the shared answer "
               "(a status of every operation that lists it) whose description names it. A code named by "
               "neither is answered outside the operations' own text: by the request guards (a malformed body "
               "is `invalid_json`), the router (`not_found`, `method_not_allowed`) or the operator UI's "
               "pages.", "",
               "| Code | Shared answer | Named by |", "|---|---|---|"]
        for code in codes:
            links = ", ".join(f"[`{m.upper()} {p}`](#{self.anchor(o, m, p)})" for p, m, o in named[code])
            out.append(f"| `{code}` | {'; '.join(shared[code])} | {links} |")
        out.append("")
        return out

    def operation_text(self, operation, at):
        parts = [operation.get("summary", ""), operation.get("description", "")]
        for i, p in enumerate(operation.get("parameters", [])):
            parts.append(self.resolve(p, f"{at}/parameters/{i}").get("description", ""))
        if "requestBody" in operation:
            parts.append(self.resolve(operation["requestBody"], f"{at}/requestBody").get("description", ""))
        for status, r in operation.get("responses", {}).items():
            if "$ref" not in r:  # shared answers are generic; only the operation's own text counts
                parts.append(r.get("description", ""))
        return "\n".join(parts)

    # --- the chapter ------------------------------------------------------------------------

    def render(self):
        info = self.doc.get("info", {})
        out = ["# HTTP API reference", "",
               "<!-- Generated by scripts/openapi_docs.py from src/http/openapi.json. Do not edit: edit the "
               "document and run `python3 scripts/openapi_docs.py`; scripts/test.sh fails while this file "
               "differs from what it would write. -->", "",
               f"This chapter is generated from the OpenAPI {self.doc.get('openapi', '')} document "
               f"`src/http/openapi.json` (\"{info.get('title', '')}\", version {info.get('version', '')}), which "
               "every coordinator serves at `GET /v1/openapi.json`. The [HTTP API](../http-api.md) chapter "
               "explains the conventions (roles, retries, idempotency keys, paging, limits) in prose.", ""]
        if info.get("description"):
            out += [cell(info["description"], table=False), ""]
        out += self.security_section()
        out += ["## All operations", "", "| Method and path | Role | Summary |", "|---|---|---|"]
        for path, method, operation in self.operations:
            out.append(f"| [`{method.upper()} {path}`](#{self.anchor(operation, method, path)}) | "
                       f"{operation.get('x-tidegate-role', '')} | {cell(operation.get('summary', ''))} |")
        out.append("")
        tags = [t["name"] for t in self.doc.get("tags", [])]
        for path, method, operation in self.operations:
            for tag in operation.get("tags", []):
                if tag not in tags:
                    tags.append(tag)
        untagged = [(p, m, o) for p, m, o in self.operations if not o.get("tags")]
        groups = [(tag, [(p, m, o) for p, m, o in self.operations if o.get("tags", [None])[0] == tag]) for tag in tags]
        if untagged:
            groups.append(("other", untagged))
        descriptions = {t["name"]: t.get("description", "") for t in self.doc.get("tags", [])}
        for tag, ops in groups:
            if not ops:
                continue
            out += [f"## {tag.capitalize()}", ""]
            if descriptions.get(tag):
                out += [cell(descriptions[tag], table=False), ""]
            for path, method, operation in ops:
                out += self.operation_section(path, method, operation)
        out += self.error_codes()
        out += ["## Schemas", ""]
        for name, schema in self.schemas.items():
            out += [f'<a id="schema-{name}"></a>', "", f"### {name}", ""]
            out += self.schema_block(schema, f"#/components/schemas/{name}")
            out.append("")
        while out and out[-1] == "":
            out.pop()
        return "\n".join(out) + "\n"

    def security_section(self):
        schemes = self.doc.get("components", {}).get("securitySchemes", {})
        if not schemes:
            return []
        out = ["## Authentication", "",
               "Each operation lists the ways it accepts a caller (\"anonymous\" means no credentials; reads are "
               "anonymous only while `service_tokens_sha256` is empty) and the role it needs.", "",
               "| Scheme | Kind | Description |", "|---|---|---|"]
        for name, scheme in schemes.items():
            kind = scheme.get("type", "")
            if kind == "http":
                kind = f"HTTP `{scheme.get('scheme', '')}`"
            elif kind == "apiKey":
                kind = f"{scheme.get('in', '')} `{scheme.get('name', '')}`"
            out.append(f"| `{name}` | {kind} | {cell(scheme.get('description', ''))} |")
        out.append("")
        return out


def names_code(text, code):
    """Whether text names an error code: as `code`, or after its status ("400 missing_user_id"),
    so that the generic code `error` does not match every use of the word."""
    pattern = r"`" + re.escape(code) + r"`|\b[1-5][0-9][0-9] " + re.escape(code) + r"(?![A-Za-z0-9_])"
    return re.search(pattern, text) is not None


def cell(text, table=True):
    """Text for a Markdown table cell (one line, pipes escaped) or a paragraph."""
    text = " ".join(str(text).split())
    if table:
        text = text.replace("|", "\\|")
    return text


def main():
    args = sys.argv[1:]
    if args not in ([], ["--check"]):
        sys.exit("usage: scripts/openapi_docs.py [--check]")
    with open(SOURCE, encoding="utf-8") as f:
        doc = json.load(f)
    try:
        text = Renderer(doc).render()
    except RenderError as e:
        sys.exit(f"scripts/openapi_docs.py: src/http/openapi.json {e}")
    rel = os.path.relpath(TARGET, ROOT)
    if args == ["--check"]:
        try:
            with open(TARGET, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            sys.exit(f"{rel} is missing (run python3 scripts/openapi_docs.py)")
        if current != text:
            diff = list(difflib.unified_diff(current.splitlines(), text.splitlines(), rel, "generated", lineterm=""))
            sys.stderr.write("\n".join(diff[:40]) + ("\n..." if len(diff) > 40 else "") + "\n")
            sys.exit(f"{rel} is out of date with src/http/openapi.json (run python3 scripts/openapi_docs.py)")
        print(f"{rel} is up to date")
        return
    os.makedirs(os.path.dirname(TARGET), exist_ok=True)
    with open(TARGET, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"{rel} written")


if __name__ == "__main__":
    main()
