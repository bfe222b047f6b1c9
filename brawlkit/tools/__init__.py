"""Tools at the edge: C-vs-Python observation parity (``parity.py``) and the CPU
level table (``cputable.py``)."""
