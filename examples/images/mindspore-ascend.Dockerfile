# MindSpore on Ascend NPUs, for ModelArts / Octopus / MindX (Volcano) custom-image jobs.
#
# The base image must already hold the CANN toolkit under /usr/local/Ascend/ascend-toolkit
# (an Ascend "ascend-toolkit" / CANN base image matching your driver and MindSpore version);
# the NPU driver itself is mounted from the host at /usr/local/Ascend/driver at run time.
# Build from the repository root:
#   pip wheel --no-deps -w dist .
#   docker build -f examples/images/mindspore-ascend.Dockerfile \
#       --build-arg BASE_IMAGE=<your CANN base image> -t my-registry/malaunch-mindspore:1 .
ARG BASE_IMAGE=ubuntu:22.04
FROM ${BASE_IMAGE}

ARG PYTHON_VERSION=3.11
ARG CONDA_ENV=mindspore
# The `mindspore` extra of malaunch pins a MindSpore release; pick the one your CANN supports.
ARG EXTRA=mindspore

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

# What CANN's set_env.sh would export: training containers start without a login shell, so
# nothing sources it. LD_LIBRARY_PATH keeps the driver first; malaunch adds the conda env's lib
# in front of it for every process.
ENV ASCEND_HOME_PATH=/usr/local/Ascend/ascend-toolkit/latest
ENV ASCEND_TOOLKIT_HOME=${ASCEND_HOME_PATH}
ENV ASCEND_OPP_PATH=${ASCEND_HOME_PATH}/opp
ENV ASCEND_AICPU_PATH=${ASCEND_HOME_PATH}
ENV LD_LIBRARY_PATH=/usr/local/Ascend/driver/lib64:/usr/local/Ascend/driver/lib64/common:/usr/local/Ascend/driver/lib64/driver:${ASCEND_HOME_PATH}/lib64:${ASCEND_HOME_PATH}/lib64/plugin/opskernel:${ASCEND_HOME_PATH}/lib64/plugin/nnengine
ENV PYTHONPATH=${ASCEND_HOME_PATH}/python/site-packages:${ASCEND_HOME_PATH}/opp/built-in/op_impl/ai_core/tbe

# ANACONDA_DIR + DEFAULT_CONDA_ENV_NAME: malaunch runs `python` from this env.
ENV ANACONDA_DIR=/home/ma-user/anaconda3
ENV DEFAULT_CONDA_ENV_NAME=${CONDA_ENV}
ENV PATH=${ANACONDA_DIR}/envs/${DEFAULT_CONDA_ENV_NAME}/bin:${ANACONDA_DIR}/bin:${ASCEND_HOME_PATH}/bin:${ASCEND_HOME_PATH}/compiler/ccec_compiler/bin:${PATH}
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

# A smoke test that needs no NPU code: it checks the rank-table environment every process gets
# (RANK_TABLE_FILE, RANK_ID, DEVICE_ID, ...). Replace it with your training script.
COPY --chown=ma-user:ma-group examples/mindspore_ranktable_check.py /home/ma-user/code/ranktable_check.py

# On ModelArts Ascend the rank table (/user/config/jobstart_hccl.json) selects rank-table
# mode: one process per NPU, each in its own device<i> directory. See start-commands.md.
CMD ["malaunch", "--framework", "mindspore", "--wait-timeout", "1800", "--", "python", "/home/ma-user/code/ranktable_check.py"]
