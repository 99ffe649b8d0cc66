# syntax=docker/dockerfile:1
# agw as a container: `docker build -t agw .`; how to run it: docker-compose.yml and the README
# ("Running it in production").
#
# Runtime image: debian slim rather than distroless, because the bundled skills run Python
# scripts (`_skill_run_script_` with python3) and skill scripts may use bash. The build stage
# uses the same Debian release, so the binary's glibc matches.

# Keep equal to the channel in rust-toolchain.toml.
ARG RUST_VERSION=1.95.0
ARG DEBIAN=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN} AS build
ARG RUST_VERSION
# rust-toolchain.toml also lists rustfmt and clippy; pinning the image's toolchain keeps rustup
# from downloading components a release build does not use.
ENV RUSTUP_TOOLCHAIN=${RUST_VERSION}
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p agw \
 && install -D -m 0755 target/release/agw /out/agw

FROM debian:${DEBIAN}-slim
# python3: the bundled skills' scripts. tini: PID 1 that forwards SIGTERM to agw (graceful drain)
# and reaps orphaned grandchildren of skill scripts. ca-certificates: HTTPS to model providers
# and JWKS endpoints (the system trust store).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 tini ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --create-home --home-dir /home/agw --shell /usr/sbin/nologin agw \
 && mkdir -p /opt/agents /opt/tools /opt/viewports /opt/skills /opt/data /opt/chats \
 && chown agw:agw /opt/agents /opt/tools /opt/viewports /opt/skills /opt/data /opt/chats
COPY --from=build /out/agw /usr/local/bin/agw

# The reference image's directories (config.md §2). The bundled demo agents, tools, viewports
# and skills are copied into them at startup wherever no file of that name exists.
# SERVER_ADDRESS: a container must listen on every interface. Without an auth key source agw then
# refuses to start unless AGENT_AUTH_ENABLED=false says that is intended (see docker-compose.yml).
ENV SERVER_ADDRESS=0.0.0.0 \
    SERVER_PORT=8080 \
    AGENT_EXTERNAL_DIR=/opt/agents \
    AGENT_TOOLS_EXTERNAL_DIR=/opt/tools \
    AGENT_VIEWPORT_EXTERNAL_DIR=/opt/viewports \
    AGENT_SKILL_EXTERNAL_DIR=/opt/skills \
    AGENT_DATA_EXTERNAL_DIR=/opt/data \
    MEMORY_CHAT_DIR=/opt/chats

# Also `_bash_`'s working directory and first allowed root: an empty home, not /opt.
WORKDIR /home/agw
USER agw
EXPOSE 8080
# `agw health` probes http://127.0.0.1:$SERVER_PORT/healthz (no curl in the image).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["/usr/local/bin/agw", "health"]
ENTRYPOINT ["/usr/bin/tini", "--", "agw"]
CMD ["serve"]
