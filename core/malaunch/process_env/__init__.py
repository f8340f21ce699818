"""What every process of a plan gets on top of the framework's plan: the conda environment
(``conda``) and the ``MALAUNCH_CONTEXT`` variable (``context_var``)."""
