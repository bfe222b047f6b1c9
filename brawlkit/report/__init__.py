"""Presentation at the edge: plots of a run and of a league, the league overview's
figures and the ``elo`` command.  Nothing below imports from here; notebooks and the
CLI do.  Matplotlib is imported inside the functions that draw, so the ``elo`` text
table never loads it."""
