# toolcall-recovery container image.
#
#   docker build -t toolcall-recovery .                      # the worker (last stage)
#   docker build --target demo -t toolcall-recovery-demo .   # the demo event publisher
#
# Plain Dockerfile syntax only (no BuildKit-only features), so the legacy builder used by
# docker-compose 1.x builds it too.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

# ---------------------------------------------------------------------------- build
FROM rust:${RUST_VERSION}-${DEBIAN_RELEASE} AS builder
WORKDIR /src
# The whole workspace (see .dockerignore for what stays out): the binary embeds
# migrations/ at compile time, and Cargo wants every declared target's path to exist.
COPY . .
RUN cargo build --release --locked -p toolcall-recovery \
        --bin toolcall-recovery --example demo_publish \
 && mkdir -p /out \
 && cp target/release/toolcall-recovery target/release/examples/demo_publish /out/ \
 && strip /out/toolcall-recovery /out/demo_publish

# ------------------------------------------------------------------- runtime base
FROM debian:${DEBIAN_RELEASE}-slim AS runtime-base
# ca-certificates: amqps:// and sslmode=require against public CAs.
# curl: the HEALTHCHECK below (a distroless image would have no way to probe /healthz).
# Versions come from the pinned Debian release; pinning package versions breaks on every
# Debian point release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 toolcall \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin toolcall
USER 10001:10001

# ---------------------------------------------------------------------------- demo
# Publishes sample finalized-message events (docker-compose profile `demo`).
FROM runtime-base AS demo
COPY --from=builder /out/demo_publish /usr/local/bin/demo_publish
ENTRYPOINT ["/usr/local/bin/demo_publish"]

# ------------------------------------------------------------------------- runtime
FROM runtime-base AS runtime
LABEL org.opencontainers.image.title="toolcall-recovery" \
      org.opencontainers.image.description="Finds tool calls that LLMs leaked into message text, runs the real recovery, keeps an audit ledger" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /out/toolcall-recovery /usr/local/bin/toolcall-recovery
# JSON logs; /metrics, /healthz and /readyz on port 9090 of every interface.
# lapin logs a returned (unroutable) message whole, body included, at WARN: keep message
# content out of the logs (the worker logs the unroutable publish itself, without content).
ENV TCR_LOG_FORMAT=json \
    TCR_HTTP_ADDR=0.0.0.0:9090 \
    RUST_LOG=info,lapin::returned_messages=error
EXPOSE 9090
# Liveness only: /readyz (broker consuming, database answering) is for orchestrators that
# route or scale on readiness. The port follows TCR_HTTP_ADDR (shell form: it needs the
# shell's ${VAR##pattern} expansion).
# hadolint ignore=DL3025
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS "http://127.0.0.1:${TCR_HTTP_ADDR##*:}/healthz" >/dev/null || exit 1
# SIGTERM drains in-flight deliveries (TCR_DRAIN_TIMEOUT_SECS, default 30 s): give
# `docker stop -t` / stop_grace_period more than that.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/toolcall-recovery"]
CMD ["run"]
