# TensorFlow parameter-server training image for ModelArts / Octopus / Volcano custom-image jobs.
#
# Build from the repository root:
#   pip wheel --no-deps -w dist .
#   docker build -f examples/images/tensorflow.Dockerfile -t my-registry/malaunch-tensorflow:1 .
# The `tensorflow` extra of malaunch pins a CPU build; for GPUs install `tensorflow[and-cuda]`
# in the env instead (EXTRA= below, then a second pip install).
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG PYTHON_VERSION=3.11
ARG CONDA_ENV=tensorflow
ARG EXTRA=tensorflow

# Platform rule: user ma-user (uid 1000), group ma-group (gid 100), home /home/ma-user.
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

# ANACONDA_DIR + DEFAULT_CONDA_ENV_NAME: malaunch runs `python` from this env (no login shell,
# so no `conda activate`).
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

COPY --chown=ma-user:ma-group dist/ /tmp/dist/
RUN pip install --no-cache-dir "$(ls /tmp/dist/malaunch-*.whl)[${EXTRA}]" \
    && rm -rf /tmp/dist

COPY --chown=ma-user:ma-group examples/tf_ps_train.py /home/ma-user/code/train.py

# Each ps / worker container runs its own task; malaunch appends --ps_hosts --worker_hosts
# --job_name --task_index and sets TF_CONFIG. See start-commands.md.
CMD ["malaunch", "--framework", "tensorflow_ps", "--tf-flags", "--", "python", "/home/ma-user/code/train.py"]
