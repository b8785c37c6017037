#!/usr/bin/env bash
# Writes the module setup that `make build` compiles the binaries with:
# wazero $WAZERO_VERSION as Go downloaded it (the module cache), with the
# patches in patches/wazero/ applied, in build/wazero-$WAZERO_VERSION-rlm-<hash
# of the patches> (the name tells the runtime which compiled code is whose),
# and build/go.patched.mod + .sum: go.mod and go.sum plus a replace of
# wazero by that directory. `go build -modfile=build/go.patched.mod` uses
# it; go.mod has no replace, so `go test`, `go install` and importers of the
# library use stock wazero. See patches/wazero/README.md.
#
# Re-run by make when a patch, this script, go.mod or go.sum changes.
set -euo pipefail

WAZERO=github.com/tetratelabs/wazero
WAZERO_VERSION=v1.12.0 # the release the patches are written against

cd "$(dirname "$0")/.."
root=$(pwd -P)
GO=${GO:-go}
# The directory's name changes with the patches: the runtime keys its
# compiled code's directories by it (runtime.wazeroBuild), so code compiled by
# another patch set is never taken for this one's.
patchsum=$(cat patches/wazero/*.patch | sha256sum | cut -c1-8)
dst=build/wazero-$WAZERO_VERSION-rlm-$patchsum

want=$($GO list -m -f '{{.Version}}' "$WAZERO")
if [ "$want" != "$WAZERO_VERSION" ]; then
	echo "patch-wazero: go.mod requires $WAZERO $want, the patches are for $WAZERO_VERSION;" \
		"port patches/wazero/ to $want and update WAZERO_VERSION in $0" >&2
	exit 1
fi

# The module cache copy, checked against go.sum by the go command.
src=$($GO mod download -json "$WAZERO@$WAZERO_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ ! -f "$src/go.mod" ]; then
	echo "patch-wazero: no module directory for $WAZERO@$WAZERO_VERSION (got '$src')" >&2
	exit 1
fi

mkdir -p build
tmp=$(mktemp -d "build/.wazero.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cp -R "$src/." "$tmp/"
chmod -R u+w "$tmp" # the module cache is read-only

# git apply rather than patch(1): git is on every machine that cloned this
# repository, patch is not. The ceiling keeps git from taking this
# repository's work tree as the one to patch.
shopt -s nullglob
patches=(patches/wazero/*.patch)
for p in "${patches[@]}"; do
	if ! (cd "$tmp" && GIT_CEILING_DIRECTORIES="$root/build" git apply --whitespace=nowarn "$root/$p"); then
		echo "patch-wazero: $p does not apply to $WAZERO@$WAZERO_VERSION" >&2
		exit 1
	fi
done

rm -rf "$dst" build/wazero-"$WAZERO_VERSION"-rlm build/wazero-"$WAZERO_VERSION"-rlm-* # this and earlier patch sets
mv "$tmp" "$dst"
trap - EXIT

# Relative replacement paths are resolved against the main module's root
# (the directory of go.mod), not the directory of the -modfile.
cp go.sum build/go.patched.sum
{
	cat go.mod
	echo
	echo "// Written by scripts/patch-wazero.sh: wazero with patches/wazero/*.patch."
	echo "replace $WAZERO => ./$dst"
} >build/go.patched.mod.tmp
mv build/go.patched.mod.tmp build/go.patched.mod
echo "patch-wazero: $dst: $WAZERO $WAZERO_VERSION + ${#patches[@]} patch(es)"
