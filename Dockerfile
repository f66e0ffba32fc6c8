# syntax=docker/dockerfile:1
# One image, two roles. The default command runs a gateway; the backend is the same image with
# another command:
#   gateway: docker run IMAGE                                  (CMD ["node", "dist/gateway/server.js"])
#   backend: docker run IMAGE node dist/backend/server.js
# Ports: 8080 gateway (public), 9091 gateway admin (/healthz /readyz /metrics), 3001 backend.
# Stages: `build` compiles TypeScript with the dev dependencies; `prod-deps` installs production
# dependencies only; the runtime stage copies both results into a slim image without npm caches or
# sources. Node 24 LTS (22.18 or later also runs it: package.json engines). No native addon: the backend uses Node's built-in
# node:sqlite, so no stage needs a compiler. The image's own Node runs the app: the Node 24 binary
# that `npm ci` brings for machines with an older node (optionalDependencies) is left out of it.
ARG BUILD_IMAGE=node:24-bookworm
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${BUILD_IMAGE} AS toolchain
WORKDIR /app
ENV npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

FROM toolchain AS build
COPY package.json package-lock.json ./
RUN npm ci
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# tsc emits JavaScript only; files the code reads at run time (Lua scripts of the limiter) are copied
# beside it, whether or not the build script already does so.
RUN npm run build \
 && (cd src && find . -type f -name '*.lua' -exec cp --parents {} ../dist/ \;)

FROM toolchain AS prod-deps
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --omit=optional \
 && node -e "new (require('node:sqlite').DatabaseSync)(':memory:').close()" \
 && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
# tini runs as PID 1: it forwards SIGTERM to node (whose close-with-grace handler drains in-flight
# requests, closes Redis and exits 0) and reaps zombies.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production \
    GATEWAY_HOST=0.0.0.0 \
    GATEWAY_PORT=8080 \
    ADMIN_PORT=9091 \
    BACKEND_HOST=0.0.0.0 \
    BACKEND_PORT=3001 \
    CONFIG_DIR=/app/config \
    PETS_DB=/app/data/pets.db
# ADMIN_HOST keeps the app's default (127.0.0.1): deployments that scrape or probe the admin port
# from outside the container set ADMIN_HOST=0.0.0.0 and restrict it (ADMIN_TOKEN, NetworkPolicy).
COPY --chown=root:root package.json ./
COPY --from=prod-deps --chown=root:root /app/node_modules ./node_modules
COPY --from=build --chown=root:root /app/dist ./dist
# Default plans and routes, and no keys: NODE_ENV=production refuses the demo keys of config/.
# Deployments mount their own config directory (compose volume, Kubernetes ConfigMap) over it.
COPY --chown=root:root config/plans.yaml config/routes.yaml ./config/
RUN printf '# No keys: mount a config directory with your keys.yaml over /app/config.\nkeys: []\n' > config/keys.yaml \
 && mkdir -p /app/data && chown 1000:1000 /app/data
# The `node` user of the base image, by number so Kubernetes can verify runAsNonRoot.
USER 1000:1000
EXPOSE 8080 9091 3001
# The gateway's liveness endpoint on the admin port (loopback works whatever ADMIN_HOST is): 503
# while the gateway is wedged — event loop stalled, upstream gate stuck (docs/operations.md). The
# backend role has no admin port: it sets HEALTHCHECK_URL to one of its own routes instead.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch(process.env.HEALTHCHECK_URL || `http://127.0.0.1:${process.env.ADMIN_PORT || 9091}/healthz`, { signal: AbortSignal.timeout(2500) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/gateway/server.js"]
