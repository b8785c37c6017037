#!/usr/bin/env bash
# Fetches the pinned Pyodide distribution from the npm registry, checks it
# against the pinned integrity hash, translates its legacy wasm exception
# handling to the exnref form wazero runs (with a pinned binaryen, also from
# npm), and leaves the result in $RLM_SANDBOX_CACHE/pyodide-$PYODIDE_VERSION.
#
# Re-running it when that directory is complete does no network work.
set -euo pipefail

PYODIDE_VERSION=314.0.7
PYODIDE_INTEGRITY='sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=='
BINARYEN_VERSION=132.0.0
BINARYEN_INTEGRITY='sha512-4Usg7yEvwO3FMso3Oov6qkOOHSod1IEv+boKkh77kTljM+eNBouqCTbqWswGzbG+vDNO/b/v2C4gfEh1WgB9Lg=='

cache=${RLM_SANDBOX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlm-sandbox}
dist="$cache/pyodide-$PYODIDE_VERSION"

if [ -f "$dist/.complete" ]; then
	exit 0
fi

for tool in npm node tar; do
	command -v "$tool" >/dev/null || { echo "fetch-pyodide: $tool is required" >&2; exit 1; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rlm-pyodide.XXXXXX")
trap 'rm -rf "$work"' EXIT

# integrity FILE EXPECTED: checks an npm "sha512-<base64>" integrity string.
integrity() {
	local got
	got="sha512-$(node -e 'const c=require("crypto");process.stdout.write(c.createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$1")"
	if [ "$got" != "$2" ]; then
		echo "fetch-pyodide: integrity mismatch for $1" >&2
		echo "  want $2" >&2
		echo "  got  $got" >&2
		exit 1
	fi
}

fetch() { # fetch NAME VERSION INTEGRITY DEST
	echo "fetch-pyodide: npm pack $1@$2" >&2
	(cd "$work" && npm pack --silent "$1@$2" >/dev/null)
	integrity "$work/$1-$2.tgz" "$3"
	mkdir -p "$4"
	tar -xzf "$work/$1-$2.tgz" -C "$4" --strip-components=1
}

binaryen="$cache/binaryen-$BINARYEN_VERSION"
if [ ! -f "$binaryen/.complete" ]; then
	rm -rf "$binaryen"
	fetch binaryen "$BINARYEN_VERSION" "$BINARYEN_INTEGRITY" "$binaryen"
	touch "$binaryen/.complete"
fi

fetch pyodide "$PYODIDE_VERSION" "$PYODIDE_INTEGRITY" "$work/pyodide"

staging="$dist.partial"
rm -rf "$staging"
mkdir -p "$staging"
cp "$work/pyodide/python_stdlib.zip" "$work/pyodide/pyodide-lock.json" "$work/pyodide/package.json" "$staging/"

echo "fetch-pyodide: translating legacy exception handling (wasm-opt --translate-to-exnref)" >&2
node "$binaryen/bin/wasm-opt" \
	--enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int \
	--enable-simd --enable-bulk-memory --enable-bulk-memory-opt \
	--enable-exception-handling --enable-reference-types --enable-multivalue \
	--enable-tail-call --enable-extended-const --enable-call-indirect-overlong \
	--translate-to-exnref "$work/pyodide/pyodide.asm.wasm" -o "$staging/pyodide.asm.wasm"

echo "$PYODIDE_VERSION" >"$staging/VERSION"
touch "$staging/.complete"
rm -rf "$dist"
mv "$staging" "$dist"
echo "fetch-pyodide: ready in $dist" >&2
