# syntax=docker/dockerfile:1
# Headroom's image: one image for both modes (engine: `headroom serve` on a local GGUF model;
# gateway: `headroom gateway` in front of engine replicas), chosen at run time by HEADROOM_MODE
# or the first argument (deploy/entrypoint.sh). deploy/README.md says how to build and run it and
# what of this file was and was not exercised where it was written.
#
#   docker build -t headroom:0.1.0 .
#   docker run --rm -p 8000:8000 --cpus 2 headroom:0.1.0
#
# Two stages:
#   build    the toolchain: `npm ci` builds the llama.cpp addon offline from the sources npm ships
#            (scripts/build-native.mjs), generates the default tiny model and checks its sha256
#            against deploy/models.sha256, then drops the dev dependencies.
#   runtime  node and only what runs: node_modules (production), the addon and the llama.cpp
#            libraries it links, the compiled JavaScript in src/, bin/, the model, the entrypoint;
#            a non-root user.
#
# The benchmark harness's dependencies (DuckDB, Vega, Vega-Lite, resvg, cli-progress,
# eventsource-parser) are devDependencies: `headroom serve` and `headroom gateway` never import
# them, so the prune drops them, 207 MB of node_modules down to 108 MB (deploy/README.md, "Size
# and start-up"). `bench`, `report`, `ladder`, `gate` and `demo` need a full `npm ci`, not this image.

# Node 20 (package.json engines: >= 20.19); the slim Debian variant has sh, sha256sum and nproc,
# which the entrypoint uses, and no compiler.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
# `prebuilt` (the default here) links @node-llama-cpp/linux-x64's libraries, which pick a CPU
# variant at run time, so the image runs on any x86-64 node. `source` builds llama.cpp with
# GGML_NATIVE=ON: faster prefill (docs/per-token.md) but only on CPUs with the build host's
# instruction set; build it on the machine type you deploy to.
ARG HEADROOM_LLAMA_BUILD=prebuilt
# git clones the llama.cpp source bundle (offline); python3, make and g++ are node-gyp's toolchain.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git g++ make python3 \
 && if [ "$HEADROOM_LLAMA_BUILD" != prebuilt ]; then apt-get install -y --no-install-recommends cmake; fi \
 && rm -rf /var/lib/apt/lists/*
# The same path in both stages: the addon's rpath is the absolute folder of the libraries it links.
WORKDIR /app
# Dependencies and the addon first, so a change under src/ reuses this layer.
COPY package.json package-lock.json .npmrc ./
COPY scripts/ scripts/
COPY native/binding.gyp native/
COPY native/src/ native/src/
RUN HEADROOM_LLAMA_BUILD="$HEADROOM_LLAMA_BUILD" npm ci \
 && test -f native/build/Release/headroom_llama.node \
 && mkdir -p native/llama-build/bin
COPY tsconfig.json ./
COPY bin/ bin/
COPY src/ src/
COPY deploy/models.sha256 deploy/
# The default model (models/tiny.gguf: the tiny preset, F16, seed 0) from the same code path
# `headroom serve` uses when it finds no model; the generator is deterministic, so its bytes are
# checked. A real model is mounted instead (HEADROOM_MODEL, HEADROOM_MODEL_SHA256).
# --omit=optional as .npmrc says, spelled out: the image must not pick up optional platform packages.
# Then the server's JavaScript (`npm run build`: dist/src/, the layout of src/), so the runtime needs
# no tsx at start-up (deploy/README.md, "Size and start-up"), before the prune drops TypeScript.
COPY tsconfig.build.json ./
RUN node --import tsx -e "await (await import('./src/model/default-model.ts')).ensureDefaultModel()" \
 && sha256sum -c deploy/models.sha256 \
 && npm run build \
 && cp src/admission/self-train/worker-entry.mjs dist/src/admission/self-train/ \
 && npm prune --omit=dev --omit=optional

FROM ${NODE_IMAGE} AS runtime
RUN groupadd --system --gid 10001 headroom \
 && useradd --system --uid 10001 --gid headroom --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin headroom \
 && mkdir -p /var/lib/headroom && chown headroom:headroom /var/lib/headroom
WORKDIR /app
# Everything is owned by root and read-only to the server's user: it never writes under /app.
COPY --from=build /app/node_modules/ node_modules/
COPY --from=build /app/native/build/Release/headroom_llama.node native/build/Release/
COPY --from=build /app/native/llama-build/bin/ native/llama-build/bin/
COPY --from=build /app/models/ models/
COPY package.json ./
COPY bin/ bin/
# The compiled JavaScript where src/ is: bin/headroom.mjs finds src/cli/main.js and runs it without tsx.
COPY --from=build /app/dist/src/ src/
COPY deploy/entrypoint.sh deploy/models.sha256 deploy/
# XDG_STATE_HOME: what admission control learns is kept per listening address under it (a volume
# there keeps it across container restarts; deploy/README.md).
ENV NODE_ENV=production \
    XDG_STATE_HOME=/var/lib/headroom \
    HEADROOM_MODE=engine \
    HEADROOM_MODEL=/app/models/tiny.gguf
USER 10001:10001
EXPOSE 8000
# SIGTERM drains (/ready turns 503, in-flight requests finish until --drain-timeout-ms, 60 s by
# default): give `docker stop -t` / compose's stop_grace_period more than that.
STOPSIGNAL SIGTERM
# Docker's health is readiness here (/ready: model loaded and warm, not draining), so compose's
# `depends_on: condition: service_healthy` waits for a server that can serve. Kubernetes ignores
# this and probes /ready and /health itself (deploy/k8s/).
HEALTHCHECK --interval=5s --timeout=3s --start-period=120s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.HEADROOM_PORT || process.env.HEADROOM_GATEWAY_PORT || 8000) + '/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
ENTRYPOINT ["/app/deploy/entrypoint.sh"]
