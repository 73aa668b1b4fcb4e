#!/usr/bin/env bash
# Build llama.cpp's own `llama-server` (the peer and the gateway showcase's upstream) offline, from the
# llama.cpp source that node-llama-cpp bundles as a git bundle — the same source as the prebuilt
# libllama Headroom links. Nothing is written inside the repository; the binary's path is printed last.
#
#   bash bench/peer/build-llama-server.sh [dir]      (dir: where llama.cpp is cloned; default $LLAMA_SRC,
#                                                     else a fresh temporary directory)
#   EXTRA_TARGETS="llama-batched-bench" ...           (more targets: docs/per-token.md uses this one)
#
# About 20 minutes on 2 cores (at nice 10). Needs git, cmake and ninja (Debian: cmake ninja-build).
# An existing build in `dir` is reused: cmake rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
[[ -f $bundle ]] || { echo "build-llama-server: $bundle not found (run npm install first)" >&2; exit 1; }
for tool in git cmake ninja; do
  command -v "$tool" >/dev/null || { echo "build-llama-server: $tool is missing (apt-get install -y cmake ninja-build git)" >&2; exit 1; }
done
src=${1:-${LLAMA_SRC:-$(mktemp -d)/llama.cpp}}
case "$(realpath -m "$src")" in "$(pwd)"/*) echo "build-llama-server: build outside the repository, not in $src" >&2; exit 1 ;; esac
[[ -d $src/.git ]] || git clone --quiet "$bundle" "$src"
cmake -S "$src" -B "$src/build" -G Ninja -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=ON -DCMAKE_BUILD_TYPE=Release >/dev/null
# shellcheck disable=SC2086
nice -n 10 cmake --build "$src/build" -j2 --target llama-server ${EXTRA_TARGETS:-}
"$src/build/bin/llama-server" --version 2>&1 | head -2 >&2
echo "$src/build/bin/llama-server"
