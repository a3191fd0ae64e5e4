#!/usr/bin/env bash
# Offline validation of the Kubernetes manifests in deploy/ (no cluster, no network once the
# venv exists):
#   1. every file and folder a kustomization.yaml names exists;
#   2. every kustomization (deploy/base, deploy/overlays/*, and each component on top of the
#      base) is rendered with `kubectl kustomize` when kubectl is installed, and each
#      rendered resource is validated strictly (unknown fields fail) against the Kubernetes
#      API schemas kubernetes-validate bundles, for the oldest and newest Kubernetes
#      versions we support; ServiceMonitor and ScaledObject (CRDs) against the schemas in
#      deploy/schemas/; any other unknown kind fails; the Deployment's sizing arithmetic too;
#   3. without kubectl, the files themselves (each is a complete resource) instead, patches
#      excepted (listed: only rendering can check them);
#   4. the examples in deploy/examples/.
# Exits non-zero on any failure, with a summary. Needs python3 with venv and pip; the first
# run installs the pinned validator (deploy/requirements.txt) into target/deploy-venv.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deploy=$root/deploy
venv=$root/target/deploy-venv
requirements=$deploy/requirements.txt
# Oldest and newest Kubernetes minor versions the manifests must be valid for.
k8s_versions=(1.30 1.37)

started=$(date +%s)

# (Re)made when missing, when the pins changed, or when it no longer runs (its Python gone).
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$requirements" "$venv/.requirements" \
        || ! "$venv/bin/python" -c 'import kubernetes_validate, jsonschema, yaml' 2>/dev/null; then
    echo "== installing the validator into target/deploy-venv (deploy/requirements.txt)"
    mkdir -p "$root/target"
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input --require-virtualenv -r "$requirements"
    cp "$requirements" "$venv/.requirements"
fi
py=$venv/bin/python

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failed=()

echo "== kustomizations: every listed file and folder exists"
if ! "$py" "$deploy/validate.py" kustomizations "$deploy"; then
    failed+=("kustomization listings")
fi

to_validate=()
# DEPLOY_VALIDATE_NO_KUBECTL=1 takes the path of a machine without kubectl.
if [ "${DEPLOY_VALIDATE_NO_KUBECTL:-0}" != 1 ] && command -v kubectl >/dev/null 2>&1 \
        && kubectl kustomize --help >/dev/null 2>&1; then
    echo "== rendering with kubectl kustomize ($(kubectl version --client 2>/dev/null | grep -i kustomize | tr -s ' ' || echo 'version unknown'))"
    # Render a copy, so that the components can be rendered on top of the base from an
    # overlay made for the purpose (kustomize takes only relative paths).
    cp -r "$deploy" "$tmp/deploy"
    targets=()
    while IFS= read -r k; do
        dir=$(dirname "$k")
        if grep -qE '^kind:[[:space:]]*Component' "$k"; then
            name=$(basename "$dir")
            mkdir -p "$tmp/deploy/.validate-$name"
            printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../base\ncomponents:\n  - ../components/%s\n' \
                "$name" > "$tmp/deploy/.validate-$name/kustomization.yaml"
            targets+=("base+components/$name:.validate-$name")
        else
            rel=${dir#"$tmp/deploy/"}
            targets+=("$rel:$rel")
        fi
    done < <(find "$tmp/deploy" -name kustomization.yaml -not -path '*/.validate-*' | sort)
    for t in "${targets[@]}"; do
        label=${t%%:*}
        dir=${t#*:}
        out=$tmp/rendered-$(echo "$label" | tr '/+' '__').yaml
        if kubectl kustomize "$tmp/deploy/$dir" > "$out" 2> "$out.err"; then
            echo "ok   rendered $label ($(grep -c '^kind:' "$out") resources)"
            to_validate+=("rendered:$label=$out")
        else
            echo "FAIL rendering $label:"
            sed 's/^/     /' "$out.err"
            failed+=("rendering $label")
        fi
    done
else
    echo "== no kubectl to render with: validating the files themselves, not their rendering"
    mapfile -t patches < <(cd "$root" && "$py" "$deploy/validate.py" patches "$deploy")
    while IFS= read -r f; do
        rel=${f#"$root/"}
        if printf '%s\n' "${patches[@]}" | grep -qxF "$rel"; then
            echo "skip $rel: a patch, checked only when rendered"
            continue
        fi
        to_validate+=("$rel=$f")
    done < <(find "$deploy/base" "$deploy/overlays" "$deploy/components" -name '*.yaml' \
                 -not -name kustomization.yaml | sort)
fi
while IFS= read -r f; do
    to_validate+=("${f#"$root/"}=$f")
done < <(find "$deploy/examples" -name '*.yaml' | sort)

echo "== schemas: Kubernetes ${k8s_versions[*]} (kubernetes-validate, strict), CRDs from deploy/schemas/"
kflags=()
for v in "${k8s_versions[@]}"; do kflags+=(-k "$v"); done
if ! "$py" "$deploy/validate.py" manifests "${kflags[@]}" "${to_validate[@]}"; then
    failed+=("schema validation")
fi

elapsed=$(( $(date +%s) - started ))
if [ ${#failed[@]} -gt 0 ]; then
    echo "deploy/validate.sh: FAILED: $(printf '%s; ' "${failed[@]}")in ${elapsed} s"
    exit 1
fi
echo "deploy/validate.sh: all manifests valid (${#to_validate[@]} files) in ${elapsed} s"
