#!/usr/bin/env bash
# Proves the image without running a container (not permitted everywhere):
# builds it, saves it with `podman save`, unpacks its layers, checks the
# image config (non-root user, entrypoint, OCI labels) and runs the binary
# found inside: `version`, then an import of a shipped sample and inspect.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
image=$("$here/build.sh" localhost/tokentrace:check)
work=$(mktemp -d)
trap 'rm -rf "$work"; podman rmi -f localhost/tokentrace:check >/dev/null 2>&1 || true' EXIT
podman save --format oci-archive -o "$work/image.tar" "$image"
mkdir -p "$work/oci" "$work/rootfs"
tar -xf "$work/image.tar" -C "$work/oci"
python3 - "$work/oci" "$work/rootfs" <<'PY'
import json, os, sys, tarfile
oci, rootfs = sys.argv[1], sys.argv[2]
blob = lambda d: os.path.join(oci, "blobs", *d.split(":"))
index = json.load(open(os.path.join(oci, "index.json")))
manifest = json.load(open(blob(index["manifests"][0]["digest"])))
config = json.load(open(blob(manifest["config"]["digest"])))["config"]
assert config.get("User") == "65532:65532", f"image user is {config.get('User')!r}, want 65532:65532"
assert config.get("Entrypoint") == ["/tokentrace"], config.get("Entrypoint")
labels = config.get("Labels") or {}
for k in ("org.opencontainers.image.title", "org.opencontainers.image.version", "org.opencontainers.image.revision"):
    assert labels.get(k), f"label {k} missing"
for layer in manifest["layers"]:
    with tarfile.open(blob(layer["digest"])) as t:
        t.extractall(rootfs)
print(f"image config ok: user {config['User']}, version {labels['org.opencontainers.image.version']}, {len(manifest['layers'])} layer(s)")
PY
bin="$work/rootfs/tokentrace"
if readelf -l "$bin" 2>/dev/null | grep -q 'program interpreter'; then
  echo "the binary in the image is dynamically linked: a FROM scratch image cannot run it"; exit 1
fi
"$bin" version
"$bin" import --format azure --out "$work/azure.parquet" "$root/testdata/publictraces/azure2023_conv_head1000.csv"
summary=$("$bin" inspect "$work/azure.parquet")
grep -q 'rows           1000' <<<"$summary" || { echo "inspect of the imported sample did not show 1000 rows:"; echo "$summary"; exit 1; }
echo "image ok: the binary from the saved image runs version, import and inspect"
