#!/usr/bin/env bash
# Builds the envtest control plane (etcd and kube-apiserver), and kubectl for
# the kubectl plugin's test, from the Go module proxy into bin/k8s/<version>/. setup-envtest is not used: it downloads release
# binaries, and only the module proxy is reachable. A binary that is already
# there is not rebuilt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
version=${K8S_VERSION:-1.37.2}
minor=$(echo "$version" | cut -d. -f2)
out=${1:-$here/../../bin/k8s/$version}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if [ ! -x "$out/etcd" ]; then
  echo "Building etcd into $out (about 40 s cold)..." >&2
  (cd "$here/etcd" && go build -trimpath -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3 && mv "$out/etcd.tmp" "$out/etcd")
fi

if [ ! -x "$out/kube-apiserver" ]; then
  echo "Building kube-apiserver v$version into $out (about 4 min cold)..." >&2
  # Without the version stamp /version reports v0.0.0-master, which kubectl and
  # Helm cannot parse.
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  (cd "$here/kube-apiserver" && go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver && mv "$out/kube-apiserver.tmp" "$out/kube-apiserver")
fi
if [ ! -x "$out/kubectl" ]; then
  echo "Building kubectl v$version into $out (about 1 min after kube-apiserver)..." >&2
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  (cd "$here/kube-apiserver" && go build -trimpath -ldflags "$ldflags" -o "$out/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl && mv "$out/kubectl.tmp" "$out/kubectl")
fi
echo "$out"
