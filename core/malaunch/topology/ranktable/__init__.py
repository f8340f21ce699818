"""HCCL rank tables: the ``ranktable`` topology source (``source``), reading and waiting
(``read``), the formats (``schema``, ``formats``, ``template1``, ``template2``, ``superpod``,
``bulk``), finding this server (``identity``), writing template 1 (``write``), and one
server's table from ``/etc/hccn.conf`` (``generate``, ``hccn``)."""
