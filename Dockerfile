# syntax=docker/dockerfile:1
# The adapter's container image: `make image`.
#
# Two stages: the builder turns the project and all its dependencies into wheels; the runtime stage installs
# only those wheels (bind-mounted, so they never become a layer). No compiler, no source tree, no pip cache in
# the final image. The base is pinned by its full version tag; add the digest (python:…@sha256:…) where your
# build can resolve it, for byte-for-byte reproducible bases.

FROM python:3.11.13-slim-bookworm AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
WORKDIR /src
# pyproject.toml names README.md as the package's readme: the build needs both.
COPY pyproject.toml README.md ./
COPY adapter/ adapter/
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11.13-slim-bookworm
LABEL org.opencontainers.image.title="llm-hpa-adapter" \
      org.opencontainers.image.description="custom.metrics.k8s.io adapter for LLM inference on GPUs" \
      org.opencontainers.image.licenses="Apache-2.0"
# HOME points at /tmp: the Deployment runs with a read-only root filesystem and an emptyDir on /tmp.
# Bytecode is compiled at install time, so nothing needs writing at run time.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    HOME=/tmp
# The package without extras: serving needs no plotting library (matplotlib is the `plot` extra, for the
# CLI's --plot), nor the test or lint tools.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels llm-hpa-adapter
# A numeric, non-root user (the Deployment's runAsUser/fsGroup): runAsNonRoot can only verify numeric users.
RUN groupadd --gid 10001 adapter \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin adapter
USER 10001:10001
EXPOSE 6443
ENTRYPOINT ["llm-hpa-adapter"]
CMD ["serve", "--help"]
