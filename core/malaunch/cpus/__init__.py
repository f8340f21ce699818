"""CPU binding per local process (``--cpu-bind``, SPEC §5): CPU lists, reading the machine
(sysfs, ``npu-smi``), choosing each process's CPUs, and putting them in the plan."""
