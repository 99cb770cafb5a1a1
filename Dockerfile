# One image for every Berth process; the command picks the service.
FROM node:24-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY core core
COPY services services
COPY activities activities
COPY workflows workflows
COPY workers workers
COPY cli cli
COPY bench bench
COPY bin bin
# The console's page, bundled by the build into dist/console.
COPY console console
COPY scripts/build-console.mjs scripts/
RUN npm ci && npm prune --omit=dev

FROM node:24-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app /app
# A volume mounted here starts owned by node, so `berth seaweedfs-keys` can write SeaweedFS's keys.
RUN mkdir -p /etc/seaweedfs && chown node:node /etc/seaweedfs
USER node
CMD ["node", "bin/berth.js", "--help"]
