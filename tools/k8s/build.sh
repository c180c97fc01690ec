#!/usr/bin/env bash
# Builds a Kubernetes control plane for the tests from the Go module proxy (this project's machines get
# no release downloads and no container images): etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, and kwok (it simulates the GPU nodes), plus kwok's stage files.
#
#   tools/k8s/build.sh [BIN_DIR]
#
# The versions are the ones the wrapper modules' go.mod files require (tools/k8s/{etcd,kubernetes,kwok});
# their go.sum files pin every dependency, so the build is reproducible. The binaries are cached by
# version outside the repo, in ${XDG_CACHE_HOME:-~/.cache}/bench-plugin/bin/k8s-<versions> (the default
# BIN_DIR): a machine builds them once (cold, on 2 cores: about 7.5 min, 1.3 GB of Go modules and 3.5 GB
# of build cache), later calls find them and do nothing. Prints the bin dir.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() {
    echo "tools/k8s/build.sh: error: $*" >&2
    exit 1
}

# the version a wrapper module's go.mod requires of a module (a `require M vX` line)
required() {
    local wrapper=$1 module=$2 version
    version=$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 }' "$here/$wrapper/go.mod")
    [[ -n $version ]] || die "no 'require $module vX.Y.Z' line in $here/$wrapper/go.mod"
    echo "$version"
}

etcd_module=go.etcd.io/etcd/server/v3
kwok_module=sigs.k8s.io/kwok
etcd_version=$(required etcd "$etcd_module")
kube_version=$(required kubernetes k8s.io/kubernetes)
kwok_version=$(required kwok "$kwok_module")
[[ $kube_version =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || die "k8s.io/kubernetes $kube_version is not vMAJOR.MINOR.PATCH"
kube_major=${BASH_REMATCH[1]}
kube_minor=${BASH_REMATCH[2]}

bin_dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/bench-plugin/bin/k8s-$kube_version-etcd-$etcd_version-kwok-$kwok_version}
wanted=(etcd kube-apiserver kube-scheduler kube-controller-manager kubectl kwok kwok-stages.yaml)

missing=()
for name in "${wanted[@]}"; do
    [[ -s $bin_dir/$name ]] || missing+=("$name")
done
if ((${#missing[@]} == 0)); then
    echo "$bin_dir"
    exit 0
fi
# an empty directory is replaced by the build; anything else is someone's, not a build of ours
if [[ -e $bin_dir ]] && ! [[ -d $bin_dir && -z $(ls -A "$bin_dir") ]]; then
    die "$bin_dir exists but lacks ${missing[*]} (remove it to rebuild)"
fi

go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $go ]] || die "no Go toolchain (not on PATH, not /usr/local/go/bin/go; set GO=/path/to/go)"
command -v python3 >/dev/null || die "python3 is needed to read 'go mod download -json'"

mkdir -p "$(dirname "$bin_dir")"
# build next to the cache entry and rename: an interrupted build never leaves a half-filled bin dir
tmp=$(mktemp -d "$bin_dir.partial.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "tools/k8s/build.sh: building Kubernetes $kube_version, etcd $etcd_version and kwok $kwok_version" \
    "from the Go module proxy (minutes when cold)" >&2
start=$SECONDS

# build WRAPPER PACKAGE OUTPUT [LDFLAGS]: one command of a wrapper module, with its go.sum as is
build() {
    local wrapper=$1 package=$2 output=$3 ldflags="-s -w ${4:-}" step=$SECONDS
    (cd "$here/$wrapper" && CGO_ENABLED=0 "$go" build -mod=readonly -trimpath -ldflags "$ldflags" \
        -o "$tmp/$output" "$package") || die "go build of $package failed (see above)"
    echo "tools/k8s/build.sh: $output in $((SECONDS - step)) s" >&2
}

build etcd "$etcd_module" etcd

# the version flags Kubernetes' own build sets (hack/lib/version.sh), in both packages that report it
kube_ldflags=""
for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    kube_ldflags+=" -X $package.gitVersion=$kube_version -X $package.gitMajor=$kube_major"
    kube_ldflags+=" -X $package.gitMinor=$kube_minor"
done
for command in kube-apiserver kube-scheduler kube-controller-manager kubectl; do
    build kubernetes "k8s.io/kubernetes/cmd/$command" "$command" "$kube_ldflags"
done

build kwok "$kwok_module/cmd/kwok" kwok

# kwok's stages (how a fake node heartbeats and a fake pod becomes Ready) ship in its module, not its binary
kwok_dir=$(cd "$here/kwok" && "$go" mod download -json "$kwok_module@$kwok_version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("Dir", ""))') ||
    die "go mod download of $kwok_module@$kwok_version failed (see above)"
[[ -d $kwok_dir ]] || die "go mod download gave no module directory for $kwok_module@$kwok_version"
stages=(node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml)
for stage in "${stages[@]}"; do
    [[ -s $kwok_dir/kustomize/stage/$stage ]] || die "$kwok_module@$kwok_version has no kustomize/stage/$stage"
    # one YAML stream: each file's documents, separated
    { echo "---"; cat "$kwok_dir/kustomize/stage/$stage"; } >>"$tmp/kwok-stages.yaml"
done

chmod 0755 "$tmp"
mv -T "$tmp" "$bin_dir" || die "could not move the build into $bin_dir"
trap - EXIT
echo "tools/k8s/build.sh: built $bin_dir in $((SECONDS - start)) s" >&2
echo "$bin_dir"
