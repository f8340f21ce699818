# PyTorch DDP training image for ModelArts / Octopus / Volcano custom-image jobs.
#
# Build from the repository root (the wheel comes from `pip wheel --no-deps -w dist .`):
#   pip wheel --no-deps -w dist .
#   docker build -f examples/images/pytorch.Dockerfile -t my-registry/malaunch-pytorch:1 .
# For GPUs pass a CUDA runtime base, e.g. --build-arg BASE_IMAGE=nvidia/cuda:12.4.1-runtime-ubuntu22.04
# (the torch wheel brings its own CUDA libraries; the base provides the driver mount points).
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG PYTHON_VERSION=3.11
ARG CONDA_ENV=pytorch

# Platform rule: the job runs as ma-user (uid 1000) in group ma-group (gid 100), home
# /home/ma-user. Ubuntu ships gid 100 as "users" (renamed here) and some releases a uid-1000
# user "ubuntu" (removed here).
USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl bzip2 \
    && rm -rf /var/lib/apt/lists/* \
    && if getent passwd 1000 >/dev/null; then userdel -r "$(getent passwd 1000 | cut -d: -f1)"; fi \
    && if getent group 100 >/dev/null; then groupmod -n ma-group "$(getent group 100 | cut -d: -f1)"; \
       else groupadd -g 100 ma-group; fi \
    && useradd -m -d /home/ma-user -s /bin/bash -u 1000 -g 100 ma-user

USER ma-user
WORKDIR /home/ma-user

# The conda convention of the platform: training is not started from a login shell, so
# `conda activate` never runs; malaunch reads ANACONDA_DIR + DEFAULT_CONDA_ENV_NAME instead and
# runs `python` from that env with its bin/ and lib/ first on PATH / LD_LIBRARY_PATH.
ENV ANACONDA_DIR=/home/ma-user/anaconda3
ENV DEFAULT_CONDA_ENV_NAME=${CONDA_ENV}
ENV PATH=${ANACONDA_DIR}/envs/${DEFAULT_CONDA_ENV_NAME}/bin:${ANACONDA_DIR}/bin:${PATH}
ENV PYTHONUNBUFFERED=1

RUN curl -fsSL -o /tmp/miniforge.sh \
        "https://github.com/conda-forge/miniforge/releases/latest/download/Miniforge3-Linux-$(uname -m).sh" \
    && bash /tmp/miniforge.sh -b -p "${ANACONDA_DIR}" \
    && rm /tmp/miniforge.sh \
    && "${ANACONDA_DIR}/bin/conda" create -y -n "${DEFAULT_CONDA_ENV_NAME}" "python=${PYTHON_VERSION}" \
    && "${ANACONDA_DIR}/bin/conda" clean -afy

# malaunch (with its pinned torch extra) goes into the training env, so `malaunch` is on PATH
# and the launcher and the job share one interpreter.
COPY --chown=ma-user:ma-group dist/ /tmp/dist/
RUN pip install --no-cache-dir "$(ls /tmp/dist/malaunch-*.whl)[torch]" \
    && rm -rf /tmp/dist

COPY --chown=ma-user:ma-group examples/torch_ddp_train.py /home/ma-user/code/train.py

# The platform's start command usually replaces this; see start-commands.md.
CMD ["malaunch", "--framework", "torch_ddp", "--console-ranks", "0", "--", "python", "/home/ma-user/code/train.py"]
