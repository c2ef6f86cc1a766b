# keyholder image: build the TypeScript in one stage, run the compiled output on a small Node 24 (LTS) image.
# Alone, with a Redis of its own (docs/operations.md "The image"):
#   docker build -t keyholder .
#   docker run --rm keyholder node dist/cli/keys-new.js --id team-a --namespace team-a --scopes locks
#     (a new API key and its keys-file entry, to paste into deploy/api-keys.yml: the key command is
#     compiled into dist/ like the server)
#   docker network create keyholder-net
#   docker run -d --name my-redis --network keyholder-net redis:7-alpine redis-server --appendonly yes --appendfsync always --maxmemory-policy noeviction
#   docker run -d --name keyholder --network keyholder-net -p 3000:3000 -e REDIS_URL=redis://my-redis:6379 \
#     -e KEYHOLDER_API_KEYS_FILE=/keys/api-keys.yml -v "$PWD/deploy:/keys:ro" keyholder
#     (in production it refuses to start without a keys file: the mounted deploy/api-keys.yml)
# See docker-compose.yml for a Redis set up for lock safety and a Prometheus that scrapes keyholder.

# Node 24: an LTS line; runtime dependencies (cookie, content-disposition) need Node 22 or newer.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# npm ls fails the build when npm ci left node_modules missing or incomplete: some npm versions end
# ci with "Exit handler never called!" and exit code 0 without installing anything.
RUN npm ci --no-audit --no-fund && npm ls >/dev/null
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/copy-lua.mjs scripts/copy-lua.mjs
COPY src src
# Compiles src/ to dist/ and copies the Redis store's .lua scripts next to the compiled code.
RUN npm run build

FROM ${NODE_IMAGE} AS runtime
WORKDIR /app
# production: refuses to start on the embedded store unless told to (KEYHOLDER_STORE=memory), since a
# second replica would hand out the same locks again. HOST 0.0.0.0: reachable from outside the container.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=3000
COPY package.json package-lock.json ./
# Production dependencies only; --ignore-scripts: nothing runs at install time in the image. npm ls, as
# in the build stage: an image without its dependencies must not be built.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm ls --omit=dev >/dev/null && npm cache clean --force
COPY --from=build /app/dist ./dist
# The files belong to root and are read-only to the process: it runs as the image's unprivileged user.
USER node
EXPOSE 3000
# Ready means the store answers; the slim image has no curl, so Node's own fetch asks /readyz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
# node directly (not npm start): SIGTERM reaches the server, which drains in-flight requests and exits.
CMD ["node", "dist/server.js"]
