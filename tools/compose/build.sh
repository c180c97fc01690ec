#!/usr/bin/env bash
# Builds docker compose from the Go module proxy and installs it as a docker CLI plugin, so that
# `docker compose config` can validate docker-compose.yml on a machine without an engine or a compose
# plugin (this project's machines reach the Go module proxy, but get no release downloads).
#
#   tools/compose/build.sh [DOCKER_CONFIG_DIR]     (default: <repo>/.docker)
#
# The version is the one tools/compose/go.mod requires; go.sum pins every dependency, so the build is
# reproducible. The binary is cached by version outside the repo, in
# ${XDG_CACHE_HOME:-~/.cache}/bench-plugin/bin/docker-compose-<version>: a machine builds it once
# (cold, on 2 cores: about 80 s and 0.8 GB of Go module and build caches), later calls only install
# it as DOCKER_CONFIG_DIR/cli-plugins/docker-compose. Prints the installed plugin's path.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
config_dir=${1:-$root/.docker}
module=github.com/docker/compose/v5

die() {
    echo "tools/compose/build.sh: error: $*" >&2
    exit 1
}

version=$(awk -v m="$module" '$1 == "require" && $2 == m { print $3 }' "$here/go.mod")
[[ -n $version ]] || die "no 'require $module vX.Y.Z' line in $here/go.mod"
binary=${XDG_CACHE_HOME:-$HOME/.cache}/bench-plugin/bin/docker-compose-$version

if [[ ! -x $binary ]]; then
    go=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
    [[ -x $go ]] || die "no Go toolchain (not on PATH, not /usr/local/go/bin/go; set GO=/path/to/go)"
    mkdir -p "$(dirname "$binary")"
    # build next to the cache entry and rename: an interrupted build never leaves a half-written binary
    tmp=$(mktemp "$binary.partial.XXXXXX")
    trap 'rm -f "$tmp"' EXIT
    echo "tools/compose/build.sh: building docker compose $version from the Go module proxy (minutes when cold)" >&2
    start=$SECONDS
    (cd "$here" && "$go" build -mod=readonly -trimpath \
        -ldflags "-s -w -X $module/internal.Version=$version" -o "$tmp" "$module/cmd") ||
        die "go build of $module@$version failed (see above)"
    mv "$tmp" "$binary"
    trap - EXIT
    echo "tools/compose/build.sh: built $binary in $((SECONDS - start)) s" >&2
fi

plugin=$config_dir/cli-plugins/docker-compose
if ! cmp -s "$binary" "$plugin"; then
    mkdir -p "$config_dir/cli-plugins"
    install -m 0755 "$binary" "$plugin"
fi
echo "$plugin"
