"""``malaunch render``: Kubernetes manifests whose containers start malaunch (SPEC §11).

Pydantic models of the manifests (``k8s`` for the core objects, ``crds`` for the operators'
custom resources), one builder per target (``volcano``, ``kubeflow`` for PyTorchJob and TFJob,
``ascend`` for MindX AscendJob) from one ``RenderRequest`` (``request``), and the YAML writer
for the models' plain dicts, PyYAML's (``emit``).
"""
