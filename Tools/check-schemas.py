#!/usr/bin/env python3
"""Checks Schemas/ with an independent JSON Schema validator (Python's jsonschema):

- every schema is a valid 2020-12 schema;
- every line of Schemas/examples/valid.jsonl is valid against event.schema.json;
- every example of Schemas/examples/invalid.json is invalid, with an error at the stated
  field, unless it is marked "schema": false (a rule JSON Schema cannot express);
- every policy pack under Schemas/policies/ is valid against policy.schema.json.

The Swift test suite checks the same corpus against the ledger's own decoder, so the two
must agree. Exit status 0 when everything holds, 1 otherwise.
"""
import json
import pathlib
import sys

import jsonschema

ROOT = pathlib.Path(__file__).resolve().parent.parent / "Schemas"
Validator = jsonschema.Draft202012Validator


def load_schemas():
    schemas = {}
    for path in sorted(ROOT.rglob("*.schema.json")):
        schema = json.loads(path.read_text())
        Validator.check_schema(schema)
        schemas[schema["$id"]] = schema
    return schemas


def validator_for(schema, schemas):
    try:  # jsonschema >= 4.18
        from referencing import Registry, Resource
        registry = Registry().with_resources(
            (uri, Resource.from_contents(s)) for uri, s in schemas.items())
        return Validator(schema, registry=registry)
    except ImportError:  # older jsonschema (Debian bookworm's 4.10)
        resolver = jsonschema.RefResolver.from_schema(schema, store=schemas)
        return Validator(schema, resolver=resolver)


def pointers(errors):
    """Every instance path an error or its sub-errors point at, as JSON pointers."""
    found = set()
    for error in errors:
        found.add("/" + "/".join(str(p) for p in error.absolute_path))
        found |= pointers(error.context or [])
        # `required` and `additionalProperties` name the key in the message, not the path.
        base = "/" + "/".join(str(p) for p in error.absolute_path)
        base = "" if base == "/" else base
        if error.validator == "required":
            for key in error.validator_value:
                if isinstance(error.instance, dict) and key not in error.instance:
                    found.add(f"{base}/{key}")
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {}))
            found |= {f"{base}/{key}" for key in error.instance if key not in allowed}
    return found


def main():
    failures = []
    schemas = load_schemas()
    event = validator_for(schemas["https://entitlementledger.example/schemas/event.schema.json"], schemas)

    valid = (ROOT / "examples" / "valid.jsonl").read_text().splitlines()
    for number, line in enumerate(valid, 1):
        errors = list(event.iter_errors(json.loads(line)))
        if errors:
            failures.append(f"valid.jsonl:{number}: rejected: {errors[0].message[:200]}")

    invalid = json.loads((ROOT / "examples" / "invalid.json").read_text())
    beyond = 0
    for example in invalid:
        if example.get("schema", True) is False:
            beyond += 1
            continue
        try:
            instance = json.loads(example["line"])
        except json.JSONDecodeError:
            continue  # not JSON: no schema applies; the decoder's test covers it
        errors = list(event.iter_errors(instance))
        if not errors:
            failures.append(f"invalid.json: {example['name']!r} was accepted")
        elif example["pointer"] != "/" and example["pointer"] not in pointers(errors):
            failures.append(f"invalid.json: {example['name']!r} failed, but not at {example['pointer']} "
                            f"(errors at {sorted(pointers(errors))})")

    policy = validator_for(schemas["https://entitlementledger.example/schemas/policy.schema.json"], schemas)
    packs = sorted((ROOT / "policies").glob("*.json"))
    for path in packs:
        for error in policy.iter_errors(json.loads(path.read_text())):
            failures.append(f"policies/{path.name}: {'/'.join(map(str, error.absolute_path))}: {error.message[:200]}")

    for failure in failures:
        print(failure)
    print(f"Schemas: {len(schemas)} schemas, {len(valid)} valid and {len(invalid)} invalid examples "
          f"({beyond} beyond JSON Schema), {len(packs)} policy packs: "
          + ("all agree" if not failures else f"{len(failures)} disagreement(s)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
