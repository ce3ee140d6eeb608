# syntax=docker/dockerfile:1
# leadpost: build stage compiles the TypeScript and the SQLite driver; the runtime stage carries
# only what `leadpost serve` needs and runs as the unprivileged `node` user.

FROM node:20-bookworm-slim AS build
# better-sqlite3 falls back to compiling from source when no prebuilt binary fits: it needs these.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
# The npm the lockfile and package.json's allowScripts were written with (the image ships npm 10).
RUN npm install -g npm@11.19.1
WORKDIR /app
COPY package.json package-lock.json ./
# Dependencies first, so a source change does not reinstall them; `prepare` (the build) runs later.
RUN npm ci --ignore-scripts && npm rebuild better-sqlite3
COPY tsconfig.json ./
# Only the service's sources: tests and benchmarks are not compiled into the image.
COPY src ./src
COPY bin ./bin
COPY config ./config
COPY console ./console
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    LEADPOST_DATA_DIR=/data \
    PORT=8443 \
    HTTP_PORT=8080
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/bin ./bin
COPY --from=build /app/config ./config
COPY --from=build /app/console ./console
# The data dir holds the embedded stores, the key store and master key of personal data (mount
# the master key from a secret store in production: LEADPOST_MASTER_KEY_FILE) and the
# self-signed certificate: the only place written.
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8443 8080
# `leadpost health` asks https://127.0.0.1:$PORT/healthz without verifying the certificate (the
# slim image has no curl; a self-signed or real certificate never names 127.0.0.1).
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "bin/leadpost.js", "health", "--timeout", "4000"]
# node is PID 1 and handles SIGTERM itself: it drains and exits within 10 s (Docker's default stop timeout).
STOPSIGNAL SIGTERM
CMD ["node", "--enable-source-maps", "--max-old-space-size=128", "bin/leadpost.js", "serve"]
