"""Offline checks of Vivarium's Kubernetes manifests; run by deploy/validate.sh in its venv.

  validate.py kustomizations DEPLOY_DIR
      every file or folder a kustomization.yaml under DEPLOY_DIR names exists.
  validate.py manifests [-k VERSION]... [LABEL=]FILE...
      every resource in the YAML files against the Kubernetes API schemas that
      kubernetes-validate bundles, strictly (unknown fields fail), for each VERSION; kinds
      that are CRDs (ServiceMonitor, ScaledObject) against the schemas in deploy/schemas/;
      any other kind without a schema fails (kubernetes-validate itself only warns). Then
      the Deployment's own arithmetic (memory budget against the limit, scratch size, drain
      time against the grace period).
  validate.py patches DEPLOY_DIR
      the patch files the kustomizations name (printed: they are checked when rendered).

Exit status 1 when anything fails; each failure is printed on a line starting with FAIL.
"""

import json
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

# Kinds that are not in Kubernetes' own API: (apiVersion, kind) -> schema in deploy/schemas.
CRD_SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor-monitoring.coreos.com-v1.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda.sh-v1alpha1.json",
}

# Fields of a kustomization.yaml that name files or folders relative to it.
LISTED = ("resources", "components", "crds", "configurations", "generators", "transformers",
          "validators", "bases")


def load_all(path):
    with open(path) as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def kustomization_files(deploy_dir):
    for dirpath, dirnames, filenames in os.walk(deploy_dir):
        dirnames.sort()
        for name in ("kustomization.yaml", "kustomization.yml", "Kustomization"):
            if name in filenames:
                yield os.path.join(dirpath, name)


def patch_paths(kust):
    for key in ("patches", "patchesStrategicMerge", "patchesJson6902"):
        for entry in kust.get(key) or []:
            if isinstance(entry, str):
                yield entry
            elif isinstance(entry, dict) and entry.get("path"):
                yield entry["path"]


def cmd_kustomizations(deploy_dir):
    failures = 0
    count = 0
    for kfile in kustomization_files(deploy_dir):
        base = os.path.dirname(kfile)
        rel = os.path.relpath(kfile, os.path.dirname(deploy_dir))
        docs = load_all(kfile)
        if len(docs) != 1 or not isinstance(docs[0], dict):
            print(f"FAIL {rel}: not one YAML mapping")
            failures += 1
            continue
        kust = docs[0]
        named = []
        for key in LISTED:
            named += [(key, e) for e in kust.get(key) or [] if isinstance(e, str)]
        named += [("patches", p) for p in patch_paths(kust)]
        for gen in ("configMapGenerator", "secretGenerator"):
            for g in kust.get(gen) or []:
                named += [(gen, f.split("=", 1)[-1]) for f in g.get("files") or []]
                named += [(gen, e) for e in g.get("envs") or []]
        for key, entry in named:
            if re.match(r"^[a-z]+://", entry):
                print(f"FAIL {rel}: {key} names a remote {entry} (this check is offline)")
                failures += 1
                continue
            target = os.path.normpath(os.path.join(base, entry))
            count += 1
            if not os.path.exists(target):
                print(f"FAIL {rel}: {key} names {entry}, which does not exist")
                failures += 1
            elif os.path.isdir(target) and not any(
                    os.path.exists(os.path.join(target, n))
                    for n in ("kustomization.yaml", "kustomization.yml", "Kustomization")):
                print(f"FAIL {rel}: {key} names the folder {entry}, which has no kustomization.yaml")
                failures += 1
        print(f"ok   {rel}: {len(named)} entries exist")
    return failures, count


def cmd_patches(deploy_dir):
    for kfile in kustomization_files(deploy_dir):
        kust = load_all(kfile)[0]
        for p in patch_paths(kust):
            print(os.path.relpath(os.path.normpath(os.path.join(os.path.dirname(kfile), p))))
    return 0


class Checker:
    def __init__(self, versions):
        import jsonschema
        import kubernetes_validate
        import kubernetes_validate.utils as kv_utils
        from referencing import Registry, Resource

        self.jsonschema = jsonschema
        self.kv = kubernetes_validate
        self.kv_utils = kv_utils
        self.versions = versions or [kv_utils.latest_version()]
        # The CRD schemas refer to Kubernetes' own definitions (ObjectMeta, LabelSelector,
        # HPA behaviour): the strict ones of the newest version asked for.
        newest = max(self.versions, key=lambda v: [int(x) for x in v.split(".")[:2]])
        defs_version = [v for v in kv_utils.all_versions()
                        if kv_utils.major_minor(v) <= kv_utils.major_minor(newest)][-1]
        defs = kv_utils.schema_contents(
            f"kubernetes-json-schema/v{defs_version}-local-strict/_definitions.json", newest)
        self.registry = Resource.from_contents(defs) @ Registry()
        self.crd = {}
        for key, name in CRD_SCHEMAS.items():
            with open(os.path.join(HERE, "schemas", name)) as f:
                schema = json.load(f)
            jsonschema.Draft202012Validator.check_schema(schema)
            self.crd[key] = jsonschema.Draft202012Validator(schema, registry=self.registry)

    def check(self, label, doc):
        """Failure messages for one resource (empty when it is valid)."""
        if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
            return ["not a Kubernetes resource (no apiVersion or kind)"]
        key = (doc["apiVersion"], doc["kind"])
        if key in self.crd:
            errors = sorted(self.crd[key].iter_errors(doc), key=lambda e: list(e.path))
            # dict.fromkeys: one line per distinct problem (two keywords may say the same).
            return list(dict.fromkeys(
                f"{'.'.join(str(p) for p in e.path) or '(top)'}: {e.message} "
                f"[deploy/schemas/{CRD_SCHEMAS[key]}]" for e in errors))
        out = []
        for version in self.versions:
            try:
                self.kv.validate(doc, version, strict=True)
            except self.kv_utils.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                out.append(f"{path or '(top)'}: {e.message} [Kubernetes {e.version}, strict]")
            except self.kv_utils.SchemaNotFoundError as e:
                out.append(f"{e.message}: a typo, or a CRD deploy/schemas/ has no schema for")
            except self.kv_utils.VersionNotSupportedError as e:
                out.append(f"kubernetes-validate has no schemas for Kubernetes {e.version}")
        return out

    def how(self, doc):
        if (doc.get("apiVersion"), doc.get("kind")) in self.crd:
            return "bundled CRD schema"
        return "Kubernetes " + ", ".join(self.versions) + " strict"


def quantity_bytes(q):
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40,
             "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    m = re.fullmatch(r"([0-9]+)([A-Za-z]*)", str(q))
    if not m or (m.group(2) and m.group(2) not in units):
        raise ValueError(f"cannot read the quantity {q!r}")
    return int(m.group(1)) * units.get(m.group(2), 1)


def deployment_arithmetic(doc):
    """The sizing rules deploy/README.md states, for the Vivarium container."""
    out = []
    spec = doc.get("spec", {}).get("template", {}).get("spec", {})
    for c in spec.get("containers", []):
        if c.get("name") != "vivarium":
            continue
        env = {e["name"]: e.get("value") for e in c.get("env", []) if "name" in e}
        budget = env.get("VIVARIUM_MEMORY_BUDGET_BYTES")
        limit = c.get("resources", {}).get("limits", {}).get("memory")
        if budget is None:
            out.append("VIVARIUM_MEMORY_BUDGET_BYTES is unset: the server would take 3/4 of "
                       "the node's RAM, not of the container's limit")
        elif limit is None:
            out.append("the container has no memory limit")
        else:
            budget, limit_b = int(budget), quantity_bytes(limit)
            if not budget + (1 << 30) <= limit_b:
                out.append(f"memory limit {limit} leaves less than 1 GiB above the budget "
                           f"{budget} for what the budget does not charge")
            mounts = {m["name"]: m["mountPath"] for m in c.get("volumeMounts", [])}
            scratch = env.get("VIVARIUM_SCRATCH")
            for v in spec.get("volumes", []):
                ed = v.get("emptyDir")
                if ed is None or mounts.get(v["name"]) != scratch:
                    continue
                if ed.get("medium") != "Memory":
                    out.append("the scratch emptyDir is not medium: Memory (guests' files "
                               "would not be charged to the budget)")
                if "sizeLimit" not in ed or quantity_bytes(ed["sizeLimit"]) > budget:
                    out.append("the scratch emptyDir's sizeLimit is missing or above the budget")
        grace_ms = int(env.get("VIVARIUM_SHUTDOWN_GRACE_MS") or 10_000)
        grace_ms += int(env.get("VIVARIUM_DRAIN_DELAY_MS") or 0)
        pre = c.get("lifecycle", {}).get("preStop", {})
        pre_s = int(pre.get("exec", {}).get("command", ["", "", "0"])[-1]) if "exec" in pre else 0
        period = spec.get("terminationGracePeriodSeconds", 30)
        # Leave at least 15 s for writing the resident sessions' snapshots after the drain.
        if pre_s + grace_ms / 1000 + 15 > period:
            out.append(f"terminationGracePeriodSeconds {period} is not above preStop {pre_s} s "
                       f"+ VIVARIUM_SHUTDOWN_GRACE_MS {grace_ms} ms + 15 s for snapshots")
    return out


def cmd_manifests(versions, files):
    checker = Checker(versions)
    failures = 0
    resources = 0
    for arg in files:
        # LABEL=PATH names a rendered file by what it was rendered from.
        label, _, path = arg.rpartition("=") if "=" in arg else (arg, "", arg)
        try:
            docs = load_all(path)
        except yaml.YAMLError as e:
            print(f"FAIL {label}: not YAML: {e}")
            failures += 1
            continue
        if not docs:
            print(f"FAIL {label}: no resource in it")
            failures += 1
        for doc in docs:
            resources += 1
            name = (f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
                    if isinstance(doc, dict) else "?")
            problems = checker.check(label, doc)
            if isinstance(doc, dict) and doc.get("kind") == "Deployment" and not problems:
                problems = deployment_arithmetic(doc)
            if problems:
                failures += 1
                for p in problems:
                    print(f"FAIL {label}: {name}: {p}")
            else:
                print(f"ok   {label}: {name} ({checker.how(doc)})")
    print(f"---- {resources} resources in {len(files)} files, {failures} invalid")
    return failures


def main(argv):
    if len(argv) >= 2 and argv[0] == "kustomizations":
        failures, _ = cmd_kustomizations(os.path.abspath(argv[1]))
        return 1 if failures else 0
    if len(argv) >= 2 and argv[0] == "patches":
        return cmd_patches(os.path.abspath(argv[1]))
    if argv and argv[0] == "manifests":
        versions, files, rest = [], [], argv[1:]
        while rest:
            arg = rest.pop(0)
            if arg in ("-k", "--kubernetes-version"):
                versions.append(rest.pop(0))
            else:
                files.append(arg)
        if not files:
            print("FAIL no files to validate")
            return 1
        return 1 if cmd_manifests(versions, files) else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
