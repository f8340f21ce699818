"""Hang detection: silence per rank (``watch``), the heartbeat socket ranks write to
(``heartbeat``), the ranks' stacks (``stacks``) and naming the odd ones out (``blame``)."""
