#!/usr/bin/env bash
# Disassembles one compiled guest function of a running process that writes
# a perf map (RLM_SANDBOX_PERFMAP=1, docs/profiling.md): perf annotate cannot,
# since the code is in anonymous memory. Offsets in the listing are from the
# function's start, as `perf script -F sym,symoff` prints them.
#
# usage: scripts/guest-disasm.sh PID NAME   (NAME as in the map: malloc, wasm-function[9405])
# needs: objdump (binutils) and the right to read /proc/PID/mem (same user,
# or root, as for a debugger).
set -euo pipefail
if [ $# -ne 2 ]; then
	echo "usage: $0 PID NAME" >&2
	exit 2
fi
pid=$1 name=$2
map=/tmp/perf-$pid.map
line=$(awk -v n="$name" '$3 == n { print $1, $2; exit }' "$map")
if [ -z "$line" ]; then
	echo "$0: no function $name in $map" >&2
	exit 1
fi
read -r start size <<<"$line"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
dd if="/proc/$pid/mem" of="$tmp" bs=64K iflag=skip_bytes,count_bytes \
	skip=$((16#$start)) count=$((16#$size)) status=none
case $(uname -m) in
x86_64) arch=i386:x86-64 ;;
aarch64) arch=aarch64 ;;
*) echo "$0: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
echo "$name at 0x$start, 0x$size bytes, pid $pid"
objdump -D -b binary -m "$arch" "$tmp" | sed -n '/<.data>:/,$p' | tail -n +2
