#!/usr/bin/env bash
# Builds the tokentrace container image from this checkout:
#   deploy/image/build.sh [IMAGE]          (default IMAGE: localhost/tokentrace:VERSION)
# The binary is static (CGO_ENABLED=0), reproducible (-trimpath) and stamped
# with the version (git describe) and the commit (`tokentrace version` takes it
# from Go's build info, this stamp where Go recorded none); the image is FROM scratch, so the build
# needs no registry. Push it with `podman push IMAGE docker://REGISTRY/…`.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
export PATH="$PATH:/usr/local/go/bin"
version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo devel)
revision=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
image=${1:-localhost/tokentrace:$version}
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$version -X main.commit=$revision" -o "$ctx/tokentrace" ./cmd/tokentrace)
cp "$here/Containerfile" "$ctx/"
podman build --quiet -f "$ctx/Containerfile" \
  --build-arg VERSION="$version" --build-arg REVISION="$revision" \
  --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  -t "$image" "$ctx" >/dev/null
echo "$image"
