"""Running agent CLIs (Claude Code, Codex) headless and reading their JSON-lines streams.

One home for what the ``claude-code`` and ``codex`` clients and agentic judges share: starting the
program in its own process group with secrets in its environment only (:mod:`.process`), and
turning each CLI's stream into canonical events and an ending (:mod:`.claude_stream`,
:mod:`.codex_stream`, :mod:`.codex_rollout`). It knows nothing of runs, grading or collecting.
"""
