"""``malaunch logs``: the rank logs of a run, merged in arrival order, filtered and followed.

``discover`` finds the node launchers' log directories under the directories given and the
rank logs their manifests list; ``index`` reads a line index as it grows; ``reader`` cuts a
log file into blocks of lines that share an arrival time; ``select`` holds the filters
(``--ranks``, ``--nodes``, ``--grep``, ``--since``); ``follow`` polls every node directory and
merges what is new (``heapq.merge``), once or until told to stop.
"""
