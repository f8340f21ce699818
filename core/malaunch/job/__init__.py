"""The job across nodes (SPEC §9): the wire format (``protocol``), node 0's channel server
and the other nodes' client (``server``, ``client``), the decisions (``coordinator``), the
restart policy (``restart``) and the settings every node derives alike (``settings``)."""
