# spinfc serve in a container: spinfc from this checkout on python:3.12-slim, nothing baked in but the embedded
# default model's package. See docs/container.md.
#
#   docker build -t spinfc .                                  # CPU (torch's CPU build)
#   docker build -t spinfc:cuda --build-arg VARIANT=cuda .    # CUDA (torch's CUDA build and Triton)
#   docker run -p 8000:8000 -v spinfc-cache:/cache spinfc [serve flags]
#   docker run --gpus all -p 8000:8000 -v spinfc-cache:/cache spinfc:cuda [serve flags]
ARG PYTHON_IMAGE=python:3.12-slim
FROM ${PYTHON_IMAGE}

# cpu or cuda; the torch build comes from TORCH_INDEX (by default the CPU or the CUDA_TAG wheel index)
ARG VARIANT=cpu
ARG TORCH_VERSION=2.13.0
ARG CUDA_TAG=cu128
ARG TORCH_INDEX=""

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    SPINFC_CACHE=/cache \
    HF_HOME=/cache/huggingface \
    TRITON_CACHE_DIR=/cache/triton \
    SPINFC_HOST=0.0.0.0 \
    SPINFC_PORT=8000

# git: --packs git+URL sources; gcc: Triton builds its launcher with the host compiler (CUDA only)
RUN apt-get update \
    && apt-get install -y --no-install-recommends git $([ "$VARIANT" = cuda ] && echo gcc libc6-dev) \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/spinfc
COPY pyproject.toml README.md LICENSE ./
COPY spinfc ./spinfc
# the bundled packs go inside the package, where an installed spinfc looks for them
COPY packs ./spinfc/packs

RUN set -eux; \
    case "$VARIANT" in \
      cpu) index="${TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"; extras="serve" ;; \
      cuda) index="${TORCH_INDEX:-https://download.pytorch.org/whl/${CUDA_TAG}}"; extras="serve,gpu" ;; \
      *) echo "VARIANT must be cpu or cuda, not $VARIANT" >&2; exit 2 ;; \
    esac; \
    pip install "torch==${TORCH_VERSION}" --index-url "$index"; \
    pip install ".[${extras}]"; \
    spinfc --help > /dev/null

VOLUME ["/cache"]
EXPOSE 8000
# /readyz answers 200 once the model is loaded and warm; a first start converts the model (minutes on a CPU)
HEALTHCHECK --interval=30s --timeout=5s --start-period=600s --retries=3 \
    CMD ["python", "-c", \
         "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/readyz' % os.environ.get('SPINFC_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["spinfc", "serve"]
