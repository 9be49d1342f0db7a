#!/usr/bin/env python3
"""Every field in deploy/k8s is one Kubernetes knows, at every depth.

The JSON schemas that k8s_validate.mjs checks against allow unknown fields, so a misspelt key
(`readOnlyRootFileSystem`, `livenesProbe`) would pass there and be silently dropped by the API
server. This walks each object through the typed models of Debian's python3-kubernetes
(attribute_map / openapi_types) and reports any key no model declares.
Usage: k8s_strict_fields.py DEPLOY_K8S_DIR. Exits 77 when python3-kubernetes or PyYAML is absent.
"""
import os
import re
import sys

try:
    import yaml
    from kubernetes import client
except ImportError as error:
    print(f"SKIPPED: {error} (apt-get install python3-kubernetes python3-yaml)")
    sys.exit(77)

# apiVersion/kind -> the model's name, as python3-kubernetes spells it.
def model_name(api_version, kind):
    group, _, version = api_version.rpartition("/")
    prefix = {"": "", "apps": "", "policy": "", "batch": ""}.get(group, None)
    if prefix is None:
        return None
    return f"{version.capitalize()}{kind}"


def walk(value, type_name, path, problems):
    if value is None:
        return
    match = re.fullmatch(r"list\[(.+)\]", type_name)
    if match:
        for i, item in enumerate(value):
            walk(item, match.group(1), f"{path}[{i}]", problems)
        return
    match = re.fullmatch(r"dict\(str, (.+)\)", type_name)
    if match:
        for key, item in value.items():
            walk(item, match.group(1), f"{path}.{key}", problems)
        return
    model = getattr(client, type_name, None)
    if model is None or not hasattr(model, "attribute_map"):
        return  # a primitive (str, int, bool, object, datetime)
    if not isinstance(value, dict):
        problems.append(f"{path}: expected an object ({type_name})")
        return
    by_json = {json_name: attr for attr, json_name in model.attribute_map.items()}
    for key, item in value.items():
        if key not in by_json:
            problems.append(f"{path}.{key}: not a field of {type_name}")
            continue
        walk(item, model.openapi_types[by_json[key]], f"{path}.{key}", problems)


def main():
    directory = sys.argv[1]
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        resources = yaml.safe_load(f)["resources"]
    problems = []
    checked = 0
    for file in resources:
        with open(os.path.join(directory, file)) as f:
            for obj in yaml.safe_load_all(f):
                if not obj:
                    continue
                name = model_name(obj["apiVersion"], obj["kind"])
                if name is None or not hasattr(client, name):
                    problems.append(f"{file}: no model for {obj['apiVersion']} {obj['kind']}")
                    continue
                walk(obj, name, f"{file}:{obj['kind']}/{obj['metadata']['name']}", problems)
                checked += 1
    # The check must be able to fail.
    control = []
    walk({"spec": {"containers": [{"name": "x", "livenesProbe": {}}]}}, "V1Pod", "control",
         control)
    if not control:
        problems.append("a misspelt field passed the control check; this test proves nothing")
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        return 1
    print(f"PASS: {checked} objects, every field known to the Kubernetes API models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
