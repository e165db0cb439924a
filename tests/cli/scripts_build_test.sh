#!/usr/bin/env bash
# scripts/build builds the targets it is given, everything without; scripts/run (the README's main
# job) asks for the command alone (issue 38: it built every test and benchmark). Run on a copy of
# the scripts with stand-ins: a cmake on PATH that records what it is asked, a set-up that does
# nothing and a trainscope that prints nothing. Usage: scripts_build_test.sh SOURCE_DIR
set -euo pipefail
src=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/tree/scripts" "$work/tree/build/default/cli"
printf '#!/bin/sh\necho "$*" >> "$CMAKE_LOG"\n' >"$work/bin/cmake"
printf '#!/bin/sh\nexit 0\n' >"$work/tree/scripts/setup"
printf '#!/bin/sh\nexit 0\n' >"$work/tree/build/default/cli/trainscope"
touch "$work/tree/build/default/build.ninja"  # configured: scripts/build goes straight to the build
cp "$src/scripts/build" "$src/scripts/run" "$work/tree/scripts/"
chmod +x "$work/bin/cmake" "$work/tree/scripts/"* "$work/tree/build/default/cli/trainscope"
export PATH="$work/bin:$PATH" CMAKE_LOG="$work/cmake.log"

fail() {
  echo "FAIL: $1; cmake was asked:"
  cat "$CMAKE_LOG"
  exit 1
}

"$work/tree/scripts/build" default trainscope
[ "$(cat "$CMAKE_LOG")" = "--build --preset default --target trainscope" ] || fail "scripts/build default trainscope"
: >"$CMAKE_LOG"
"$work/tree/scripts/build" default
[ "$(cat "$CMAKE_LOG")" = "--build --preset default" ] || fail "scripts/build default (everything)"
: >"$CMAKE_LOG"
"$work/tree/scripts/run" >/dev/null
[ "$(cat "$CMAKE_LOG")" = "--build --preset default --target trainscope" ] || fail "scripts/run"
echo "OK: scripts/build builds what it is asked; scripts/run builds the command alone"
