"""Validates Kubernetes objects offline against Kubernetes' own OpenAPI schemas.

    k8s_validate.py [--kubernetes-version V]... FILE...      (FILE: a YAML stream; "-" is stdin)

Exit 0 when every object passes for every version, 1 with one line per error otherwise, 2 on bad
usage. The schemas are the JSON schemas `kubernetes-validate` (PyPI, pinned in
tools/requirements.txt) carries for each Kubernetes release, generated from the API's OpenAPI
definitions; its strict variant sets additionalProperties: false, so a misspelt field ("imagee")
is refused as well as a wrong type ("replicas": "three"), a missing required field or a value
outside an enum. Every error of an object is reported (iter_errors, not the first only), and the
OpenAPI formats the schemas name are checked too (int32/int64 ranges, base64 "byte", RFC 3339
"date-time"), which jsonschema leaves alone by default. An object whose apiVersion/kind has no
schema is an error, never skipped.

Default versions: 1.27 (the oldest docs/kubernetes.md supports: native grpc probes) and 1.32 (the
kubectl these machines use to render the overlays).
"""
import argparse
import base64
import binascii
import datetime
import json
import os
import re
import sys

import jsonschema
import kubernetes_validate
import referencing
import yaml

DEFAULT_VERSIONS = ["1.27", "1.32"]
SCHEMAS = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")

FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("int32", raises=())
def _int32(v):
    return not isinstance(v, int) or isinstance(v, bool) or -2**31 <= v < 2**31


@FORMATS.checks("int64", raises=())
def _int64(v):
    return not isinstance(v, int) or isinstance(v, bool) or -2**63 <= v < 2**63


@FORMATS.checks("byte", raises=(binascii.Error, ValueError))
def _byte(v):
    # kustomize folds long base64 over lines; the API server's Go decoder skips line breaks.
    if isinstance(v, str):
        base64.b64decode(re.sub(r"[\r\n]", "", v), validate=True)
    return True


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(v):
    if isinstance(v, str):
        datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
    return True


def schema_dir(version):
    want = tuple(int(x) for x in version.split(".")[:2])
    held = {}
    for name in os.listdir(SCHEMAS):
        m = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local-strict", name)
        if m:
            held[(int(m[1]), int(m[2]))] = name
    if want not in held:
        have = ", ".join(f"{a}.{b}" for a, b in sorted(held))
        raise SystemExit(f"k8s_validate: no schemas for Kubernetes {version} (kubernetes-validate has {have})")
    return os.path.join(SCHEMAS, held[want])


def load_json(path):
    with open(path) as f:
        return json.load(f)


class Versioned:
    """The strict schemas of one Kubernetes release, resolved through its _definitions.json."""

    def __init__(self, version):
        self.version = version
        self.dir = schema_dir(version)
        definitions = referencing.Resource.from_contents(load_json(os.path.join(self.dir, "_definitions.json")))
        self.registry = definitions @ referencing.Registry()
        self.cache = {}

    def validator(self, api_version, kind):
        # "apps/v1" StatefulSet -> statefulset-apps-v1.json; "v1" Service -> service-v1.json;
        # "networking.k8s.io/v1" -> networking-v1 (the group's first label, as the schema files are named).
        group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        path = os.path.join(self.dir, f"{kind.lower()}-{group_version}.json")
        if path not in self.cache:
            self.cache[path] = None
            if os.path.exists(path):
                schema = load_json(path)
                self.cache[path] = jsonschema.Draft202012Validator(
                    schema, registry=referencing.Resource.from_contents(schema) @ self.registry,
                    format_checker=FORMATS)
        return self.cache[path]


def where_of(error):
    return "/" + "/".join(str(p) for p in error.absolute_path)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes-version", action="append", dest="versions",
                        help="a Kubernetes release (MAJOR.MINOR) to validate against; repeatable "
                             f"(default: {' and '.join(DEFAULT_VERSIONS)})")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    releases = [Versioned(v) for v in (args.versions or DEFAULT_VERSIONS)]
    errors, count = [], 0
    for file in args.files:
        text = sys.stdin.read() if file == "-" else open(file).read()
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            errors.append(f"{file}: YAML does not parse: {str(e).splitlines()[0]}")
            continue
        for i, obj in enumerate(docs):
            if obj is None:
                continue  # an empty document
            name = obj.get("metadata", {}).get("name", "?") if isinstance(obj, dict) else "?"
            kind = obj.get("kind", "?") if isinstance(obj, dict) else "?"
            where = f"{file}: document {i + 1} ({kind} {name})"
            if not isinstance(obj, dict) or not isinstance(obj.get("apiVersion"), str) or not isinstance(obj.get("kind"), str):
                errors.append(f"{where}: not a Kubernetes object (apiVersion and kind must be strings)")
                continue
            count += 1
            for release in releases:
                validator = release.validator(obj["apiVersion"], obj["kind"])
                if validator is None:
                    errors.append(f"{where}: Kubernetes {release.version} has no schema for {obj['apiVersion']} {obj['kind']}")
                    continue
                for e in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
                    errors.append(f"{where}: Kubernetes {release.version}: at {where_of(e)}: {e.message}")
    for e in errors:
        print(e)
    print(f"k8s_validate: {count} object(s) against Kubernetes {', '.join(r.version for r in releases)}, "
          f"{len(errors)} error(s)")
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
