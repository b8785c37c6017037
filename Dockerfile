# syntax=docker/dockerfile:1
# rlm-sandbox as a network service: `serve --listen` (docs/serve.md, "The
# network server"; deploy/ has Kubernetes manifests).
#
# The build stage runs `make` (fetches Pyodide from npm, builds the two
# binaries with the patched wazero, compiles Pyodide to native code and the
# standard library to bytecode); the final image holds the binaries and
# that prepared cache, so a container starts sandboxes without network.
#
#   docker build -t rlm-sandbox .
#   docker run --rm rlm-sandbox version

FROM golang:1.26-bookworm AS build
RUN apt-get update \
	&& apt-get install -y --no-install-recommends nodejs npm \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ENV RLM_SANDBOX_CACHE=/opt/rlm-sandbox/cache
RUN make all && bin/rlm-sandbox version

FROM debian:bookworm-slim
# The service runs as an unprivileged user that owns the cache (the runtime
# may add to it, e.g. a snapshot for a new configuration).
RUN useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin rlm
COPY --from=build /src/bin/rlm-sandbox /src/bin/rlm-worker /usr/local/bin/
COPY --from=build --chown=10001:10001 /opt/rlm-sandbox/cache /opt/rlm-sandbox/cache
ENV RLM_SANDBOX_CACHE=/opt/rlm-sandbox/cache
USER 10001:10001
# 7070: JSON-RPC (serve --listen); 9090: /metrics, /healthz, /readyz.
EXPOSE 7070 9090
ENTRYPOINT ["rlm-sandbox"]
# --require-worker: a sandbox whose rlm-worker cannot start fails to be
# created rather than run its code unconfined inside the server.
CMD ["serve", "--listen", "0.0.0.0:7070", "--token-file", "/etc/rlm-sandbox/token", \
	"--metrics-listen", "0.0.0.0:9090", "--log-format", "json", "--require-worker"]
