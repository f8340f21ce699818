"""``malaunch report``: one self-contained HTML page of a run, from what it left in its log dir.

``collect`` reads a launcher's log dir (or a simulation's, one ``node-<k>/`` per node) into a
:class:`~malaunch.report.model.JobReport`; ``bars`` and ``staging`` turn manifests and summaries
into spans of time; ``timeline`` draws them as inline SVG and ``page`` builds the HTML around
it; ``write`` is the entry the CLI calls. Everything taken from the run is escaped.
"""
