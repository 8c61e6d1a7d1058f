"""Runtimes for user-written graders (docs/graders.md, "Custom graders run apart"), kept apart from the pure built-ins.

* :mod:`~mst.graders.custom.js` — custom JavaScript graders in a restricted Node.js process;
* :mod:`~mst.graders.custom.bash_check` — static analysis of ``operational-value`` Bash;
* :mod:`~mst.graders.custom.bash_run` — the bounded Bash compatibility runtime;
* :mod:`~mst.graders.custom.bounded` — the process-group, time and output bounds both share.

Nothing here is imported by the built-in graders: custom source never executes in that phase.
"""
