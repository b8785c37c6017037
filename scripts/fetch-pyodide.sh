#!/usr/bin/env bash
# Fetches the pinned Pyodide distribution from the npm registry, checks it
# against the pinned integrity hash, and leaves its stock files (the ones the
# runtime loads, see runtime/dist.go) in
# $RLM_SANDBOX_CACHE/pyodide-npm-$PYODIDE_VERSION.
# The runtime checks each file's SHA-256 again, translates the module's legacy
# wasm exception handling to the exnref form in Go on first load, and caches
# the result.
#
# Re-running it when that directory is complete does no network work.
#
# With PYODIDE_NODE_DIR set, it leaves instead the whole package, checked the
# same way, in that directory: what Node needs to run the same Pyodide (the
# side-by-side CPU benchmark, scripts/node-cpu-bench.mjs).
set -euo pipefail

PYODIDE_VERSION=314.0.7
PYODIDE_INTEGRITY='sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=='
FILES=(pyodide.asm.wasm python_stdlib.zip pyodide-lock.json package.json)

cache=${RLM_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlm-sandbox}
# Older versions of this script kept a binaryen-translated module in
# pyodide-$PYODIDE_VERSION; this directory has another name so that a
# checkout of either kind never overwrites the other's.
dist="$cache/pyodide-npm-$PYODIDE_VERSION"
marker=.complete
if [ -n "${PYODIDE_NODE_DIR:-}" ]; then
	dist=$PYODIDE_NODE_DIR
fi

if [ -f "$dist/$marker" ]; then
	exit 0
fi

for tool in npm node tar; do
	command -v "$tool" >/dev/null || { echo "fetch-pyodide: $tool is required" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rlm-pyodide.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "fetch-pyodide: npm pack pyodide@$PYODIDE_VERSION" >&2
(cd "$work" && npm pack --silent "pyodide@$PYODIDE_VERSION" >/dev/null)
tgz="$work/pyodide-$PYODIDE_VERSION.tgz"
got="sha512-$(node -e 'const c=require("crypto");process.stdout.write(c.createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tgz")"
if [ "$got" != "$PYODIDE_INTEGRITY" ]; then
	echo "fetch-pyodide: integrity mismatch for $tgz" >&2
	echo "  want $PYODIDE_INTEGRITY" >&2
	echo "  got  $got" >&2
	exit 1
fi
mkdir -p "$work/pyodide"
tar -xzf "$tgz" -C "$work/pyodide" --strip-components=1

mkdir -p "$cache" "$(dirname "$dist")"
staging=$(mktemp -d "$dist.partial.XXXXXX")
if [ -n "${PYODIDE_NODE_DIR:-}" ]; then
	cp -R "$work/pyodide/." "$staging/"
else
	for f in "${FILES[@]}"; do
		cp "$work/pyodide/$f" "$staging/"
		chmod 644 "$staging/$f"
	done
fi
echo "$PYODIDE_VERSION" >"$staging/VERSION"
touch "$staging/$marker"
chmod 755 "$staging"
if [ -f "$dist/$marker" ]; then # another run finished first
	rm -rf "$staging"
else
	rm -rf "$dist"
	mv "$staging" "$dist"
fi
echo "fetch-pyodide: ready in $dist" >&2
