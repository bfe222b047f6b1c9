"""Whether this code runs inside an IPython kernel (Jupyter, Colab, papermill).

Asked of the running shell, not of ``sys.modules``: a test suite or a library may have
imported ``ipykernel`` without running in one, and then a progress display drawn for a
notebook would write carriage returns into a log file.
"""

from __future__ import annotations


def in_kernel() -> bool:
    """True when the current IPython shell has a kernel (any notebook front end or
    papermill); False in plain Python, in a terminal IPython and in a test process."""
    try:
        from IPython import get_ipython  # optional: plain installs need not have IPython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")
