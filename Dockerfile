# syntax=docker/dockerfile:1
# keyholder image: build the TypeScript in one stage, run the compiled output on a small Node 20 image.
#   docker build -t keyholder .
#   docker run -p 3000:3000 -e REDIS_URL=redis://my-redis:6379 keyholder
#   docker run --rm keyholder node dist/cli/keys-new.js --id team-a --namespace team-a --scopes locks
#     (a new API key and its keys-file entry: the key command is compiled into dist/ like the server)
# See docker-compose.yml for a Redis set up for lock safety and a Prometheus that scrapes keyholder.

ARG NODE_IMAGE=node:20-alpine

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
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
# Production dependencies only; --ignore-scripts: nothing runs at install time in the image.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
# The files belong to root and are read-only to the process: it runs as the image's unprivileged user.
USER node
EXPOSE 3000
# Ready means the store answers; alpine has no curl, so Node's own fetch asks /readyz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.status===200?0:1),()=>process.exit(1))"]
# node directly (not npm start): SIGTERM reaches the server, which drains in-flight requests and exits.
CMD ["node", "dist/server.js"]
